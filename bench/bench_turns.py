"""Our Keras layer's inference (or training step) in turns with a peer, in one process: the
distribution of each side's calls, not one median (bench/results/cpu_history_2.md, "Zen 4 again").

    .venv/bin/python bench/bench_turns.py --size 200x16x64x128 --kind lstm --dtype bfloat16
        ours (tf_rnn_ops.keras, in a tf.function, training=False) against PyTorch's nn.LSTM /
        nn.GRU (batch_first, under no_grad, --threads threads)
    .venv/bin/python bench/bench_turns.py --size 100x32x128x72 --kind gru --vs-h 128
        ours at H against ours at another H (GF/s, the sweep's no-cliff check) instead
    .venv/bin/python bench/bench_turns.py --size 20x128x512x1024 --train --vs-gemm
        ours against the GEMM rate of the same turns: tf.matmul and torch.matmul of the RNN's
        input-projection shape [T·B, I+H]·[I+H, gates·H] and tf.matmul of a --square GEMM;
        prints our GF/s as a share of the fastest of them (the CPU issue's %GEMM target)

--train times a training step instead of inference: ours the layer's forward and the gradients
of sum(y) with respect to x and the weights (a GradientTape in the tf.function), PyTorch's
forward and backward of the same sum (x requiring its gradient); FLOPs 3x the forward's. With
--no-input-grad neither side differentiates x (a model's first layer): the weights' gradients
only, FLOPs less the input gradient's product.

Each round times --calls calls of one side after --settle seconds of untimed calls of it (a
peer's spinning OpenMP workers, or the other side's pool threads, settle meanwhile); the
sides alternate, and the round's order alternates too (ABBA). Prints, per side, the fastest
call, the 10th, 50th and 90th percentiles (ms), GF/s at the fastest and median call and the
process's minor page faults a call (mean over the timed calls: fresh pages a side's buffers
fault in, docs/PERFORMANCE_AVX2.md "Fresh output pages"), then
the peer / ours ratios of the fastest and median calls (of GF/s for --vs-h). The mixed_bfloat16
policy for --dtype bfloat16, as bench_rnn.py's Keras benchmarks; x is batch-major, in the
benchmark's dtype on both sides (as bench_rnn.py's).
"""
import argparse
import os
import resource
import sys
import time

import numpy as np

import bench_util as bu
from bench_util import tf
from keras_cases import _policy


def _size(text):
    try:
        sizes = bu.parse_sizes(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e))
    if len(sizes) != 1 or min(sizes[0]) < 1:
        raise argparse.ArgumentTypeError(f"expected one TxBxIxH with positive sizes, got {text!r}")
    return sizes[0]


_GATES = {"lstm": 4, "gru": 3}


def _flops(T, B, I, H, kind):
    return bu.lstm_flops(T, B, I, H, _GATES[kind])


def _ours(x, H, kind, dtype, train=False, input_grad=True):
    import tf_rnn_ops.keras as ok
    layer = getattr(ok, kind.upper())(H, return_sequences=True, dtype=_policy(dtype))
    layer(x[:, :2])
    if not train:
        return tf.function(lambda: layer(x, training=False))
    sources = [x] if input_grad else []

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            tape.watch(sources)
            loss = tf.reduce_sum(tf.cast(layer(x, training=True), tf.float32))
        return tape.gradient(loss, sources + layer.trainable_variables)
    return step


def _torch(x, H, kind, dtype, threads, train=False, input_grad=True):
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    tdt = torch.float32 if dtype == "float32" else torch.bfloat16
    mod = getattr(torch.nn, kind.upper())(x.shape[2], H, batch_first=True).to(tdt)
    xt = torch.from_numpy(x.numpy()).to(tdt)
    if train:
        xt.requires_grad_(input_grad)

        def train_step():
            mod.zero_grad(set_to_none=True)
            xt.grad = None
            mod(xt)[0].float().sum().backward()
        return train_step

    def step():
        with torch.no_grad():
            return mod(xt)[0]
    return step


def _gemms(T, B, I, H, kind, dtype, threads, square):
    """The GEMM sides of --vs-gemm: name -> (call, FLOPs)."""
    rng = np.random.default_rng(1)
    m, k, n = T * B, I + H, _GATES[kind] * H
    tdt = bu.DTYPES[dtype]
    sides = {f"tf.matmul {m}x{k}x{n}": bu.matmul_call(m, k, n, tdt, rng)}
    if square > 0:
        sides[f"tf.matmul {square}³"] = bu.matmul_call(square, square, square, tdt, rng)
    try:
        import torch
    except ImportError:
        return sides
    torch.set_num_threads(threads)
    sides[f"torch.matmul {m}x{k}x{n}"] = bu.matmul_call(m, k, n, tdt, rng, torch)
    return sides


def _stats(ms, flops):
    v = np.asarray(ms)
    best, med = float(v.min()), float(np.median(v))
    return {"min": best, "p10": float(np.percentile(v, 10)), "median": med,
            "p90": float(np.percentile(v, 90)), "gflops_min": flops / best / 1e6,
            "gflops_median": flops / med / 1e6}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=_size, default=(200, 16, 64, 128), help="TxBxIxH")
    ap.add_argument("--kind", choices=["lstm", "gru"], default="lstm")
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    ap.add_argument("--train", action="store_true",
                    help="a training step (forward and gradients) instead of inference")
    ap.add_argument("--no-input-grad", action="store_true",
                    help="with --train: the gradients of the weights only, not of x (a "
                         "model's first layer: x needs no gradient), on both sides")
    ap.add_argument("--vs-h", type=int, help="time ours at this H as the peer, not PyTorch")
    ap.add_argument("--vs-gemm", action="store_true",
                    help="time GEMMs as the peers (our GF/s as a share of the fastest), "
                         "not PyTorch's RNN")
    ap.add_argument("--square", type=int, default=2048,
                    help="side of --vs-gemm's square tf.matmul (0: none)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=10, help="timed calls per round and side")
    ap.add_argument("--settle", type=float, default=0.03,
                    help="seconds of untimed calls before each side's timed calls")
    ap.add_argument("--threads", type=int, default=os.cpu_count(),
                    help="PyTorch's intra-op threads (default: all CPUs, as TensorFlow's pool)")
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.calls < 1 or args.settle < 0:
        ap.error("--rounds and --calls must be at least 1, --settle at least 0")
    if args.vs_h is not None and args.vs_h < 1:
        ap.error("--vs-h must be at least 1")
    if args.vs_h is not None and args.vs_gemm:
        ap.error("--vs-h and --vs-gemm are two different peers: choose one")
    if args.square < 0:
        ap.error("--square must be at least 0")
    if args.no_input_grad and not args.train:
        ap.error("--no-input-grad goes with --train")

    T, B, I, H = args.size
    x = tf.constant(np.random.default_rng(0).standard_normal((B, T, I)).astype(np.float32))
    # Both sides take x in the benchmark's dtype, made before the timed calls (PyTorch's is
    # converted once in _torch; ours here, so that the layer's call runs no cast of x).
    x_ours = tf.cast(x, tf.bfloat16) if args.dtype == "bfloat16" else x
    grad_x = not args.no_input_grad

    def flops(h):
        f = _flops(T, B, I, h, args.kind)
        return bu.train_flops(f, I, h, grad_x) if args.train else f
    sides = {"ours": (_ours(x_ours, H, args.kind, args.dtype, args.train, grad_x), flops(H))}
    if args.vs_h is not None:
        peer = f"ours H={args.vs_h}"
        sides[peer] = (_ours(x_ours, args.vs_h, args.kind, args.dtype, args.train, grad_x),
                       flops(args.vs_h))
    elif args.vs_gemm:
        peer = None
        sides.update(_gemms(T, B, I, H, args.kind, args.dtype, args.threads, args.square))
    else:
        peer = "torch"
        try:
            sides[peer] = (_torch(x, H, args.kind, args.dtype, args.threads, args.train,
                                  grad_x), flops(H))
        except ImportError:
            sys.exit("bench_turns: PyTorch is not installed (pip install torch==2.13.0 beside, "
                     "or use --vs-h)")
    for fn, _ in sides.values():  # first calls: tracing, packing, thread start-up
        for _ in range(3):
            fn()

    times = {name: [] for name in sides}
    faults = {name: [] for name in sides}
    order = list(sides)
    start = time.perf_counter()
    for r in range(args.rounds):
        for name in (order if r % 2 == 0 else order[::-1]):
            fn = sides[name][0]
            settle_end = time.perf_counter() + args.settle
            while time.perf_counter() < settle_end:
                fn()
            for _ in range(args.calls):
                f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                t0 = time.perf_counter()
                fn()
                times[name].append((time.perf_counter() - t0) * 1e3)
                faults[name].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
        print(f"[bench_turns] round {r + 1}/{args.rounds} "
              f"({time.perf_counter() - start:.1f} s)", file=sys.stderr, flush=True)

    what = "training step" if args.train else "inference"
    print(f"{args.kind.upper()} {args.dtype} {what}, T×B×I×H = {T}×{B}×{I}×{H}, "
          f"{args.rounds} rounds × {args.calls} calls a side")
    print("| side | fastest ms | p10 | median | p90 | GF/s fastest | GF/s median "
          "| faults a call |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    stats = {}
    for name, (_, flops) in sides.items():
        s = stats[name] = _stats(times[name], flops)
        s["faults"] = float(np.mean(faults[name]))
        print(f"| {name} | {s['min']:.3f} | {s['p10']:.3f} | {s['median']:.3f} | "
              f"{s['p90']:.3f} | {s['gflops_min']:.1f} | {s['gflops_median']:.1f} | "
              f"{s['faults']:.0f} |")
    o = stats["ours"]
    if peer is None:
        for q in ("min", "median"):
            best = max((n for n in stats if n != "ours"), key=lambda n: stats[n]["gflops_" + q])
            print(f"ours / the fastest GEMM ({'fastest' if q == 'min' else 'median'} calls, "
                  f"{best}): {o['gflops_' + q] / stats[best]['gflops_' + q]:.3f}")
        return stats
    p = stats[peer]
    if args.vs_h is None:
        print(f"{peer} / ours (time): fastest {p['min'] / o['min']:.3f}x, "
              f"median {p['median'] / o['median']:.3f}x")
    else:
        print(f"ours H={H} / {peer} (GF/s): fastest {o['gflops_min'] / p['gflops_min']:.3f}, "
              f"median {o['gflops_median'] / p['gflops_median']:.3f}")
    return stats


if __name__ == "__main__":
    main()
