"""Single-step ops (LSTMBlockCell(Grad), GRUBlockCell(Grad)): ours against stock, per call.

    .venv/bin/python bench/bench_cells.py                 # B in {1, 8, 32}, I = H in {64, 128, 256}
    .venv/bin/python bench/bench_cells.py --quick         # B in {1, 32}, H = 64, few reps
    .venv/bin/python bench/bench_cells.py --breakdown     # also where the time of one call goes

These ops are what step-by-step decoding and streaming inference call thousands of times, so
the time of one call is what matters, in two settings:

  eager     one Python call of tf_rnn_ops.raw_ops.X / tf.raw_ops.X (the wrapper, TensorFlow's
            eager dispatch and the kernel);
  function  a tf.function that chains --chain calls of the op (each call's state output is the
            next call's state input, as in decoding or backpropagation through time), divided
            by --chain: TensorFlow's executor and the kernel, no Python.

Time per call = median over --reps rounds; ours and stock are timed in turns (one untimed and
one timed call each per round), so the machine's drift hits both. speed-up = stock / ours.

--breakdown splits one eager call of ours at B=1 into: TensorFlow's eager dispatch of an op with
the same inputs and outputs (IdentityN over the inputs: no kernel work), our Python wrapper
(raw_ops.X minus calling the generated op function directly), and the rest (the kernel).
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_util as bu  # noqa: E402  (puts the repository root on sys.path)
from bench_util import tf  # noqa: E402

from tf_rnn_ops import raw_ops as ours  # noqa: E402
from tf_rnn_ops._loader import load_library  # noqa: E402

OPS = ["LSTMBlockCell", "LSTMBlockCellGrad", "GRUBlockCell", "GRUBlockCellGrad"]
TARGET = 1.5  # issue: >= 1.5x stock for every op, size and mode


def make_inputs(op, B, I, H, seed=0):
    rng = np.random.default_rng(seed)

    def r(*shape, scale=0.5):
        return tf.constant((rng.standard_normal(shape) * scale).astype(np.float32))

    ws = 1.0 / np.sqrt(I + H)
    if op.startswith("LSTM"):
        kw = dict(x=r(B, I), cs_prev=r(B, H), h_prev=r(B, H), w=r(I + H, 4 * H, scale=ws),
                  wci=r(H, scale=0.1), wcf=r(H, scale=0.1), wco=r(H, scale=0.1), b=r(4 * H))
        if op == "LSTMBlockCellGrad":
            acts = tf.raw_ops.LSTMBlockCell(**kw)
            kw.update(dict(zip(["i", "cs", "f", "o", "ci", "co"], acts[:6])),
                      cs_grad=r(B, H), h_grad=r(B, H), use_peephole=False)
        return kw
    kw = dict(x=r(B, I), h_prev=r(B, H), w_ru=r(I + H, 2 * H, scale=ws),
              w_c=r(I + H, H, scale=ws), b_ru=r(2 * H), b_c=r(H))
    if op == "GRUBlockCellGrad":
        ru, u, c, _ = tf.raw_ops.GRUBlockCell(**kw)
        kw.update(r=ru, u=u, c=c, d_h=r(B, H))
    return kw


def chained(mod, op, kw, chain):
    """A tf.function running `chain` calls of op, each fed the previous call's state output."""
    fn = getattr(mod, op)

    def body():
        a = dict(kw)
        out = None
        for _ in range(chain):
            out = fn(**a)
            if op == "LSTMBlockCell":
                a["cs_prev"], a["h_prev"] = out[1], out[6]
            elif op == "LSTMBlockCellGrad":
                a["cs_grad"] = out[0]
            elif op == "GRUBlockCell":
                a["h_prev"] = out[3]
            else:
                a["d_h"] = out[1]
        return out
    return tf.function(body, autograph=False)


def time_in_turns(fns, reps, per_call=1):
    """Median µs per call of each fn, timed in turns."""
    times = {k: [] for k in fns}
    for f in fns.values():
        f()
    for _ in range(reps):
        for k, f in fns.items():
            f()
            times[k].append(bu.time_once_ms(f) * 1e3 / per_call)
    return {k: float(np.median(v)) for k, v in times.items()}


def snake(op):
    return {"LSTMBlockCell": "tf_rnn_lstm_block_cell",
            "LSTMBlockCellGrad": "tf_rnn_lstm_block_cell_grad",
            "GRUBlockCell": "tf_rnn_gru_block_cell",
            "GRUBlockCellGrad": "tf_rnn_gru_block_cell_grad"}[op]


def breakdown(op, H, reps):
    """µs of one eager call at B=1, I=H: dispatch floor, our wrapper, the rest."""
    kw = make_inputs(op, 1, H, H)
    tensors = [v for v in kw.values() if isinstance(v, tf.Tensor)]
    gen = getattr(load_library(), snake(op))
    t = time_in_turns({
        "identity_n": lambda: tf.raw_ops.IdentityN(input=tensors),
        "generated": lambda: gen(**kw),
        "ours": lambda: getattr(ours, op)(**kw),
        "stock": lambda: getattr(tf.raw_ops, op)(**kw),
    }, reps)
    return t


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 2)[2])
    p.add_argument("--batch", default="1,8,32", help="comma-separated B")
    p.add_argument("--hidden", default="64,128,256", help="comma-separated I = H")
    p.add_argument("--ops", default=",".join(OPS))
    p.add_argument("--reps", type=int, default=200, help="timed rounds per measurement")
    p.add_argument("--chain", type=int, default=50, help="calls per tf.function")
    p.add_argument("--quick", action="store_true", help="B in {1, 32}, H = 64, 20 reps")
    p.add_argument("--breakdown", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.batch, args.hidden, args.reps, args.chain = "1,32", "64", 20, 10
    batches = [int(v) for v in args.batch.split(",")]
    hiddens = [int(v) for v in args.hidden.split(",")]
    ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    items = [(op, n, h) for op in ops for n in batches for h in hiddens]
    print(f"bench_cells: {len(items)} sizes x 2 modes, {args.reps} reps, chain {args.chain}, "
          f"{os.cpu_count()} CPUs, TensorFlow {tf.__version__}", file=sys.stderr, flush=True)
    rows, t0 = [], time.perf_counter()
    for k, (op, B, H) in enumerate(items):
        kw = make_inputs(op, B, H, H)
        eager = time_in_turns({"stock": lambda: getattr(tf.raw_ops, op)(**kw),
                               "ours": lambda: getattr(ours, op)(**kw)}, args.reps)
        func = time_in_turns({"stock": chained(tf.raw_ops, op, kw, args.chain),
                              "ours": chained(ours, op, kw, args.chain)},
                             max(5, args.reps // args.chain * 2), per_call=args.chain)
        row = dict(op=op, B=B, H=H, eager=eager, function=func)
        rows.append(row)
        el = time.perf_counter() - t0
        left = el / (k + 1) * (len(items) - k - 1)
        print(f"[{k + 1}/{len(items)}] {bu.clock(el)} elapsed, ~{bu.clock(left)} left | {op} "
              f"B={B} I=H={H}: eager {eager['stock']:.1f}/{eager['ours']:.1f} µs "
              f"({eager['stock'] / eager['ours']:.2f}x), function {func['stock']:.1f}/"
              f"{func['ours']:.1f} µs ({func['stock'] / func['ours']:.2f}x)",
              file=sys.stderr, flush=True)
    print(f"\n### Single-step ops, µs per call (stock / ours), float32, {os.cpu_count()} CPUs\n")
    print("| op | B | I=H | eager stock | eager ours | speed-up | function stock | "
          "function ours | speed-up |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    worst = None
    for r in rows:
        e, f = r["eager"], r["function"]
        se, sf = e["stock"] / e["ours"], f["stock"] / f["ours"]
        worst = min(worst or se, se, sf)
        print(f"| {r['op']} | {r['B']} | {r['H']} | {e['stock']:.1f} | {e['ours']:.1f} | "
              f"{se:.2f}x | {f['stock']:.1f} | {f['ours']:.1f} | {sf:.2f}x |")
    print(f"\nsmallest speed-up: {worst:.2f}x (target >= {TARGET}x)")
    if args.breakdown:
        print("\n### One eager call of ours at B=1 (µs): where the time goes\n")
        print("| op | I=H | dispatch floor (IdentityN) | generated op fn | ours (raw_ops) | "
              "our wrapper | kernel + rest | stock |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for op in ops:
            for H in hiddens:
                b = breakdown(op, H, args.reps)
                print(f"| {op} | {H} | {b['identity_n']:.1f} | {b['generated']:.1f} | "
                      f"{b['ours']:.1f} | {b['ours'] - b['generated']:.1f} | "
                      f"{b['generated'] - b['identity_n']:.1f} | {b['stock']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
