"""The step chains' two roads against the float64 reference, run by tests/test_chain_roads.py in
a child process per road (cc/engine/types.h reads TF_RNN_OPS_CPU_CHAIN once per process):
the chain on one thread with the input projection or the weight gradients beside it
("pipelined"), or every step split over the threads in unit blocks ("split"). The default
picks by thread count (kFwdChainMaxThreads, kBwdChainMaxThreads), so a 2-core machine runs the
split step of small batches only when forced, or with more intra-op threads than that
(CHAIN_CHECK_THREADS: TensorFlow's intra-op pool size, set before the first op).

    CHAIN_CHECK_THREADS=8 python tests/chain_checks.py   # one line per case, exit 1 on a mismatch
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tensorflow as tf  # noqa: E402

from child_run import intra_op_threads_from, run_cases  # noqa: E402

intra_op_threads_from("CHAIN_CHECK_THREADS")

import isa_checks as C  # noqa: E402

F32, F64 = tf.float32, tf.float64
# Batches of 2 to 16 rows (both roads exist up to 32 rows forward, 64 backward); chunks of
# 1, 2, 4, ... steps up to 128 / B (T = 12 at B = 16: 1, 2, 4, 5); R of 37·148 up to 300·1200
# elements (the forward's chain only below 2^17).
BLOCK_SIZES = [(75, 4, 6, 37), (140, 2, 5, 40), (12, 16, 10, 300)]
RNN_SIZES = [(40, 6, 12, 40), (10, 16, 8, 200)]


def main():
    from tf_rnn_ops import raw_ops as ours
    rng = np.random.default_rng(11)
    cases = []
    for size in BLOCK_SIZES:
        for op in ("BlockLSTM", "BlockLSTMV2"):
            for dtype in (F32, F64):
                cases.append((f"{op} {size} {dtype.name}",
                              lambda op=op, size=size, dtype=dtype:
                              C._block_lstm(ours, rng, op, size, size[3] % 2 == 0, dtype)))
    for size in RNN_SIZES:
        for mode in ("lstm", "gru", "rnn_tanh"):
            for bidi in (False, True):
                cases.append((f"CudnnRNNV3 {mode} {size} full lengths bidi={bidi}",
                              lambda mode=mode, size=size, bidi=bidi:
                              C._cudnn_rnn(ours, rng, mode, size, bidi, F64, full=True)))
        for mode in ("lstm", "gru"):
            for dtype in (F32, F64):
                cases.append((f"CudnnRNNV3 {mode} {size} short lengths {dtype.name}",
                              lambda mode=mode, size=size, dtype=dtype:
                              C._cudnn_rnn(ours, rng, mode, size, False, dtype, short=True)))
    return run_cases(cases, "ROAD " + os.environ.get("TF_RNN_OPS_CPU_CHAIN", "auto"))


if __name__ == "__main__":
    sys.exit(main())
