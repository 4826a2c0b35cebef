"""Tests of the float64 references themselves (tests/reference.py), against stock tf.raw_ops
(float32 and half, where stock is right), TF autodiff and numeric differentiation.

These need no plugin.
"""

import numpy as np
import pytest
import tensorflow as tf

import lstm_util as U
import reference as ref

F32 = tf.float32
SIZES = [(4, 3, 5, 7), (3, 4, 6, 8)]         # (T, B, I, C): odd and even
CLIPS = [-1.0, 0.5, 3.0]
FORGET_BIASES = [0.0, 1.0, 0.3]


def _rounded(params, dtype):
    return {k: U.round_to(v, dtype) for k, v in params.items()}


# ---------------------------------------------------------------------------------------------
# forward vs stock
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("forget_bias", FORGET_BIASES)
@pytest.mark.parametrize("cell_clip", CLIPS)
@pytest.mark.parametrize("use_peephole", [False, True])
def test_cell_fwd_vs_stock(rng, use_peephole, cell_clip, forget_bias):
    _, B, I, C = SIZES[0]
    p = _rounded(U.make_params(rng, None, B, I, C), F32)
    got = U.call_fwd(tf.raw_ops, "LSTMBlockCell", U.tensors(p, F32), forget_bias=forget_bias,
                     cell_clip=cell_clip, use_peephole=use_peephole)
    want = U.ref_fwd("LSTMBlockCell", p, forget_bias=forget_bias, cell_clip=cell_clip,
                     use_peephole=use_peephole)
    U.assert_all_close([U.to_numpy(g) for g in got], want, ref.OUTPUT_NAMES, U.TOL[F32])


@pytest.mark.parametrize("seq_case", ["0", "1", "T-1", "T"])
@pytest.mark.parametrize("cell_clip", CLIPS)
@pytest.mark.parametrize("use_peephole", [False, True])
@pytest.mark.parametrize("op_name", ["BlockLSTM", "BlockLSTMV2"])
@pytest.mark.parametrize("size", SIZES, ids=str)
def test_block_fwd_vs_stock(rng, size, op_name, use_peephole, cell_clip, seq_case):
    T, B, I, C = size
    slm = {"0": 0, "1": 1, "T-1": T - 1, "T": T}[seq_case]
    p = _rounded(U.make_params(rng, T, B, I, C), F32)
    attrs = U.fwd_attrs(op_name, 0.3, cell_clip, use_peephole)
    got = [U.to_numpy(g) for g in U.call_fwd(tf.raw_ops, op_name, U.tensors(p, F32), slm, **attrs)]
    want = U.ref_fwd(op_name, p, slm, forget_bias=0.3, cell_clip=cell_clip,
                     use_peephole=use_peephole)
    # Stock leaves i, f, o, ci, co uninitialised for t >= seq_len_max: compare t < slm only.
    U.assert_all_close([g[:slm] for g in got], [w[:slm] for w in want], ref.OUTPUT_NAMES,
                       U.TOL[F32])
    for k in (1, 6):                        # stock zeroes cs and h in the tail, as the reference
        assert np.all(got[k][slm:] == 0.0), ref.OUTPUT_NAMES[k]
    for w in want:                          # the reference zeroes all seven
        assert np.all(w[slm:] == 0.0)


@pytest.mark.parametrize("use_peephole", [False, True])
@pytest.mark.parametrize("op_name", ["LSTMBlockCell", "BlockLSTM", "BlockLSTMV2"])
def test_half_stock_vs_reference(rng, op_name, use_peephole):
    """Stock half vs the float64 reference on half-rounded inputs: calibrates TOL[float16]."""
    T, B, I, C = SIZES[0]
    h = tf.float16
    p = _rounded(U.make_params(rng, T if U.is_block(op_name) else None, B, I, C), h)
    attrs = U.fwd_attrs(op_name, U.round_scalar(0.3, h), 0.5, use_peephole)
    got = [U.to_numpy(g) for g in U.call_fwd(tf.raw_ops, op_name, U.tensors(p, h), T, **attrs)]
    want = U.ref_fwd(op_name, p, T, forget_bias=U.round_scalar(0.3, h), cell_clip=0.5,
                     use_peephole=use_peephole)
    U.assert_all_close(got, want, ref.OUTPUT_NAMES, U.TOL[h])


def test_layouts_are_column_permutations(rng):
    """IFCO with w, b columns permuted from ICFO gives the same outputs (V2 = V1 reordered)."""
    T, B, I, C = SIZES[1]
    p = U.make_params(rng, T, B, I, C)
    perm = np.concatenate([np.arange(C) + k * C for k in (0, 2, 1, 3)])  # ICFO -> IFCO columns
    q = dict(p, w=p["w"][:, perm], b=p["b"][perm])
    a = ref.block_lstm_fwd(T, *[p[n] for n in U.PARAM_NAMES], forget_bias=0.0, cell_clip=0.5,
                           use_peephole=True, layout=ref.ICFO)
    b = ref.block_lstm_fwd(T, *[q[n] for n in U.PARAM_NAMES], forget_bias=0.0, cell_clip=0.5,
                           use_peephole=True, layout=ref.IFCO)
    for u, v in zip(a, b):
        np.testing.assert_allclose(u, v, rtol=1e-13, atol=1e-13)


# ---------------------------------------------------------------------------------------------
# raw grad ops vs stock
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cell_clip", [-1.0, 0.5])
@pytest.mark.parametrize("use_peephole", [False, True])
def test_cell_grad_vs_stock(rng, use_peephole, cell_clip):
    """LSTMBlockCellGrad in eager mode with plain tensors (where stock is right, §5 #2)."""
    _, B, I, C = SIZES[0]
    p = _rounded(U.make_params(rng, None, B, I, C), F32)
    acts = [U.round_to(a, F32) for a in U.ref_fwd(
        "LSTMBlockCell", p, forget_bias=0.3, cell_clip=cell_clip, use_peephole=use_peephole)]
    cs_grad = U.round_to(rng.normal(size=(B, C)), F32)
    h_grad = U.round_to(rng.normal(size=(B, C)), F32)
    inputs = U.grad_inputs("LSTMBlockCellGrad", p, acts, cs_grad, h_grad)
    got = U.call_grad(tf.raw_ops, "LSTMBlockCellGrad", U.tensors(inputs, F32),
                      use_peephole=use_peephole)
    want = U.ref_grad("LSTMBlockCellGrad", inputs, use_peephole=use_peephole)
    U.assert_all_close([U.to_numpy(g) for g in got], want, ref.CELL_GRAD_NAMES, U.TOL[F32],
                       scale=True)


@pytest.mark.parametrize("seq_case", ["0", "1", "T-1", "T"])
@pytest.mark.parametrize("use_peephole", [False, True])
@pytest.mark.parametrize("op_name", ["BlockLSTMGrad", "BlockLSTMGradV2"])
@pytest.mark.parametrize("size", SIZES, ids=str)
def test_block_grad_vs_stock(rng, size, op_name, use_peephole, seq_case):
    T, B, I, C = size
    slm = {"0": 0, "1": 1, "T-1": T - 1, "T": T}[seq_case]
    fwd = U.FWD_FOR_GRAD[op_name]
    p = _rounded(U.make_params(rng, T, B, I, C), F32)
    acts = [U.round_to(a, F32) for a in U.ref_fwd(fwd, p, slm, forget_bias=0.3, cell_clip=0.5,
                                                   use_peephole=use_peephole)]
    cs_grad = U.round_to(rng.normal(size=(T, B, C)), F32)
    h_grad = U.round_to(rng.normal(size=(T, B, C)), F32)
    inputs = U.grad_inputs(op_name, p, acts, cs_grad, h_grad)
    got = U.call_grad(tf.raw_ops, op_name, U.tensors(inputs, F32), slm,
                      use_peephole=use_peephole)
    want = U.ref_grad(op_name, inputs, slm, use_peephole=use_peephole)
    U.assert_all_close([U.to_numpy(g) for g in got], want, ref.BLOCK_GRAD_NAMES, U.TOL[F32],
                       scale=True)
    assert np.all(want[0][slm:] == 0.0)


# ---------------------------------------------------------------------------------------------
# the TF-ops reference
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cell_clip", [-1.0, 0.5])
@pytest.mark.parametrize("use_peephole", [False, True])
@pytest.mark.parametrize("op_name", ["LSTMBlockCell", "BlockLSTM", "BlockLSTMV2"])
def test_tf_reference_fwd_matches_numpy(rng, op_name, use_peephole, cell_clip):
    T, B, I, C = SIZES[1]
    slm = T - 1
    blk = U.is_block(op_name)
    p = U.make_params(rng, T if blk else None, B, I, C)
    fb = 0.0 if op_name == "BlockLSTMV2" else 0.3
    kw = dict(forget_bias=fb, cell_clip=cell_clip, use_peephole=use_peephole,
              layout=U.LAYOUT[op_name])
    pt = [tf.constant(p[n]) for n in U.PARAM_NAMES]
    got = ref.tf_block_lstm_fwd(slm, *pt, **kw) if blk else ref.tf_lstm_cell_fwd(*pt, **kw)
    want = U.ref_fwd(op_name, p, slm, forget_bias=fb, cell_clip=cell_clip,
                     use_peephole=use_peephole)
    U.assert_all_close([g.numpy() for g in got], want, ref.OUTPUT_NAMES, U.TOL[tf.float64])


def _tape_grads(fn, xs):
    with tf.GradientTape() as tape:
        tape.watch(xs)
        loss = fn(*xs)
    return [g.numpy() for g in tape.gradient(loss, xs,
                                             unconnected_gradients=tf.UnconnectedGradients.ZERO)]


@pytest.mark.parametrize("use_peephole", [False, True])
@pytest.mark.parametrize("op_name", ["LSTMBlockCell", "BlockLSTM", "BlockLSTMV2"])
def test_tf_reference_autodiff_matches_numpy_grads(rng, op_name, use_peephole):
    """Loss on cs and h only, clip never binding: the true gradient equals what the raw grad ops
    compute (numpy block_lstm_grad / lstm_cell_grad + lstm_cell_param_grads)."""
    T, B, I, C = 4, 3, 5, 7
    slm = T - 1
    blk = U.is_block(op_name)
    kw = dict(forget_bias=0.3 if op_name != "BlockLSTMV2" else 0.0, cell_clip=50.0,
              use_peephole=use_peephole, layout=U.LAYOUT[op_name])
    p = U.make_params(rng, T if blk else None, B, I, C)
    oshape = (T, B, C) if blk else (B, C)
    r_cs, r_h = rng.normal(size=oshape), rng.normal(size=oshape)

    def loss(*xs):
        outs = ref.tf_block_lstm_fwd(slm, *xs, **kw) if blk else ref.tf_lstm_cell_fwd(*xs, **kw)
        return tf.reduce_sum(outs[1] * r_cs) + tf.reduce_sum(outs[6] * r_h)

    got = _tape_grads(loss, [tf.constant(p[n]) for n in U.PARAM_NAMES])
    acts = U.ref_fwd(op_name, p, slm, forget_bias=kw["forget_bias"], cell_clip=50.0,
                     use_peephole=use_peephole)
    if blk:
        gop = "BlockLSTMGradV2" if op_name == "BlockLSTMV2" else "BlockLSTMGrad"
        want = U.ref_grad(gop, U.grad_inputs(gop, p, acts, r_cs, r_h), slm,
                          use_peephole=use_peephole)
    else:
        cs_prev_grad, dicfo, wci_g, wcf_g, wco_g = U.ref_grad(
            "LSTMBlockCellGrad", U.grad_inputs("LSTMBlockCellGrad", p, acts, r_cs, r_h),
            use_peephole=use_peephole)
        x_g, h_g, w_g, b_g = ref.lstm_cell_param_grads(p["x"], p["h_prev"], p["w"], dicfo)
        want = (x_g, cs_prev_grad, h_g, w_g, wci_g, wcf_g, wco_g, b_g)
    U.assert_all_close(got, want, ref.BLOCK_GRAD_NAMES, U.Tol(1e-9, 1e-9), scale=True)


def _numeric_grads(fn, xs, delta=1e-5):
    """Central differences of a float64 numpy scalar function of several arrays."""
    return U.numeric_grads(fn, xs, delta)


@pytest.mark.parametrize("cell_clip", [-1.0, 0.6])
@pytest.mark.parametrize("use_peephole", [False, True])
@pytest.mark.parametrize("op_name", ["LSTMBlockCell", "BlockLSTM", "BlockLSTMV2"])
def test_tf_reference_autodiff_matches_numeric(rng, op_name, use_peephole, cell_clip):
    """Loss on all seven outputs, clip binding or off: TF autodiff of the TF reference equals
    central differences of the numpy reference (so it is the true gradient, exact clip)."""
    T, B, I, C = 3, 2, 3, 2
    slm = 2
    blk = U.is_block(op_name)
    fb = 0.0 if op_name == "BlockLSTMV2" else 0.3
    p = U.make_clean_params(rng, op_name, T, B, I, C, seq_len_max=slm, forget_bias=fb,
                            cell_clip=cell_clip, use_peephole=use_peephole,
                            binding=True if cell_clip > 0 else None)
    kw = dict(forget_bias=fb, cell_clip=cell_clip, use_peephole=use_peephole,
              layout=U.LAYOUT[op_name])
    oshape = (T, B, C) if blk else (B, C)
    R = [rng.normal(size=oshape) for _ in range(7)]

    def np_loss(*xs):
        outs = (ref.block_lstm_fwd(slm, *xs, **kw) if blk else ref.lstm_cell_fwd(*xs, **kw))
        return sum(float(np.sum(o * r)) for o, r in zip(outs, R))

    def tf_loss(*xs):
        outs = ref.tf_block_lstm_fwd(slm, *xs, **kw) if blk else ref.tf_lstm_cell_fwd(*xs, **kw)
        return tf.add_n([tf.reduce_sum(o * r) for o, r in zip(outs, R)])

    xs = [p[n] for n in U.PARAM_NAMES]
    got = _tape_grads(tf_loss, [tf.constant(a) for a in xs])
    want = _numeric_grads(np_loss, xs)
    U.assert_all_close(got, want, ref.BLOCK_GRAD_NAMES, U.Tol(1e-7, 1e-7), scale=True)
