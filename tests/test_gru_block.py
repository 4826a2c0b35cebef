"""tf_rnn_ops GRU block ops (GRUBlockCell, GRUBlockCellGrad) and the registered gradient of
TfRnn>GRUBlockCell.

* forward and grad op vs stock tf.raw_ops (float32) and vs the float64 reference
  (tests/gru_reference.py) for float64, half and bfloat16 (stock: float32 only);
* the reference itself vs stock and vs numeric differentiation;
* the registered gradient (docs/SEMANTICS.md §3.2: stock TF2 has none) is the TRUE gradient of all
  four outputs r, u, c, h: float64 numeric gradients, eager and inside tf.function; for a loss on h
  only it equals the TF1 contrib composition (§2.7) built on stock GRUBlockCellGrad;
* keras.layers.GRU(reset_after=False) equals a loop of our cells with the §2.6 weight mapping,
  outputs and gradients;
* every malformed input is an InvalidArgumentError naming the input, and the process survives;
* the signatures equal tf.raw_ops'.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

import gru_reference as gref
import lstm_util as U

F16, BF16, F32, F64 = tf.float16, tf.bfloat16, tf.float32, tf.float64
OPS = ("GRUBlockCell", "GRUBlockCellGrad")

# (B, I, H): B=1, odd and even, I != H, I == H, I = H = 1, sizes past SIMD-width remainders.
SIZES = [(1, 5, 7), (3, 5, 7), (4, 6, 8), (2, 1, 1), (5, 8, 3), (3, 7, 7), (17, 33, 65)]
SMALL_SIZES = [(1, 5, 7), (3, 5, 7), (4, 6, 8), (2, 1, 1)]
# Registered-gradient tolerances (atol scaled by max(1, max|grad|)), as for the LSTM ops.
GRAD_TOL = {F64: U.Tol(1e-9, 1e-9), F32: U.Tol(1e-5, 1e-5), F16: U.Tol(3e-2, 3e-2),
            BF16: U.Tol(1e-1, 1e-1)}
NUMERIC_TOL = U.Tol(1e-6, 1e-6)             # theoretical vs central differences, float64
NUMERIC_DELTA = 2.0 ** -13


def _size_id(size):
    return "B{}I{}H{}".format(*size)


# ---------------------------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------------------------

def make_params(rng, B, I, H):
    """Random float64 x, h_prev, w_ru, w_c, b_ru, b_c (dict, op order); pre-activations O(1)."""
    return {
        "x": rng.normal(size=(B, I)),
        "h_prev": rng.uniform(-1.0, 1.0, size=(B, H)),
        "w_ru": rng.normal(size=(I + H, 2 * H)) / np.sqrt(I + H),
        "w_c": rng.normal(size=(I + H, H)) / np.sqrt(I + H),
        "b_ru": 0.5 * rng.normal(size=(2 * H,)),
        "b_c": 0.5 * rng.normal(size=(H,)),
    }


def rounded(d, dtype):
    return {k: U.round_to(v, dtype) for k, v in d.items()}


def grad_op_inputs(rng, B, I, H, dtype):
    """All ten GRUBlockCellGrad inputs (float64 dict, every value representable in dtype):
    r, u, c from the reference forward (rounded to dtype), random d_h."""
    p = rounded(make_params(rng, B, I, H), dtype)
    r, u, c, _ = gref.gru_cell_fwd(*[p[n] for n in gref.INPUT_NAMES])
    extra = {"r": r, "u": u, "c": c, "d_h": rng.normal(size=(B, H))}
    return dict(p, **rounded(extra, dtype))


def call(mod, op, arrays_or_tensors, dtype=None):
    kw = arrays_or_tensors if dtype is None else U.tensors(arrays_or_tensors, dtype)
    return tuple(getattr(mod, op)(**kw))


def ref_fwd(p):
    return gref.gru_cell_fwd(*[p[n] for n in gref.INPUT_NAMES])


def ref_grad(g):
    return gref.gru_cell_grad(*[g[n] for n in gref.GRAD_OP_INPUTS])


def _check_dtype_shapes(outs, dtype, shapes):
    assert len(outs) == len(shapes)
    for k, (o, s) in enumerate(zip(outs, shapes)):
        assert o.dtype == dtype, f"output {k}: dtype {o.dtype.name} != {dtype.name}"
        assert tuple(o.shape) == tuple(s), f"output {k}: shape {o.shape} != {s}"


# ---------------------------------------------------------------------------------------------
# API surface
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", OPS)
def test_signature_matches_stock(ours, op):
    U.assert_signature_matches_stock(getattr(ours, op), op)


@pytest.mark.parametrize("op", OPS)
def test_positional_call_is_type_error(ours, rng, op):
    """Like tf.raw_ops, positional arguments are refused, even a complete valid set."""
    B, I, H = 2, 3, 4
    g = grad_op_inputs(rng, B, I, H, F32)
    names = gref.INPUT_NAMES if op == "GRUBlockCell" else gref.GRAD_OP_INPUTS
    args = [U.to_tensor(g[n], F32) for n in names]
    with pytest.raises(TypeError):
        getattr(tf.raw_ops, op)(*args)          # the behaviour being mirrored
    with pytest.raises(TypeError):
        getattr(ours, op)(*args)
    with pytest.raises(TypeError):
        getattr(ours, op)(args[0], **dict(zip(names[1:], args[1:])))
    call(ours, op, dict(zip(names, args)))     # the same arguments by keyword are fine


@pytest.mark.parametrize("op", OPS)
def test_static_shapes_in_function(ours, op):
    """Inside tf.function the outputs have stock's static shapes (§1.1)."""
    B, I, H = 3, 5, 7
    shapes = {"x": (B, I), "h_prev": (B, H), "w_ru": (I + H, 2 * H), "w_c": (I + H, H),
              "b_ru": (2 * H,), "b_c": (H,), "r": (B, H), "u": (B, H), "c": (B, H),
              "d_h": (B, H)}
    names = gref.INPUT_NAMES if op == "GRUBlockCell" else gref.GRAD_OP_INPUTS
    sig = [tf.TensorSpec(shapes[n], F32, name=n) for n in names]
    traced = {}

    @tf.function(input_signature=sig)
    def f(*args):
        outs = getattr(ours, op)(**dict(zip(names, args)))
        traced["dtypes"] = [o.dtype for o in outs]
        traced["shapes"] = [tuple(o.shape.as_list()) for o in outs]
        return outs

    f.get_concrete_function()
    assert traced["dtypes"] == [F32] * 4
    if op == "GRUBlockCell":
        assert traced["shapes"] == [(B, H)] * 4
    else:
        assert traced["shapes"] == [(B, I), (B, H), (B, H), (B, 2 * H)]


# ---------------------------------------------------------------------------------------------
# the float64 reference vs stock (float32) and vs numeric differentiation
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("size", SIZES, ids=_size_id)
def test_reference_fwd_vs_stock(rng, size):
    p = rounded(make_params(rng, *size), F32)
    stock = [U.to_numpy(o) for o in call(tf.raw_ops, "GRUBlockCell", p, F32)]
    U.assert_all_close(ref_fwd(p), stock, gref.FWD_NAMES, U.TOL[F32], prefix="reference vs stock: ")


@pytest.mark.parametrize("size", SIZES, ids=_size_id)
def test_reference_grad_vs_stock(rng, size):
    g = grad_op_inputs(rng, *size, F32)
    stock = [U.to_numpy(o) for o in call(tf.raw_ops, "GRUBlockCellGrad", g, F32)]
    U.assert_all_close(ref_grad(g), stock, gref.GRAD_OP_NAMES, U.TOL[F32], scale=True,
                       prefix="reference vs stock: ")


def _numeric_grad(f, arrays, delta=1e-6):
    """Central differences of a scalar f(list of float64 arrays) w.r.t. each array."""
    return U.numeric_grads(lambda *a: f(list(a)), arrays, delta)


@pytest.mark.parametrize("size", [(3, 4, 5), (1, 1, 1), (2, 3, 2)], ids=_size_id)
def test_reference_backprop_vs_numeric(rng, size):
    """gru_cell_backprop (all four outputs in the loss) and gru_cell_grad + gru_weight_grads
    (h only) are the derivatives of gru_cell_fwd."""
    B, I, H = size
    p = make_params(rng, B, I, H)
    xs = [p[n] for n in gref.INPUT_NAMES]
    wts = [rng.normal(size=(B, H)) for _ in range(4)]

    def loss(arrays, only=None):
        outs = gref.gru_cell_fwd(*arrays)
        return sum((w * o).sum() for k, (w, o) in enumerate(zip(wts, outs))
                   if only is None or k == only)

    tol = U.Tol(1e-7, 1e-7)
    got = gref.gru_cell_backprop(*xs, *wts)
    U.assert_all_close(got, _numeric_grad(loss, xs), gref.INPUT_NAMES, tol, scale=True,
                       prefix="all outputs, d ")
    # h only: the op's part (d_x, d_h_prev) plus the §2.7 weight grads
    r, u, c, _ = gref.gru_cell_fwd(*xs)
    d_x, d_h_prev, d_c_bar, d_rubar = gref.gru_cell_grad(*xs, r, u, c, wts[3])
    d_w = gref.gru_weight_grads(p["x"], p["h_prev"], r, d_c_bar, d_rubar)
    U.assert_all_close((d_x, d_h_prev) + tuple(d_w), _numeric_grad(lambda a: loss(a, 3), xs),
                       gref.INPUT_NAMES, tol, scale=True, prefix="h only, d ")


# ---------------------------------------------------------------------------------------------
# forward op
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("size", SIZES, ids=_size_id)
def test_fwd_float32(ours, rng, size):
    B, I, H = size
    p = rounded(make_params(rng, B, I, H), F32)
    got = call(ours, "GRUBlockCell", p, F32)
    _check_dtype_shapes(got, F32, [(B, H)] * 4)
    got = [U.to_numpy(o) for o in got]
    stock = [U.to_numpy(o) for o in call(tf.raw_ops, "GRUBlockCell", p, F32)]
    U.assert_all_close(got, stock, gref.FWD_NAMES, U.TOL[F32], prefix="vs stock: ")
    U.assert_all_close(got, ref_fwd(p), gref.FWD_NAMES, U.TOL[F32], prefix="vs reference: ")


@pytest.mark.parametrize("dtype", [F64, F16, BF16], ids=lambda d: d.name)
@pytest.mark.parametrize("size", SMALL_SIZES + [(17, 33, 65)], ids=_size_id)
def test_fwd_other_dtypes(ours, rng, size, dtype):
    """float64, half, bfloat16 vs the float64 reference on inputs rounded to the dtype."""
    B, I, H = size
    p = rounded(make_params(rng, B, I, H), dtype)
    got = call(ours, "GRUBlockCell", p, dtype)
    _check_dtype_shapes(got, dtype, [(B, H)] * 4)
    U.assert_all_close([U.to_numpy(o) for o in got], ref_fwd(p), gref.FWD_NAMES, U.TOL[dtype],
                       prefix=f"{dtype.name} vs reference: ")


# ---------------------------------------------------------------------------------------------
# grad op
# ---------------------------------------------------------------------------------------------

def _grad_shapes(B, I, H):
    return [(B, I), (B, H), (B, H), (B, 2 * H)]


@pytest.mark.parametrize("size", SIZES, ids=_size_id)
def test_grad_op_float32(ours, rng, size):
    B, I, H = size
    g = grad_op_inputs(rng, B, I, H, F32)
    got = call(ours, "GRUBlockCellGrad", g, F32)
    _check_dtype_shapes(got, F32, _grad_shapes(B, I, H))
    got = [U.to_numpy(o) for o in got]
    stock = [U.to_numpy(o) for o in call(tf.raw_ops, "GRUBlockCellGrad", g, F32)]
    U.assert_all_close(got, stock, gref.GRAD_OP_NAMES, U.TOL[F32], scale=True,
                       prefix="vs stock: ")
    U.assert_all_close(got, ref_grad(g), gref.GRAD_OP_NAMES, U.TOL[F32], scale=True,
                       prefix="vs reference: ")


@pytest.mark.parametrize("dtype", [F64, F16, BF16], ids=lambda d: d.name)
@pytest.mark.parametrize("size", SMALL_SIZES + [(17, 33, 65)], ids=_size_id)
def test_grad_op_other_dtypes(ours, rng, size, dtype):
    B, I, H = size
    g = grad_op_inputs(rng, B, I, H, dtype)
    got = call(ours, "GRUBlockCellGrad", g, dtype)
    _check_dtype_shapes(got, dtype, _grad_shapes(B, I, H))
    U.assert_all_close([U.to_numpy(o) for o in got], ref_grad(g), gref.GRAD_OP_NAMES,
                       U.TOL[dtype], scale=True, prefix=f"{dtype.name} vs reference: ")


def test_grad_op_fed_by_our_forward(ours, rng):
    """Our forward's r, u, c straight into our grad op, in a tf.function (float32)."""
    B, I, H = 4, 6, 8
    p = rounded(make_params(rng, B, I, H), F32)
    d_h = U.round_to(rng.normal(size=(B, H)), F32)

    @tf.function
    def f(kw, d_h):
        r, u, c, _ = ours.GRUBlockCell(**kw)
        return ours.GRUBlockCellGrad(**kw, r=r, u=u, c=c, d_h=d_h)

    got = [U.to_numpy(o) for o in f(U.tensors(p, F32), U.to_tensor(d_h, F32))]
    r, u, c, _ = ref_fwd(p)
    want = gref.gru_cell_grad(*[p[n] for n in gref.INPUT_NAMES], r, u, c, d_h)
    U.assert_all_close(got, want, gref.GRAD_OP_NAMES, U.TOL[F32], scale=True)


def test_grad_op_uses_given_activations(ours, rng):
    """Like stock, the grad op uses the r, u, c it is given (it does not recompute them)."""
    B, I, H = 3, 5, 7
    g = grad_op_inputs(rng, B, I, H, F64)
    g.update(rounded({n: rng.uniform(0.1, 0.9, size=(B, H)) for n in ("r", "u", "c")}, F64))
    got = [U.to_numpy(o) for o in call(ours, "GRUBlockCellGrad", g, F64)]
    U.assert_all_close(got, ref_grad(g), gref.GRAD_OP_NAMES, U.TOL[F64], scale=True)


# ---------------------------------------------------------------------------------------------
# registered gradient of TfRnn>GRUBlockCell
# ---------------------------------------------------------------------------------------------

class Problem(U.WeightedLossProblem):
    """Inputs and random loss weights for the four outputs: L = sum_k <W_k, out_k>."""
    input_names = gref.INPUT_NAMES

    def __init__(self, rng, B=3, I=4, H=5):
        self.B, self.I, self.H = B, I, H
        self.params = make_params(rng, B, I, H)
        self.weights = [rng.normal(size=(B, H)) for _ in range(4)]

    def call(self, ours, inputs):
        return ours.GRUBlockCell(**inputs)

    def ref_grads(self, dtype=F64, only=None):
        """True gradient (reference) at the inputs rounded to dtype."""
        p = rounded(self.params, dtype)
        ws = [w if only is None or k == only else np.zeros_like(w)
              for k, w in enumerate(self.weights)]
        return gref.gru_cell_backprop(*[p[n] for n in gref.INPUT_NAMES], *ws)


def tape_grads(fn, xs, mode="eager"):
    def g(*xs):
        with tf.GradientTape() as tape:
            tape.watch(xs)
            loss = fn(*xs)
        return tape.gradient(loss, list(xs))

    if mode == "function":
        g = tf.function(g)
    grads = g(*xs)
    for name, gr in zip(gref.INPUT_NAMES, grads):
        assert gr is not None, f"no gradient for {name}"
    return [U.to_numpy(gr) for gr in grads]


@pytest.mark.parametrize("mode", ["eager", "function"])
@pytest.mark.parametrize("size", [(3, 4, 5), (1, 1, 1), (2, 3, 2)], ids=_size_id)
def test_registered_gradient_vs_numeric_float64(ours, rng, size, mode):
    """Tape gradient of a loss on all four outputs == float64 central differences of our op
    (tf.test.compute_gradient) == the reference's true gradient."""
    pb = Problem(rng, *size)
    xs = pb.xs(F64)
    theoretical, numerical = tf.test.compute_gradient(pb.ours_loss(ours), xs,
                                                      delta=NUMERIC_DELTA)
    got = tape_grads(pb.ours_loss(ours), xs, mode)
    want = pb.ref_grads()
    for name, th, nu, gt, w, x in zip(gref.INPUT_NAMES, theoretical, numerical, got, want, xs):
        nu = nu.reshape(x.shape)
        U.assert_close(th.reshape(x.shape), nu, NUMERIC_TOL, name=f"{name}: compute_gradient "
                       "theoretical vs numeric", scale=True)
        U.assert_close(gt, nu, NUMERIC_TOL, name=f"{name}: {mode} tape vs numeric", scale=True)
        U.assert_close(gt, w, GRAD_TOL[F64], name=f"{name}: {mode} tape vs reference",
                       scale=True)


@pytest.mark.parametrize("output", gref.FWD_NAMES)
def test_registered_gradient_through_each_output(ours, rng, output):
    """d<W, out>/d(inputs) for each output alone: pinpoints a dropped per-output gradient."""
    pb = Problem(rng, 3, 4, 5)
    k = gref.FWD_NAMES.index(output)
    got = tape_grads(pb.ours_loss(ours, only=k), pb.xs(F64))
    want = pb.ref_grads(only=k)
    U.assert_all_close(got, want, gref.INPUT_NAMES, GRAD_TOL[F64], scale=True,
                       prefix=f"d<W,{output}>/d ")
    # r and u do not depend on w_c, b_c; every other (output, input) pair does
    for name, g, w in zip(gref.INPUT_NAMES, got, want):
        if output in ("r", "u") and name in ("w_c", "b_c"):
            assert np.all(g == 0.0), f"d<W,{output}>/d {name} must be zero"
        else:
            assert np.abs(w).max() > 1e-3, name


@pytest.mark.parametrize("mode", ["eager", "function"])
@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=lambda d: d.name)
def test_registered_gradient_other_dtypes(ours, rng, dtype, mode):
    pb = Problem(rng, 4, 6, 8)
    got = tape_grads(pb.ours_loss(ours), pb.xs(dtype), mode)
    want = pb.ref_grads(dtype)
    U.assert_all_close(got, want, gref.INPUT_NAMES, GRAD_TOL[dtype], scale=True,
                       prefix=f"{dtype.name} ")


def _contrib_grads(x, h_prev, w_ru, w_c, b_ru, b_c, d_h):
    """TF1 contrib _GRUBlockCellGrad (§2.7) on stock ops: stock forward, stock
    GRUBlockCellGrad, and the weight-grad formulas with tf.matmul."""
    r, u, c, _ = tf.raw_ops.GRUBlockCell(x=x, h_prev=h_prev, w_ru=w_ru, w_c=w_c, b_ru=b_ru,
                                         b_c=b_c)
    d_x, d_h_prev, d_c_bar, d_rubar = tf.raw_ops.GRUBlockCellGrad(
        x=x, h_prev=h_prev, w_ru=w_ru, w_c=w_c, b_ru=b_ru, b_c=b_c, r=r, u=u, c=c, d_h=d_h)
    d_w_ru = tf.matmul(tf.concat([x, h_prev], 1), d_rubar, transpose_a=True)
    d_w_c = tf.matmul(tf.concat([x, h_prev * r], 1), d_c_bar, transpose_a=True)
    return [d_x, d_h_prev, d_w_ru, d_w_c, tf.reduce_sum(d_rubar, 0), tf.reduce_sum(d_c_bar, 0)]


@pytest.mark.parametrize("mode", ["eager", "function"])
@pytest.mark.parametrize("size", [(3, 5, 7), (1, 6, 4), (8, 16, 32)], ids=_size_id)
def test_registered_gradient_h_only_vs_stock_contrib(ours, rng, size, mode):
    """Loss on h only (float32): our tape gradient == the contrib composition on stock ops."""
    pb = Problem(rng, *size)
    xs = [U.to_tensor(U.round_to(pb.params[n], F32), F32) for n in gref.INPUT_NAMES]
    got = tape_grads(pb.ours_loss(ours, only=3), xs, mode)
    want = [U.to_numpy(t) for t in _contrib_grads(*xs, U.to_tensor(pb.weights[3], F32))]
    U.assert_all_close(got, want, gref.INPUT_NAMES, U.TOL[F32], scale=True,
                       prefix="vs contrib on stock: ")


def test_registered_gradient_graph_mode(ours, rng):
    """tf.gradients in a v1 graph: the op is TfRnn>GRUBlockCell and its gradient gives one
    tensor per input with the input's shape and dtype."""
    B, I, H = 3, 4, 5
    p = make_params(rng, B, I, H)
    with tf.Graph().as_default():
        xs = [tf.constant(p[n], dtype=F32) for n in gref.INPUT_NAMES]
        outs = ours.GRUBlockCell(**dict(zip(gref.INPUT_NAMES, xs)))
        assert outs[0].op.type == "TfRnn>GRUBlockCell"
        grads = tf.gradients(tf.add_n([tf.reduce_sum(o) for o in outs]), xs)
        for name, gr, x in zip(gref.INPUT_NAMES, grads, xs):
            assert gr is not None, name
            assert gr.dtype == F32, name
            assert gr.shape.as_list() == x.shape.as_list(), name


# ---------------------------------------------------------------------------------------------
# keras.layers.GRU(reset_after=False) == our cell stepped with mapped weights (§2.6)
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def keras():
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import keras as k
    assert k.backend.backend() == "tensorflow", "these tests need the TensorFlow Keras backend"
    return k


def _keras_gru(keras, units, kernel, recurrent_kernel, bias, x, h0):
    layer = keras.layers.GRU(units, reset_after=False, return_sequences=True)
    layer(x, initial_state=[h0])                        # builds the layer
    assert [tuple(w.shape) for w in layer.get_weights()] == [
        kernel.shape, recurrent_kernel.shape, bias.shape]
    layer.set_weights([kernel, recurrent_kernel, bias])
    return layer


def _ours_sequence(ours, kernel, recurrent_kernel, bias, x, h0):
    """x [B, T, I] -> h for every step [B, T, H], stepping our GRUBlockCell; weights mapped
    with TF ops (differentiable, so the tape maps the gradients back to Keras layout)."""
    w_ru, w_c, b_ru, b_c = gref.keras_to_block(kernel, recurrent_kernel, bias,
                                               concat=tf.concat, split=tf.split)
    h, hs = h0, []
    for t in range(x.shape[1]):
        _, _, _, h = ours.GRUBlockCell(x=x[:, t], h_prev=h, w_ru=w_ru, w_c=w_c, b_ru=b_ru,
                                       b_c=b_c)
        hs.append(h)
    return tf.stack(hs, axis=1)


@pytest.mark.parametrize("size", [(3, 4, 5, 7), (1, 4, 2, 3)],
                         ids=lambda s: "B{}T{}I{}H{}".format(*s))
def test_keras_gru_reset_before_matches_stepped_cells(ours, rng, keras, size):
    B, T, I, H = size
    kernel = U.round_to(rng.normal(size=(I, 3 * H)) / np.sqrt(I + H), F32)
    rec = U.round_to(rng.normal(size=(H, 3 * H)) / np.sqrt(I + H), F32)
    bias = U.round_to(0.5 * rng.normal(size=(3 * H,)), F32)
    x = U.round_to(rng.normal(size=(B, T, I)), F32)
    h0 = U.round_to(rng.uniform(-1, 1, size=(B, H)), F32)
    wts = rng.normal(size=(B, T, H))
    xt, h0t, wt = U.to_tensor(x, F32), U.to_tensor(h0, F32), U.to_tensor(wts, F32)
    layer = _keras_gru(keras, H, kernel, rec, bias, xt, h0t)

    # forward: Keras, our stepped cells, and the reference with the numpy mapping
    with tf.GradientTape() as tape:
        tape.watch([xt, h0t])
        y_keras = layer(xt, initial_state=[h0t])
        loss_keras = tf.reduce_sum(y_keras * wt)
    g_keras = tape.gradient(loss_keras, [layer.cell.kernel, layer.cell.recurrent_kernel,
                                         layer.cell.bias, xt, h0t])
    y_ref = gref.gru_sequence_fwd(x, h0, *gref.keras_to_block(kernel, rec, bias))
    U.assert_close(U.to_numpy(y_keras), y_ref, U.TOL[F32], name="keras vs reference")

    vs = [U.to_tensor(a, F32) for a in (kernel, rec, bias, x, h0)]
    with tf.GradientTape() as tape:
        tape.watch(vs)
        y_ours = _ours_sequence(ours, *vs)
        loss_ours = tf.reduce_sum(y_ours * wt)
    g_ours = tape.gradient(loss_ours, vs)
    U.assert_close(U.to_numpy(y_ours), U.to_numpy(y_keras), U.TOL[F32], name="ours vs keras")

    names = ("kernel", "recurrent_kernel", "bias", "x", "h0")
    for name, go, gk in zip(names, g_ours, g_keras):
        assert go is not None and gk is not None, name
        U.assert_close(U.to_numpy(go), U.to_numpy(gk), U.TOL[F32], scale=True,
                       name=f"d loss/d {name}: ours vs keras")
        assert np.abs(U.to_numpy(gk)).max() > 1e-3, name


# ---------------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------------

BAD_B, BAD_I, BAD_H = 2, 3, 5          # distinct, 2H and I+H distinct too


def _valid_args(op, rng, B=BAD_B):
    g = grad_op_inputs(rng, B, BAD_I, BAD_H, F32)
    names = gref.INPUT_NAMES if op == "GRUBlockCell" else gref.GRAD_OP_INPUTS
    return {n: U.to_tensor(g[n], F32) for n in names}


def _word(name):
    return rf"\b{name}\b"


def _resize(name, axis, by):
    def mutate(args, rng):
        shape = list(args[name].shape)
        shape[axis] += by
        return dict(args, **{name: U.to_tensor(rng.normal(size=shape), F32)})
    return mutate


def _rank_up(name):
    return lambda args, rng: dict(args, **{name: tf.expand_dims(args[name], 0)})


def _rank_down(name):
    return lambda args, rng: dict(args, **{name: args[name][0]})


def _cast(name, dtype):
    return lambda args, rng: dict(args, **{name: tf.cast(args[name], dtype)})


def _catalogue():
    cases = []

    def add(op, cid, mutate, regex):
        cases.append(pytest.param(op, mutate, regex, id=f"{op}-{cid}"))

    for op in OPS:
        names = gref.INPUT_NAMES if op == "GRUBlockCell" else gref.GRAD_OP_INPUTS
        for n in names:
            add(op, f"rank+1-{n}", _rank_up(n), _word(n))
            add(op, f"rank-1-{n}", _rank_down(n), _word(n))
        add(op, "h_prev-batch+1", _resize("h_prev", 0, 1), _word("h_prev"))
        add(op, "h_prev-batch-1", _resize("h_prev", 0, -1), _word("h_prev"))
        for by in (1, -1):
            add(op, f"w_ru-rows{by:+d}", _resize("w_ru", 0, by), _word("w_ru"))
            add(op, f"w_ru-cols{by:+d}", _resize("w_ru", 1, by), _word("w_ru"))
            add(op, f"w_c-rows{by:+d}", _resize("w_c", 0, by), _word("w_c"))
            add(op, f"w_c-cols{by:+d}", _resize("w_c", 1, by), _word("w_c"))
            add(op, f"b_ru-len{by:+d}", _resize("b_ru", 0, by), _word("b_ru"))
            add(op, f"b_c-len{by:+d}", _resize("b_c", 0, by), _word("b_c"))
        # w_ru with H columns (a w_c-shaped w_ru) and w_c with 2H columns
        add(op, "w_ru-cols=H", _resize("w_ru", 1, -BAD_H), _word("w_ru"))
        add(op, "w_c-cols=2H", _resize("w_c", 1, BAD_H), _word("w_c"))
        if op == "GRUBlockCellGrad":
            for n in ("r", "u", "c", "d_h"):
                add(op, f"{n}-batch+1", _resize(n, 0, 1), _word(n))
                add(op, f"{n}-cells+1", _resize(n, 1, 1), _word(n))
                add(op, f"{n}-cells-1", _resize(n, 1, -1), _word(n))
        for n in names[1:]:                 # x is float32; the offending input is not
            add(op, f"dtype-{n}-float64", _cast(n, F64), _word(n))
        add(op, "dtype-h_prev-float16", _cast("h_prev", F16), _word("h_prev"))
        add(op, "dtype-b_c-bfloat16", _cast("b_c", BF16), _word("b_c"))
    return cases


def _assert_still_works(ours, op, rng):
    for o in call(ours, op, _valid_args(op, rng)):
        assert np.all(np.isfinite(U.to_numpy(o)))


def _in_function(ours, op, args):
    """Runs the op in a tf.function whose inputs have unknown shapes, so the kernel (not the
    shape function, which may reject static shapes with a ValueError at trace time) validates."""
    names = list(args)
    sig = [tf.TensorSpec(None, args[n].dtype, name=n) for n in names]
    f = tf.function(lambda *a: getattr(ours, op)(**dict(zip(names, a))), input_signature=sig)
    return f(*[args[n] for n in names])


@pytest.mark.parametrize("mode", ["eager", "function"])
@pytest.mark.parametrize("op,mutate,regex", _catalogue())
def test_bad_input(ours, rng, op, mutate, regex, mode):
    args = mutate(_valid_args(op, rng), rng)
    with pytest.raises(tf.errors.InvalidArgumentError, match=regex):
        if mode == "eager":
            call(ours, op, args)
        else:
            _in_function(ours, op, args)
    _assert_still_works(ours, op, rng)              # the process (and the op) survive


@pytest.mark.parametrize("op", OPS)
def test_valid_args_are_valid(ours, rng, op):
    """The unmutated catalogue arguments run (so each failure above is the mutation's)."""
    outs = call(ours, op, _valid_args(op, rng))
    for o in outs:
        assert o.dtype == F32
        assert np.all(np.isfinite(U.to_numpy(o)))
