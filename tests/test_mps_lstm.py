"""tf_rnn_ops.mps: MPSGraph-style LSTM (mps.lstm) and LSTMGradients (mps.lstm_gradients).

Everything is checked against the independent float64 reference in tests/mps_reference.py
(docs/SEMANTICS.md §8), which is itself checked against keras.layers.LSTM / Bidirectional
(float64):

* forward outputs [state, cell?, z_state?] for pairwise-covering combinations of every
  descriptor field (every gate activation and `activation` through all five values, both gate
  orders, reverse, bidirectional), every optional operand absent / present, mask [B,DH] and
  [T,B,DH], T=1, B=1, in float64, float32, float16 and bfloat16;
* lstm_gradients vs tape autodiff of the reference (state_gradient / cell_gradient absent and
  present), plus float64 central differences of the op's own forward on small cases;
* the registered gradient of mps.lstm (eager and tf.function), including gradients arriving at
  the cell output; a gradient arriving at z_state is an error;
* malformed operands raise InvalidArgumentError naming the operand.

The tests that are the same for mps.gru come from mps_test_util.shared_tests, run here with
this op's cases (class LSTM below).
"""

import numpy as np
import pytest
import tensorflow as tf

import mps_reference as ref
from lstm_util import Tol
from mps_test_util import (B0, BF16, F16, F32, F64, H0, T0, MpsOp, assert_close,
                           check_activations, keras_case,
                           mps, rng,  # noqa: F401 (fixtures)
                           round_to, run_keras, run_keras_bidirectional, shared_tests, to_t)

ACT_FIELDS = ("input_gate_activation", "forget_gate_activation", "cell_gate_activation",
              "output_gate_activation", "activation")

# (T, B, I, H): T=1, B=1, I=1, H=1, I != H, I == H.
SIZES = [(1, 3, 4, 2), (4, 1, 3, 3), (3, 2, 5, 4), (5, 3, 1, 1), (2, 4, 3, 3), (6, 2, 2, 5)]


class LSTM(MpsOp):
    name, descriptor, ref, gates, cell = "lstm", "LSTMDescriptor", ref, 4, True
    act_fields = ACT_FIELDS
    outputs = dict(produce_cell=True, training=True)
    fwd_output, fwd_index = "cell_output_fwd", 1
    full = dict(forget_gate_last=False, init_cell=True, peephole=True, cell_gradient=True)
    fwd_tol = {F64: Tol(1e-10, 1e-10), F32: Tol(1e-5, 1e-5), F16: Tol(2e-2, 2e-2),
               BF16: Tol(5e-2, 5e-2)}
    grad_tol = fwd_tol
    sizes, operands = SIZES, ("init_cell", "peephole")
    layout = {"forget_gate_last": [False, True]}
    output_factors = dict(produce_cell=[False, True], training=[False, True])
    gradient_factors = dict(state_gradient=[False, True], cell_gradient=[False, True])
    every = dict(tf_function=5, half_grad=3, reg_function=3, reg_low=4)
    unknown_sizes = (3, 4, [(4, 3), (2, 5)])

    def layout_id(self, c):
        return "-izfo" if c["forget_gate_last"] else "-ifzo"

    def desc_of(self, case, **over):
        fields = {k: case[k] for k in ("reverse", "bidirectional", "forget_gate_last")
                  + ACT_FIELDS}
        fields["produce_cell"] = case.get("produce_cell", False)
        fields["training"] = case.get("training", False)
        fields.update(over)
        return ref.Desc(**fields)

    def extra_operands(self, rng, case, B, D, G, H):
        ops = {}
        if case["init_cell"]:
            ops["init_cell"] = 0.7 * rng.normal(size=(B, D * H))
        if case["peephole"]:
            ops["peephole"] = 0.3 * rng.normal(size=(2, G) if D == 2 else (G,))
        return ops

    def extra_valid(self, rng, D, G):
        return dict(init_cell=rng.normal(size=(B0, D * H0)),
                    peephole=rng.normal(size=(2, G) if D == 2 else (G,)))


OP = LSTM()
G0 = 4 * H0
OP.numeric_cases = [
    dict(size=(3, 2, 3, 2), bidirectional=False, reverse=False, forget_gate_last=False,
         input_gate_activation="sigmoid", forget_gate_activation="sigmoid",
         cell_gate_activation="tanh", output_gate_activation="sigmoid", activation="tanh",
         input_weight=True, bias=True, init_state=True, init_cell=True, peephole=True,
         mask="tnh", state_gradient=True, cell_gradient=True),
    dict(size=(3, 2, 2, 2), bidirectional=True, reverse=False, forget_gate_last=True,
         input_gate_activation="tanh", forget_gate_activation="sigmoid",
         cell_gate_activation="none", output_gate_activation="tanh", activation="sigmoid",
         input_weight=False, bias=True, init_state=True, init_cell=True, peephole=True,
         mask="nh", state_gradient=True, cell_gradient=True),
    dict(size=(4, 2, 2, 2), bidirectional=False, reverse=True, forget_gate_last=False,
         input_gate_activation="hard_sigmoid", forget_gate_activation="sigmoid",
         cell_gate_activation="relu", output_gate_activation="sigmoid", activation="tanh",
         input_weight=True, bias=False, init_state=False, init_cell=True, peephole=True,
         mask=None, state_gradient=False, cell_gradient=True),
]
OP.extra_cases = [
    OP.full_case((1, 1, 2, 3), False),                                   # T = B = 1
    OP.full_case((1, 1, 3, 2), True, input_weight=False, mask="nh"),
    OP.full_case((3, 17, 33, 19), False, reverse=True, forget_gate_last=True),  # past SIMD
    OP.full_case((2, 9, 16, 16), True, activation="hard_sigmoid", cell_gate_activation="relu"),
]
OP.bad_forward = [
    ("peephole_rank2_uni", False, {"peephole": (2, G0)}, "peephole"),
    ("peephole_rank1_bi", True, {"peephole": (G0,)}, "peephole"),
    ("peephole_size", False, {"peephole": (G0 + 1,)}, "peephole"),
    ("init_cell_width", False, {"init_cell": (B0, H0 - 1)}, "init_cell"),
    ("init_cell_batch_bi", True, {"init_cell": (B0 - 1, 2 * H0)}, "init_cell"),
]
OP.bad_gradients = [
    ("cell_output_fwd_shape", False, {"cell_output_fwd": (T0, B0, H0 + 1)},
     "cell_output(_fwd)?"),
    ("cell_gradient_shape", True, {"cell_gradient": (B0, H0)}, "cell_gradient"),
    ("peephole_in_gradients", False, {"peephole": (G0 - 1,)}, "peephole"),
]

# forward, lstm_gradients, the registered gradient, malformed operands
globals().update(shared_tests(OP))


# ---------------------------------------------------------------------------------------------
# the reference itself (needs no plugin op)
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("go_backwards", [False, True], ids=["fwd", "backwards"])
def test_reference_vs_keras_lstm(rng, go_backwards):
    keras = pytest.importorskip("keras")
    T, B, I, H = 5, 3, 4, 3
    k = keras_case(rng, T, B, I, 4 * H, H)
    layer = keras.layers.LSTM(H, return_sequences=True, return_state=True, dtype="float64",
                              go_backwards=go_backwards)
    seq, wh_t, (hf, cf), (gk, grk, _) = run_keras(rng, layer, k, k["b"], [k["h0"], k["c0"]],
                                                  go_backwards)
    desc = ref.Desc(reverse=go_backwards)
    ops = dict(source=k["x"], recurrent_weight=k["R"], input_weight=k["W"], bias=k["b"],
               init_state=k["h0"], init_cell=k["c0"])
    r = ref.lstm_forward(desc=desc, **ops)
    assert_close(r["state"].numpy(), seq, Tol(1e-12, 1e-12), "state")
    assert_close(r["h_final"].numpy(), hf, Tol(1e-12, 1e-12), "h_final")
    assert_close(r["c_final"].numpy(), cf, Tol(1e-12, 1e-12), "c_final")
    grads, names = ref.reference_vjp(ops, desc, state_cot=wh_t)
    g = dict(zip(names, grads))
    assert_close(g["input_weight"], gk.T, Tol(1e-10, 1e-10), "d_input_weight")
    assert_close(g["recurrent_weight"], grk.T, Tol(1e-10, 1e-10), "d_recurrent_weight")


def test_reference_vs_keras_bidirectional(rng):
    keras = pytest.importorskip("keras")
    T, B, I, H = 4, 2, 3, 2
    kf, kb = keras_case(rng, T, B, I, 4 * H, H), keras_case(rng, T, B, I, 4 * H, H)
    layer = keras.layers.Bidirectional(
        keras.layers.LSTM(H, return_sequences=True, return_state=True, dtype="float64"),
        dtype="float64")
    seq, (fh, fc, bh, bc) = run_keras_bidirectional(
        layer, kf, kb, kf["b"], kb["b"], [kf["h0"], kf["c0"], kb["h0"], kb["c0"]])
    r = ref.lstm_forward(
        kf["x"], np.stack([kf["R"], kb["R"]]), np.concatenate([kf["W"], kb["W"]]),
        np.concatenate([kf["b"], kb["b"]]), np.concatenate([kf["h0"], kb["h0"]], -1),
        np.concatenate([kf["c0"], kb["c0"]], -1), desc=ref.Desc(bidirectional=True))
    tol = Tol(1e-12, 1e-12)
    assert_close(r["state"].numpy(), seq, tol, "state")
    assert_close(r["h_final"].numpy(), np.concatenate([fh, bh], -1), tol, "h_final")
    assert_close(r["c_final"].numpy(), np.concatenate([fc, bc], -1), tol, "c_final")


def test_reference_activations_and_gate_order():
    check_activations(ref)
    # one step, H=1, identity projection: the gate blocks are read in the descriptor's order
    pre = np.array([[[0.3, -0.4, 0.8, 1.1]]])
    for fgl in (False, True):
        r = ref.lstm_forward(pre, np.zeros((4, 1)), init_cell=[[0.5]],
                             desc=ref.Desc(forget_gate_last=fgl, training=True))
        s = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
        i, f, z, o = (s(0.3), s(-0.4), np.tanh(0.8), s(1.1)) if not fgl else (
            s(0.3), s(0.8), np.tanh(-0.4), s(1.1))
        c = f * 0.5 + i * z
        np.testing.assert_allclose(r["cell"].numpy(), [[[c]]], rtol=1e-14)
        np.testing.assert_allclose(r["state"].numpy(), [[[o * np.tanh(c)]]], rtol=1e-14)
        expect_z = [i, f, z, o] if not fgl else [i, z, f, o]
        np.testing.assert_allclose(r["z_state"].numpy(), [[expect_z]], rtol=1e-14)


# ---------------------------------------------------------------------------------------------
# LSTM only
# ---------------------------------------------------------------------------------------------

def test_descriptor_defaults(mps):
    d = mps.LSTMDescriptor()
    for k, v in ref.Desc().kwargs().items():
        assert getattr(d, k) == v, k


def test_bad_activation_name(mps, rng):
    ops_t = {k: to_t(v, F32) for k, v in OP.valid(rng, False).items()}
    with pytest.raises((ValueError, TypeError, tf.errors.InvalidArgumentError)):
        d = mps.LSTMDescriptor(activation="gelu")
        mps.lstm(ops_t["source"], ops_t["recurrent_weight"],
                 input_weight=ops_t["input_weight"], descriptor=d)[0].numpy()


@pytest.mark.parametrize("use_function", [False, True], ids=["eager", "tf_function"])
def test_registered_gradient_cell_only_and_unused_z_state(mps, rng, use_function):
    """Loss on the cell output only (nothing arrives at state), training=True (z_state unused)."""
    case = OP.full_case((4, 3, 2, 3), True, forget_gate_last=True)
    ops = OP.make_operands(rng, case)
    desc = OP.desc_of(case, produce_cell=True, training=True)
    wc = rng.normal(size=(4, 3, 6))
    ops_t = {k: to_t(v, F64) for k, v in ops.items()}
    names = [n for n in ref.GRAD_ORDER if ops_t.get(n) is not None]

    def grads_of(**kw):
        with tf.GradientTape() as tape:
            for n in names:
                tape.watch(kw[n])
            outs = OP.call(mps, kw, desc)
            loss = tf.reduce_sum(outs[1] * wc)
        return tape.gradient(loss, [kw[n] for n in names])

    fn = tf.function(grads_of) if use_function else grads_of
    grads = fn(**ops_t)
    expected, _ = ref.reference_vjp(ops, desc, cell_cot=wc)
    for g, e, n in zip(grads, expected, names):
        assert_close(g.numpy(), e, OP.grad_tol[F64], "d_" + n)


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
def test_gradients_at_a_saturated_cell(mps, rng, dtype):
    """A cell far past ±709 (init_cell ±900, sigmoid cell activation): sigmoid(c) is 0 or 1
    and its derivative vanishes; every gradient is finite and matches the reference (whose
    float64 activations and their tape gradients stay finite there too). float32 to 1e-3:
    the peephole terms (p · 900) saturate gates whose derivatives float32 can only form from
    the rounded gate (1 - z², z · (1 - z)), then multiplied by the cell."""
    case = OP.full_case((3, 4, 3, 5), False, activation="sigmoid", cell_gradient=True)
    ops = OP.make_operands(rng, case)
    B, H = case["size"][1], case["size"][3]
    ops["init_cell"] = np.where(rng.uniform(size=(B, H)) < 0.5, -900.0, 900.0) + rng.normal(
        size=(B, H))
    ops, cots, desc, _, _, grads = OP.run_gradients(mps, rng, case, dtype, ops=ops)
    r = lambda a: round_to(a, dtype)  # noqa: E731
    expected, names = ref.reference_vjp({k: r(v) for k, v in ops.items()}, desc,
                                        **{k: r(v) for k, v in cots.items()})
    assert len(grads) == len(names)
    for g, e, n in zip(grads, expected, names):
        g = tf.cast(g, tf.float64).numpy()
        assert np.isfinite(g).all() and np.isfinite(e).all(), n
        assert_close(g, e, OP.grad_tol[dtype] if dtype == F64 else Tol(1e-3, 1e-3), "d_" + n)
