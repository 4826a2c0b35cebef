"""The forward's recurrent product with the batch in the SIMD lanes (cc/engine/lanes_gemm.h:
Rᵀ · hᵀ per step on AVX-512 for 32 to 64 rows, float32) against the float64 reference, at
inference and in training (the forward's outputs, then CudnnRNNBackprop's gradients from the
reserve it wrote), run by tests/test_lanes.py in a child process per setting: TensorFlow's
intra-op pool size (LANES_CHECK_THREADS: 1 runs one unit block of all gates, 2 to 4 unit
blocks that write their units of hᵀ for the next step; 2 also batch blocks of 32 rows that take
the lanes themselves) and TF_RNN_OPS_CPU_LANES (1: the lanes at every size the spec allows; unset:
only where a unit block's slice of R is over 1 MiB, which LARGE has; 0: the register blocks of
packed::Gemm; read once per process). On a CPU without AVX-512 every setting runs packed::Gemm.

Cases: every mode; one layer, and two bidirectional layers with per-sequence lengths (the
reversed direction's steps then differ per row: its product goes to the separate R·h rows);
time-major and batch-major; two bidirectional lstm layers with every sequence full length (the
lstm's gates in the lanes to the pointwise pass, cc/engine/lanes_lstm.h); 32, 45 and 64 rows
(two, three and four packets of lanes, 45 with three lanes of padding) and 33 (too much padding:
packed::Gemm); unit counts that leave a partial register block of units (13, 40, 200; 40 on 2
threads and 200 on 2 to 4 split into unit blocks whose last is the longest, UnitBlocksOf); lstm
weights too large to fuse with the input (128 + 200 inputs by 800 gates), whose full-length
steps project the input apart; full-length lstm steps with small weights, whose input
product runs in the lanes with R's; and the lstm's gates in the lanes in training (two
bidirectional layers, both layouts: the pointwise pass writes the reserve's planes).

    LANES_CHECK_THREADS=2 python tests/lanes_checks.py   # a line per case, exit 1 on a mismatch
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tensorflow as tf  # noqa: E402

from child_run import intra_op_threads_from, run_cases  # noqa: E402

intra_op_threads_from("LANES_CHECK_THREADS")

import batch_block_checks as BB  # noqa: E402
import test_cudnn_rnn as C  # noqa: E402

F32 = tf.float32

# (T, B, I, H)
SIZES = [(5, 32, 20, 24), (4, 45, 10, 13), (5, 64, 16, 40), (4, 32, 128, 200), (3, 33, 8, 20)]
# A unit block's slice of R over 1 MiB on 1-3 threads (lstm on 3 threads: 4 gates x 336 units
# x 1000 x 4 bytes), so that the default setting takes the lanes too: an input narrow enough
# to fuse with R in the lanes (24 <= 1000 / 8) and a wider one (200) projected apart.
LARGE = [(3, 32, 24, 1000), (3, 48, 200, 1000)]


def main():
    from tf_rnn_ops import raw_ops as ours
    rng = np.random.default_rng(31)
    named = []
    for size in SIZES:
        for mode in C.MODES:
            for i, (L, direction, lengths) in enumerate(((1, "unidirectional", False),
                                                         (2, "bidirectional", True))):
                time_major = (i + len(named)) % 2 == 0
                case = (size, mode, L, direction, time_major, lengths, 0, F32)
                named.append(("size={} mode={} L={} {} time_major={} lengths={}".format(
                    *case[:6]), lambda case=case: BB._case(ours, rng, *case)))
    # The LSTM at inference with its gates in the lanes to the pointwise pass
    # (cc/engine/lanes_lstm.h: every sequence full length, 32 or 64 rows): two bidirectional
    # layers (the reversed direction's steps, the second layer's input both directions' h),
    # and 13 units (one partial tile of 16).
    for size in (SIZES[0], SIZES[2], SIZES[3], (4, 32, 10, 13)):
        for time_major in (True, False):
            case = (size, "lstm", 2, "bidirectional", time_major, False, 0, F32)
            named.append(("size={} mode=lstm L=2 bidirectional time_major={}".format(
                size, time_major), lambda case=case: BB._case(ours, rng, *case)))
    # The same road in training, its pointwise pass writing the reserve's planes and the
    # next step's h_prev rows (the reversed direction's in descending time rows), then the
    # backward from them.
    for size in (SIZES[0], SIZES[3], (4, 32, 10, 13)):
        for time_major in (True, False):
            case = (size, "lstm", 2, "bidirectional", time_major, False, F32)
            named.append(("training size={} mode=lstm L=2 bidirectional time_major={}".format(
                size, time_major), lambda case=case: BB._train_case(ours, rng, *case)))
    for size in LARGE:
        for mode in ("lstm", "gru"):
            case = (size, mode, 1, "unidirectional", False, False, 0, F32)
            named.append(("size={} mode={} L=1 batch-major".format(size, mode),
                          lambda case=case: BB._case(ours, rng, *case)))
    for size in SIZES[:4] + LARGE:
        for mode in ("lstm", "gru"):
            case = (size, mode, 1, "unidirectional", True, False, F32)
            named.append(("training size={} mode={} {}".format(size, mode, case[3]),
                          lambda case=case: BB._train_case(ours, rng, *case)))
        case = (size, "rnn_tanh", 2, "bidirectional", False, True, F32)
        named.append(("training size={} mode=rnn_tanh L=2 bidirectional lengths".format(size),
                      lambda case=case: BB._train_case(ours, rng, *case)))
    return run_cases(named, "LANES " + os.environ.get("TF_RNN_OPS_CPU_LANES", "auto"))


if __name__ == "__main__":
    sys.exit(main())
