"""tf_rnn_ops.mps: MPSGraph-style LSTM (mps.lstm) and LSTMGradients (mps.lstm_gradients).

Everything is checked against the independent float64 reference in tests/mps_reference.py
(docs/SEMANTICS.md §8), which is itself checked against keras.layers.LSTM / Bidirectional
(float64):

* forward outputs [state, cell?, z_state?] for pairwise-covering combinations of every
  descriptor field (every gate activation and `activation` through all five values, both gate
  orders, reverse, bidirectional), every optional operand absent / present, mask [N,DH] and
  [T,N,DH], T=1, N=1, in float64, float32, float16 and bfloat16;
* lstm_gradients vs tape autodiff of the reference (state_gradient / cell_gradient absent and
  present), plus float64 central differences of the op's own forward on small cases;
* the registered gradient of mps.lstm (eager and tf.function), including gradients arriving at
  the cell output; a gradient arriving at z_state is an error;
* malformed operands raise InvalidArgumentError naming the operand.
"""

import itertools

import numpy as np
import pytest
import tensorflow as tf

import mps_reference as ref
from lstm_util import Tol, pairwise
from mps_test_util import (_ABBR, _apply, _mask, assert_close, np64, rng,  # noqa: F401 (rng: fixture)
                           round_to, to_t)

F16, BF16, F32, F64 = tf.float16, tf.bfloat16, tf.float32, tf.float64
DTYPE_IDS = {F64: "f64", F32: "f32", F16: "f16", BF16: "bf16"}
ACTS = ref.ACTIVATION_NAMES
ACT_FIELDS = ("input_gate_activation", "forget_gate_activation", "cell_gate_activation",
              "output_gate_activation", "activation")


FWD_TOL = {F64: Tol(1e-10, 1e-10), F32: Tol(1e-5, 1e-5), F16: Tol(2e-2, 2e-2),
           BF16: Tol(5e-2, 5e-2)}
GRAD_TOL = FWD_TOL
NUMERIC_TOL = Tol(1e-6, 1e-6)
NUMERIC_DELTA = 1e-6

# (T, N, I, H): T=1, N=1, I=1, H=1, I != H, I == H.
SIZES = [(1, 3, 4, 2), (4, 1, 3, 3), (3, 2, 5, 4), (5, 3, 1, 1), (2, 4, 3, 3), (6, 2, 2, 5)]


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
    return module


BASE_FACTORS = {
    "size": SIZES,
    "bidirectional": [False, True],
    "reverse": [False, True],
    "forget_gate_last": [False, True],
    "input_gate_activation": list(ACTS),
    "forget_gate_activation": list(ACTS),
    "cell_gate_activation": list(ACTS),
    "output_gate_activation": list(ACTS),
    "activation": list(ACTS),
    "input_weight": [False, True],
    "bias": [False, True],
    "init_state": [False, True],
    "init_cell": [False, True],
    "peephole": [False, True],
    "mask": [None, "nh", "tnh"],
}
FWD_CASES = pairwise(dict(BASE_FACTORS, produce_cell=[False, True], training=[False, True]),
                     seed=1)
GRAD_CASES = pairwise(dict(BASE_FACTORS, state_gradient=[False, True],
                           cell_gradient=[False, True]), seed=2)
REG_CASES = pairwise(dict(BASE_FACTORS, produce_cell=[False, True], training=[False, True]),
                     seed=3)

def case_id(c):
    T, N, I, H = c["size"]
    s = f"T{T}N{N}I{I}H{H}-"
    s += "bi" if c["bidirectional"] else ("rev" if c["reverse"] else "fwd")
    if c["bidirectional"] and c["reverse"]:
        s += "+rev"
    s += "-izfo" if c["forget_gate_last"] else "-ifzo"
    s += "-" + "".join(_ABBR[c[f]] for f in ACT_FIELDS)
    for k, a in (("input_weight", "W"), ("bias", "b"), ("init_state", "h0"),
                 ("init_cell", "c0"), ("peephole", "p"), ("produce_cell", "C"),
                 ("training", "Z"), ("state_gradient", "gh"), ("cell_gradient", "gc")):
        if c.get(k):
            s += "-" + a
    if c["mask"]:
        s += "-m" + c["mask"]
    return s


def desc_of(case, **over):
    fields = {k: case[k] for k in ("reverse", "bidirectional", "forget_gate_last") + ACT_FIELDS}
    fields["produce_cell"] = case.get("produce_cell", False)
    fields["training"] = case.get("training", False)
    fields.update(over)
    return ref.Desc(**fields)


def make_operands(rng, case):
    """float64 numpy operands (None = not given) for a case.  Gate pre-activations are O(0.5):
    enough to exercise every nonlinearity, small enough that unbounded gates ('none', 'relu',
    with the peephole making f depend on c) do not blow the cell up over T steps."""
    T, N, I, H = case["size"]
    D = 2 if case["bidirectional"] else 1
    G = 4 * H
    ops = dict.fromkeys(ref.OPERAND_NAMES)
    if case["input_weight"]:
        ops["source"] = rng.normal(size=(T, N, I))
        ops["input_weight"] = 0.5 * rng.normal(size=(D * G, I)) / np.sqrt(I)
    else:
        ops["source"] = 0.5 * rng.normal(size=(T, N, D * G))
    ops["recurrent_weight"] = 0.5 * rng.normal(size=(2, G, H) if D == 2 else (G, H)) / np.sqrt(H)
    if case["bias"]:
        ops["bias"] = 0.3 * rng.normal(size=(D * G,))
    if case["init_state"]:
        ops["init_state"] = rng.uniform(-1.0, 1.0, size=(N, D * H))
    if case["init_cell"]:
        ops["init_cell"] = 0.7 * rng.normal(size=(N, D * H))
    if case["peephole"]:
        ops["peephole"] = 0.3 * rng.normal(size=(2, G) if D == 2 else (G,))
    if case["mask"] == "nh":
        ops["mask"] = _mask(rng, (N, D * H))
    elif case["mask"] == "tnh":
        ops["mask"] = _mask(rng, (T, N, D * H))
    return ops


def mps_desc(mps, desc):
    return mps.LSTMDescriptor(**desc.kwargs())


def call_lstm(mps, ops_t, desc):
    return mps.lstm(ops_t["source"], ops_t["recurrent_weight"],
                    input_weight=ops_t.get("input_weight"), bias=ops_t.get("bias"),
                    init_state=ops_t.get("init_state"), init_cell=ops_t.get("init_cell"),
                    mask=ops_t.get("mask"), peephole=ops_t.get("peephole"),
                    descriptor=mps_desc(mps, desc))


def call_grads(mps, ops_t, desc, source_gradient, z_state, cell_output_fwd,
               state_gradient=None, cell_gradient=None):
    return mps.lstm_gradients(
        ops_t["source"], ops_t["recurrent_weight"], source_gradient, z_state, cell_output_fwd,
        state_gradient=state_gradient, cell_gradient=cell_gradient,
        input_weight=ops_t.get("input_weight"), bias=ops_t.get("bias"),
        init_state=ops_t.get("init_state"), init_cell=ops_t.get("init_cell"),
        mask=ops_t.get("mask"), peephole=ops_t.get("peephole"), descriptor=mps_desc(mps, desc))


def output_names(desc):
    return ["state"] + (["cell"] if desc.produce_cell else []) + (
        ["z_state"] if desc.training else [])


def finals_from_sequences(seq, desc):
    """h_final / c_final [N, DH] from a [T, N, DH] sequence: the last step of each direction."""
    if desc.bidirectional:
        H = seq.shape[-1] // 2
        return np.concatenate([seq[-1, :, :H], seq[0, :, H:]], axis=-1)
    return seq[0] if desc.reverse else seq[-1]


# ---------------------------------------------------------------------------------------------
# the reference itself (needs no plugin op)
# ---------------------------------------------------------------------------------------------

def _keras_case(rng, T, N, I, H):
    return dict(x=rng.normal(size=(T, N, I)), W=rng.normal(size=(4 * H, I)) / np.sqrt(I),
                R=rng.normal(size=(4 * H, H)) / np.sqrt(H), b=0.5 * rng.normal(size=(4 * H,)),
                h0=rng.uniform(-1, 1, size=(N, H)), c0=rng.normal(size=(N, H)))


@pytest.mark.parametrize("go_backwards", [False, True], ids=["fwd", "backwards"])
def test_reference_vs_keras_lstm(rng, go_backwards):
    keras = pytest.importorskip("keras")
    T, N, I, H = 5, 3, 4, 3
    k = _keras_case(rng, T, N, I, H)
    layer = keras.layers.LSTM(H, return_sequences=True, return_state=True, dtype="float64",
                              go_backwards=go_backwards)
    layer.build((N, T, I))
    layer.set_weights([k["W"].T, k["R"].T, k["b"]])
    x_bt = tf.constant(np.transpose(k["x"], (1, 0, 2)))
    wh = rng.normal(size=(N, T, H))
    with tf.GradientTape() as tape:
        seq, hf, cf = layer(x_bt, initial_state=[tf.constant(k["h0"]), tf.constant(k["c0"])])
        loss = tf.reduce_sum(seq * wh)
    gk, grk = tape.gradient(loss, [layer.weights[0], layer.weights[1]])
    seq = np.transpose(seq.numpy(), (1, 0, 2))
    wh_t = np.transpose(wh, (1, 0, 2))
    if go_backwards:                  # Keras returns the sequence in processing order
        seq, wh_t = seq[::-1], wh_t[::-1]
    desc = ref.Desc(reverse=go_backwards)
    ops = dict(source=k["x"], recurrent_weight=k["R"], input_weight=k["W"], bias=k["b"],
               init_state=k["h0"], init_cell=k["c0"])
    r = ref.lstm_forward(desc=desc, **ops)
    assert_close(r["state"].numpy(), seq, Tol(1e-12, 1e-12), "state")
    assert_close(r["h_final"].numpy(), hf.numpy(), Tol(1e-12, 1e-12), "h_final")
    assert_close(r["c_final"].numpy(), cf.numpy(), Tol(1e-12, 1e-12), "c_final")
    grads, names = ref.reference_vjp(ops, desc, state_cot=wh_t)
    g = dict(zip(names, grads))
    assert_close(g["input_weight"], gk.numpy().T, Tol(1e-10, 1e-10), "d_input_weight")
    assert_close(g["recurrent_weight"], grk.numpy().T, Tol(1e-10, 1e-10), "d_recurrent_weight")


def test_reference_vs_keras_bidirectional(rng):
    keras = pytest.importorskip("keras")
    T, N, I, H = 4, 2, 3, 2
    kf, kb = _keras_case(rng, T, N, I, H), _keras_case(rng, T, N, I, H)
    layer = keras.layers.Bidirectional(
        keras.layers.LSTM(H, return_sequences=True, return_state=True, dtype="float64"),
        dtype="float64")
    x_bt = tf.constant(np.transpose(kf["x"], (1, 0, 2)))
    layer.build((N, T, I))
    layer.forward_layer.set_weights([kf["W"].T, kf["R"].T, kf["b"]])
    layer.backward_layer.set_weights([kb["W"].T, kb["R"].T, kb["b"]])
    out = layer(x_bt, initial_state=[tf.constant(kf["h0"]), tf.constant(kf["c0"]),
                                     tf.constant(kb["h0"]), tf.constant(kb["c0"])])
    seq, fh, fc, bh, bc = [o.numpy() for o in out]
    r = ref.lstm_forward(
        kf["x"], np.stack([kf["R"], kb["R"]]), np.concatenate([kf["W"], kb["W"]]),
        np.concatenate([kf["b"], kb["b"]]), np.concatenate([kf["h0"], kb["h0"]], -1),
        np.concatenate([kf["c0"], kb["c0"]], -1), desc=ref.Desc(bidirectional=True))
    tol = Tol(1e-12, 1e-12)
    assert_close(r["state"].numpy(), np.transpose(seq, (1, 0, 2)), tol, "state")
    assert_close(r["h_final"].numpy(), np.concatenate([fh, bh], -1), tol, "h_final")
    assert_close(r["c_final"].numpy(), np.concatenate([fc, bc], -1), tol, "c_final")


def test_reference_activations_and_gate_order():
    x = tf.constant([-3.0, -2.5, -1.0, 0.0, 0.7, 2.5, 4.0], tf.float64)
    hs = ref.activate("hard_sigmoid", x).numpy()
    np.testing.assert_allclose(hs, [0.0, 0.0, 0.3, 0.5, 0.64, 1.0, 1.0], atol=1e-15)
    np.testing.assert_allclose(ref.activate("relu", x).numpy(), np.maximum(x.numpy(), 0))
    np.testing.assert_allclose(ref.activate("none", x).numpy(), x.numpy())
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


def test_pairwise_covers_every_activation():
    for cases in (FWD_CASES, GRAD_CASES, REG_CASES):
        for f in ACT_FIELDS:
            assert {c[f] for c in cases} == set(ACTS)
        for a, b in itertools.combinations(ACT_FIELDS, 2):
            assert {(c[a], c[b]) for c in cases} == set(itertools.product(ACTS, ACTS))


# ---------------------------------------------------------------------------------------------
# forward
# ---------------------------------------------------------------------------------------------

def test_descriptor_defaults(mps):
    d = mps.LSTMDescriptor()
    for k, v in ref.Desc().kwargs().items():
        assert getattr(d, k) == v, k


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
    outs = call_lstm(mps, ops_t, desc)
    names = output_names(desc)
    assert len(outs) == len(names), f"{len(outs)} outputs, expected {names}"
    expected = ref.forward_outputs({k: round_to(v, dtype) for k, v in ops.items()}, desc)
    for o, e, n in zip(outs, expected, names):
        assert o.dtype == dtype, n
        assert_close(np64(o), e.numpy(), FWD_TOL[dtype], n)


@pytest.mark.parametrize("case", FWD_CASES[::5], ids=case_id)
def test_forward_tf_function(mps, rng, case):
    ops = make_operands(rng, case)
    desc = desc_of(case, produce_cell=True, training=True)
    ops_t = {k: to_t(v, F64) for k, v in ops.items()}
    given = {k: v for k, v in ops_t.items() if v is not None}

    @tf.function
    def f(**kw):
        return call_lstm(mps, kw, desc)

    outs = f(**given)
    expected = ref.forward_outputs(ops, desc)
    for o, e, n in zip(outs, expected, output_names(desc)):
        assert_close(o.numpy(), e.numpy(), FWD_TOL[F64], n)


@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
def test_reverse_ignored_when_bidirectional_and_reverse_differs(mps, rng, bidirectional):
    case = dict(size=(4, 2, 3, 2), bidirectional=bidirectional, reverse=False,
                forget_gate_last=False, input_weight=True, bias=True, init_state=True,
                init_cell=True, peephole=True, mask="tnh",
                **dict(zip(ACT_FIELDS, ("sigmoid", "sigmoid", "tanh", "sigmoid", "tanh"))))
    ops_t = {k: to_t(v, F64) for k, v in make_operands(rng, case).items()}
    a = call_lstm(mps, ops_t, desc_of(case, reverse=False))[0].numpy()
    b = call_lstm(mps, ops_t, desc_of(case, reverse=True))[0].numpy()
    if bidirectional:
        np.testing.assert_array_equal(a, b)
    else:
        assert np.abs(a - b).max() > 1e-3


# ---------------------------------------------------------------------------------------------
# lstm_gradients
# ---------------------------------------------------------------------------------------------

def _grad_inputs(rng, case, ops):
    T, N, _, H = case["size"]
    D = 2 if case["bidirectional"] else 1
    sg = rng.normal(size=(T, N, D * H))
    stg = rng.normal(size=(N, D * H)) if case.get("state_gradient") else None
    cg = rng.normal(size=(N, D * H)) if case.get("cell_gradient") else None
    return sg, stg, cg


def _check_lstm_gradients(mps, rng, case, dtype):
    ops = make_operands(rng, case)
    sg, stg, cg = _grad_inputs(rng, case, ops)
    desc = desc_of(case, produce_cell=True, training=True)
    ops_t = {k: to_t(v, dtype) for k, v in ops.items()}
    state, cell, z = call_lstm(mps, ops_t, desc)
    grads = call_grads(mps, ops_t, desc, to_t(sg, dtype), z, cell,
                       state_gradient=to_t(stg, dtype), cell_gradient=to_t(cg, dtype))
    r = lambda a: round_to(a, dtype)  # noqa: E731
    expected, names = ref.reference_vjp({k: r(v) for k, v in ops.items()}, desc,
                                        state_cot=r(sg), final_state_cot=r(stg),
                                        final_cell_cot=r(cg))
    assert len(grads) == len(names), f"{len(grads)} gradients, expected {names}"
    for g, e, n in zip(grads, expected, names):
        assert g.dtype == dtype, n
        assert_close(np64(g), e, GRAD_TOL[dtype], "d_" + n)


@pytest.mark.parametrize("case", GRAD_CASES, ids=case_id)
@pytest.mark.parametrize("dtype", [F64, F32], ids=DTYPE_IDS.get)
def test_lstm_gradients(mps, rng, case, dtype):
    _check_lstm_gradients(mps, rng, case, dtype)


@pytest.mark.parametrize("case", GRAD_CASES[::3], ids=case_id)
@pytest.mark.parametrize("dtype", [F16, BF16], ids=DTYPE_IDS.get)
def test_lstm_gradients_half(mps, rng, case, dtype):
    _check_lstm_gradients(mps, rng, case, dtype)


NUMERIC_CASES = [
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


@pytest.mark.parametrize("case", NUMERIC_CASES, ids=case_id)
def test_lstm_gradients_numeric(mps, rng, case):
    """Float64 central differences of L computed from the op's own forward."""
    ops = make_operands(rng, case)
    sg, stg, cg = _grad_inputs(rng, case, ops)
    desc = desc_of(case, produce_cell=True, training=True)

    def loss(o):
        state, cell, _ = call_lstm(mps, {k: to_t(v, F64) for k, v in o.items()}, desc)
        state, cell = state.numpy(), cell.numpy()
        total = np.sum(sg * state)
        if stg is not None:
            total += np.sum(stg * finals_from_sequences(state, desc))
        if cg is not None:
            total += np.sum(cg * finals_from_sequences(cell, desc))
        return total

    ops_t = {k: to_t(v, F64) for k, v in ops.items()}
    state, cell, z = call_lstm(mps, ops_t, desc)
    grads = call_grads(mps, ops_t, desc, to_t(sg, F64), z, cell, state_gradient=to_t(stg, F64),
                       cell_gradient=to_t(cg, F64))
    expected_ref, names = ref.reference_vjp(ops, desc, state_cot=sg, final_state_cot=stg,
                                            final_cell_cot=cg)
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
# registered gradient of mps.lstm
# ---------------------------------------------------------------------------------------------

DIFF_OPERANDS = ("source", "recurrent_weight", "input_weight", "bias", "init_state",
                 "init_cell", "peephole")


def _check_registered(mps, rng, case, dtype, use_function):
    ops = make_operands(rng, case)
    desc = desc_of(case)
    T, N, _, H = case["size"]
    D = 2 if case["bidirectional"] else 1
    wh = rng.normal(size=(T, N, D * H))
    wc = rng.normal(size=(T, N, D * H)) if desc.produce_cell else None
    ops_t = {k: to_t(v, dtype) for k, v in ops.items()}
    names = [n for n in ref.GRAD_ORDER if ops_t.get(n) is not None]

    def grads_of(ops_t):
        with tf.GradientTape() as tape:
            for n in names:
                tape.watch(ops_t[n])
            outs = call_lstm(mps, ops_t, desc)
            loss = tf.reduce_sum(tf.cast(outs[0], F64) * wh)
            if desc.produce_cell:
                loss += tf.reduce_sum(tf.cast(outs[1], F64) * wc)
        return tape.gradient(loss, [ops_t[n] for n in names])

    if use_function:
        given = {k: v for k, v in ops_t.items() if v is not None}
        grads = tf.function(lambda **kw: grads_of(kw))(**given)
    else:
        grads = grads_of(ops_t)
    expected, enames = ref.reference_vjp({k: round_to(v, dtype) for k, v in ops.items()}, desc,
                                         state_cot=wh, cell_cot=wc)
    assert enames == names
    for g, e, n in zip(grads, expected, names):
        assert g is not None, f"no gradient for {n}"
        assert_close(np64(g), e, GRAD_TOL[dtype], "d_" + n)


@pytest.mark.parametrize("case", REG_CASES, ids=case_id)
def test_registered_gradient_eager(mps, rng, case):
    _check_registered(mps, rng, case, F64, False)


@pytest.mark.parametrize("case", REG_CASES[1::3], ids=case_id)
def test_registered_gradient_tf_function(mps, rng, case):
    _check_registered(mps, rng, case, F64, True)


@pytest.mark.parametrize("case", REG_CASES[2::4], ids=case_id)
@pytest.mark.parametrize("dtype", [F32, F16], ids=DTYPE_IDS.get)
def test_registered_gradient_low_precision(mps, rng, case, dtype):
    _check_registered(mps, rng, case, dtype, False)


@pytest.mark.parametrize("use_function", [False, True], ids=["eager", "tf_function"])
def test_registered_gradient_into_z_state_raises(mps, rng, use_function):
    case = dict(REG_CASES[0], size=(3, 2, 3, 2), training=True, produce_cell=True)
    ops_t = {k: to_t(v, F64) for k, v in make_operands(rng, case).items()}
    desc = desc_of(case)

    def run(src, rw):
        with tf.GradientTape() as tape:
            tape.watch([src, rw])
            outs = call_lstm(mps, dict(ops_t, source=src, recurrent_weight=rw), desc)
            loss = tf.reduce_sum(outs[0]) + tf.reduce_sum(outs[2] * outs[2])
        return tape.gradient(loss, [src, rw])

    fn = tf.function(run) if use_function else run
    with pytest.raises(Exception):
        g = fn(ops_t["source"], ops_t["recurrent_weight"])
        [t.numpy() for t in g]


# ---------------------------------------------------------------------------------------------
# malformed operands
# ---------------------------------------------------------------------------------------------

T0, N0, I0, H0 = 3, 2, 4, 2
G0 = 4 * H0


def _valid(rng, bi):
    D = 2 if bi else 1
    return dict(
        source=rng.normal(size=(T0, N0, I0)),
        recurrent_weight=rng.normal(size=(2, G0, H0) if bi else (G0, H0)),
        input_weight=rng.normal(size=(D * G0, I0)),
        bias=rng.normal(size=(D * G0,)),
        init_state=rng.normal(size=(N0, D * H0)),
        init_cell=rng.normal(size=(N0, D * H0)),
        mask=np.ones((T0, N0, D * H0)),
        peephole=rng.normal(size=(2, G0) if bi else (G0,)),
    )


# (id, bidirectional, {operand: new shape or None (= drop)}, regex the message must match)
BAD_FWD = [
    ("R_rank3_uni", False, {"recurrent_weight": (2, G0, H0)}, "recurrent_weight"),
    ("R_rank2_bi", True, {"recurrent_weight": (G0, H0)}, "recurrent_weight"),
    ("R_rows", False, {"recurrent_weight": (G0 - 1, H0)}, "recurrent_weight"),
    ("R_rank1", False, {"recurrent_weight": (G0,)}, "recurrent_weight"),
    ("R_bi_dim0", True, {"recurrent_weight": (3, G0, H0)}, "recurrent_weight"),
    ("R_bi_rows", True, {"recurrent_weight": (2, G0 + 4, H0)}, "recurrent_weight"),
    ("W_rows", False, {"input_weight": (G0 - 1, I0)}, "input_weight"),
    ("W_rows_bi", True, {"input_weight": (G0, I0)}, "input_weight"),
    ("W_cols", False, {"input_weight": (G0, I0 + 1)}, "input_weight|source"),
    ("W_rank3", False, {"input_weight": (1, G0, I0)}, "input_weight"),
    ("src_noW_width", False, {"input_weight": None, "source": (T0, N0, G0 + 1)}, "source"),
    ("src_noW_width_bi", True, {"input_weight": None, "source": (T0, N0, G0)}, "source"),
    ("src_rank2", False, {"source": (T0, I0)}, "source"),
    ("src_rank4", False, {"source": (T0, N0, 1, I0)}, "source"),
    ("bias_size", False, {"bias": (G0 - 1,)}, "bias"),
    ("bias_size_bi", True, {"bias": (G0,)}, "bias"),
    ("bias_rank2", False, {"bias": (1, G0)}, "bias"),
    ("peephole_rank2_uni", False, {"peephole": (2, G0)}, "peephole"),
    ("peephole_rank1_bi", True, {"peephole": (G0,)}, "peephole"),
    ("peephole_size", False, {"peephole": (G0 + 1,)}, "peephole"),
    ("init_state_width", False, {"init_state": (N0, H0 + 1)}, "init_state"),
    ("init_state_width_bi", True, {"init_state": (N0, H0)}, "init_state"),
    ("init_state_batch", False, {"init_state": (N0 + 1, H0)}, "init_state"),
    ("init_state_rank3", False, {"init_state": (1, N0, H0)}, "init_state"),
    ("init_cell_width", False, {"init_cell": (N0, H0 - 1)}, "init_cell"),
    ("init_cell_batch_bi", True, {"init_cell": (N0 - 1, 2 * H0)}, "init_cell"),
    ("mask_width", False, {"mask": (N0, H0 + 1)}, "mask"),
    ("mask_width_bi", True, {"mask": (N0, H0)}, "mask"),
    ("mask_time", False, {"mask": (T0 + 1, N0, H0)}, "mask"),
    ("mask_batch", False, {"mask": (T0, N0 + 1, H0)}, "mask"),
    ("mask_rank1", False, {"mask": (H0,)}, "mask"),
    ("mask_rank4", False, {"mask": (1, T0, N0, H0)}, "mask"),
]


@pytest.mark.parametrize("bi,changes,pattern", [c[1:] for c in BAD_FWD],
                         ids=[c[0] for c in BAD_FWD])
def test_bad_input_forward(mps, rng, bi, changes, pattern):
    ops = _apply(rng, _valid(rng, bi), changes)
    desc = ref.Desc(bidirectional=bi, produce_cell=True, training=True)
    with pytest.raises(tf.errors.InvalidArgumentError, match=pattern):
        outs = call_lstm(mps, {k: to_t(v, F32) for k, v in ops.items()}, desc)
        [o.numpy() for o in outs]


def _valid_grad_inputs(rng, bi):
    D = 2 if bi else 1
    return dict(source_gradient=rng.normal(size=(T0, N0, D * H0)),
                z_state=rng.uniform(size=(T0, N0, D * G0)),
                cell_output_fwd=rng.normal(size=(T0, N0, D * H0)),
                state_gradient=rng.normal(size=(N0, D * H0)),
                cell_gradient=rng.normal(size=(N0, D * H0)))


BAD_GRAD = [
    ("source_gradient_width", False, {"source_gradient": (T0, N0, H0 + 1)}, "source_gradient"),
    ("source_gradient_time", True, {"source_gradient": (T0 - 1, N0, 2 * H0)}, "source_gradient"),
    ("source_gradient_rank2", False, {"source_gradient": (N0, H0)}, "source_gradient"),
    ("z_state_width", False, {"z_state": (T0, N0, G0 - 1)}, "z_?state"),
    ("z_state_width_bi", True, {"z_state": (T0, N0, G0)}, "z_?state"),
    ("cell_output_fwd_shape", False, {"cell_output_fwd": (T0, N0, H0 + 1)},
     "cell_output(_fwd)?"),
    ("state_gradient_shape", False, {"state_gradient": (N0, H0 + 1)}, "state_gradient"),
    ("cell_gradient_shape", True, {"cell_gradient": (N0, H0)}, "cell_gradient"),
    ("R_in_gradients", True, {"recurrent_weight": (G0, H0)}, "recurrent_weight"),
    ("W_in_gradients", False, {"input_weight": (G0 + 1, I0)}, "input_weight"),
    ("mask_in_gradients", False, {"mask": (N0, 2 * H0)}, "mask"),
    ("peephole_in_gradients", False, {"peephole": (G0 - 1,)}, "peephole"),
]


@pytest.mark.parametrize("bi,changes,pattern", [c[1:] for c in BAD_GRAD],
                         ids=[c[0] for c in BAD_GRAD])
def test_bad_input_gradients(mps, rng, bi, changes, pattern):
    ops = _valid(rng, bi)
    gin = _valid_grad_inputs(rng, bi)
    gin = _apply(rng, gin, {k: v for k, v in changes.items() if k in gin})
    ops = _apply(rng, ops, {k: v for k, v in changes.items() if k not in gin})
    t = lambda a: to_t(a, F32)  # noqa: E731
    desc = ref.Desc(bidirectional=bi, produce_cell=True, training=True)
    with pytest.raises(tf.errors.InvalidArgumentError, match=pattern):
        grads = call_grads(mps, {k: t(v) for k, v in ops.items()}, desc,
                           t(gin["source_gradient"]), t(gin["z_state"]),
                           t(gin["cell_output_fwd"]), state_gradient=t(gin["state_gradient"]),
                           cell_gradient=t(gin["cell_gradient"]))
        [g.numpy() for g in grads]


def test_bad_activation_name(mps, rng):
    ops_t = {k: to_t(v, F32) for k, v in _valid(rng, False).items()}
    with pytest.raises((ValueError, TypeError, tf.errors.InvalidArgumentError)):
        d = mps.LSTMDescriptor(activation="gelu")
        mps.lstm(ops_t["source"], ops_t["recurrent_weight"],
                 input_weight=ops_t["input_weight"], descriptor=d)[0].numpy()



# ---------------------------------------------------------------------------------------------
# extra shapes and graph-mode details
# ---------------------------------------------------------------------------------------------

def _full_case(size, bidirectional, **over):
    c = dict(size=size, bidirectional=bidirectional, reverse=False, forget_gate_last=False,
             input_weight=True, bias=True, init_state=True, init_cell=True, peephole=True,
             mask="tnh", state_gradient=True, cell_gradient=True,
             **dict(zip(ACT_FIELDS, ("sigmoid", "sigmoid", "tanh", "sigmoid", "tanh"))))
    c.update(over)
    return c


EXTRA_CASES = [
    _full_case((1, 1, 2, 3), False),                                   # T = N = 1
    _full_case((1, 1, 3, 2), True, input_weight=False, mask="nh"),
    _full_case((3, 17, 33, 19), False, reverse=True, forget_gate_last=True),   # past SIMD widths
    _full_case((2, 9, 16, 16), True, activation="hard_sigmoid", cell_gate_activation="relu"),
]


@pytest.mark.parametrize("case", EXTRA_CASES, ids=case_id)
@pytest.mark.parametrize("dtype", [F64, F32], ids=DTYPE_IDS.get)
def test_extra_shapes_forward_and_gradients(mps, rng, case, dtype):
    ops = make_operands(rng, case)
    desc = desc_of(case, produce_cell=True, training=True)
    outs = call_lstm(mps, {k: to_t(v, dtype) for k, v in ops.items()}, desc)
    expected = ref.forward_outputs({k: round_to(v, dtype) for k, v in ops.items()}, desc)
    for o, e, n in zip(outs, expected, output_names(desc)):
        assert_close(np64(o), e.numpy(), FWD_TOL[dtype], n)
    _check_lstm_gradients(mps, rng, case, dtype)


def test_tf_function_unknown_time_and_batch(mps, rng):
    """Traced once with [None, None, I] / [None, DH] signatures, run at two (T, N)."""
    H, I = 3, 4
    desc = ref.Desc(bidirectional=True, produce_cell=True, training=True)
    spec = tf.TensorSpec
    sig = [spec([None, None, I], F64), spec([2, 4 * H, H], F64), spec([8 * H, I], F64),
           spec([None, 2 * H], F64), spec([None, None, 2 * H], F64)]

    @tf.function(input_signature=sig)
    def f(x, R, W, h0, m):
        return call_lstm(mps, dict(source=x, recurrent_weight=R, input_weight=W,
                                   init_state=h0, mask=m), desc)

    R = 0.5 * rng.normal(size=(2, 4 * H, H))
    W = 0.5 * rng.normal(size=(8 * H, I))
    for T, N in ((4, 3), (2, 5)):
        x, h0 = rng.normal(size=(T, N, I)), rng.normal(size=(N, 2 * H))
        m = _mask(rng, (T, N, 2 * H))
        outs = f(*[tf.constant(a) for a in (x, R, W, h0, m)])
        expected = ref.forward_outputs(dict(source=x, recurrent_weight=R, input_weight=W,
                                            init_state=h0, mask=m), desc)
        for o, e, n in zip(outs, expected, output_names(desc)):
            assert_close(o.numpy(), e.numpy(), FWD_TOL[F64], n)
    assert f.experimental_get_tracing_count() == 1


@pytest.mark.parametrize("use_function", [False, True], ids=["eager", "tf_function"])
def test_registered_gradient_cell_only_and_unused_z_state(mps, rng, use_function):
    """Loss on the cell output only (nothing arrives at state), training=True (z_state unused)."""
    case = _full_case((4, 3, 2, 3), True, forget_gate_last=True)
    ops = make_operands(rng, case)
    desc = desc_of(case, produce_cell=True, training=True)
    wc = rng.normal(size=(4, 3, 6))
    ops_t = {k: to_t(v, F64) for k, v in ops.items()}
    names = [n for n in ref.GRAD_ORDER if ops_t.get(n) is not None]

    def grads_of(**kw):
        with tf.GradientTape() as tape:
            for n in names:
                tape.watch(kw[n])
            outs = call_lstm(mps, kw, desc)
            loss = tf.reduce_sum(outs[1] * wc)
        return tape.gradient(loss, [kw[n] for n in names])

    fn = tf.function(grads_of) if use_function else grads_of
    grads = fn(**ops_t)
    expected, _ = ref.reference_vjp(ops, desc, cell_cot=wc)
    for g, e, n in zip(grads, expected, names):
        assert_close(g.numpy(), e, GRAD_TOL[F64], "d_" + n)
