"""The fixed costs around our layers under XLA, timed in turns in one process (medians, µs).

1. Our XLA custom call: TfRnn>KerasRNN on a problem of two steps, one row and one unit (no
   work to speak of; two steps, so that it is a custom call and not the HLO step of
   cc/xla/keras_step_hlo.h) inside tf.function(jit_compile=True), against an XLA-compiled
   function that does as little (x + 1), and the same op without XLA against an empty
   tf.function.
2. The streaming step's floors (--units H, --kind LSTM or GRU, batch 1, input 64): a function
   that reads a stateful layer's variables and writes its states with no RNN work, compiled by
   XLA and plain, beside the step itself (ours and stock, with and without XLA). The floor is
   what any layer pays per call: what is above it is the step's own cost. Stock's plain step
   over the empty tf.function is the most any layer's plain step can gain over it (a step that
   cost no more than an empty call).

    .venv/bin/python bench/bench_xla_overhead.py [--reps 2000] [--units 128] [--kind LSTM]
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tensorflow as tf  # noqa: E402

import tf_rnn_ops  # noqa: E402
from tf_rnn_ops.keras import _keras_rnn  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reps", type=int, default=2000)
    p.add_argument("--units", type=int, default=128)
    p.add_argument("--kind", choices=["LSTM", "GRU"], default="LSTM")
    args = p.parse_args()
    if not tf_rnn_ops.has_xla():
        sys.exit(f"XLA kernels not loaded: {tf_rnn_ops.xla_status()}")
    one = lambda *s: tf.ones(s, tf.float32)  # noqa: E731
    inp = dict(input=one(1, 2, 1), input_h=one(1, 1), input_c=one(1, 1), kernel=one(1, 4),
               recurrent_kernel=one(1, 4), bias=one(4), sequence_lengths=tf.zeros([0], tf.int32),
               recurrent_mask=tf.zeros([0]))

    def op():
        return _keras_rnn(**inp, rnn_mode="lstm", is_training=False)[0]

    x = one(1, 1)
    fns = {"empty jit (x + 1)": tf.function(lambda: x + 1, jit_compile=True),
           "KerasRNN 2x1x1x1, jit": tf.function(op, jit_compile=True),
           "empty tf.function (x + 1)": tf.function(lambda: x + 1),
           "KerasRNN 2x1x1x1, no jit": tf.function(op)}
    fns.update(_stream_fns(args.units, args.kind))
    med = _time_in_turns(fns, args.reps)
    print("| call | median µs |\n|---|---:|")
    for k, v in med.items():
        print(f"| {k} | {v:.1f} |")
    print(f"\ncustom call over an empty jit function: "
          f"{med['KerasRNN 2x1x1x1, jit'] - med['empty jit (x + 1)']:.1f} µs; "
          f"the op's kernel over an empty tf.function: "
          f"{med['KerasRNN 2x1x1x1, no jit'] - med['empty tf.function (x + 1)']:.1f} µs")
    h = args.units
    fj, fp = med[f"floor H {h}, jit"], med[f"floor H {h}, no jit"]
    above = {(k, tag): med[f"{k} H {h}, {tag}"] - (fj if tag == "jit" else fp)
             for k in ("ours", "stock") for tag in ("jit", "no jit")}
    print(f"\nstreaming step, {args.kind} H {h}: the floor under XLA costs "
          f"{abs(fj - fp):.1f} µs {'more' if fj >= fp else 'less'} than without; above their "
          f"floors: ours + XLA {above['ours', 'jit']:.1f} µs, stock + XLA "
          f"{above['stock', 'jit']:.1f} µs, ours {above['ours', 'no jit']:.1f} µs, stock "
          f"{above['stock', 'no jit']:.1f} µs")
    empty, stock, ours = (med["empty tf.function (x + 1)"], med[f"stock H {h}, no jit"],
                          med[f"ours H {h}, no jit"])
    print(f"plain steps: stock / ours {stock / ours:.2f}x; stock / empty tf.function "
          f"{stock / empty:.2f}x (the most a plain step can gain over stock's); under XLA: "
          f"stock / ours {med[f'stock H {h}, jit'] / med[f'ours H {h}, jit']:.2f}x")


def _stream_fns(h, kind):
    """The streaming step of a stateful LSTM or GRU (batch 1, input 64, h units), ours and
    stock, and the floors: the same variable reads and state writes with no RNN work."""
    from keras_cases import _pair  # bench/, this script's folder
    x1 = tf.random.normal([1, 1, 64])
    stock, ours = _pair(kind, "float32", x1.shape, units=h, stateful=True)
    cell, states = stock.cell, stock.states

    def floor():
        k, r = cell.kernel.value, cell.recurrent_kernel.value
        b = tf.reshape(cell.bias.value, [-1])  # a GRU's is [2, 3H]
        h_new = states[0].value + x1[:, 0, :1] + k[:1, :1] + r[:1, :1] + b[:1]
        states[0].assign(h_new)
        for s in states[1:]:  # an LSTM's c
            s.assign(s.value + 1.0)
        return h_new
    fns = {}
    for jit in (True, False):
        tag = "jit" if jit else "no jit"
        fns[f"floor H {h}, {tag}"] = tf.function(floor, jit_compile=jit)
        fns[f"ours H {h}, {tag}"] = tf.function(lambda: ours(x1, training=False),
                                                jit_compile=jit)
        fns[f"stock H {h}, {tag}"] = tf.function(lambda: stock(x1, training=False),
                                                 jit_compile=jit)
    return fns


def _time_in_turns(fns, reps, settle=5):
    """Median µs of each function, timed in turns (each turn settles with `settle` calls)."""
    for fn in fns.values():
        fn()
    times = {k: [] for k in fns}
    step = max(1, reps // 10)
    for r in range(reps):
        for name, fn in fns.items():
            for _ in range(settle):
                fn()
            t0 = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - t0) * 1e6)
        if (r + 1) % step == 0:
            print(f"[{r + 1}/{reps}]", file=sys.stderr, flush=True)
    return {k: float(np.median(v)) for k, v in times.items()}


if __name__ == "__main__":
    main()
