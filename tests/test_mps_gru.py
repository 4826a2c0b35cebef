"""tf_rnn_ops.mps: MPSGraph-style GRU (mps.gru) and GRUGradients (mps.gru_gradients).

Everything is checked against the independent float64 reference in tests/mps_gru_reference.py,
which is itself checked against keras.layers.GRU / Bidirectional (float64, both reset_after):

* forward outputs [state, z_state?] for pairwise-covering combinations of every descriptor
  field (every gate activation through all five values, both gate orders, reset before/after
  with and without the secondary bias, flip_z, reverse, bidirectional, training), every
  optional operand absent / present, mask [B,DH] and [T,B,DH], T=1, B=1, in float64, float32,
  float16 and bfloat16;
* gru_gradients vs tape autodiff of the reference (state_gradient absent and present), plus
  float64 central differences of the op's own forward on small cases;
* the registered gradient of mps.gru (eager and tf.function), including init_state and
  secondary_bias; a gradient arriving at z_state is an error;
* malformed operands raise InvalidArgumentError naming the operand;
* zero-size time and batch.

Sizes are small: the suite is meant to run in well under a minute on two cores.
"""

import itertools

import numpy as np
import pytest
import tensorflow as tf

import mps_gru_reference as ref
from lstm_util import Tol
from mps_test_util import (B0, BF16, F16, F32, F64, H0, T0, MpsOp,
                           assert_close, check_activations, check_registered,
                           keras_case, mps, rng,  # noqa: F401 (fixtures)
                           run_keras, run_keras_bidirectional, shared_tests, to_t)

ACT_FIELDS = ref.ACT_FIELDS

# (T, B, I, H): T=1, B=1, H=1, I=1, I != H, I == H.
SIZES = [(1, 3, 4, 2), (4, 1, 3, 3), (3, 2, 2, 1), (5, 3, 1, 2), (2, 2, 3, 3)]

# "reset": reset_after=False; reset_after=True without / with the secondary bias (which is
# only valid with reset_after, so the two are one factor).
RESETS = ("before", "after", "after_b2")


class GRU(MpsOp):
    name, descriptor, ref, gates, cell = "gru", "GRUDescriptor", ref, 3, False
    act_fields = ACT_FIELDS
    outputs = dict(training=True)
    valid_desc = dict(reset_after=True)
    fwd_output, fwd_index = "output_fwd", 0
    full = dict(reset_gate_first=False, reset="after_b2", flip_z=False)
    fwd_tol = {F64: Tol(1e-12, 1e-12), F32: Tol(1e-5, 1e-5), F16: Tol(3e-3, 3e-3),
               BF16: Tol(3e-2, 3e-2)}
    grad_tol = {F64: Tol(1e-11, 1e-11), F32: Tol(1e-5, 1e-5), F16: Tol(3e-3, 3e-3),
                BF16: Tol(3e-2, 3e-2)}
    sizes = SIZES
    layout = {"reset_gate_first": [False, True], "reset": list(RESETS), "flip_z": [False, True]}
    output_factors = dict(training=[False, True])
    gradient_factors = dict(state_gradient=[False, True])
    every = dict(tf_function=6, half_grad=4, reg_function=5, reg_low=5)
    unknown_sizes = (2, 3, [(4, 3), (2, 1)])

    def layout_id(self, c):
        s = "-rzo" if c["reset_gate_first"] else "-zro"
        s += {"before": "-rb", "after": "-ra", "after_b2": "-ra+b2"}[c["reset"]]
        return s + ("-flip" if c["flip_z"] else "")

    def desc_of(self, case, **over):
        fields = {k: case[k] for k in ("reverse", "bidirectional", "reset_gate_first", "flip_z")
                  + ACT_FIELDS}
        fields["reset_after"] = case["reset"] != "before"
        fields["training"] = case.get("training", False)
        fields.update(over)
        return ref.Desc(**fields)

    def extra_operands(self, rng, case, B, D, G, H):
        if case["reset"] == "after_b2":
            return {"secondary_bias": 0.3 * rng.normal(size=(D * H,))}
        return {}

    def extra_valid(self, rng, D, G):
        return {"secondary_bias": rng.normal(size=(D * H0,))}

    def check_numeric_case(self, ops, desc):
        dist = ref.kink_distance(ref.gru_forward(desc=desc, **ops)["preacts"])
        assert dist > 1e-3, f"test data too close to an activation kink ({dist}); change the seed"


OP = GRU()
G0 = 3 * H0
OP.numeric_cases = [
    # reset before, mask [T,B,H], every operand but secondary_bias
    OP.full_case((3, 2, 2, 2), False, reset="before"),
    # bidirectional, reset after with b2, [r, z, o], flip_z, no input weight, mask [B, DH]
    OP.full_case((3, 2, 2, 2), True, reset_gate_first=True, flip_z=True, input_weight=False,
                 mask="nh", update_gate_activation="tanh", output_gate_activation="none"),
    # kinked activations (inputs checked to be away from the kinks), reverse, no bias
    OP.full_case((3, 2, 2, 2), False, reverse=True, reset="after_b2", bias=False, mask=None,
                 update_gate_activation="hard_sigmoid", reset_gate_activation="relu",
                 output_gate_activation="relu"),
    OP.full_case((2, 2, 2, 1), False, reset="before", init_state=False, state_gradient=False,
                 update_gate_activation="sigmoid", reset_gate_activation="hard_sigmoid",
                 output_gate_activation="sigmoid"),
]
OP.extra_cases = [
    OP.full_case((1, 1, 2, 3), False),                                   # T = B = 1
    OP.full_case((1, 1, 3, 2), True, input_weight=False, mask="nh"),
    OP.full_case((3, 17, 33, 19), False, reverse=True, reset_gate_first=True),  # past SIMD
    OP.full_case((2, 9, 16, 16), True, reset="before", output_gate_activation="hard_sigmoid",
                 reset_gate_activation="relu"),
]
OP.bad_forward = [
    ("R_4H_rows", False, {"recurrent_weight": (4 * H0, H0)}, "recurrent_weight"),
    ("secondary_bias_size", False, {"secondary_bias": (H0 + 1,)}, "secondary_bias"),
    ("secondary_bias_size_bi", True, {"secondary_bias": (H0,)}, "secondary_bias"),
    ("secondary_bias_3H", False, {"secondary_bias": (G0,)}, "secondary_bias"),
    ("secondary_bias_rank2", True, {"secondary_bias": (2, H0)}, "secondary_bias"),
]
OP.bad_gradients = [
    ("output_fwd_shape", False, {"output_fwd": (T0, B0, H0 + 1)}, "output_fwd"),
    ("output_fwd_shape_bi", True, {"output_fwd": (T0, B0, H0)}, "output_fwd"),
    ("secondary_bias_in_gradients", False, {"secondary_bias": (H0 - 1,)}, "secondary_bias"),
]

# forward, gru_gradients, the registered gradient, malformed operands
globals().update(shared_tests(OP))


# ---------------------------------------------------------------------------------------------
# the reference itself (needs no plugin op)
# ---------------------------------------------------------------------------------------------

def _keras_bias(k, reset_after):
    """Keras bias: [3H] (reset before) or [2, 3H] (input bias; recurrent bias, zero for z, r)."""
    if not reset_after:
        return k["b"]
    H = k["b2"].shape[0]
    return np.stack([k["b"], np.concatenate([np.zeros(2 * H), k["b2"]])])


@pytest.mark.parametrize("go_backwards", [False, True], ids=["fwd", "backwards"])
@pytest.mark.parametrize("reset_after", [False, True], ids=["reset_before", "reset_after"])
def test_reference_vs_keras_gru(rng, reset_after, go_backwards):
    keras = pytest.importorskip("keras")
    T, B, I, H = 5, 3, 4, 3
    k = keras_case(rng, T, B, I, 3 * H, H)
    layer = keras.layers.GRU(H, return_sequences=True, return_state=True, dtype="float64",
                             reset_after=reset_after, go_backwards=go_backwards)
    seq, wh_t, (hf,), (gk, grk, gbk) = run_keras(rng, layer, k, _keras_bias(k, reset_after),
                                                 [k["h0"]], go_backwards)
    desc = ref.Desc(reverse=go_backwards, flip_z=True, reset_after=reset_after)
    ops = dict(source=k["x"], recurrent_weight=k["R"], input_weight=k["W"], bias=k["b"],
               init_state=k["h0"], secondary_bias=k["b2"] if reset_after else None)
    r = ref.gru_forward(desc=desc, **ops)
    tol = Tol(1e-12, 1e-12)
    assert_close(r["state"].numpy(), seq, tol, "state")
    assert_close(r["h_final"].numpy(), hf, tol, "h_final")
    grads, names = ref.reference_vjp(ops, desc, state_cot=wh_t)
    g = dict(zip(names, grads))
    gtol = Tol(1e-10, 1e-10)
    assert_close(g["input_weight"], gk.T, gtol, "d_input_weight")
    assert_close(g["recurrent_weight"], grk.T, gtol, "d_recurrent_weight")
    if reset_after:
        assert_close(g["bias"], gbk[0], gtol, "d_bias")
        assert_close(g["secondary_bias"], gbk[1, 2 * H:], gtol, "d_secondary_bias")
    else:
        assert_close(g["bias"], gbk, gtol, "d_bias")


@pytest.mark.parametrize("reset_after", [False, True], ids=["reset_before", "reset_after"])
def test_reference_vs_keras_bidirectional(rng, reset_after):
    keras = pytest.importorskip("keras")
    T, B, I, H = 4, 2, 3, 2
    kf, kb = keras_case(rng, T, B, I, 3 * H, H), keras_case(rng, T, B, I, 3 * H, H)
    layer = keras.layers.Bidirectional(
        keras.layers.GRU(H, return_sequences=True, return_state=True, dtype="float64",
                         reset_after=reset_after),
        dtype="float64")
    seq, (fh, bh) = run_keras_bidirectional(layer, kf, kb, _keras_bias(kf, reset_after),
                                            _keras_bias(kb, reset_after), [kf["h0"], kb["h0"]])
    r = ref.gru_forward(
        kf["x"], np.stack([kf["R"], kb["R"]]), np.concatenate([kf["W"], kb["W"]]),
        np.concatenate([kf["b"], kb["b"]]), np.concatenate([kf["h0"], kb["h0"]], -1),
        secondary_bias=np.concatenate([kf["b2"], kb["b2"]]) if reset_after else None,
        desc=ref.Desc(bidirectional=True, flip_z=True, reset_after=reset_after))
    tol = Tol(1e-12, 1e-12)
    assert_close(r["state"].numpy(), seq, tol, "state")
    assert_close(r["h_final"].numpy(), np.concatenate([fh, bh], -1), tol, "h_final")


def test_reference_activations_and_gate_order():
    check_activations(ref)
    s = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    # one step, H=1, identity projection, R = [a, b, c]ᵀ: the gate blocks are read in the
    # descriptor's order and every variant is evaluated by hand.
    pre = np.array([[[0.3, -0.4, 0.8]]])
    R = np.array([[0.5], [-0.7], [1.3]])
    h0, b2 = 0.6, 0.25
    for rgf, ra, flip in itertools.product((False, True), repeat=3):
        pz, pr, po = (pre[0, 0, 0], pre[0, 0, 1], pre[0, 0, 2]) if not rgf else (
            pre[0, 0, 1], pre[0, 0, 0], pre[0, 0, 2])
        rz, rr, ro = (R[0, 0], R[1, 0], R[2, 0]) if not rgf else (R[1, 0], R[0, 0], R[2, 0])
        z, r = s(pz + rz * h0), s(pr + rr * h0)
        c = (ro * h0 + b2) * r if ra else ro * (r * h0)
        o = np.tanh(c + po)
        h = z * h0 + (1 - z) * o if flip else (1 - z) * h0 + z * o
        res = ref.gru_forward(pre, R, init_state=[[h0]], secondary_bias=[b2] if ra else None,
                              desc=ref.Desc(reset_gate_first=rgf, reset_after=ra, flip_z=flip,
                                            training=True))
        np.testing.assert_allclose(res["state"].numpy(), [[[h]]], rtol=1e-14)
        expect_z = [z, r, o] if not rgf else [r, z, o]
        np.testing.assert_allclose(res["z_state"].numpy(), [[expect_z]], rtol=1e-14)


def test_reference_mask_only_in_recurrent_products():
    """With mask 0 the recurrent products vanish but the blend still uses the unmasked h."""
    pre = np.array([[[0.3, -0.4, 0.8]]])
    R = np.array([[0.5], [-0.7], [1.3]])
    h0 = 0.6
    res = ref.gru_forward(pre, R, init_state=[[h0]], mask=[[0.0]], desc=ref.Desc())
    s = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    z, o = s(0.3), np.tanh(0.8)
    np.testing.assert_allclose(res["state"].numpy(), [[[(1 - z) * h0 + z * o]]], rtol=1e-14)



# ---------------------------------------------------------------------------------------------
# GRU only
# ---------------------------------------------------------------------------------------------

# ---------------------------------------------------------------------------------------------
# descriptor
# ---------------------------------------------------------------------------------------------

def test_descriptor_defaults(mps):
    d = mps.GRUDescriptor()
    expected = dict(reverse=False, bidirectional=False, training=False, reset_gate_first=False,
                    reset_after=False, flip_z=False, update_gate_activation="sigmoid",
                    reset_gate_activation="sigmoid", output_gate_activation="tanh")
    assert ref.Desc().kwargs() == expected
    for k, v in expected.items():
        assert getattr(d, k) == v, k


@pytest.mark.parametrize("field", ACT_FIELDS)
def test_descriptor_rejects_unknown_activation(mps, field):
    with pytest.raises(ValueError, match=field):
        mps.GRUDescriptor(**{field: "gelu"})


def test_raw_op_rejects_unknown_activation(mps, rng):
    from tf_rnn_ops._loader import load_library
    x = tf.constant(rng.normal(size=(2, 1, 3)))
    R = tf.constant(rng.normal(size=(3, 1)))
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError)):
        load_library().tf_rnn_gru(source=x, recurrent_weight=R, input_weight=[], bias=[],
                                  init_state=[], mask=[], secondary_bias=[],
                                  output_gate_activation="gelu")[0].numpy()


@pytest.mark.parametrize("field,value", [("flip_z", True), ("reset_after", True),
                                         ("reset_gate_first", True)])
def test_descriptor_fields_change_the_result(mps, rng, field, value):
    """Each switch alone changes the output (guards against an attr being ignored)."""
    case = OP.full_case((3, 2, 3, 2), False, reset="before")
    ops = OP.make_operands(rng, case)
    ops_t = {k: to_t(v, F64) for k, v in ops.items()}
    base = OP.call(mps, ops_t, OP.desc_of(case))[0].numpy()
    other_desc = OP.desc_of(case, **{field: value})
    other = OP.call(mps, ops_t, other_desc)[0].numpy()
    assert np.abs(base - other).max() > 1e-3
    assert_close(other, ref.forward_outputs(ops, other_desc)[0].numpy(), OP.fwd_tol[F64], "state")


@pytest.mark.parametrize("use_function", [False, True], ids=["eager", "tf_function"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
def test_registered_gradient_all_operands(mps, rng, bidirectional, use_function):
    """init_state and secondary_bias included, training=True (z_state unused by the loss)."""
    case = OP.full_case((3, 2, 3, 2), bidirectional, reset_gate_first=True, flip_z=True,
                      training=True)
    check_registered(OP, mps, rng, case, F64, use_function)



# ---------------------------------------------------------------------------------------------
# zero sizes
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
@pytest.mark.parametrize("size", [(0, 2, 3, 2), (3, 0, 3, 2)], ids=["T0", "B0"])
def test_zero_size(mps, rng, size, bidirectional):
    case = OP.full_case(size, bidirectional, training=True)
    ops, cots, desc, ops_t, (state, z), grads = OP.run_gradients(mps, rng, case, F64)
    T, B, _, H = size
    D = 2 if bidirectional else 1
    assert state.shape == (T, B, D * H)
    assert z.shape == (T, B, D * 3 * H)
    expected, names = ref.reference_vjp(ops, desc, **cots)
    assert len(grads) == len(names)
    for g, e, n in zip(grads, expected, names):
        assert_close(g.numpy(), e, OP.grad_tol[F64], "d_" + n)
    if T == 0:   # the final state is init_state, so its gradient passes through unchanged
        np.testing.assert_array_equal(grads[names.index("init_state")].numpy(),
                                      cots["final_state_cot"])
    # the registered gradient
    with tf.GradientTape() as tape:
        tape.watch(ops_t["source"])
        tape.watch(ops_t["recurrent_weight"])
        s = OP.call(mps, ops_t, desc)[0]
        loss = tf.reduce_sum(s)
    g = tape.gradient(loss, [ops_t["source"], ops_t["recurrent_weight"]])
    assert g[0].shape == ops_t["source"].shape
    np.testing.assert_array_equal(g[1].numpy(), 0.0)


@pytest.mark.parametrize("bi", [False, True], ids=["uni", "bi"])
def test_secondary_bias_requires_reset_after(mps, rng, bi):
    ops_t = {k: to_t(v, F32) for k, v in OP.valid(rng, bi).items()}
    desc = ref.Desc(bidirectional=bi, reset_after=False)
    with pytest.raises(tf.errors.InvalidArgumentError, match="secondary_bias"):
        OP.call(mps, ops_t, desc)[0].numpy()
    D = 2 if bi else 1
    t = lambda a: to_t(a, F32)  # noqa: E731
    with pytest.raises(tf.errors.InvalidArgumentError, match="secondary_bias"):
        grads = OP.call_grads(mps, ops_t, desc,
                              source_gradient=t(rng.normal(size=(T0, B0, D * H0))),
                              z_state=tf.zeros([0], F32), output_fwd=tf.zeros([0], F32))
        [g.numpy() for g in grads]



OPTIONAL_FWD = ("input_weight", "bias", "init_state", "mask", "secondary_bias")


@pytest.mark.parametrize("operand", OPTIONAL_FWD + ("state_gradient",))
def test_optional_operand_with_two_tensors(mps, rng, operand):
    """The raw ops take each optional operand as a list of 0 or 1 tensors; 2 is an error."""
    from tf_rnn_ops._loader import load_library
    lib = load_library()
    ops_t = {k: to_t(v, F32) for k, v in OP.valid(rng, False).items()}
    attrs = ref.Desc(training=True, reset_after=True).kwargs()
    lists = {k: [ops_t[k]] for k in OPTIONAL_FWD}
    gin = {k: to_t(v, F32) for k, v in OP.valid_grad_inputs(rng, False).items()}
    lists_g = dict(lists, state_gradient=[gin["state_gradient"]])
    with pytest.raises(tf.errors.InvalidArgumentError, match=operand):
        if operand == "state_gradient":
            lists_g[operand] = lists_g[operand] * 2
            out = lib.tf_rnn_gru_gradients(
                source=ops_t["source"], recurrent_weight=ops_t["recurrent_weight"],
                source_gradient=gin["source_gradient"], z_state=gin["z_state"],
                output_fwd=gin["output_fwd"], **lists_g, **attrs)
        else:
            lists[operand] = lists[operand] * 2
            out = lib.tf_rnn_gru(source=ops_t["source"],
                                 recurrent_weight=ops_t["recurrent_weight"], **lists, **attrs)
        tf.nest.map_structure(lambda t: t.numpy(), out)
    if operand != "state_gradient":
        lists[operand] = lists[operand][:1]
        lists_g = dict(lists, state_gradient=[gin["state_gradient"]])
        lists_g[operand] = lists_g[operand] * 2
        with pytest.raises(tf.errors.InvalidArgumentError, match=operand):
            out = lib.tf_rnn_gru_gradients(
                source=ops_t["source"], recurrent_weight=ops_t["recurrent_weight"],
                source_gradient=gin["source_gradient"], z_state=gin["z_state"],
                output_fwd=gin["output_fwd"], **lists_g, **attrs)
            tf.nest.map_structure(lambda t: t.numpy(), out)
