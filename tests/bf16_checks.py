"""bfloat16 ops against the float64 reference, run by tests/test_bf16_products.py in a child
process (TF_RNN_OPS_BF16_GEMM is read once per process, so each setting needs its own).

For each case: the op's outputs and gradients in bfloat16 against the float64 reference
(tests/reference.py, tests/cudnn_reference.py) evaluated at the bf16-rounded inputs, as
max |ours - ref| / max(1, max |ref|) over all outputs, and a checksum of our results (to tell
whether the products ran in bf16). The sizes reach every path of the engines' products: the
pipelined step chain (small batch: the input projection and weight gradients of chunks beside
the chain), the non-pipelined path (large batch: one pool GEMM each), the fused input path of
the LSTM block engine (and of larger weights with bf16 products), odd inputs (a zero-padded
pair), column tails of 16, 1, and the pool products in slabs of rows and columns (a Keras LSTM
in training, against stock Keras in float64).

    python tests/bf16_checks.py        # one JSON line per case
"""
import hashlib
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tensorflow as tf  # noqa: E402

import lstm_util as U  # noqa: E402
import reference as ref  # noqa: E402
import test_cudnn_rnn as C  # noqa: E402
import test_cudnn_rnn_grads as G  # noqa: E402
from tf_rnn_ops import raw_ops as ours  # noqa: E402

BF16, F64 = tf.bfloat16, tf.float64
# CudnnRNNV3: (mode, layers, direction, T, B, I, H)
RNN_CASES = [("lstm", 1, "unidirectional", 12, 8, 24, 48),       # pipelined
             ("gru", 1, "unidirectional", 12, 8, 24, 48),
             ("lstm", 2, "bidirectional", 5, 70, 17, 37),        # pool GEMMs, odd sizes
             ("gru", 1, "unidirectional", 6, 80, 64, 80),
             # fused input with bf16 products only ((I + H)·4H between 2^18 and 2^19)
             ("lstm", 1, "unidirectional", 5, 40, 150, 200),
             # weight gradients over an odd T·B = 469 (the last pair of Aᵀ half zero)
             ("lstm", 1, "unidirectional", 7, 67, 24, 40),
             # the backward's per-step product on 8.5 MiB of packed Rᵀ (over kStreamedBytes:
             # each piece of B fetched during the one before), 1030 columns (a partial panel)
             ("lstm", 1, "unidirectional", 2, 20, 16, 1030)]
# The batch in the SIMD lanes with bf16 products (cc/engine/lanes_gemm.h, pair words; taken
# at every size the spec allows with TF_RNN_OPS_CPU_LANES=1, else at inference where a unit
# block's slice of R is over 256 KiB): 32, 45 (three lanes of padding) and 64 rows; unit
# counts that leave a partial register block and odd ones (the last pair of hᵀ half zero; 13
# units: one partial tile of the LSTM's pointwise pass in the lanes, cc/engine/lanes_lstm.h);
# an input narrow enough to fuse with R in the lanes and a wide one projected apart; the last
# case takes the lanes unforced. Each case in training (forward + CudnnRNNBackpropV3, as
# RNN_CASES) and at inference, batch-major (the Keras layers' road: rows batch-major).
LANES_CASES = [("lstm", 1, "unidirectional", 5, 32, 20, 24),
               ("gru", 1, "unidirectional", 4, 45, 10, 13),
               ("rnn_tanh", 2, "bidirectional", 4, 64, 16, 40),
               ("lstm", 1, "unidirectional", 4, 32, 8, 201),
               ("lstm", 2, "bidirectional", 4, 64, 10, 13),
               ("lstm", 1, "unidirectional", 3, 48, 200, 600),
               ("gru", 1, "unidirectional", 3, 32, 40, 700),
               # inference: batch blocks of 32 rows on 2 threads, each block's R (4·200·200 bf16
               # values, over 256 KiB) in the lanes unforced, the narrow input fused with it
               ("lstm", 1, "unidirectional", 3, 64, 24, 200),
               # inference: blocks of 31 and 32 rows on 2 threads, the second in the lanes
               # (its own pack), the first packing all of the blocks' shared copy alone
               ("lstm", 1, "unidirectional", 3, 63, 24, 200)]
# The Keras layers at inference (TfRnn>KerasRNN: the weights in Keras's [in, K·units] layout,
# read in place, units contiguous) against stock Keras in float64 at the bf16-rounded weights:
# (layer, T, B, I, H). On 2 threads each runs in two batch blocks (32, 32 and 45 rows) in the
# lanes (the first case unforced, the others with TF_RNN_OPS_CPU_LANES=1; the GRU's sums there
# come out in packed::Gemm's order, so its bits match the lanes-off run).
# The LSTM cases read and write the op's bf16 words in the engine (cc/engine/rnn_cpu.cc
# Reads16; the fourth: the whole batch of 32 rows in two unit blocks, unforced; the last only
# with the lanes forced: two unit blocks of 16 and 5 units, odd widths); the next two on the
# packed step over the whole batch of 8 rows (too few for batch blocks or the lanes, weights
# too large to fuse x with h, B·H too large for the pipelined chain: x's rows projected from
# their words, an odd input width's last pair padded); the last in two batch blocks of 8 rows,
# x fused with h, each step's rows of x read as pair words. Each case's "bits" are compared
# with TF_RNN_OPS_BF16_WORDS=0's (the op converting them) by test_bf16_products.py.
KERAS_CASES = [("LSTM", 4, 64, 24, 250),   # narrow input fused with R
               ("LSTM", 3, 64, 200, 160),  # wide input projected apart
               ("GRU", 3, 90, 40, 130),    # blocks of 45 rows, a partial unit block
               ("LSTM", 3, 32, 24, 600),
               ("LSTM", 5, 32, 13, 21),
               ("LSTM", 10, 8, 301, 600),
               ("GRU", 12, 8, 33, 530),
               ("LSTM", 12, 16, 64, 128)]
# The Keras LSTM in training (mixed_bfloat16: the op in bfloat16 on Keras's [in, 4·units]
# weights) against stock Keras in float64 at the bf16-rounded weights: its outputs and the
# gradients of x and the weights. T·B = 4096 rows and 4·520 gate columns: the pool products
# (bf16::GemmLarge) in slabs, the weight gradients' packing of the gate gradients in columns
# 1024, 1024 and 32 (a partial tile), the input gradient's conversion of them in rows 4032 and
# 64 (on 2 threads).
KERAS_TRAIN_CASES = [("LSTM", 32, 128, 24, 520)]
# BlockLSTMV2 + its registered gradient: (T, B, I, H)
BLOCK_CASES = [(10, 4, 6, 37),      # fused input, pipelined chain
               (6, 80, 33, 80),     # pool GEMMs (not pipelined), odd I
               (8, 16, 40, 136),    # recurrent packed product, pipelined backward
               (5, 40, 150, 201)]   # fused input with bf16 products only, pipelined backward
                                    # (W packed once, transposed, with a tail pair)


def rel_err(got, want):
    got = np.asarray(U.to_numpy(got) if isinstance(got, tf.Tensor) else got, np.float64)
    want = np.asarray(want, np.float64)
    if not want.size:
        return 0.0
    return float(np.abs(got - want).max()) / max(1.0, float(np.abs(want).max()))


def checksum(arrays):
    return float(sum(np.abs(np.asarray(U.to_numpy(a), np.float64)).sum() for a in arrays))


def rnn_case(rng, mode, layers, direction, T, B, I, H):
    kw = C.model_kw(mode, layers, H, I, "linear_input", direction)
    x, h0, c0, params = C.make_inputs(rng, kw, T, B)
    outs = C.call_fwd(ours, "V3", x, h0, c0, params, kw, BF16)
    dy, dh, dc = G.upstream(rng, outs, mode)
    ref_out, want = G.ref_grads(x, h0, c0, params, kw, dy, dh, dc, BF16)
    got = G.call_backprop(ours, "V3", x, h0, c0, params, outs, dy, dh, dc, kw, BF16)
    errs = [rel_err(outs[k], ref_out[k]) for k in range(3) if ref_out[k] is not None]
    errs += [rel_err(got[k], want[k]) for k in range(4) if want[k] is not None]
    return max(errs), checksum(list(outs[:3]) + [g for g in got if g is not None])


def rnn_infer_case(rng, mode, layers, direction, T, B, I, H):
    kw = C.model_kw(mode, layers, H, I, "linear_input", direction)
    x, h0, c0, params = C.make_inputs(rng, kw, T, B)
    # Batch-major x and y; the states' memory stays [L·dir, B, N] in a [B, L·dir, N] shape
    # (cuDNN's and stock's reading, SEMANTICS.md), so they are reshaped, not transposed.
    def states(a):
        return np.reshape(a, (a.shape[1], a.shape[0], a.shape[2])) if np.ndim(a) == 3 else a
    outs = C.call_fwd(ours, "V3", np.transpose(x, (1, 0, 2)), states(h0), states(c0), params,
                      kw, BF16, time_major=False, is_training=False)
    want = C.ref_fwd(x, h0, c0, params, kw, BF16)
    got = [np.transpose(U.to_numpy(outs[0]), (1, 0, 2))]
    got += [states(U.to_numpy(o)) for o in outs[1:3]]
    errs = [rel_err(got[k], want[k]) for k in range(3) if want[k] is not None]
    return max(errs), checksum(outs[:3])


def keras_pair(rng, kind, T, B, I, H, **layer_kw):
    """x [B, T, I] and our layer (mixed_bfloat16) beside stock Keras's (float64), both with the
    same bf16-rounded weights (drawn after x)."""
    import keras
    import tf_rnn_ops.keras as ok
    x = U.round_to(rng.normal(size=(B, T, I)), BF16)
    mine = getattr(ok, kind)(H, dtype="mixed_bfloat16", **layer_kw)
    stock = getattr(keras.layers, kind)(H, dtype="float64", **layer_kw)
    mine.build((B, T, I))
    stock.build((B, T, I))
    w = [U.round_to(0.1 * rng.normal(size=v.shape), BF16) for v in mine.get_weights()]
    mine.set_weights(w)
    stock.set_weights(w)
    return x, mine, stock


def keras_infer_case(rng, kind, T, B, I, H):
    x, mine, stock = keras_pair(rng, kind, T, B, I, H, return_sequences=True,
                                return_state=True)
    got = mine(tf.constant(x, tf.float32), training=False)
    want = stock(tf.constant(x, F64), training=False)
    errs = [rel_err(g, U.to_numpy(v)) for g, v in zip(got, want)]
    bits = hashlib.sha256(b"".join(np.asarray(g).tobytes() for g in got)).hexdigest()
    return max(errs), checksum(got), bits


def keras_train_case(rng, kind, T, B, I, H):
    x, mine, stock = keras_pair(rng, kind, T, B, I, H, return_sequences=True)
    up = rng.normal(size=(B, T, H))

    def grads(layer, dtype):
        xt = tf.constant(x, dtype)
        with tf.GradientTape() as tape:
            tape.watch(xt)
            y = layer(xt, training=True)
            loss = tf.reduce_sum(tf.cast(y, dtype) * tf.constant(up, dtype))
        return [y] + tape.gradient(loss, [xt] + layer.trainable_variables)

    got = grads(mine, tf.float32)
    want = grads(stock, F64)
    errs = [rel_err(g, U.to_numpy(v)) for g, v in zip(got, want)]
    return max(errs), checksum(got)


def block_case(rng, T, B, I, H):
    p = {k: U.round_to(v, BF16) for k, v in U.make_params(rng, T, B, I, H).items()}
    names = ["x", "cs_prev", "h_prev", "w", "wci", "wcf", "wco", "b"]
    up = [rng.normal(size=(T, B, H)) for _ in range(2)]  # upstream of cs and h

    def loss(outs, dtype):
        return (tf.reduce_sum(outs[1] * tf.constant(up[0], dtype)) +
                tf.reduce_sum(outs[6] * tf.constant(up[1], dtype)))

    ts = [tf.constant(p[n], F64) for n in names]
    with tf.GradientTape() as tape:
        tape.watch(ts)
        want_out = ref.tf_block_lstm_fwd(T, *ts, forget_bias=0.0, cell_clip=0.0,
                                         use_peephole=False, layout=ref.IFCO)
        want_loss = loss(want_out, F64)
    want = tape.gradient(want_loss, ts)
    tb = [tf.constant(p[n], BF16) for n in names]
    with tf.GradientTape() as tape:
        tape.watch(tb)
        outs = ours.BlockLSTMV2(seq_len_max=tf.constant(T, tf.int64), x=tb[0], cs_prev=tb[1],
                                h_prev=tb[2], w=tb[3], wci=tb[4], wcf=tb[5], wco=tb[6], b=tb[7],
                                cell_clip=0.0, use_peephole=False)
        got_loss = loss(outs, BF16)
    got = tape.gradient(got_loss, tb)
    keep = [0, 1, 2, 3, 7]  # x, cs_prev, h_prev, w, b (no peephole)
    errs = [rel_err(outs[k], want_out[k].numpy()) for k in range(7)]
    errs += [rel_err(got[k], want[k].numpy()) for k in keep]
    return max(errs), checksum(list(outs) + [got[k] for k in keep])


def main():
    rng = np.random.default_rng(20261123)
    if os.environ.get("BF16_CHECKS_ONLY") == "keras":  # the bits check of the Keras cases
        RNN_CASES[:] = LANES_CASES[:] = KERAS_TRAIN_CASES[:] = BLOCK_CASES[:] = []
    for case in RNN_CASES:
        err, cs = rnn_case(rng, *case)
        print(json.dumps({"case": "CudnnRNNV3 " + " ".join(map(str, case)), "err": err,
                          "checksum": cs}), flush=True)
    for case in LANES_CASES:
        for name, run in (("CudnnRNNV3", rnn_case), ("CudnnRNNV3 inference", rnn_infer_case)):
            err, cs = run(rng, *case)
            print(json.dumps({"case": name + " " + " ".join(map(str, case)), "err": err,
                              "checksum": cs}), flush=True)
    for i, case in enumerate(KERAS_CASES):  # own seeds: the same inputs in a keras-only run
        err, cs, bits = keras_infer_case(np.random.default_rng([20261130, i]), *case)
        print(json.dumps({"case": "Keras " + " ".join(map(str, case)), "err": err,
                          "checksum": cs, "bits": bits}), flush=True)
    for i, case in enumerate(KERAS_TRAIN_CASES):
        err, cs = keras_train_case(np.random.default_rng([20261206, i]), *case)
        print(json.dumps({"case": "Keras training " + " ".join(map(str, case)), "err": err,
                          "checksum": cs}), flush=True)
    for case in BLOCK_CASES:
        err, cs = block_case(rng, *case)
        print(json.dumps({"case": "BlockLSTMV2 " + "x".join(map(str, case)), "err": err,
                          "checksum": cs}), flush=True)


if __name__ == "__main__":
    main()
