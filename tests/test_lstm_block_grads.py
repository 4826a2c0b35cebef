"""Registered gradients of TfRnn>LSTMBlockCell, TfRnn>BlockLSTM and TfRnn>BlockLSTMV2.

Ours are the TRUE gradients of the forward function (unlike stock, docs/SEMANTICS.md §3.1, §5):
* BlockLSTMV2 uses the IFCO layout in backward (stock's registered gradient uses ICFO);
* gradients flowing into all seven outputs (i, cs, f, o, ci, co, h) are used (stock: cs, h);
* cell clipping has its exact derivative: zero through a clipped cell value (stock:
  straight-through);
* seq_len_max gets None.

Checked against float64 numeric gradients of our own float64 ops (tf.test.compute_gradient)
and against autodiff of the float64 TF-ops reference (tests/reference.py), eager and inside
tf.function, with a loss that weights all seven outputs randomly.  Inputs are drawn so that no
pre-clip cell value is within 0.05 of +-cell_clip, so the numeric derivative is clean.
"""

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.framework import ops as tf_ops

import lstm_util as U
import reference as ref

F16, BF16, F32, F64 = tf.float16, tf.bfloat16, tf.float32, tf.float64
FWD_OPS = ("LSTMBlockCell", "BlockLSTM", "BlockLSTMV2")
SIZE = (3, 2, 3, 3)                         # (T, B, I, C), small: numeric gradients
FORGET_BIAS = 0.3
# float32 gradients vs float64 autodiff (atol scaled by max(1, max|grad|)).
GRAD_TOL = {F64: U.Tol(1e-9, 1e-9), F32: U.Tol(1e-4, 1e-4), F16: U.Tol(3e-2, 3e-2),
            BF16: U.Tol(1e-1, 1e-1)}
NUMERIC_TOL = U.Tol(1e-6, 1e-6)             # theoretical vs central differences, float64
NUMERIC_DELTA = 2.0 ** -13                  # central-difference step (truncation ~1e-8)
F32_MARGIN = 2e-3                           # clip margin for float32 problems (no numerics)


def _clip_value(op, kind):
    return {"off": 0.0 if op == "BlockLSTMV2" else -1.0, "loose": 10.0, "binding": 0.6}[kind]


def _slm(case, T):
    return {"0": 0, "1": 1, "T-1": T - 1, "T": T}[case]


def _cases(clip_kinds, slm_cases, peepholes=(False, True), ops=FWD_OPS):
    out = []
    for op in ops:
        for peep in peepholes:
            for ck in clip_kinds:
                for sc in (slm_cases if U.is_block(op) else ["-"]):
                    out.append(pytest.param(op, peep, ck, sc,
                                            id=f"{op}-peep{int(peep)}-clip_{ck}-slm{sc}"))
    return out


class Problem(U.WeightedLossProblem):
    """Inputs, attrs and loss weights for one gradient test."""
    input_names = U.PARAM_NAMES

    def __init__(self, rng, op, peep, clip_kind, slm_case, size=SIZE, margin=0.05):
        T, B, I, C = size
        self.op, self.peep, self.blk = op, peep, U.is_block(op)
        self.slm = _slm(slm_case, T) if self.blk else None
        self.fb = 0.0 if op == "BlockLSTMV2" else FORGET_BIAS
        self.clip = _clip_value(op, clip_kind)
        binding = {"off": None, "loose": False, "binding": True}[clip_kind]
        self.params = U.make_clean_params(
            rng, op, T, B, I, C, seq_len_max=self.slm, forget_bias=self.fb, cell_clip=self.clip,
            use_peephole=peep, binding=binding, margin=margin)
        oshape = (T, B, C) if self.blk else (B, C)
        self.weights = [rng.normal(size=oshape) for _ in range(7)]   # loss weights, 7 outputs
        self.attrs = U.fwd_attrs(op, self.fb, self.clip, peep)

    def rounded(self, dtype):
        """Same problem with the inputs rounded to dtype (float64 arrays)."""
        return [U.round_to(self.params[n], dtype) for n in U.PARAM_NAMES]

    def call(self, ours, inputs):
        return U.call_fwd(ours, self.op, inputs, self.slm, **self.attrs)

    def ref_loss(self, only=None, dtype=F64):
        # attrs as the kernel sees them (float32 attr, converted to dtype)
        kw = dict(forget_bias=U.round_scalar(self.fb, dtype),
                  cell_clip=U.round_scalar(self.clip, dtype), use_peephole=self.peep,
                  layout=U.LAYOUT[self.op])

        def f(*xs):
            if self.blk:
                outs = ref.tf_block_lstm_fwd(self.slm, *xs, **kw)
            else:
                outs = ref.tf_lstm_cell_fwd(*xs, **kw)
            return self.loss_of(outs, only)
        return f

    def ref_grads(self, dtype=F64, only=None):
        """Autodiff of the float64 TF reference at the inputs rounded to dtype."""
        xs = [tf.constant(a) for a in self.rounded(dtype)]
        return tape_grads(self.ref_loss(only, dtype), xs)


def tape_grads(fn, xs, mode="eager"):
    def g(*xs):
        with tf.GradientTape() as tape:
            tape.watch(xs)
            loss = fn(*xs)
        return tape.gradient(loss, list(xs),
                             unconnected_gradients=tf.UnconnectedGradients.ZERO)

    if mode == "function":
        g = tf.function(g)
    grads = g(*xs)
    return [U.to_numpy(gr) if gr is not None else np.zeros(x.shape)
            for gr, x in zip(grads, xs)]


# ---------------------------------------------------------------------------------------------
# float64: numeric gradients of our own ops, and autodiff of the reference
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op,peep,clip_kind,slm_case",
                         _cases(["off", "loose", "binding"], ["1", "T-1", "T"]))
def test_numeric_gradient_float64(ours, rng, op, peep, clip_kind, slm_case):
    _check_numeric_gradient(ours, Problem(rng, op, peep, clip_kind, slm_case))


@pytest.mark.parametrize("size", [(1, 1, 2, 2), (2, 1, 1, 1), (1, 3, 2, 1)],
                         ids=lambda s: "T{}B{}I{}C{}".format(*s))
@pytest.mark.parametrize("op", FWD_OPS)
def test_numeric_gradient_edge_sizes(ours, rng, op, size):
    """T=1, B=1, I=C=1 (float64, peephole, clip on but not binding)."""
    _check_numeric_gradient(ours, Problem(rng, op, True, "loose", "T", size=size))


def _check_numeric_gradient(ours, pb):
    xs = pb.xs(F64)
    theoretical, numerical = tf.test.compute_gradient(pb.ours_loss(ours), xs,
                                                      delta=NUMERIC_DELTA)
    want = pb.ref_grads()
    for name, th, nu, w, x in zip(ref.BLOCK_GRAD_NAMES, theoretical, numerical, want, xs):
        th = th.reshape(x.shape)
        nu = nu.reshape(x.shape)
        U.assert_close(th, nu, NUMERIC_TOL, name=f"{name} theoretical vs numeric", scale=True)
        U.assert_close(th, w, GRAD_TOL[F64], name=f"{name} vs reference autodiff", scale=True)


@pytest.mark.parametrize("output", ref.OUTPUT_NAMES)
@pytest.mark.parametrize("op", FWD_OPS)
def test_gradient_through_each_output_float64(ours, rng, op, output):
    """d<r, out_k>/d(inputs) for each output alone (peephole, binding clip, seq_len_max < T):
    pinpoints a dropped or wrong per-output gradient."""
    pb = Problem(rng, op, True, "binding", "T-1")
    k = ref.OUTPUT_NAMES.index(output)
    got = tape_grads(pb.ours_loss(ours, only=k), pb.xs(F64))
    want = pb.ref_grads(only=k)
    U.assert_all_close(got, want, ref.BLOCK_GRAD_NAMES, GRAD_TOL[F64], scale=True,
                       prefix=f"d<r,{output}>/d ")
    assert any(np.abs(w).max() > 1e-3 for w in want)        # the output does depend on inputs


# ---------------------------------------------------------------------------------------------
# float32 (and half, bfloat16) vs autodiff of the float64 reference, eager and tf.function
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["eager", "function"])
@pytest.mark.parametrize("op,peep,clip_kind,slm_case",
                         _cases(["off", "binding"], ["0", "T-1", "T"])
                         + _cases(["loose"], ["T"], peepholes=(True,)))
def test_gradient_float32_vs_reference(ours, rng, mode, op, peep, clip_kind, slm_case):
    pb = Problem(rng, op, peep, clip_kind, slm_case, size=(4, 3, 5, 7), margin=F32_MARGIN)
    got = tape_grads(pb.ours_loss(ours), pb.xs(F32), mode)
    want = pb.ref_grads(F32)
    U.assert_all_close(got, want, ref.BLOCK_GRAD_NAMES, GRAD_TOL[F32], scale=True)
    if pb.slm == 0:
        for g in got:
            assert np.all(g == 0.0)


@pytest.mark.parametrize("dtype", [F16, BF16], ids=lambda d: d.name)
@pytest.mark.parametrize("op", FWD_OPS)
def test_gradient_low_precision(ours, rng, dtype, op):
    """half / bfloat16 gradients vs float64 autodiff at the rounded inputs (loose tolerance)."""
    pb = Problem(rng, op, True, "off", "T-1", size=(4, 3, 5, 7), margin=F32_MARGIN)
    got = tape_grads(pb.ours_loss(ours), pb.xs(dtype))
    want = pb.ref_grads(dtype)
    U.assert_all_close(got, want, ref.BLOCK_GRAD_NAMES, GRAD_TOL[dtype], scale=True)


@pytest.mark.parametrize("op", ["LSTMBlockCell", "BlockLSTM"])
def test_cell_peephole_weights_computed_in_function(ours, rng, op):
    """Registered gradient inside tf.function with peephole weights that are temporaries
    computed in the function (the input-aliasing trap of stock LSTMBlockCellGrad, §5 #2)."""
    pb = Problem(rng, op, True, "binding", "T-1", size=(4, 3, 5, 7), margin=F32_MARGIN)

    @tf.function
    def g(xs, one):
        with tf.GradientTape() as tape:
            tape.watch(xs)
            kw = dict(zip(U.PARAM_NAMES, xs))
            for n in ("wci", "wcf", "wco"):
                kw[n] = kw[n] * one
            outs = U.call_fwd(ours, op, kw, pb.slm, **pb.attrs)
            loss = pb.loss_of(outs)
        return tape.gradient(loss, xs)

    got = [U.to_numpy(x) for x in g(pb.xs(F32), tf.constant(1.0))]
    want = pb.ref_grads(F32)
    U.assert_all_close(got, want, ref.BLOCK_GRAD_NAMES, GRAD_TOL[F32], scale=True)


def test_block_lstm_gradient_matches_stock_where_stock_is_right(ours, rng):
    """Loss on cs and h only, clip never binding, BlockLSTM (V1): stock's registered gradient
    is the true one there, so ours must agree with it."""
    pb = Problem(rng, "BlockLSTM", True, "loose", "T-1", size=(4, 3, 5, 7), margin=F32_MARGIN)
    pb.weights = [w if k in (1, 6) else np.zeros_like(w) for k, w in enumerate(pb.weights)]
    got = tape_grads(pb.ours_loss(ours), pb.xs(F32))
    stock = tape_grads(pb.ours_loss(tf.raw_ops), pb.xs(F32))
    U.assert_all_close(got, stock, ref.BLOCK_GRAD_NAMES, U.Tol(1e-5, 1e-5), scale=True)


# ---------------------------------------------------------------------------------------------
# the registered functions themselves
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", FWD_OPS)
def test_registered_gradient_function(ours, rng, op):
    """Graph mode: the op is TfRnn>op, its gradient function is registered, returns one entry
    per input with the input's shape, and None for seq_len_max."""
    T, B, I, C = SIZE
    blk = U.is_block(op)
    p = U.make_params(rng, T if blk else None, B, I, C)
    with tf.Graph().as_default():
        outs = U.call_fwd(ours, op, U.tensors(p, F32), T if blk else None,
                          **U.fwd_attrs(op, 0.3, 0.6, True))
        node = outs[0].op
        assert node.type == "TfRnn>" + op
        grad_fn = tf_ops.get_gradient_function(node)
        assert grad_fn is not None
        grads = grad_fn(node, *[tf.ones_like(o) for o in node.outputs])
        grads = list(grads)
        assert len(grads) == len(node.inputs)
        if blk:
            assert grads[0] is None, "seq_len_max must get a None gradient"
            grads = grads[1:]
        for g, n in zip(grads, U.PARAM_NAMES):
            assert g is not None, n
            assert g.shape.as_list() == list(p[n].shape), n
        # tf.gradients in graph mode agrees: no gradient for seq_len_max
        if blk:
            assert tf.gradients(tf.reduce_sum(outs[6]), node.inputs[0])[0] is None


# ---------------------------------------------------------------------------------------------
# stock TF's gradients are wrong exactly where the tests above are sensitive (no plugin needed)
# ---------------------------------------------------------------------------------------------

def _max_err(a, b):
    return max(float(np.abs(x - y).max()) for x, y in zip(a, b))


def test_stock_v2_registered_gradient_is_wrong(rng):
    """§3.1: stock's BlockLSTMV2 gradient uses the ICFO layout; O(1) error on cs/h loss."""
    pb = Problem(rng, "BlockLSTMV2", False, "off", "T", size=(4, 3, 5, 7), margin=F32_MARGIN)
    pb.weights = [w if k in (1, 6) else np.zeros_like(w) for k, w in enumerate(pb.weights)]
    stock = tape_grads(pb.ours_loss(tf.raw_ops), pb.xs(F32))
    assert _max_err(stock, pb.ref_grads(F32)) > 1e-2


def test_stock_drops_gate_output_gradients(rng):
    """§5 #6: stock ignores gradients arriving at i, f, o, ci, co."""
    pb = Problem(rng, "BlockLSTM", False, "off", "T", size=(4, 3, 5, 7), margin=F32_MARGIN)
    stock = tape_grads(pb.ours_loss(tf.raw_ops, only=0), pb.xs(F32))      # output i alone
    assert all(np.all(g == 0.0) for g in stock)
    assert _max_err(stock, pb.ref_grads(F32, only=0)) > 1e-2


def test_stock_clip_gradient_is_straight_through(rng):
    """§5 #6: with a binding clip, stock's gradient differs from the true (exact) one."""
    pb = Problem(rng, "BlockLSTM", False, "binding", "T", size=(4, 3, 5, 7), margin=F32_MARGIN)
    pb.weights = [w if k in (1, 6) else np.zeros_like(w) for k, w in enumerate(pb.weights)]
    stock = tape_grads(pb.ours_loss(tf.raw_ops), pb.xs(F32))
    assert _max_err(stock, pb.ref_grads(F32)) > 1e-2
