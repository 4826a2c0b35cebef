"""The forward in batch blocks (cc/engine/rnn_cpu_stack.cc ForwardBatchBlocks: the rows in blocks
of at least 8, or 4, 3 or 2 on 2 threads with small weights, each block's whole stack a call of
its own on one thread) against the float64 reference, at inference and in training (the
forward's outputs and then CudnnRNNBackprop's gradients, which read the reserve the blocks
wrote), run by tests/test_batch_blocks.py in a child process per setting:
TensorFlow's intra-op pool size (BATCH_CHECK_THREADS, set before the first op: 2 threads make
two blocks, 3 three, 4 up to four), TF_RNN_OPS_CPU_BATCH_BLOCKS (0: no blocks, the roads over the
whole batch; read once per process) and TF_RNN_OPS_CPU_FUSE_WIDE (0: the AVX2 engine fuses the
input with R for small weights only, as the other engines do).

Cases: every mode, one and two layers and directions (the states gathered per block), time-major
x and y (in place, time-major over the whole batch as in training, where every block's layers
fuse the input into the step's product and every sequence is full length; else gathered and
scattered) and batch-major (in place), per-sequence lengths with 0 and T
(one layer: the first half of the rows full length, so that the first block's road fuses the
input and the others' do not: a block whose packing's layout is not the share's packs its own),
a projection, batches that do not split evenly (19 rows: 10 and 9; 40 rows in 3 blocks: 14, 13
and 13; the first blocks take the extra rows, types.h RnnBatchBlockRow), and batches below two
blocks of 8 (15 rows in 4 steps: no split; 11 rows in 9 steps: two blocks of 6 and 5 on 2
threads only, types.h RnnBatchBlockRows; 7 rows in 12 steps: blocks of 4 and 3, 5 rows in 20
steps: blocks of 3 and 2, on 2 threads only), in float64, and in float32 for every mode (a
block's gru input projection on the packed kernel where K·H is off the multiples of 8), and in
bfloat16 (lstm and rnn_tanh, time-major: in place on float rows, gathered on pair words).
Training cases: lstm, rnn_tanh and rnn_relu take blocks where every layer's input fuses into its
step's product and every sequence is full length (small weights; on the AVX2 engine weights up to
8 MiB too, as TRAIN_SIZES[2]'s and SIZES[4]'s lstm: types.h RnnFusesInput's `wide`); gru,
per-sequence lengths, the larger weights of TRAIN_SIZES[2] elsewhere and T = 4 (a streaming
call's steps at 8 rows) keep the roads over the whole batch, and check that the choice is made
right; on 2 threads only, 9 rows in 10 steps (TRAIN_SIZES[4]) run in blocks of 5 and 4 rows,
6 rows in 12 steps (TRAIN_SIZES[5]) in blocks of 3, and 4 rows in 18 steps (TRAIN_SIZES[6]) in
blocks of 2.
Small batches (3-15 rows, SMALL_SIZES: fewer than two blocks, so the whole batch, its steps split
into unit blocks) with weights past the L2 rule: on 2-4 threads the AVX-512 engine fuses the
input into each step's product there too (rnn_cpu_common.h FuseSmallBatch; the AVX2 engine
everywhere, FuseWide), on one thread or with TF_RNN_OPS_CPU_FUSE_WIDE=0 it projects it apart;
at inference and in training, float64 and float32.

    BATCH_CHECK_THREADS=4 python tests/batch_block_checks.py   # a line per case, exit 1 on a mismatch
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tensorflow as tf  # noqa: E402

from child_run import intra_op_threads_from, run_cases  # noqa: E402

intra_op_threads_from("BATCH_CHECK_THREADS")

import test_cudnn_rnn as C  # noqa: E402
import test_cudnn_rnn_grads as G  # noqa: E402

BF16, F32, F64 = tf.bfloat16, tf.float32, tf.float64

# (T, B, I, H): sizes that take the fused input product inside a block (small weights), the
# batch splits above, and an lstm whose weights are past the L2 rule ((128 + 200) x 800 floats:
# fused on the AVX2 engine unless TF_RNN_OPS_CPU_FUSE_WIDE=0, projected apart elsewhere).
# And 11 rows in 9 steps, 7 rows in 12 and 5 rows in 20: on 2 threads two blocks of 6 and 5
# rows, of 4 and 3, of 3 and 2 (small weights, types.h RnnBatchBlockRows), on 3 or 4 the whole
# batch.
SIZES = [(6, 19, 5, 12), (5, 40, 30, 70), (4, 15, 6, 10), (3, 64, 8, 16), (4, 24, 128, 200),
         (9, 11, 7, 13), (12, 7, 5, 9), (20, 5, 5, 9)]


def _case(ours, rng, size, mode, L, direction, time_major, lengths, num_proj, dtype):
    T, B, I, H = size
    kw = C.model_kw(mode, L, H, I, "linear_input", direction, num_proj=num_proj)
    x, h0, c0, params = C.make_inputs(rng, kw, T, B, time_major=time_major)
    lens = C._lengths(rng, B, T) if lengths else None
    if lengths and L == 1:  # the first half full length: blocks on different roads
        lens = np.concatenate([np.full(B // 2, T, np.int32), C._lengths(rng, B - B // 2, T)])
    outs = C.call_fwd(ours, "V3", x, h0, c0, params, kw, dtype, seq_lengths=lens,
                      time_major=time_major, is_training=False)
    ref = C.ref_fwd(x, h0, c0, params, kw, dtype, seq_lengths=lens, time_major=time_major)
    C.assert_fwd(outs, ref, mode, C.FWD_TOL[dtype])
    if lens is not None:
        C._assert_zero_past_lengths(outs[0], lens, time_major=time_major)


# (T, B, I, H) of the training cases: 19 rows (two blocks of 10 and 9), 40 rows (up to four
# blocks), lstm weights past the L2 rule ((160 + 300) x 1200: blocks on the AVX2 engine unless
# TF_RNN_OPS_CPU_FUSE_WIDE=0, the whole batch elsewhere), too few steps (T = 4), 9 rows
# (on 2 threads blocks of 5 and 4 rows), 6 rows (on 2 threads blocks of 3) and 4 rows (on 2
# threads blocks of 2).
TRAIN_SIZES = [(6, 19, 5, 12), (7, 40, 16, 24), (6, 16, 160, 300), (4, 24, 6, 10),
               (10, 9, 8, 12), (12, 6, 8, 12), (18, 4, 8, 12)]

# (T, B, I, H) of small batches whose [W; R] is past the L2 rule (2^18 floats) for the lstm at
# every size (one layer: 393K, 480K and 1.57M elements; a second layer of both directions
# more) and for rnn_tanh / rnn_relu at the last: fused on 2-4 threads (FuseSmallBatch). More
# than 32 rows of steps (T·B; fewer run unpacked, types.h RnnStepsUnpacked).
SMALL_SIZES = [(12, 3, 128, 256), (4, 13, 100, 300), (6, 6, 256, 512)]


def _train_case(ours, rng, size, mode, L, direction, time_major, lengths, dtype):
    T, B, I, H = size
    kw = C.model_kw(mode, L, H, I, "linear_input", direction)
    x, h0, c0, params = C.make_inputs(rng, kw, T, B, time_major=time_major)
    lens = C._lengths(rng, B, T) if lengths else None
    outs = C.call_fwd(ours, "V3", x, h0, c0, params, kw, dtype, seq_lengths=lens,
                      time_major=time_major, is_training=True)
    dy, dh, dc = G.upstream(rng, outs, mode)
    ref, want = G.ref_grads(x, h0, c0, params, kw, dy, dh, dc, dtype, seq_lengths=lens,
                            time_major=time_major)
    C.assert_fwd(outs, ref, mode, C.FWD_TOL[dtype])
    got = G.call_backprop(ours, "V3", x, h0, c0, params, outs, dy, dh, dc, kw, dtype,
                          seq_lengths=lens, time_major=time_major)
    G.assert_grads(got, want, mode, G.GRAD_TOL[dtype])


def main():
    from tf_rnn_ops import raw_ops as ours
    rng = np.random.default_rng(23)
    cases = []
    for size in SIZES:
        for mode in C.MODES:
            for L, direction, lengths in ((1, "unidirectional", False),
                                          (1, "unidirectional", True),
                                          (2, "bidirectional", True),
                                          (2, "bidirectional", False)):
                # (two layers and directions of full length: time-major only, the layers'
                # rows of x, y and the reserve in place over the whole batch)
                for time_major in (True, False) if lengths or L == 1 else (True,):
                    cases.append((size, mode, L, direction, time_major, lengths, 0, F64))
        # float32, every mode: a block's input projection on one thread (gru, rnn: K·H off the
        # multiples of 8 on the packed kernel, rnn_cpu.cc LayerForward's packed_proj)
        for mode in C.MODES:
            cases.append((size, mode, 1, "unidirectional", False, False, 0, F32))
    # bf16 products, time-major: one layer of an odd input width fuses on float rows (in
    # place); an even width, as a second layer's, on the step's pair words (gathered)
    for size in SIZES[:2]:
        for mode in ("lstm", "rnn_tanh"):
            for L, direction in ((1, "unidirectional"), (2, "bidirectional")):
                cases.append((size, mode, L, direction, True, False, 0, BF16))
    cases.append((SIZES[1], "lstm", 2, "unidirectional", True, True, 24, F64))
    train = []
    for size in TRAIN_SIZES:
        for mode in C.MODES:
            for L, direction in ((1, "unidirectional"), (2, "bidirectional")):
                train.append((size, mode, L, direction, True, False, F64))
        train.append((size, "lstm", 1, "unidirectional", False, False, F64))
        train.append((size, "lstm", 2, "bidirectional", True, True, F64))
        train.append((size, "lstm", 1, "unidirectional", True, False, F32))
    for size in SMALL_SIZES:
        for mode in C.MODES:
            for L, direction in ((1, "unidirectional"), (2, "bidirectional")):
                cases.append((size, mode, L, direction, True, False, 0, F64))
            train.append((size, mode, 2, "bidirectional", True, False, F64))
        cases.append((size, "lstm", 1, "unidirectional", False, False, 0, F32))
        train.append((size, "lstm", 1, "unidirectional", True, False, F32))
    named = [("size={} mode={} L={} {} time_major={} lengths={} num_proj={} {}".format(
                  *case[:-1], case[-1].name),
              lambda case=case: _case(ours, rng, *case)) for case in cases]
    named += [("training size={} mode={} L={} {} time_major={} lengths={} {}".format(
                   *case[:-1], case[-1].name),
               lambda case=case: _train_case(ours, rng, *case)) for case in train]
    return run_cases(named, "BATCH_BLOCKS {} FUSE_WIDE {}".format(
        os.environ.get("TF_RNN_OPS_CPU_BATCH_BLOCKS", "auto"),
        os.environ.get("TF_RNN_OPS_CPU_FUSE_WIDE", "auto")))


if __name__ == "__main__":
    sys.exit(main())
