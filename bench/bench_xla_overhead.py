"""The fixed cost of our XLA custom call: TfRnn>KerasRNN on a problem of one step, one row and
one unit (no work to speak of) inside tf.function(jit_compile=True), against an XLA-compiled
function that does as little (x + 1), and the same op without XLA against an empty
tf.function. All timed in turns in one process; medians in microseconds.

    .venv/bin/python bench/bench_xla_overhead.py [--reps 2000]
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
    args = p.parse_args()
    if not tf_rnn_ops.has_xla():
        sys.exit(f"XLA kernels not loaded: {tf_rnn_ops.xla_status()}")
    one = lambda *s: tf.ones(s, tf.float32)  # noqa: E731
    inp = dict(input=one(1, 1, 1), input_h=one(1, 1), input_c=one(1, 1), kernel=one(1, 4),
               recurrent_kernel=one(1, 4), bias=one(4), sequence_lengths=tf.zeros([0], tf.int32),
               recurrent_mask=tf.zeros([0]))

    def op():
        return _keras_rnn(**inp, rnn_mode="lstm", is_training=False)[0]

    x = one(1, 1)
    fns = {"empty jit (x + 1)": tf.function(lambda: x + 1, jit_compile=True),
           "KerasRNN 1x1x1x1, jit": tf.function(op, jit_compile=True),
           "empty tf.function (x + 1)": tf.function(lambda: x + 1),
           "KerasRNN 1x1x1x1, no jit": tf.function(op)}
    for fn in fns.values():
        fn()
    times = {k: [] for k in fns}
    step = max(1, args.reps // 10)
    for r in range(args.reps):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - t0) * 1e6)
        if (r + 1) % step == 0:
            print(f"[{r + 1}/{args.reps}]", file=sys.stderr, flush=True)
    med = {k: float(np.median(v)) for k, v in times.items()}
    print("| call | median µs |\n|---|---:|")
    for k, v in med.items():
        print(f"| {k} | {v:.1f} |")
    print(f"\ncustom call over an empty jit function: "
          f"{med['KerasRNN 1x1x1x1, jit'] - med['empty jit (x + 1)']:.1f} µs; "
          f"the op's kernel over an empty tf.function: "
          f"{med['KerasRNN 1x1x1x1, no jit'] - med['empty tf.function (x + 1)']:.1f} µs")


if __name__ == "__main__":
    main()
