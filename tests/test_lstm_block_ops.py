"""tf_rnn_ops LSTM block ops (LSTMBlockCell(Grad), BlockLSTM(Grad), BlockLSTMV2, BlockLSTMGradV2)
against stock tf.raw_ops (float32, half) and the float64 reference (all dtypes).

Intended differences from stock (docs/SEMANTICS.md §2.4, §5), checked here:
* BlockLSTM(V2): all seven outputs are exactly zero for t >= seq_len_max (stock: only cs, h),
  so stock is compared for t < seq_len_max only.
* LSTMBlockCellGrad with peephole is right in graph mode with temporary peephole weights
  (stock zeroes them before reading, §5 #2).
* float64 and bfloat16 are supported (stock: half and float only).
"""


import numpy as np
import pytest
import tensorflow as tf

import lstm_util as U
import reference as ref

F16, BF16, F32, F64 = tf.float16, tf.bfloat16, tf.float32, tf.float64
SIZES = [(4, 3, 5, 7), (3, 4, 6, 8)]                      # (T, B, I, C): odd and even
EDGE_SIZES = [(1, 3, 5, 7), (4, 1, 5, 7), (3, 2, 1, 1), (2, 5, 4, 3)]   # T=1, B=1, I=C=1
# Long enough for several chunks of steps in the pipelined forward and backward
# (cc/engine/types.h FwdChainPipelined, BwdChainPipelined: chunks of 128 / B steps) and large
# enough for them to run on pool threads too (step_loops.h SideHelpers); 4C = 148 splits into
# uneven column panels.
LONG_SIZES = [(90, 4, 8, 37)]
# Enough rows and steps for batch blocks on 2-4 threads (cc/engine/lstm_cpu.cc
# BlockRowsForward: 19 rows in blocks of 10 and 9, each block's rows of the outputs in place),
# and on 2 threads 9 rows in blocks of 5 and 4, 7 rows in blocks of 4 and 3 and 5 rows in
# blocks of 3 and 2 (small weights, types.h RnnBatchBlockRows).
BATCH_BLOCK_SIZES = [(8, 19, 5, 7), (10, 9, 5, 7), (12, 7, 5, 7), (18, 5, 5, 7)]
# The recurrent product with the batch in the SIMD lanes (cc/engine/lanes_gemm.h, AVX-512):
# 32 and 45 rows (45: three packets of lanes, three padded), weights too large to fuse with
# the input, a unit block's slice of R over 1 MiB on up to 2 threads (4 x 208 x 400 x 4 bytes),
# unit counts that leave a partial register block of units.
LANES_SIZES = [(4, 32, 64, 400), (3, 45, 32, 410)]
CLIPS = [-1.0, 0.5, 3.0]                                  # off, binding, default
FORGET_BIASES = [0.0, 1.0, 0.3]
FWD_OPS = ("LSTMBlockCell", "BlockLSTM", "BlockLSTMV2")
GRAD_OPS = ("LSTMBlockCellGrad", "BlockLSTMGrad", "BlockLSTMGradV2")


def _slm(case, T):
    return {"0": 0, "1": 1, "T-1": T - 1, "T": T}[case]


def _size_id(size):
    return "T{}B{}I{}C{}".format(*size)


def _fwd_cases(sizes, peepholes, clips, fbs, slm_cases, ops=FWD_OPS):
    cases = []
    for op in ops:
        for size in sizes:
            for peep in peepholes:
                for clip in clips:
                    for fb in (fbs if op != "BlockLSTMV2" else [0.0]):
                        for sc in (slm_cases if U.is_block(op) else ["-"]):
                            if sc != "-" and _slm(sc, size[0]) < 0:
                                continue
                            cases.append(pytest.param(
                                op, size, peep, clip, fb, sc,
                                id=f"{op}-{_size_id(size)}-peep{int(peep)}-clip{clip}-fb{fb}"
                                   f"-slm{sc}"))
    return cases


def _grad_cases(sizes, peepholes, slm_cases, ops=GRAD_OPS):
    cases = []
    for op in ops:
        for size in sizes:
            for peep in peepholes:
                for sc in (slm_cases if U.is_block(op) else ["-"]):
                    if sc != "-" and _slm(sc, size[0]) < 0:
                        continue
                    cases.append(pytest.param(op, size, peep, sc,
                                              id=f"{op}-{_size_id(size)}-peep{int(peep)}"
                                                 f"-slm{sc}"))
    return cases


FWD_F32_CASES = (_fwd_cases(SIZES, [False, True], CLIPS, FORGET_BIASES, ["0", "1", "T-1", "T"])
                 + _fwd_cases(EDGE_SIZES, [True], [0.5], [0.3], ["0", "T-1", "T"])
                 + _fwd_cases(LONG_SIZES, [False, True], [0.5], [0.3], ["T-1", "T"],
                              ops=FWD_OPS[1:])
                 + _fwd_cases(BATCH_BLOCK_SIZES, [False, True], [0.5], [0.3], ["T-1", "T"],
                              ops=FWD_OPS[1:])
                 + _fwd_cases(LANES_SIZES, [False, True], [0.5], [0.3], ["T-1", "T"],
                              ops=FWD_OPS[1:]))
FWD_SMALL_CASES = (_fwd_cases(SIZES[:1], [False, True], [-1.0, 0.5], [0.3], ["1", "T"])
                   + _fwd_cases(EDGE_SIZES[1:3], [True], [0.5], [1.0], ["T-1"]))
GRAD_F32_CASES = (_grad_cases(SIZES, [False, True], ["0", "1", "T-1", "T"])
                  + _grad_cases(EDGE_SIZES, [True], ["T-1", "T"])
                  + _grad_cases(LONG_SIZES, [False, True], ["T-1", "T"],
                                ops=GRAD_OPS[1:]))
GRAD_SMALL_CASES = (_grad_cases(SIZES[:1], [False, True], ["1", "T"])
                    + _grad_cases(EDGE_SIZES[1:3], [True], ["T"]))


def _check_dtypes_shapes(outs, dtype, shape):
    for k, o in enumerate(outs):
        assert o.dtype == dtype, f"output {k}: dtype {o.dtype.name} != {dtype.name}"
        assert tuple(o.shape) == tuple(shape), f"output {k}: shape {o.shape} != {shape}"


# ---------------------------------------------------------------------------------------------
# API surface
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op_name", U.ALL_OPS)
def test_signature_matches_stock(ours, op_name):
    U.assert_signature_matches_stock(getattr(ours, op_name), op_name)
    with pytest.raises(TypeError):          # like tf.raw_ops: positional arguments are refused
        getattr(ours, op_name)(tf.zeros([1]))


def test_python_int_seq_len_max(ours, rng):
    """seq_len_max may be a Python int, as with stock."""
    T, B, I, C = SIZES[0]
    p = {k: U.round_to(v, F32) for k, v in U.make_params(rng, T, B, I, C).items()}
    outs = ours.BlockLSTM(seq_len_max=T - 1, **U.tensors(p, F32))
    want = U.ref_fwd("BlockLSTM", p, T - 1)
    U.assert_all_close([U.to_numpy(o) for o in outs], want, ref.OUTPUT_NAMES, U.TOL[F32])


# ---------------------------------------------------------------------------------------------
# forward ops
# ---------------------------------------------------------------------------------------------

def _run_fwd(ours, rng, op, size, peep, clip, fb, slm_case, dtype):
    """Runs ours (and stock where it has the dtype).
    Returns (ours, stock or None, reference, seq_len_max or None), arrays as float64."""
    T, B, I, C = size
    blk = U.is_block(op)
    slm = _slm(slm_case, T) if blk else None
    p = {k: U.round_to(v, dtype) for k, v in U.make_params(rng, T if blk else None, B, I, C)
         .items()}
    attrs = U.fwd_attrs(op, fb, clip, peep)
    pt = U.tensors(p, dtype)
    got = U.call_fwd(ours, op, pt, slm, **attrs)
    _check_dtypes_shapes(got, dtype, (T, B, C) if blk else (B, C))
    stock = None
    if dtype in U.STOCK_DTYPES:
        stock = [U.to_numpy(s) for s in U.call_fwd(tf.raw_ops, op, pt, slm, **attrs)]
    want = U.ref_fwd(op, p, slm, forget_bias=U.round_scalar(fb, dtype),
                     cell_clip=U.round_scalar(clip, dtype), use_peephole=peep)
    return [U.to_numpy(g) for g in got], stock, want, slm


def _check_fwd(got, stock, want, slm, tol):
    n = slm                                 # compare stock for t < seq_len_max only (None: all)
    if stock is not None:
        U.assert_all_close([g[:n] for g in got], [s[:n] for s in stock], ref.OUTPUT_NAMES, tol,
                           prefix="vs stock: ")
    U.assert_all_close(got, want, ref.OUTPUT_NAMES, tol, prefix="vs reference: ")
    if slm is not None:
        for name, g in zip(ref.OUTPUT_NAMES, got):
            assert np.all(g[slm:] == 0.0), f"{name} not exactly zero for t >= seq_len_max"


@pytest.mark.parametrize("op,size,peep,clip,fb,slm_case", FWD_F32_CASES)
def test_fwd_float32(ours, rng, op, size, peep, clip, fb, slm_case):
    got, stock, want, slm = _run_fwd(ours, rng, op, size, peep, clip, fb, slm_case, F32)
    _check_fwd(got, stock, want, slm, U.TOL[F32])


@pytest.mark.parametrize("dtype", [F16, BF16, F64], ids=lambda d: d.name)
@pytest.mark.parametrize("op,size,peep,clip,fb,slm_case", FWD_SMALL_CASES)
def test_fwd_other_dtypes(ours, rng, dtype, op, size, peep, clip, fb, slm_case):
    """half vs stock and vs the float64 reference on half-rounded inputs; bfloat16 and float64
    vs the reference (stock has no kernel for them)."""
    got, stock, want, slm = _run_fwd(ours, rng, op, size, peep, clip, fb, slm_case, dtype)
    _check_fwd(got, stock, want, slm, U.TOL[dtype])


@pytest.mark.parametrize("op", FWD_OPS)
def test_fwd_default_attrs(ours, rng, op):
    """No attrs given: BlockLSTM/LSTMBlockCell clip at 3.0 with forget_bias 1.0, V2 clips at 0
    (no clip) with no forget bias; use_peephole defaults to False.  Inputs are scaled so that
    clipping at 3 binds and the peephole weights would matter."""
    T, B, I, C = SIZES[0]
    blk = U.is_block(op)
    p = U.make_params(rng, T if blk else None, B, I, C)
    p["wci"], p["wcf"], p["wco"] = 4 * p["wci"], 4 * p["wcf"], 4 * p["wco"]
    # unit 0: large cell state and forget gate ~1, so |cs| stays far above 3 unless clipped
    p["cs_prev"][:, 0] = 10.0
    p["wcf"][0] = 0.0
    p["b"][ref.GATE_BLOCK[U.LAYOUT[op]]["f"] * C] = 6.0
    p = {k: U.round_to(v, F32) for k, v in p.items()}
    pt = U.tensors(p, F32)
    got = [U.to_numpy(g) for g in U.call_fwd(ours, op, pt, T)]
    stock = [U.to_numpy(g) for g in U.call_fwd(tf.raw_ops, op, pt, T)]
    clip = 0.0 if op == "BlockLSTMV2" else 3.0
    want = U.ref_fwd(op, p, T, forget_bias=1.0, cell_clip=clip, use_peephole=False)
    U.assert_all_close(got, stock, ref.OUTPUT_NAMES, U.TOL[F32], prefix="vs stock: ")
    U.assert_all_close(got, want, ref.OUTPUT_NAMES, U.TOL[F32], prefix="vs reference: ")
    # The inputs distinguish the defaults from the alternatives.
    unclipped = U.ref_fwd(op, p, T, forget_bias=1.0 if op != "BlockLSTMV2" else 0.0,
                          cell_clip=-1.0, use_peephole=False)
    assert np.abs(unclipped[1][..., 0]).min() > 6.0
    if op == "BlockLSTMV2":
        assert np.abs(want[1]).max() > 3.5                  # not clipped
    else:
        assert np.abs(want[1]).max() <= 3.0                 # clipped at 3
    if op != "BlockLSTMV2":
        no_fb = U.ref_fwd(op, p, T, forget_bias=0.0, cell_clip=clip, use_peephole=False)
        assert not np.allclose(no_fb[2], want[2])
    peep = U.ref_fwd(op, p, T, forget_bias=1.0, cell_clip=clip, use_peephole=True)
    assert not np.allclose(peep[0], want[0])


@pytest.mark.parametrize("op", FWD_OPS + GRAD_OPS)
def test_static_shapes_in_function(ours, op):
    """Inside tf.function the outputs have the static shapes of stock's shape functions."""
    T, B, I, C = SIZES[0]
    blk = U.is_block(op)
    shapes = U.input_shapes(op, T, B, I, C)
    sig = [tf.TensorSpec(shapes[n], tf.int64 if n == "seq_len_max" else F32, name=n)
           for n in U.OP_INPUTS[op]]
    attrs = {"use_peephole": True} if U.is_grad(op) else {}

    traced = {}

    @tf.function(input_signature=sig)
    def f(*args):
        outs = getattr(ours, op)(**dict(zip(U.OP_INPUTS[op], args)), **attrs)
        traced["dtypes"] = [o.dtype for o in outs]
        traced["shapes"] = [tuple(o.shape.as_list()) if o.shape.rank is not None else None
                            for o in outs]
        return outs

    f.get_concrete_function()
    assert traced["dtypes"] == [F32] * len(traced["dtypes"])
    got = traced["shapes"]
    if not U.is_grad(op):
        want = [(T, B, C) if blk else (B, C)] * 7
    elif blk:
        want = [(T, B, I), (B, C), (B, C), (I + C, 4 * C), (C,), (C,), (C,), (4 * C,)]
    else:
        want = [(B, C), (B, 4 * C), (C,), (C,), (C,)]
    assert got == want


# ---------------------------------------------------------------------------------------------
# grad ops
# ---------------------------------------------------------------------------------------------

def _run_grad(ours, rng, op, size, peep, slm_case, dtype, clip=0.5):
    """Feeds forward activations (reference forward, rounded to dtype; zero tails) and random
    cs_grad/h_grad (nonzero everywhere, also in the tail) to ours and, where it has the dtype,
    stock.  Returns (ours, stock or None, reference, slm)."""
    T, B, I, C = size
    blk = U.is_block(op)
    slm = _slm(slm_case, T) if blk else None
    p = {k: U.round_to(v, dtype) for k, v in U.make_params(rng, T if blk else None, B, I, C)
         .items()}
    acts = [U.round_to(a, dtype) for a in U.ref_fwd(
        U.FWD_FOR_GRAD[op], p, slm, forget_bias=0.3, cell_clip=clip, use_peephole=peep)]
    oshape = (T, B, C) if blk else (B, C)
    cs_grad = U.round_to(rng.normal(size=oshape), dtype)
    h_grad = U.round_to(rng.normal(size=oshape), dtype)
    inputs = U.grad_inputs(op, p, acts, cs_grad, h_grad)
    it = U.tensors(inputs, dtype)
    got = U.call_grad(ours, op, it, slm, use_peephole=peep)
    want = U.ref_grad(op, inputs, slm, use_peephole=peep)
    for g, w, n in zip(got, want, U.grad_output_names(op)):
        assert g.dtype == dtype, n
        assert tuple(g.shape) == w.shape, n
    stock = None
    if dtype in U.STOCK_DTYPES:
        stock = [U.to_numpy(s) for s in U.call_grad(tf.raw_ops, op, it, slm, use_peephole=peep)]
    return [U.to_numpy(g) for g in got], stock, want, slm


def _check_grad(op, got, stock, want, slm, tol):
    names = U.grad_output_names(op)
    if stock is not None:
        U.assert_all_close(got, stock, names, tol, scale=True, prefix="vs stock: ")
    U.assert_all_close(got, want, names, tol, scale=True, prefix="vs reference: ")
    if slm is not None:
        assert np.all(got[0][slm:] == 0.0), "x_grad not zero for t >= seq_len_max"


@pytest.mark.parametrize("op,size,peep,slm_case", GRAD_F32_CASES)
def test_grad_op_float32(ours, rng, op, size, peep, slm_case):
    got, stock, want, slm = _run_grad(ours, rng, op, size, peep, slm_case, F32)
    _check_grad(op, got, stock, want, slm, U.TOL[F32])


@pytest.mark.parametrize("dtype", [F16, BF16, F64], ids=lambda d: d.name)
@pytest.mark.parametrize("op,size,peep,slm_case", GRAD_SMALL_CASES)
def test_grad_op_other_dtypes(ours, rng, dtype, op, size, peep, slm_case):
    got, stock, want, slm = _run_grad(ours, rng, op, size, peep, slm_case, dtype)
    _check_grad(op, got, stock, want, slm, U.TOL[dtype])


@pytest.mark.parametrize("op", GRAD_OPS[1:])
def test_grad_op_deterministic(ours, rng, op):
    """Repeated calls give bit-identical gradients: the pipelined backward splits its w_grad /
    b_grad sums over threads, but adds the chunks of each column panel in a fixed order."""
    T, B, I, C = 150, 8, 16, 32
    p = {k: U.round_to(v, F32) for k, v in U.make_params(rng, T, B, I, C).items()}
    acts = [U.round_to(a, F32) for a in U.ref_fwd(
        U.FWD_FOR_GRAD[op], p, T, forget_bias=0.3, cell_clip=0.5, use_peephole=True)]
    inputs = U.grad_inputs(op, p, acts, rng.normal(size=(T, B, C)), rng.normal(size=(T, B, C)))
    it = U.tensors(inputs, F32)
    first = [U.to_numpy(g) for g in U.call_grad(ours, op, it, T, use_peephole=True)]
    for _ in range(4):
        again = [U.to_numpy(g) for g in U.call_grad(ours, op, it, T, use_peephole=True)]
        for a, b, n in zip(first, again, U.grad_output_names(op)):
            np.testing.assert_array_equal(a, b, err_msg=n)


@pytest.mark.parametrize("peep", [False, True])
@pytest.mark.parametrize("op", GRAD_OPS)
def test_grad_op_fed_by_our_forward(ours, rng, op, peep):
    """Forward outputs of our forward op fed straight into our grad op (float32)."""
    T, B, I, C = SIZES[1]
    fwd = U.FWD_FOR_GRAD[op]
    blk = U.is_block(op)
    slm = T - 1 if blk else None
    p = {k: U.round_to(v, F32) for k, v in
         U.make_params(rng, T if blk else None, B, I, C).items()}
    pt = U.tensors(p, F32)
    outs = U.call_fwd(ours, fwd, pt, slm, **U.fwd_attrs(fwd, 0.3, 0.5, peep))
    oshape = (T, B, C) if blk else (B, C)
    cs_grad = U.round_to(rng.normal(size=oshape), F32)
    h_grad = U.round_to(rng.normal(size=oshape), F32)
    acts = [U.to_numpy(o) for o in outs]
    inputs = U.grad_inputs(op, p, acts, cs_grad, h_grad)
    got = U.call_grad(ours, op, U.tensors(inputs, F32), slm, use_peephole=peep)
    want = U.ref_grad(op, inputs, slm, use_peephole=peep)
    U.assert_all_close([U.to_numpy(g) for g in got], want, U.grad_output_names(op), U.TOL[F32],
                       scale=True)


# ---------------------------------------------------------------------------------------------
# LSTMBlockCellGrad: peephole weights that are graph temporaries (stock bug §5 #2)
# ---------------------------------------------------------------------------------------------

def _cell_grad_inputs(rng, B=3, I=5, C=7):
    p = {k: U.round_to(v, F32) for k, v in U.make_params(rng, None, B, I, C).items()}
    acts = [U.round_to(a, F32) for a in U.ref_fwd(
        "LSTMBlockCell", p, forget_bias=0.3, cell_clip=0.5, use_peephole=True)]
    cs_grad = U.round_to(rng.normal(size=(B, C)), F32)
    h_grad = U.round_to(rng.normal(size=(B, C)), F32)
    return U.grad_inputs("LSTMBlockCellGrad", p, acts, cs_grad, h_grad)


def _cell_grad_with_temporary_peepholes(mod, scale_kind):
    """tf.function that computes wci/wcf/wco inside the function (single-consumer temporaries)
    before passing them to LSTMBlockCellGrad."""

    @tf.function
    def f(inputs, one):
        kw = dict(inputs)
        for n in ("wci", "wcf", "wco"):
            kw[n] = inputs[n] * (1.0 if scale_kind == "const" else one)
        return mod.LSTMBlockCellGrad(**kw, use_peephole=True)

    return f


@pytest.mark.parametrize("scale_kind", ["const", "tensor"])
def test_cell_grad_peephole_temporaries_in_function(ours, rng, scale_kind):
    inputs = _cell_grad_inputs(rng)
    f = _cell_grad_with_temporary_peepholes(ours, scale_kind)
    got = f(U.tensors(inputs, F32), tf.constant(1.0))
    want = U.ref_grad("LSTMBlockCellGrad", inputs, use_peephole=True)
    U.assert_all_close([U.to_numpy(g) for g in got], want, ref.CELL_GRAD_NAMES, U.TOL[F32],
                       scale=True)
    # and the inputs were not written to
    again = ours.LSTMBlockCellGrad(**U.tensors(inputs, F32), use_peephole=True)
    U.assert_all_close([U.to_numpy(g) for g in again], want, ref.CELL_GRAD_NAMES, U.TOL[F32],
                       scale=True)


def test_stock_cell_grad_peephole_temporaries_is_wrong(rng):
    """Documents stock's bug (§5 #2) that the test above guards against: with peephole weights
    computed inside the function (`* one`, which Grappler cannot fold), stock's result differs
    from the reference.  Needs no plugin."""
    inputs = _cell_grad_inputs(rng)
    f = _cell_grad_with_temporary_peepholes(tf.raw_ops, "tensor")
    got = [U.to_numpy(g) for g in f(U.tensors(inputs, F32), tf.constant(1.0))]
    want = U.ref_grad("LSTMBlockCellGrad", inputs, use_peephole=True)
    assert max(np.abs(g - w).max() for g, w in zip(got, want)) > 1e-3
