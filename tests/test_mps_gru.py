"""tf_rnn_ops.mps: MPSGraph-style GRU (mps.gru) and GRUGradients (mps.gru_gradients).

Everything is checked against the independent float64 reference in tests/mps_gru_reference.py,
which is itself checked against keras.layers.GRU / Bidirectional (float64, both reset_after):

* forward outputs [state, z_state?] for pairwise-covering combinations of every descriptor
  field (every gate activation through all five values, both gate orders, reset before/after
  with and without the secondary bias, flip_z, reverse, bidirectional, training), every
  optional operand absent / present, mask [N,DH] and [T,N,DH], T=1, N=1, in float64, float32,
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
from lstm_util import Tol, pairwise
from mps_test_util import (_ABBR, _apply, _mask, assert_close, np64, rng,  # noqa: F401 (rng: fixture)
                           round_to, to_t)

F16, BF16, F32, F64 = tf.float16, tf.bfloat16, tf.float32, tf.float64
DTYPE_IDS = {F64: "f64", F32: "f32", F16: "f16", BF16: "bf16"}
ACTS = ref.ACTIVATION_NAMES
ACT_FIELDS = ref.ACT_FIELDS


FWD_TOL = {F64: Tol(1e-12, 1e-12), F32: Tol(1e-5, 1e-5), F16: Tol(3e-3, 3e-3),
           BF16: Tol(3e-2, 3e-2)}
GRAD_TOL = {F64: Tol(1e-11, 1e-11), F32: Tol(1e-5, 1e-5), F16: Tol(3e-3, 3e-3),
            BF16: Tol(3e-2, 3e-2)}
NUMERIC_TOL = Tol(1e-6, 1e-6)
NUMERIC_DELTA = 1e-6

# (T, N, I, H): T=1, N=1, H=1, I=1, I != H, I == H.
SIZES = [(1, 3, 4, 2), (4, 1, 3, 3), (3, 2, 2, 1), (5, 3, 1, 2), (2, 2, 3, 3)]


# ---------------------------------------------------------------------------------------------
# fixtures and helpers
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def mps():
    try:
        from tf_rnn_ops import mps as module
    except Exception as e:
        pytest.fail(f"tf_rnn_ops.mps could not be imported: {type(e).__name__}: {e}",
                    pytrace=False)
    if not hasattr(module, "gru"):
        pytest.fail("tf_rnn_ops.mps has no gru", pytrace=False)
    return module


# "reset": reset_after=False; reset_after=True without / with the secondary bias (which is
# only valid with reset_after, so the two are one factor).
RESETS = ("before", "after", "after_b2")

BASE_FACTORS = {
    "size": SIZES,
    "bidirectional": [False, True],
    "reverse": [False, True],
    "reset_gate_first": [False, True],
    "reset": list(RESETS),
    "flip_z": [False, True],
    "update_gate_activation": list(ACTS),
    "reset_gate_activation": list(ACTS),
    "output_gate_activation": list(ACTS),
    "input_weight": [False, True],
    "bias": [False, True],
    "init_state": [False, True],
    "mask": [None, "nh", "tnh"],
}
FWD_CASES = pairwise(dict(BASE_FACTORS, training=[False, True]), seed=1)
GRAD_CASES = pairwise(dict(BASE_FACTORS, state_gradient=[False, True]), seed=2)
REG_CASES = pairwise(dict(BASE_FACTORS, training=[False, True]), seed=3)

def case_id(c):
    T, N, I, H = c["size"]
    s = f"T{T}N{N}I{I}H{H}-"
    s += "bi" if c["bidirectional"] else ("rev" if c["reverse"] else "fwd")
    if c["bidirectional"] and c["reverse"]:
        s += "+rev"
    s += "-rzo" if c["reset_gate_first"] else "-zro"
    s += {"before": "-rb", "after": "-ra", "after_b2": "-ra+b2"}[c["reset"]]
    if c["flip_z"]:
        s += "-flip"
    s += "-" + "".join(_ABBR[c[f]] for f in ACT_FIELDS)
    for k, a in (("input_weight", "W"), ("bias", "b"), ("init_state", "h0"),
                 ("training", "Z"), ("state_gradient", "gh")):
        if c.get(k):
            s += "-" + a
    if c["mask"]:
        s += "-m" + c["mask"]
    return s


def desc_of(case, **over):
    fields = {k: case[k] for k in ("reverse", "bidirectional", "reset_gate_first", "flip_z")
              + ACT_FIELDS}
    fields["reset_after"] = case["reset"] != "before"
    fields["training"] = case.get("training", False)
    fields.update(over)
    return ref.Desc(**fields)


def make_operands(rng, case):
    """float64 numpy operands (None = not given) for a case.  Gate pre-activations are O(0.5):
    enough to exercise every nonlinearity, small enough that unbounded gates ('none', 'relu')
    do not blow the state up over T steps."""
    T, N, I, H = case["size"]
    D = 2 if case["bidirectional"] else 1
    G = 3 * H
    ops = dict.fromkeys(ref.OPERAND_NAMES)
    if case["input_weight"]:
        ops["source"] = rng.normal(size=(T, N, I))
        ops["input_weight"] = 0.5 * rng.normal(size=(D * G, I)) / np.sqrt(max(I, 1))
    else:
        ops["source"] = 0.5 * rng.normal(size=(T, N, D * G))
    ops["recurrent_weight"] = 0.5 * rng.normal(size=(2, G, H) if D == 2 else (G, H)) / np.sqrt(H)
    if case["bias"]:
        ops["bias"] = 0.3 * rng.normal(size=(D * G,))
    if case["init_state"]:
        ops["init_state"] = rng.uniform(-1.0, 1.0, size=(N, D * H))
    if case["reset"] == "after_b2":
        ops["secondary_bias"] = 0.3 * rng.normal(size=(D * H,))
    if case["mask"] == "nh":
        ops["mask"] = _mask(rng, (N, D * H))
    elif case["mask"] == "tnh":
        ops["mask"] = _mask(rng, (T, N, D * H))
    return ops


def mps_desc(mps, desc):
    return mps.GRUDescriptor(**desc.kwargs())


def call_gru(mps, ops_t, desc):
    return mps.gru(ops_t["source"], ops_t["recurrent_weight"],
                   input_weight=ops_t.get("input_weight"), bias=ops_t.get("bias"),
                   init_state=ops_t.get("init_state"), mask=ops_t.get("mask"),
                   secondary_bias=ops_t.get("secondary_bias"), descriptor=mps_desc(mps, desc))


def call_grads(mps, ops_t, desc, source_gradient, z_state, output_fwd, state_gradient=None):
    return mps.gru_gradients(
        ops_t["source"], ops_t["recurrent_weight"], source_gradient, z_state, output_fwd,
        state_gradient=state_gradient, input_weight=ops_t.get("input_weight"),
        bias=ops_t.get("bias"), init_state=ops_t.get("init_state"), mask=ops_t.get("mask"),
        secondary_bias=ops_t.get("secondary_bias"), descriptor=mps_desc(mps, desc))


def output_names(desc):
    return ["state"] + (["z_state"] if desc.training else [])


def finals_from_sequences(seq, desc):
    """h_final [N, DH] from a [T, N, DH] sequence: the last step of each direction."""
    if desc.bidirectional:
        H = seq.shape[-1] // 2
        return np.concatenate([seq[-1, :, :H], seq[0, :, H:]], axis=-1)
    return seq[0] if desc.reverse else seq[-1]


# ---------------------------------------------------------------------------------------------
# the reference itself (needs no plugin op)
# ---------------------------------------------------------------------------------------------

def _keras_case(rng, T, N, I, H):
    return dict(x=rng.normal(size=(T, N, I)), W=rng.normal(size=(3 * H, I)) / np.sqrt(I),
                R=rng.normal(size=(3 * H, H)) / np.sqrt(H), b=0.5 * rng.normal(size=(3 * H,)),
                b2=0.5 * rng.normal(size=(H,)), h0=rng.uniform(-1, 1, size=(N, H)))


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
    T, N, I, H = 5, 3, 4, 3
    k = _keras_case(rng, T, N, I, H)
    layer = keras.layers.GRU(H, return_sequences=True, return_state=True, dtype="float64",
                             reset_after=reset_after, go_backwards=go_backwards)
    layer.build((N, T, I))
    layer.set_weights([k["W"].T, k["R"].T, _keras_bias(k, reset_after)])
    x_bt = tf.constant(np.transpose(k["x"], (1, 0, 2)))
    wh = rng.normal(size=(N, T, H))
    with tf.GradientTape() as tape:
        seq, hf = layer(x_bt, initial_state=[tf.constant(k["h0"])])
        loss = tf.reduce_sum(seq * wh)
    gk, grk, gbk = tape.gradient(loss, [layer.weights[0], layer.weights[1], layer.weights[2]])
    seq = np.transpose(seq.numpy(), (1, 0, 2))
    wh_t = np.transpose(wh, (1, 0, 2))
    if go_backwards:                  # Keras returns the sequence in processing order
        seq, wh_t = seq[::-1], wh_t[::-1]
    desc = ref.Desc(reverse=go_backwards, flip_z=True, reset_after=reset_after)
    ops = dict(source=k["x"], recurrent_weight=k["R"], input_weight=k["W"], bias=k["b"],
               init_state=k["h0"], secondary_bias=k["b2"] if reset_after else None)
    r = ref.gru_forward(desc=desc, **ops)
    tol = Tol(1e-12, 1e-12)
    assert_close(r["state"].numpy(), seq, tol, "state")
    assert_close(r["h_final"].numpy(), hf.numpy(), tol, "h_final")
    grads, names = ref.reference_vjp(ops, desc, state_cot=wh_t)
    g = dict(zip(names, grads))
    gtol = Tol(1e-10, 1e-10)
    assert_close(g["input_weight"], gk.numpy().T, gtol, "d_input_weight")
    assert_close(g["recurrent_weight"], grk.numpy().T, gtol, "d_recurrent_weight")
    if reset_after:
        assert_close(g["bias"], gbk.numpy()[0], gtol, "d_bias")
        assert_close(g["secondary_bias"], gbk.numpy()[1, 2 * H:], gtol, "d_secondary_bias")
    else:
        assert_close(g["bias"], gbk.numpy(), gtol, "d_bias")


@pytest.mark.parametrize("reset_after", [False, True], ids=["reset_before", "reset_after"])
def test_reference_vs_keras_bidirectional(rng, reset_after):
    keras = pytest.importorskip("keras")
    T, N, I, H = 4, 2, 3, 2
    kf, kb = _keras_case(rng, T, N, I, H), _keras_case(rng, T, N, I, H)
    layer = keras.layers.Bidirectional(
        keras.layers.GRU(H, return_sequences=True, return_state=True, dtype="float64",
                         reset_after=reset_after),
        dtype="float64")
    x_bt = tf.constant(np.transpose(kf["x"], (1, 0, 2)))
    layer.build((N, T, I))
    layer.forward_layer.set_weights([kf["W"].T, kf["R"].T, _keras_bias(kf, reset_after)])
    layer.backward_layer.set_weights([kb["W"].T, kb["R"].T, _keras_bias(kb, reset_after)])
    out = layer(x_bt, initial_state=[tf.constant(kf["h0"]), tf.constant(kb["h0"])])
    seq, fh, bh = [o.numpy() for o in out]
    r = ref.gru_forward(
        kf["x"], np.stack([kf["R"], kb["R"]]), np.concatenate([kf["W"], kb["W"]]),
        np.concatenate([kf["b"], kb["b"]]), np.concatenate([kf["h0"], kb["h0"]], -1),
        secondary_bias=np.concatenate([kf["b2"], kb["b2"]]) if reset_after else None,
        desc=ref.Desc(bidirectional=True, flip_z=True, reset_after=reset_after))
    tol = Tol(1e-12, 1e-12)
    assert_close(r["state"].numpy(), np.transpose(seq, (1, 0, 2)), tol, "state")
    assert_close(r["h_final"].numpy(), np.concatenate([fh, bh], -1), tol, "h_final")


def test_reference_activations_and_gate_order():
    x = tf.constant([-3.0, -2.5, -1.0, 0.0, 0.7, 2.5, 4.0], tf.float64)
    hs = ref.activate("hard_sigmoid", x).numpy()
    np.testing.assert_allclose(hs, [0.0, 0.0, 0.3, 0.5, 0.64, 1.0, 1.0], atol=1e-15)
    np.testing.assert_allclose(ref.activate("relu", x).numpy(), np.maximum(x.numpy(), 0))
    np.testing.assert_allclose(ref.activate("none", x).numpy(), x.numpy())
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


def test_pairwise_covers_every_activation():
    for cases in (FWD_CASES, GRAD_CASES, REG_CASES):
        for f in ACT_FIELDS:
            assert {c[f] for c in cases} == set(ACTS)
        for a, b in itertools.combinations(ACT_FIELDS, 2):
            assert {(c[a], c[b]) for c in cases} == set(itertools.product(ACTS, ACTS))
        assert {c["reset"] for c in cases} == set(RESETS)


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


# ---------------------------------------------------------------------------------------------
# forward
# ---------------------------------------------------------------------------------------------

def _fwd_params():
    out = []
    for c in FWD_CASES:
        for dt in (F64, F32, F16, BF16):
            out.append(pytest.param(c, dt, id=f"{case_id(c)}-{DTYPE_IDS[dt]}"))
    return out


@pytest.mark.parametrize("case,dtype", _fwd_params())
def test_forward(mps, rng, case, dtype):
    ops = make_operands(rng, case)
    desc = desc_of(case)
    ops_t = {k: to_t(v, dtype) for k, v in ops.items()}
    outs = call_gru(mps, ops_t, desc)
    names = output_names(desc)
    assert len(outs) == len(names), f"{len(outs)} outputs, expected {names}"
    expected = ref.forward_outputs({k: round_to(v, dtype) for k, v in ops.items()}, desc)
    for o, e, n in zip(outs, expected, names):
        assert o.dtype == dtype, n
        assert_close(np64(o), e.numpy(), FWD_TOL[dtype], n)


@pytest.mark.parametrize("case", FWD_CASES[::6], ids=case_id)
def test_forward_tf_function(mps, rng, case):
    ops = make_operands(rng, case)
    desc = desc_of(case, training=True)
    ops_t = {k: to_t(v, F64) for k, v in ops.items()}
    given = {k: v for k, v in ops_t.items() if v is not None}

    @tf.function
    def f(**kw):
        return call_gru(mps, kw, desc)

    outs = f(**given)
    expected = ref.forward_outputs(ops, desc)
    for o, e, n in zip(outs, expected, output_names(desc)):
        assert o.shape == e.shape, n
        assert_close(o.numpy(), e.numpy(), FWD_TOL[F64], n)


def _full_case(size, bidirectional, **over):
    c = dict(size=size, bidirectional=bidirectional, reverse=False, reset_gate_first=False,
             reset="after_b2", flip_z=False, input_weight=True, bias=True, init_state=True,
             mask="tnh", state_gradient=True, update_gate_activation="sigmoid",
             reset_gate_activation="sigmoid", output_gate_activation="tanh")
    c.update(over)
    return c


@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
def test_reverse_ignored_when_bidirectional_and_reverse_differs(mps, rng, bidirectional):
    case = _full_case((4, 2, 3, 2), bidirectional)
    ops_t = {k: to_t(v, F64) for k, v in make_operands(rng, case).items()}
    a = call_gru(mps, ops_t, desc_of(case, reverse=False))[0].numpy()
    b = call_gru(mps, ops_t, desc_of(case, reverse=True))[0].numpy()
    if bidirectional:
        np.testing.assert_array_equal(a, b)
    else:
        assert np.abs(a - b).max() > 1e-3


@pytest.mark.parametrize("field,value", [("flip_z", True), ("reset_after", True),
                                         ("reset_gate_first", True)])
def test_descriptor_fields_change_the_result(mps, rng, field, value):
    """Each switch alone changes the output (guards against an attr being ignored)."""
    case = _full_case((3, 2, 3, 2), False, reset="before")
    ops = make_operands(rng, case)
    ops_t = {k: to_t(v, F64) for k, v in ops.items()}
    base = call_gru(mps, ops_t, desc_of(case))[0].numpy()
    other_desc = desc_of(case, **{field: value})
    other = call_gru(mps, ops_t, other_desc)[0].numpy()
    assert np.abs(base - other).max() > 1e-3
    assert_close(other, ref.forward_outputs(ops, other_desc)[0].numpy(), FWD_TOL[F64], "state")


def test_tf_function_unknown_time_and_batch(mps, rng):
    """Traced once with [None, None, I] / [None, DH] signatures, run at two (T, N)."""
    H, I = 2, 3
    desc = ref.Desc(bidirectional=True, training=True, reset_after=True)
    spec = tf.TensorSpec
    sig = [spec([None, None, I], F64), spec([2, 3 * H, H], F64), spec([6 * H, I], F64),
           spec([None, 2 * H], F64), spec([None, None, 2 * H], F64), spec([2 * H], F64)]

    @tf.function(input_signature=sig)
    def f(x, R, W, h0, m, b2):
        return call_gru(mps, dict(source=x, recurrent_weight=R, input_weight=W,
                                  init_state=h0, mask=m, secondary_bias=b2), desc)

    R = 0.5 * rng.normal(size=(2, 3 * H, H))
    W = 0.5 * rng.normal(size=(6 * H, I))
    b2 = 0.3 * rng.normal(size=(2 * H,))
    for T, N in ((4, 3), (2, 1)):
        x, h0 = rng.normal(size=(T, N, I)), rng.normal(size=(N, 2 * H))
        m = _mask(rng, (T, N, 2 * H))
        outs = f(*[tf.constant(a) for a in (x, R, W, h0, m, b2)])
        expected = ref.forward_outputs(dict(source=x, recurrent_weight=R, input_weight=W,
                                            init_state=h0, mask=m, secondary_bias=b2), desc)
        for o, e, n in zip(outs, expected, output_names(desc)):
            assert_close(o.numpy(), e.numpy(), FWD_TOL[F64], n)
    assert f.experimental_get_tracing_count() == 1


# ---------------------------------------------------------------------------------------------
# gru_gradients
# ---------------------------------------------------------------------------------------------

def _grad_inputs(rng, case):
    T, N, _, H = case["size"]
    D = 2 if case["bidirectional"] else 1
    sg = rng.normal(size=(T, N, D * H))
    stg = rng.normal(size=(N, D * H)) if case.get("state_gradient") else None
    return sg, stg


def _check_gru_gradients(mps, rng, case, dtype):
    ops = make_operands(rng, case)
    sg, stg = _grad_inputs(rng, case)
    desc = desc_of(case, training=True)
    ops_t = {k: to_t(v, dtype) for k, v in ops.items()}
    state, z = call_gru(mps, ops_t, desc)
    grads = call_grads(mps, ops_t, desc, to_t(sg, dtype), z, state,
                       state_gradient=to_t(stg, dtype))
    r = lambda a: round_to(a, dtype)  # noqa: E731
    expected, names = ref.reference_vjp({k: r(v) for k, v in ops.items()}, desc,
                                        state_cot=r(sg), final_state_cot=r(stg))
    assert len(grads) == len(names), f"{len(grads)} gradients, expected {names}"
    for g, e, n in zip(grads, expected, names):
        assert g.dtype == dtype, n
        assert_close(np64(g), e, GRAD_TOL[dtype], "d_" + n)


@pytest.mark.parametrize("case", GRAD_CASES, ids=case_id)
@pytest.mark.parametrize("dtype", [F64, F32], ids=DTYPE_IDS.get)
def test_gru_gradients(mps, rng, case, dtype):
    _check_gru_gradients(mps, rng, case, dtype)


@pytest.mark.parametrize("case", GRAD_CASES[::4], ids=case_id)
@pytest.mark.parametrize("dtype", [F16, BF16], ids=DTYPE_IDS.get)
def test_gru_gradients_half(mps, rng, case, dtype):
    _check_gru_gradients(mps, rng, case, dtype)


@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
def test_gru_gradients_accept_empty_z_state_and_output(mps, rng, bidirectional):
    """z_state / output_fwd are only shape-checked: empty tensors give the same gradients."""
    case = _full_case((3, 2, 3, 2), bidirectional)
    ops = make_operands(rng, case)
    sg, stg = _grad_inputs(rng, case)
    desc = desc_of(case, training=True)
    ops_t = {k: to_t(v, F64) for k, v in ops.items()}
    state, z = call_gru(mps, ops_t, desc)
    full = call_grads(mps, ops_t, desc, to_t(sg, F64), z, state, state_gradient=to_t(stg, F64))
    empty = tf.zeros([0], F64)
    got = call_grads(mps, ops_t, desc, to_t(sg, F64), empty, empty,
                     state_gradient=to_t(stg, F64))
    assert len(full) == len(got) == 6
    for a, b in zip(full, got):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


NUMERIC_CASES = [
    # reset before, mask [T,N,H], every operand but secondary_bias
    _full_case((3, 2, 2, 2), False, reset="before"),
    # bidirectional, reset after with b2, [r, z, o], flip_z, no input weight, mask [N, DH]
    _full_case((3, 2, 2, 2), True, reset_gate_first=True, flip_z=True, input_weight=False,
               mask="nh", update_gate_activation="tanh", output_gate_activation="none"),
    # kinked activations (inputs checked to be away from the kinks), reverse, no bias
    _full_case((3, 2, 2, 2), False, reverse=True, reset="after_b2", bias=False, mask=None,
               update_gate_activation="hard_sigmoid", reset_gate_activation="relu",
               output_gate_activation="relu"),
    _full_case((2, 2, 2, 1), False, reset="before", init_state=False, state_gradient=False,
               update_gate_activation="sigmoid", reset_gate_activation="hard_sigmoid",
               output_gate_activation="sigmoid"),
]


@pytest.mark.parametrize("case", NUMERIC_CASES, ids=case_id)
def test_gru_gradients_numeric(mps, rng, case):
    """Float64 central differences of L computed from the op's own forward."""
    ops = make_operands(rng, case)
    sg, stg = _grad_inputs(rng, case)
    desc = desc_of(case, training=True)
    dist = ref.kink_distance(ref.gru_forward(desc=desc, **ops)["preacts"])
    assert dist > 1e-3, f"test data too close to an activation kink ({dist}); change the seed"

    def loss(o):
        state, _ = call_gru(mps, {k: to_t(v, F64) for k, v in o.items()}, desc)
        state = state.numpy()
        total = np.sum(sg * state)
        if stg is not None:
            total += np.sum(stg * finals_from_sequences(state, desc))
        return total

    ops_t = {k: to_t(v, F64) for k, v in ops.items()}
    state, z = call_gru(mps, ops_t, desc)
    grads = call_grads(mps, ops_t, desc, to_t(sg, F64), z, state, state_gradient=to_t(stg, F64))
    expected_ref, names = ref.reference_vjp(ops, desc, state_cot=sg, final_state_cot=stg)
    assert len(grads) == len(names)
    for g, gr, n in zip(grads, expected_ref, names):
        num = np.zeros_like(ops[n])
        for idx in np.ndindex(*ops[n].shape):
            o = dict(ops)
            a = ops[n].copy()
            a[idx] += NUMERIC_DELTA
            o[n] = a
            up = loss(o)
            a[idx] -= 2 * NUMERIC_DELTA
            down = loss(o)
            num[idx] = (up - down) / (2 * NUMERIC_DELTA)
        assert_close(g.numpy(), num, NUMERIC_TOL, "op d_" + n)
        assert_close(gr, num, NUMERIC_TOL, "reference d_" + n)


# ---------------------------------------------------------------------------------------------
# registered gradient of mps.gru
# ---------------------------------------------------------------------------------------------

def _check_registered(mps, rng, case, dtype, use_function):
    ops = make_operands(rng, case)
    desc = desc_of(case)
    T, N, _, H = case["size"]
    D = 2 if case["bidirectional"] else 1
    wh = rng.normal(size=(T, N, D * H))
    ops_t = {k: to_t(v, dtype) for k, v in ops.items()}
    names = [n for n in ref.GRAD_ORDER if ops_t.get(n) is not None]

    def grads_of(ops_t):
        with tf.GradientTape() as tape:
            for n in names:
                tape.watch(ops_t[n])
            outs = call_gru(mps, ops_t, desc)
            loss = tf.reduce_sum(tf.cast(outs[0], F64) * wh)
        return tape.gradient(loss, [ops_t[n] for n in names])

    if use_function:
        given = {k: v for k, v in ops_t.items() if v is not None}
        grads = tf.function(lambda **kw: grads_of(kw))(**given)
    else:
        grads = grads_of(ops_t)
    expected, enames = ref.reference_vjp({k: round_to(v, dtype) for k, v in ops.items()}, desc,
                                         state_cot=wh)
    assert enames == names
    for g, e, n in zip(grads, expected, names):
        assert g is not None, f"no gradient for {n}"
        assert g.dtype == dtype, n
        assert_close(np64(g), e, GRAD_TOL[dtype], "d_" + n)


@pytest.mark.parametrize("case", REG_CASES, ids=case_id)
def test_registered_gradient_eager(mps, rng, case):
    _check_registered(mps, rng, case, F64, False)


@pytest.mark.parametrize("case", REG_CASES[1::5], ids=case_id)
def test_registered_gradient_tf_function(mps, rng, case):
    _check_registered(mps, rng, case, F64, True)


@pytest.mark.parametrize("case", REG_CASES[2::5], ids=case_id)
@pytest.mark.parametrize("dtype", [F32, F16], ids=DTYPE_IDS.get)
def test_registered_gradient_low_precision(mps, rng, case, dtype):
    _check_registered(mps, rng, case, dtype, False)


@pytest.mark.parametrize("use_function", [False, True], ids=["eager", "tf_function"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
def test_registered_gradient_all_operands(mps, rng, bidirectional, use_function):
    """init_state and secondary_bias included, training=True (z_state unused by the loss)."""
    case = _full_case((3, 2, 3, 2), bidirectional, reset_gate_first=True, flip_z=True,
                      training=True)
    _check_registered(mps, rng, case, F64, use_function)


@pytest.mark.parametrize("use_function", [False, True], ids=["eager", "tf_function"])
def test_registered_gradient_into_z_state_raises(mps, rng, use_function):
    case = _full_case((3, 2, 3, 2), False, training=True)
    ops_t = {k: to_t(v, F64) for k, v in make_operands(rng, case).items()}
    desc = desc_of(case)

    def run(src, rw):
        with tf.GradientTape() as tape:
            tape.watch([src, rw])
            outs = call_gru(mps, dict(ops_t, source=src, recurrent_weight=rw), desc)
            loss = tf.reduce_sum(outs[0]) + tf.reduce_sum(outs[1] * outs[1])
        return tape.gradient(loss, [src, rw])

    fn = tf.function(run) if use_function else run
    with pytest.raises(tf.errors.InvalidArgumentError, match="z_state"):
        g = fn(ops_t["source"], ops_t["recurrent_weight"])
        [t.numpy() for t in g]


# ---------------------------------------------------------------------------------------------
# zero sizes
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
@pytest.mark.parametrize("size", [(0, 2, 3, 2), (3, 0, 3, 2)], ids=["T0", "N0"])
def test_zero_size(mps, rng, size, bidirectional):
    case = _full_case(size, bidirectional, training=True)
    ops = make_operands(rng, case)
    sg, stg = _grad_inputs(rng, case)
    desc = desc_of(case)
    T, N, _, H = size
    D = 2 if bidirectional else 1
    ops_t = {k: to_t(v, F64) for k, v in ops.items()}
    state, z = call_gru(mps, ops_t, desc)
    assert state.shape == (T, N, D * H)
    assert z.shape == (T, N, D * 3 * H)
    grads = call_grads(mps, ops_t, desc, to_t(sg, F64), z, state, state_gradient=to_t(stg, F64))
    expected, names = ref.reference_vjp(ops, desc, state_cot=sg, final_state_cot=stg)
    assert len(grads) == len(names)
    for g, e, n in zip(grads, expected, names):
        assert_close(g.numpy(), e, GRAD_TOL[F64], "d_" + n)
    if T == 0:   # the final state is init_state, so its gradient passes through unchanged
        np.testing.assert_array_equal(grads[names.index("init_state")].numpy(), stg)
    # the registered gradient
    with tf.GradientTape() as tape:
        tape.watch(ops_t["source"])
        tape.watch(ops_t["recurrent_weight"])
        s = call_gru(mps, ops_t, desc)[0]
        loss = tf.reduce_sum(s)
    g = tape.gradient(loss, [ops_t["source"], ops_t["recurrent_weight"]])
    assert g[0].shape == ops_t["source"].shape
    np.testing.assert_array_equal(g[1].numpy(), 0.0)


# ---------------------------------------------------------------------------------------------
# malformed operands
# ---------------------------------------------------------------------------------------------

T0, N0, I0, H0 = 3, 2, 4, 2
G0 = 3 * H0


def _valid(rng, bi):
    D = 2 if bi else 1
    return dict(
        source=rng.normal(size=(T0, N0, I0)),
        recurrent_weight=rng.normal(size=(2, G0, H0) if bi else (G0, H0)),
        input_weight=rng.normal(size=(D * G0, I0)),
        bias=rng.normal(size=(D * G0,)),
        init_state=rng.normal(size=(N0, D * H0)),
        mask=np.ones((T0, N0, D * H0)),
        secondary_bias=rng.normal(size=(D * H0,)),
    )


# (id, bidirectional, {operand: new shape or None (= drop)}, regex the message must match)
BAD_FWD = [
    ("R_rank3_uni", False, {"recurrent_weight": (2, G0, H0)}, "recurrent_weight"),
    ("R_rank2_bi", True, {"recurrent_weight": (G0, H0)}, "recurrent_weight"),
    ("R_rows", False, {"recurrent_weight": (G0 - 1, H0)}, "recurrent_weight"),
    ("R_cols_H_mismatch", False, {"recurrent_weight": (G0, H0 + 1)}, "recurrent_weight"),
    ("R_rank1", False, {"recurrent_weight": (G0,)}, "recurrent_weight"),
    ("R_bi_dim0", True, {"recurrent_weight": (3, G0, H0)}, "recurrent_weight"),
    ("R_bi_rows", True, {"recurrent_weight": (2, G0 + 3, H0)}, "recurrent_weight"),
    ("R_4H_rows", False, {"recurrent_weight": (4 * H0, H0)}, "recurrent_weight"),
    ("W_rows", False, {"input_weight": (G0 - 1, I0)}, "input_weight"),
    ("W_rows_bi", True, {"input_weight": (G0, I0)}, "input_weight"),
    ("W_rows_uni_given_bi", False, {"input_weight": (2 * G0, I0)}, "input_weight"),
    ("W_cols", False, {"input_weight": (G0, I0 + 1)}, "input_weight|source"),
    ("W_rank3", False, {"input_weight": (1, G0, I0)}, "input_weight"),
    ("src_noW_width", False, {"input_weight": None, "source": (T0, N0, G0 + 1)}, "source"),
    ("src_noW_width_bi", True, {"input_weight": None, "source": (T0, N0, G0)}, "source"),
    ("src_rank2", False, {"source": (T0, I0)}, "source"),
    ("src_rank4", False, {"source": (T0, N0, 1, I0)}, "source"),
    ("bias_size", False, {"bias": (G0 - 1,)}, "bias"),
    ("bias_size_bi", True, {"bias": (G0,)}, "bias"),
    ("bias_rank2", False, {"bias": (1, G0)}, "bias"),
    ("init_state_width", False, {"init_state": (N0, H0 + 1)}, "init_state"),
    ("init_state_width_bi", True, {"init_state": (N0, H0)}, "init_state"),
    ("init_state_batch", False, {"init_state": (N0 + 1, H0)}, "init_state"),
    ("init_state_rank3", False, {"init_state": (1, N0, H0)}, "init_state"),
    ("mask_width", False, {"mask": (N0, H0 + 1)}, "mask"),
    ("mask_width_bi", True, {"mask": (N0, H0)}, "mask"),
    ("mask_time", False, {"mask": (T0 + 1, N0, H0)}, "mask"),
    ("mask_batch", False, {"mask": (T0, N0 + 1, H0)}, "mask"),
    ("mask_rank1", False, {"mask": (H0,)}, "mask"),
    ("mask_rank4", False, {"mask": (1, T0, N0, H0)}, "mask"),
    ("secondary_bias_size", False, {"secondary_bias": (H0 + 1,)}, "secondary_bias"),
    ("secondary_bias_size_bi", True, {"secondary_bias": (H0,)}, "secondary_bias"),
    ("secondary_bias_3H", False, {"secondary_bias": (G0,)}, "secondary_bias"),
    ("secondary_bias_rank2", True, {"secondary_bias": (2, H0)}, "secondary_bias"),
]


@pytest.mark.parametrize("bi,changes,pattern", [c[1:] for c in BAD_FWD],
                         ids=[c[0] for c in BAD_FWD])
def test_bad_input_forward(mps, rng, bi, changes, pattern):
    ops = _apply(rng, _valid(rng, bi), changes)
    desc = ref.Desc(bidirectional=bi, training=True, reset_after=True)
    with pytest.raises(tf.errors.InvalidArgumentError, match=pattern):
        outs = call_gru(mps, {k: to_t(v, F32) for k, v in ops.items()}, desc)
        [o.numpy() for o in outs]


@pytest.mark.parametrize("bi", [False, True], ids=["uni", "bi"])
def test_valid_operands_are_accepted(mps, rng, bi):
    """The base of the bad-input tables is itself valid (so each failure is the change)."""
    ops = _valid(rng, bi)
    desc = ref.Desc(bidirectional=bi, training=True, reset_after=True)
    ops_t = {k: to_t(v, F32) for k, v in ops.items()}
    outs = call_gru(mps, ops_t, desc)
    gin = _valid_grad_inputs(rng, bi)
    t = lambda a: to_t(a, F32)  # noqa: E731
    grads = call_grads(mps, ops_t, desc, t(gin["source_gradient"]), t(gin["z_state"]),
                       t(gin["output_fwd"]), state_gradient=t(gin["state_gradient"]))
    assert len(outs) == 2 and len(grads) == 6


@pytest.mark.parametrize("bi", [False, True], ids=["uni", "bi"])
def test_secondary_bias_requires_reset_after(mps, rng, bi):
    ops_t = {k: to_t(v, F32) for k, v in _valid(rng, bi).items()}
    desc = ref.Desc(bidirectional=bi, reset_after=False)
    with pytest.raises(tf.errors.InvalidArgumentError, match="secondary_bias"):
        call_gru(mps, ops_t, desc)[0].numpy()
    D = 2 if bi else 1
    t = lambda a: to_t(a, F32)  # noqa: E731
    with pytest.raises(tf.errors.InvalidArgumentError, match="secondary_bias"):
        grads = call_grads(mps, ops_t, desc, t(rng.normal(size=(T0, N0, D * H0))),
                           tf.zeros([0], F32), tf.zeros([0], F32))
        [g.numpy() for g in grads]


def _valid_grad_inputs(rng, bi):
    D = 2 if bi else 1
    return dict(source_gradient=rng.normal(size=(T0, N0, D * H0)),
                z_state=rng.uniform(size=(T0, N0, D * G0)),
                output_fwd=rng.normal(size=(T0, N0, D * H0)),
                state_gradient=rng.normal(size=(N0, D * H0)))


BAD_GRAD = [
    ("source_gradient_width", False, {"source_gradient": (T0, N0, H0 + 1)}, "source_gradient"),
    ("source_gradient_time", True, {"source_gradient": (T0 - 1, N0, 2 * H0)}, "source_gradient"),
    ("source_gradient_batch", False, {"source_gradient": (T0, N0 + 1, H0)}, "source_gradient"),
    ("source_gradient_rank2", False, {"source_gradient": (N0, H0)}, "source_gradient"),
    ("z_state_width", False, {"z_state": (T0, N0, G0 - 1)}, "z_?state"),
    ("z_state_width_bi", True, {"z_state": (T0, N0, G0)}, "z_?state"),
    ("z_state_rank2", False, {"z_state": (T0, N0 * G0)}, "z_?state"),
    ("output_fwd_shape", False, {"output_fwd": (T0, N0, H0 + 1)}, "output_fwd"),
    ("output_fwd_shape_bi", True, {"output_fwd": (T0, N0, H0)}, "output_fwd"),
    ("state_gradient_shape", False, {"state_gradient": (N0, H0 + 1)}, "state_gradient"),
    ("state_gradient_bi", True, {"state_gradient": (N0, H0)}, "state_gradient"),
    ("state_gradient_rank3", False, {"state_gradient": (1, N0, H0)}, "state_gradient"),
    ("R_in_gradients", True, {"recurrent_weight": (G0, H0)}, "recurrent_weight"),
    ("W_in_gradients", False, {"input_weight": (G0 + 1, I0)}, "input_weight"),
    ("bias_in_gradients", False, {"bias": (G0 + 1,)}, "bias"),
    ("init_state_in_gradients", True, {"init_state": (N0, H0)}, "init_state"),
    ("mask_in_gradients", False, {"mask": (N0, 2 * H0)}, "mask"),
    ("secondary_bias_in_gradients", False, {"secondary_bias": (H0 - 1,)}, "secondary_bias"),
    ("src_noW_in_gradients", False, {"input_weight": None}, "source"),
]


@pytest.mark.parametrize("bi,changes,pattern", [c[1:] for c in BAD_GRAD],
                         ids=[c[0] for c in BAD_GRAD])
def test_bad_input_gradients(mps, rng, bi, changes, pattern):
    ops = _valid(rng, bi)
    gin = _valid_grad_inputs(rng, bi)
    gin = _apply(rng, gin, {k: v for k, v in changes.items() if k in gin})
    ops = _apply(rng, ops, {k: v for k, v in changes.items() if k not in gin})
    t = lambda a: to_t(a, F32)  # noqa: E731
    desc = ref.Desc(bidirectional=bi, training=True, reset_after=True)
    with pytest.raises(tf.errors.InvalidArgumentError, match=pattern):
        grads = call_grads(mps, {k: t(v) for k, v in ops.items()}, desc,
                           t(gin["source_gradient"]), t(gin["z_state"]),
                           t(gin["output_fwd"]), state_gradient=t(gin["state_gradient"]))
        [g.numpy() for g in grads]


OPTIONAL_FWD = ("input_weight", "bias", "init_state", "mask", "secondary_bias")


@pytest.mark.parametrize("operand", OPTIONAL_FWD + ("state_gradient",))
def test_optional_operand_with_two_tensors(mps, rng, operand):
    """The raw ops take each optional operand as a list of 0 or 1 tensors; 2 is an error."""
    from tf_rnn_ops._loader import load_library
    lib = load_library()
    ops_t = {k: to_t(v, F32) for k, v in _valid(rng, False).items()}
    attrs = ref.Desc(training=True, reset_after=True).kwargs()
    lists = {k: [ops_t[k]] for k in OPTIONAL_FWD}
    gin = {k: to_t(v, F32) for k, v in _valid_grad_inputs(rng, False).items()}
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
