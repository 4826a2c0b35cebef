"""CudnnRNN op family, backward (docs/SEMANTICS.md §1.2, §3.3, §4).

* CudnnRNNBackprop, V2, V3 (fed with the matching forward's outputs, reserve_space and
  host_reserved) vs tf.GradientTape through the float64 reference: input, input_h, input_c and
  params gradients, weighted random upstream gradients on output, output_h and output_c;
* V3 with sequence lengths (including 0 and T), time_major=False, num_proj;
* registered gradients of TfRnn>CudnnRNN / V2 / V3, eager and in tf.function;
* float64 central differences of our forward vs our backward (also with dropout, same seeds);
* Keras 3 LSTM / GRU(reset_after=True) / SimpleRNN gradients (autodiff through Keras) vs ours.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import cudnn_reference as cref
import lstm_util as U
import test_cudnn_rnn as C

F16, BF16, F32, F64 = tf.float16, tf.bfloat16, tf.float32, tf.float64
MODES = cref.MODES
DIRS = cref.DIRECTIONS
VERSIONS = ("", "V2", "V3")
# max |ours - ref| <= tol * max(1, max |ref|)
GRAD_TOL = {F64: 1e-9, F32: 1e-4, F16: 5e-2, BF16: 2e-1}
GRAD_NAMES = ("input_backprop", "input_h_backprop", "input_c_backprop", "params_backprop")


def ref_grads(x, h0, c0, params, kw, dy, dh, dc, dtype=F64, **more):
    """Reference (outputs, [dx, dh0, dc0 or None, dparams]) for loss
    <dy, output> + <dh, output_h> + <dc, output_c> (lstm), on inputs rounded to dtype."""
    lstm = kw["mode"] == "lstm"
    ts = [tf.constant(U.round_to(a, dtype)) for a in (x, h0, c0, params)]
    with tf.GradientTape() as tape:
        tape.watch(ts)
        out = cref.cudnn_rnn_ref(ts[0], ts[1], ts[2] if lstm else None, ts[3], **kw, **more)
        loss = tf.reduce_sum(out[0] * U.round_to(dy, dtype)) + tf.reduce_sum(
            out[1] * U.round_to(dh, dtype))
        if lstm:
            loss += tf.reduce_sum(out[2] * U.round_to(dc, dtype))
    g = tape.gradient(loss, ts, unconnected_gradients=tf.UnconnectedGradients.ZERO)
    g = [t.numpy() for t in g]
    if not lstm:
        g[2] = None
    return [None if o is None else o.numpy() for o in out], g


def upstream(rng, outs, mode):
    dy = rng.normal(size=tuple(outs[0].shape))
    dh = rng.normal(size=tuple(outs[1].shape))
    dc = rng.normal(size=tuple(outs[2].shape)) if mode == "lstm" else np.zeros(
        tuple(outs[2].shape))
    return dy, dh, dc


def call_backprop(ours, version, x, h0, c0, params, outs, dy, dh, dc, kw, dtype, *,
                  seq_lengths=None, time_major=True, **attrs):
    t = lambda a: U.to_tensor(a, dtype)
    args = dict(input=t(x), input_h=t(h0), input_c=t(c0), params=t(params), output=outs[0],
                output_h=outs[1], output_c=outs[2], output_backprop=t(dy),
                output_h_backprop=t(dh), output_c_backprop=t(dc), reserve_space=outs[3])
    a = C.attrs_of(kw, **attrs)
    if version == "V2":
        args["host_reserved"] = outs[4]
    if version == "V3":
        T = x.shape[0] if time_major else x.shape[1]
        B = x.shape[1] if time_major else x.shape[0]
        lens = np.full([B], T) if seq_lengths is None else seq_lengths
        args.update(host_reserved=outs[4], sequence_lengths=tf.constant(lens, tf.int32))
        a.update(num_proj=kw["num_proj"], time_major=time_major)
    return tuple(getattr(ours, "CudnnRNNBackprop" + version)(**args, **a))


def assert_grads(got, want, mode, tol, prefix=""):
    for k, name in enumerate(GRAD_NAMES):
        if want[k] is None:
            continue
        C.assert_near(got[k], want[k], tol, prefix + name)


def run_case(ours, rng, version, kw, T, B, dtype=F64, *, seq_lengths=None, time_major=True,
             c_dummy="full", tol=None):
    x, h0, c0, params = C.make_inputs(rng, kw, T, B, time_major=time_major, c_dummy=c_dummy)
    outs = C.call_fwd(ours, version, x, h0, c0, params, kw, dtype, seq_lengths=seq_lengths,
                      time_major=time_major)
    dy, dh, dc = upstream(rng, outs, kw["mode"])
    more = dict(seq_lengths=seq_lengths, time_major=time_major)
    ref_out, want = ref_grads(x, h0, c0, params, kw, dy, dh, dc, dtype, **more)
    got = call_backprop(ours, version, x, h0, c0, params, outs, dy, dh, dc, kw, dtype,
                        seq_lengths=seq_lengths, time_major=time_major)
    assert len(got) == 4
    for k, src in enumerate((x, h0, c0, params)):
        if k == 2 and kw["mode"] != "lstm":
            continue
        assert tuple(got[k].shape) == tuple(np.shape(src)), GRAD_NAMES[k]
        assert got[k].dtype == dtype
    assert_grads(got, want, kw["mode"], tol or GRAD_TOL[dtype])


# ---------------------------------------------------------------------------------------------
# 7. Backprop ops vs autodiff of the reference
# ---------------------------------------------------------------------------------------------

INPUT_CASES = [("linear_input", 4), ("skip_input", 3), ("auto_select", 4)]
# (num_layers, T, B)
SHAPES = [(1, 5, 3), (2, 1, 1), (2, 4, 3), (3, 3, 2)]


@C.over_models(INPUT_CASES)
def test_backprop_float64(ours, rng, mode, input_mode, input_size, direction):
    for kw, (x, h0, c0, params), where in C.model_runs(rng, SHAPES, mode, input_mode,
                                                        input_size, direction):
        outs0 = C.call_fwd(ours, "", x, h0, c0, params, kw, F64)
        dy, dh, dc = upstream(rng, outs0, mode)
        _, want = ref_grads(x, h0, c0, params, kw, dy, dh, dc)
        for version in VERSIONS:
            outs = C.call_fwd(ours, version, x, h0, c0, params, kw, F64)
            got = call_backprop(ours, version, x, h0, c0, params, outs, dy, dh, dc, kw, F64)
            assert_grads(got, want, mode, GRAD_TOL[F64], prefix=f"V{version} {where}: ")


@pytest.mark.parametrize("mode", MODES)
def test_backprop_full_lengths_on_pool_threads(ours, rng, mode):
    """Every sequence of full length, a small batch and enough work for pool threads: the layer
    backward runs its step chain on one thread and the weight, bias and input gradients of
    finished chunks of steps beside it (cc/engine/rnn_cpu.cc PipelinedGrads). Against the
    reference, then repeated: bit-identical (each column panel sums its chunks in order)."""
    T, B = 40, 6
    kw = C.model_kw(mode, 2, 40, 12, direction="bidirectional")
    x, h0, c0, params = C.make_inputs(rng, kw, T, B)
    lengths = np.full(B, T, np.int32)
    outs = C.call_fwd(ours, "V3", x, h0, c0, params, kw, F32, seq_lengths=lengths)
    dy, dh, dc = upstream(rng, outs, mode)
    _, want = ref_grads(x, h0, c0, params, kw, dy, dh, dc, seq_lengths=lengths)
    first = call_backprop(ours, "V3", x, h0, c0, params, outs, dy, dh, dc, kw, F32,
                          seq_lengths=lengths)
    assert_grads(first, want, mode, GRAD_TOL[F32])
    for _ in range(3):
        again = call_backprop(ours, "V3", x, h0, c0, params, outs, dy, dh, dc, kw, F32,
                              seq_lengths=lengths)
        for a, b, name in zip(first, again, GRAD_NAMES):
            np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=["float32", "half", "bfloat16"])
@pytest.mark.parametrize("mode", MODES)
def test_backprop_dtypes(ours, rng, mode, dtype):
    for version, direction, L in (("", "bidirectional", 2), ("V3", "unidirectional", 1)):
        kw = C.model_kw(mode, L, 3, 4, direction=direction)
        run_case(ours, rng, version, kw, 4, 3, dtype)


V3_CASES = [(m, d, tm) for m in MODES for d in DIRS for tm in (True, False)]


@pytest.mark.parametrize("mode,direction,time_major", V3_CASES,
                         ids=[f"{m}-{d[:3]}-{'tm' if tm else 'bm'}" for m, d, tm in V3_CASES])
def test_backprop_v3_lengths(ours, rng, mode, direction, time_major):
    T, B = 5, 5
    for L, input_mode, I in ((2, "linear_input", 4), (1, "skip_input", 3)):
        kw = C.model_kw(mode, L, 3, I, input_mode, direction)
        lens = C._lengths(rng, B, T)
        run_case(ours, rng, "V3", kw, T, B, seq_lengths=lens, time_major=time_major)
    kw = C.model_kw(mode, 2, 3, 4, direction=direction)
    run_case(ours, rng, "V3", kw, T, B, F32, seq_lengths=C._lengths(rng, B, T),
             time_major=time_major)


@pytest.mark.parametrize("direction", DIRS)
@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("time_major", [True, False], ids=["tm", "bm"])
def test_backprop_v3_num_proj(ours, rng, direction, num_layers, time_major):
    T, B = 4, 3
    kw = C.model_kw("lstm", num_layers, 5, 3, direction=direction, num_proj=2)
    run_case(ours, rng, "V3", kw, T, B, time_major=time_major)
    run_case(ours, rng, "V3", kw, T, B, seq_lengths=np.array([4, 0, 2], np.int32),
             time_major=time_major)
    run_case(ours, rng, "V3", kw, T, B, F32, time_major=time_major)


def test_backprop_non_lstm_scalar_input_c(ours, rng):
    """Keras-style dummy input_c = 0 (scalar) for gru / rnn modes."""
    for mode in ("gru", "rnn_tanh", "rnn_relu"):
        for version in VERSIONS:
            kw = C.model_kw(mode, 1, 3, 4)
            run_case(ours, rng, version, kw, 4, 2, c_dummy="scalar")


def test_backprop_larger_float32(ours, rng):
    for mode in MODES:
        kw = C.model_kw(mode, 2, 21, 13, direction="bidirectional")
        run_case(ours, rng, "", kw, 6, 5, F32)


def test_backprop_twice_same_result(ours, rng):
    """reserve_space is not consumed/mutated by a backward call (stock #26331)."""
    kw = C.model_kw("lstm", 2, 3, 4, direction="bidirectional")
    x, h0, c0, params = C.make_inputs(rng, kw, 4, 3)
    outs = C.call_fwd(ours, "V2", x, h0, c0, params, kw, F32)
    dy, dh, dc = upstream(rng, outs, "lstm")
    a = call_backprop(ours, "V2", x, h0, c0, params, outs, dy, dh, dc, kw, F32)
    b = call_backprop(ours, "V2", x, h0, c0, params, outs, dy, dh, dc, kw, F32)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u.numpy(), v.numpy())


# ---------------------------------------------------------------------------------------------
# registered gradients
# ---------------------------------------------------------------------------------------------

def _registered(ours, version, x, h0, c0, params, kw, dy, dh, dc, dtype, *, use_function,
                seq_lengths=None, time_major=True):
    ts = [U.to_tensor(a, dtype) for a in (x, h0, c0, params)]
    lstm = kw["mode"] == "lstm"

    def f(x, h, c, p):
        with tf.GradientTape() as tape:
            tape.watch([x, h, c, p])
            outs = C.call_fwd(ours, version, x, h, c, p, kw, dtype, seq_lengths=seq_lengths,
                              time_major=time_major)
            loss = tf.reduce_sum(outs[0] * tf.cast(dy, dtype)) + tf.reduce_sum(
                outs[1] * tf.cast(dh, dtype))
            if lstm:
                loss += tf.reduce_sum(outs[2] * tf.cast(dc, dtype))
        return tape.gradient(loss, [x, h, c, p])

    if use_function:
        f = tf.function(f)
    return f(*ts)


REG_CASES = [(v, m, fn) for v in VERSIONS for m in MODES for fn in (False, True)]
REG_IDS = [f"{v or 'V1'}-{m}-{'fn' if fn else 'eager'}" for v, m, fn in REG_CASES]


@pytest.mark.parametrize("version,mode,use_function", REG_CASES, ids=REG_IDS)
def test_registered_gradient(ours, rng, version, mode, use_function):
    for direction, L in (("unidirectional", 1), ("bidirectional", 2)):
        kw = C.model_kw(mode, L, 3, 4, direction=direction)
        T, B = 4, 3
        x, h0, c0, params = C.make_inputs(rng, kw, T, B)
        lens = np.array([4, 0, 2], np.int32) if version == "V3" else None
        D = cref.num_dirs(direction)
        dy = rng.normal(size=(T, B, 3 * D))
        dh = rng.normal(size=(L * D, B, 3))
        dc = rng.normal(size=(L * D, B, 3))
        _, want = ref_grads(x, h0, c0, params, kw, dy, dh, dc, seq_lengths=lens)
        got = _registered(ours, version, x, h0, c0, params, kw, dy, dh, dc, F64,
                          use_function=use_function, seq_lengths=lens)
        assert_grads(got, want, mode, GRAD_TOL[F64], prefix=f"{direction}: ")


def test_registered_gradient_v3_batch_major_proj(ours, rng):
    T, B, H, P, L = 4, 3, 5, 2, 2
    kw = C.model_kw("lstm", L, H, 3, direction="bidirectional", num_proj=P)
    x, h0, c0, params = C.make_inputs(rng, kw, T, B, time_major=False)
    lens = np.array([4, 1, 0], np.int32)
    dy = rng.normal(size=(B, T, 2 * P))
    dh = rng.normal(size=(B, 2 * L, P))
    dc = rng.normal(size=(B, 2 * L, H))
    _, want = ref_grads(x, h0, c0, params, kw, dy, dh, dc, seq_lengths=lens, time_major=False)
    for use_function in (False, True):
        got = _registered(ours, "V3", x, h0, c0, params, kw, dy, dh, dc, F64,
                          use_function=use_function, seq_lengths=lens, time_major=False)
        assert_grads(got, want, "lstm", GRAD_TOL[F64])


def test_registered_gradient_loss_on_output_only(ours, rng):
    """Unused outputs (output_h, output_c) get zero upstream gradients."""
    for mode in MODES:
        kw = C.model_kw(mode, 2, 3, 4, direction="bidirectional")
        x, h0, c0, params = C.make_inputs(rng, kw, 4, 2)
        ts = [tf.constant(a) for a in (x, h0, c0, params)]
        with tf.GradientTape() as tape:
            tape.watch(ts)
            outs = C.call_fwd(ours, "", *ts, kw, F64)
            loss = tf.reduce_sum(outs[0] ** 2)
        got = tape.gradient(loss, ts)
        with tf.GradientTape() as tape:
            tape.watch(ts)
            out = cref.cudnn_rnn_ref(ts[0], ts[1], ts[2] if mode == "lstm" else None, ts[3],
                                     **kw)
            loss = tf.reduce_sum(out[0] ** 2)
        want = tape.gradient(loss, ts, unconnected_gradients=tf.UnconnectedGradients.ZERO)
        for k in (0, 1, 3) + ((2,) if mode == "lstm" else ()):
            C.assert_near(got[k], want[k].numpy(), GRAD_TOL[F64], f"{mode} {GRAD_NAMES[k]}")


# ---------------------------------------------------------------------------------------------
# numeric gradients (float64 central differences of our forward)
# ---------------------------------------------------------------------------------------------

NUMERIC_DELTA = 1e-6
NUMERIC_TOL = 1e-6


def _numeric_check(ours, rng, version, kw, T, B, *, seq_lengths=None, time_major=True,
                   **attrs):
    x, h0, c0, params = C.make_inputs(rng, kw, T, B, time_major=time_major)
    outs = C.call_fwd(ours, version, x, h0, c0, params, kw, F64, seq_lengths=seq_lengths,
                      time_major=time_major, **attrs)
    dy, dh, dc = upstream(rng, outs, kw["mode"])
    got = call_backprop(ours, version, x, h0, c0, params, outs, dy, dh, dc, kw, F64,
                        seq_lengths=seq_lengths, time_major=time_major, **attrs)
    lstm = kw["mode"] == "lstm"

    def loss(x, h0, c0, params):
        o = C.call_fwd(ours, version, x, h0, c0, params, kw, F64, seq_lengths=seq_lengths,
                       time_major=time_major, **attrs)
        val = np.sum(o[0].numpy() * dy) + np.sum(o[1].numpy() * dh)
        if lstm:
            val += np.sum(o[2].numpy() * dc)
        return val

    num = U.numeric_grads(loss, [x, h0, c0, params], NUMERIC_DELTA)
    for k, name in enumerate(GRAD_NAMES):
        if k == 2 and not lstm:
            continue
        C.assert_near(got[k], num[k], NUMERIC_TOL, name)


@pytest.mark.parametrize("mode", MODES)
def test_numeric_gradient(ours, rng, mode):
    kw = C.model_kw(mode, 2, 2, 3, direction="bidirectional")
    _numeric_check(ours, rng, "", kw, 3, 2)
    kw = C.model_kw(mode, 1, 2, 2, "skip_input")
    _numeric_check(ours, rng, "V3", kw, 3, 3, seq_lengths=np.array([3, 0, 1], np.int32),
                   time_major=False)


def test_numeric_gradient_num_proj(ours, rng):
    kw = C.model_kw("lstm", 2, 3, 2, direction="bidirectional", num_proj=2)
    _numeric_check(ours, rng, "V3", kw, 3, 2, seq_lengths=np.array([2, 3], np.int32))


@pytest.mark.parametrize("mode", MODES)
def test_numeric_gradient_dropout(ours, rng, mode):
    """With dropout > 0 and fixed seeds the forward is a deterministic function (same masks);
    its central differences equal the backward op's gradient."""
    for version, direction in (("", "unidirectional"), ("V2", "bidirectional"),
                               ("V3", "unidirectional")):
        kw = C.model_kw(mode, 3, 2, 3, direction=direction)
        _numeric_check(ours, rng, version, kw, 3, 2, dropout=0.5, seed=5, seed2=9)


def test_registered_gradient_dropout_matches_backprop(ours, rng):
    kw = C.model_kw("lstm", 2, 3, 4, direction="bidirectional")
    x, h0, c0, params = C.make_inputs(rng, kw, 4, 3)
    attrs = dict(dropout=0.5, seed=3, seed2=4)
    ts = [tf.constant(a) for a in (x, h0, c0, params)]
    with tf.GradientTape() as tape:
        tape.watch(ts)
        outs = C.call_fwd(ours, "", *ts, kw, F64, **attrs)
        loss = tf.reduce_sum(outs[0] * outs[0])
    got = tape.gradient(loss, ts)

    def lossf(x, h0, c0, params):
        o = C.call_fwd(ours, "", x, h0, c0, params, kw, F64, **attrs)[0].numpy()
        return np.sum(o * o)

    # the params gradient at 20 random entries vs central differences
    idx = rng.choice(len(params), size=20, replace=False)
    for i in idx:
        p1, p2 = params.copy(), params.copy()
        p1[i] += NUMERIC_DELTA
        p2[i] -= NUMERIC_DELTA
        n = (lossf(x, h0, c0, p1) - lossf(x, h0, c0, p2)) / (2 * NUMERIC_DELTA)
        assert abs(got[3].numpy()[i] - n) <= NUMERIC_TOL * max(1.0, abs(n)), (i, got[3][i], n)


# ---------------------------------------------------------------------------------------------
# 8. Keras gradients (float32)
# ---------------------------------------------------------------------------------------------

def _params_from_keras(mode, kernel, rec, bias, H):
    """Keras [kernel, recurrent_kernel, bias] tensors -> flat params (differentiable)."""
    K = cref.num_gates(mode)
    order = [1, 0, 2] if mode == "gru" else list(range(K))
    ks, rs = tf.split(kernel, K, axis=1), tf.split(rec, K, axis=1)
    mats = [tf.transpose(ks[k]) for k in order] + [tf.transpose(rs[k]) for k in order]
    if mode == "gru":
        bw, br = tf.split(bias[0], K), tf.split(bias[1], K)
        biases = [bw[k] for k in order] + [br[k] for k in order]
    else:
        biases = list(tf.split(bias, K)) + [tf.zeros([H], bias.dtype)] * K
    return tf.concat([tf.reshape(m, [-1]) for m in mats] + biases, axis=0)


@pytest.mark.parametrize("mode", MODES)
def test_keras_gradients(ours, rng, mode):
    T, B, I, H = 6, 4, 5, 4
    layer = {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU,
             "rnn_tanh": keras.layers.SimpleRNN, "rnn_relu": keras.layers.SimpleRNN}[mode]
    extra = {"gru": dict(reset_after=True), "rnn_tanh": dict(activation="tanh"),
             "rnn_relu": dict(activation="relu")}.get(mode, {})
    layer = layer(H, return_sequences=True, return_state=True, dtype="float32", **extra)
    layer.build((B, T, I))
    weights = [rng.normal(size=tuple(w.shape)) * 0.5 for w in layer.get_weights()]
    layer.set_weights([w.astype(np.float32) for w in weights])
    x = rng.normal(size=(B, T, I)).astype(np.float32)
    h0 = rng.uniform(-1, 1, size=(B, H)).astype(np.float32)
    c0 = rng.normal(size=(B, H)).astype(np.float32)
    lstm = mode == "lstm"
    dy = rng.normal(size=(B, T, H)).astype(np.float32)
    dh = rng.normal(size=(B, H)).astype(np.float32)
    dc = rng.normal(size=(B, H)).astype(np.float32)

    xs, hs, cs = tf.constant(x), tf.constant(h0), tf.constant(c0)
    variables = [v.value if hasattr(v, "value") else v for v in layer.trainable_weights]
    with tf.GradientTape() as tape:
        tape.watch([xs, hs, cs])
        res = layer(xs, initial_state=[hs, cs] if lstm else [hs])
        loss = tf.reduce_sum(res[0] * dy) + tf.reduce_sum(res[1] * dh)
        if lstm:
            loss += tf.reduce_sum(res[2] * dc)
    want = tape.gradient(loss, [xs, hs, cs] + variables,
                         unconnected_gradients=tf.UnconnectedGradients.ZERO)

    kt, rt, bt = [tf.constant(w.astype(np.float32)) for w in weights]
    with tf.GradientTape() as tape:
        tape.watch([xs, hs, cs, kt, rt, bt])
        params = _params_from_keras(mode, kt, rt, bt, H)
        outs = ours.CudnnRNN(input=tf.transpose(xs, [1, 0, 2]), input_h=hs[None],
                             input_c=cs[None] if lstm else tf.constant(0.0), params=params,
                             rnn_mode=mode)
        loss = tf.reduce_sum(tf.transpose(outs[0], [1, 0, 2]) * dy) + tf.reduce_sum(
            outs[1][0] * dh)
        if lstm:
            loss += tf.reduce_sum(outs[2][0] * dc)
    got = tape.gradient(loss, [xs, hs, cs, kt, rt, bt])
    names = ("x", "h0", "c0", "kernel", "recurrent_kernel", "bias")
    for k, name in enumerate(names):
        if name == "c0" and not lstm:
            continue
        C.assert_near(got[k], want[k].numpy(), GRAD_TOL[F32], name)
