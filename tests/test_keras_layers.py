"""tf_rnn_ops.keras.LSTM / GRU against the stock Keras 3 layers they replace.

Every comparison builds a stock layer and ours, copies the weights with
``ours.set_weights(stock.get_weights())`` and compares outputs, states and the gradients with
respect to the inputs and to every trainable weight (tf.GradientTape). Stock Keras runs its
generic loop on this CPU-only host, so these also check that the fused op reproduces that
loop's masking rules. Whether the fused op ran is checked by counting calls of
``tf_rnn_ops.keras._keras_rnn`` (eager and at trace time) or by looking for ``TfRnn>KerasRNN``
in the traced graph.
SavedModel / .keras reloads and tf.distribute run in fresh subprocesses.
"""
import json
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import tensorflow as tf

keras = pytest.importorskip("keras")

import tf_rnn_ops  # noqa: E402,F401
import tf_rnn_ops.keras as K  # noqa: E402
from tf_rnn_ops import raw_ops  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STOCK = {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU}
OURS = {"lstm": K.LSTM, "gru": K.GRU}
B, T, I = 4, 6, 3

# Outputs are O(1); gradients up to O(10): compared with atol scaled by max(1, max|expected|).
TOL = {"float32": (2e-5, 2e-5), "float16": (2e-2, 2e-2), "bfloat16": (8e-2, 8e-2)}


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------

def count_calls(monkeypatch, owner, attr):
    """The rnn_mode of every call of owner.attr (eager and at trace time), in a list."""
    calls = []
    real = getattr(owner, attr)

    def counting(**kw):
        calls.append(kw["rnn_mode"])
        return real(**kw)

    monkeypatch.setattr(owner, attr, counting)
    return calls


@pytest.fixture
def fused_calls(monkeypatch):
    """Counts eager and trace-time calls of the fused op (TfRnn>KerasRNN) made by the layers."""
    return count_calls(monkeypatch, K, "_keras_rnn")


@pytest.fixture(autouse=True)
def _fresh_warnings():
    K._warned.clear()
    yield


def _np_rng(seed):
    return np.random.default_rng(seed)


def make_pair(stock_cls, ours_cls, units, input_shape, weight_seed, **kw):
    """A stock layer and ours with the same config (units, kw), built for input_shape: the stock
    weights randomized (_randomize with weight_seed), ours with the stock weights."""
    stock, ours = stock_cls(units, **kw), ours_cls(units, **kw)
    stock.build(input_shape)
    ours.build(input_shape)
    _randomize(stock, seed=weight_seed)
    ours.set_weights(stock.get_weights())
    return stock, ours


def _pair(kind, input_shape=(B, T, I), units=5, build=True, **kw):
    """A stock layer and ours with the same config, ours with the stock weights (unbuilt with
    build=False)."""
    if not build:
        return STOCK[kind](units, **kw), OURS[kind](units, **kw)
    return make_pair(STOCK[kind], OURS[kind], units, input_shape, units, **kw)


def _randomize(layer, seed):
    """Nonzero biases (so bias mapping errors show), weights of a useful size."""
    rng = _np_rng(seed)
    layer.set_weights([rng.uniform(-0.6, 0.6, size=w.shape).astype(w.dtype)
                       for w in layer.get_weights()])


def _flat(out):
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _run(layer, x, loss_weights=None, **call_kw):
    """Outputs and d(weighted sum of all outputs)/d(x, initial states, trainable weights)."""
    x = tf.convert_to_tensor(x)
    init = list(call_kw.get("initial_state") or [])
    with tf.GradientTape() as tape:
        tape.watch([x] + init)
        outs = _flat(layer(x, **call_kw))
        if loss_weights is None:
            rng = _np_rng(99)
            loss_weights = [rng.normal(size=o.shape) for o in outs]
        loss = tf.add_n([tf.reduce_sum(tf.cast(o, tf.float32) * w.astype(np.float32))
                         for o, w in zip(outs, loss_weights)])
    grads = tape.gradient(loss, [x] + init + list(layer.trainable_weights))
    return ([np.asarray(tf.cast(o, tf.float32)) for o in outs],
            [np.asarray(tf.cast(g, tf.float32)) for g in grads], loss_weights)


def _assert_close(actual, expected, dtype="float32", what=""):
    rtol, atol = TOL[dtype]
    assert len(actual) == len(expected), what
    for k, (a, e) in enumerate(zip(actual, expected)):
        assert a.shape == e.shape, f"{what}[{k}]: shape {a.shape} != {e.shape}"
        scale = max(1.0, float(np.max(np.abs(e)))) if e.size else 1.0
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol * scale, err_msg=f"{what}[{k}]")


def _compare(stock, ours, x, dtype="float32", **call_kw):
    s_out, s_grad, w = _run(stock, x, **call_kw)
    o_out, o_grad, _ = _run(ours, x, loss_weights=w, **call_kw)
    _assert_close(o_out, s_out, dtype, "outputs")
    _assert_close(o_grad, s_grad, dtype, "grads")
    return o_out, s_out


def _x(seed=0, shape=(B, T, I)):
    return _np_rng(seed).normal(size=shape).astype(np.float32)


def _right_padded_mask(lengths, steps=T):
    return np.arange(steps)[None, :] < np.asarray(lengths)[:, None]


def _op_types(concrete):
    """Op types in a concrete function's graph and in every function it calls (cond, while)."""
    gd = concrete.graph.as_graph_def()
    types = {n.op for n in gd.node}
    for f in gd.library.function:
        types |= {n.op for n in f.node_def}
    return types


def _env():
    path = os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p)
    return dict(os.environ, PYTHONPATH=path, TF_CPP_MIN_LOG_LEVEL="2")


def _child(code, tmp_path, env_extra=None):
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(code))
    env = _env()
    env.update(env_extra or {})
    proc = subprocess.run([sys.executable, str(script)], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"child failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
    return proc.stdout


# ---------------------------------------------------------------------------------------------
# layer options, eager, against stock
# ---------------------------------------------------------------------------------------------

OPTIONS = [
    dict(units=1),
    dict(units=7),
    dict(use_bias=False),
    dict(return_sequences=True),
    dict(return_state=True),
    dict(return_sequences=True, return_state=True, go_backwards=True),
    dict(go_backwards=True),
    dict(implementation=1),
    dict(dtype="float64", return_sequences=True),
]


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("opts", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_options_match_stock(kind, opts, fused_calls):
    opts = dict(opts)
    units = opts.pop("units", 5)
    stock, ours = _pair(kind, units=units, **opts)
    _compare(stock, ours, _x(1))
    assert fused_calls == [kind]


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("go_backwards", [False, True])
@pytest.mark.parametrize("rows,steps", [(24, 8), (11, 12), (7, 12), (4, 18)])
def test_batch_blocks_match_stock(kind, go_backwards, rows, steps, fused_calls):
    # 24 rows: on 2-4 intra-op threads the forward runs in batch blocks of 8-12 rows, in
    # training too for lstm (its weights fuse into the step's product; gru keeps the whole
    # batch), with the layer's separate weight tensors. 11 rows: on 2 threads blocks of 6 and
    # 5 rows, 7 rows blocks of 4 and 3, 4 rows blocks of 2 (small weights,
    # cc/engine/types.h RnnBatchBlockRows), else the whole batch.
    shape = (rows, steps, I)
    stock, ours = _pair(kind, input_shape=shape, return_sequences=True, return_state=True,
                        go_backwards=go_backwards)
    _randomize(stock, 5)
    ours.set_weights(stock.get_weights())
    _compare(stock, ours, _x(6, shape))
    assert fused_calls == [kind]


@pytest.mark.parametrize("unit_forget_bias", [True, False])
def test_lstm_unit_forget_bias(unit_forget_bias, fused_calls):
    # Initial weights (not randomized) so the forget-gate bias of 1 is what is compared.
    stock, ours = _pair("lstm", build=False, unit_forget_bias=unit_forget_bias,
                        return_sequences=True)
    stock.build((B, T, I))
    ours.build((B, T, I))
    b = ours.cell.bias.numpy()
    np.testing.assert_array_equal(b[5:10], np.full(5, 1.0 if unit_forget_bias else 0.0))
    ours.set_weights(stock.get_weights())
    _compare(stock, ours, _x(2))
    assert fused_calls == ["lstm"]


@pytest.mark.parametrize("reset_after", [True, False])
def test_gru_reset_after(reset_after, fused_calls):
    stock, ours = _pair("gru", reset_after=reset_after, return_sequences=True,
                        return_state=True)
    assert ours.cell.bias.shape == ((2, 15) if reset_after else (15,))
    if reset_after:
        _compare(stock, ours, _x(3))
        assert fused_calls == ["gru"]
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            _compare(stock, ours, _x(3))
        assert fused_calls == ["gru"]


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_initial_state(kind, fused_calls):
    stock, ours = _pair(kind, return_sequences=True, return_state=True)
    rng = _np_rng(4)
    n_states = 2 if kind == "lstm" else 1
    init = [tf.constant(rng.normal(size=(B, 5)).astype(np.float32)) for _ in range(n_states)]
    _compare(stock, ours, _x(4), initial_state=init)
    assert fused_calls == [kind]


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_stateful_two_batches(kind, fused_calls):
    stock, ours = _pair(kind, stateful=True, return_state=True)
    x1, x2 = _x(5), _x(6)
    for x in (x1, x2):   # the second batch starts from the state the first one left
        s_out, o_out = stock(x), ours(x)
        _assert_close([np.asarray(t) for t in o_out], [np.asarray(t) for t in s_out])
    for s, o in zip(stock.states, ours.states):
        np.testing.assert_allclose(o.numpy(), s.numpy(), rtol=2e-5, atol=2e-5)
        assert np.abs(o.numpy()).max() > 0
    ours.reset_state()
    assert all(np.all(v.numpy() == 0) for v in ours.states)
    assert fused_calls == [kind, kind]


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_input_dropout_in_training(kind, fused_calls):
    # Same seed: both layers draw the same dropout mask; the fused path applies it to x.
    stock, ours = _pair(kind, dropout=0.4, seed=7, return_sequences=True)
    _compare(stock, ours, _x(7), training=True)
    assert fused_calls == [kind]
    o_train = np.asarray(ours(_x(7), training=True))
    o_infer = np.asarray(ours(_x(7), training=False))
    assert not np.allclose(o_train, o_infer)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_input_dropout_one_mask_per_gate_fused(kind, fused_calls):
    # implementation=1 draws a separate input mask per gate: the per-gate projections go to
    # TfRnn>KerasRNN (pre-projected input) in training; inference takes x itself.
    # (Stock Keras 3.15 itself fails here in its cuDNN attempt: it broadcasts the list of
    # masks and gets InvalidArgumentError, not NotImplementedError; so use its plain loop.)
    stock, ours = _pair(kind, dropout=0.4, seed=7, implementation=1)
    stock.use_cudnn = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _compare(stock, ours, _x(7), training=True)
    _compare(stock, ours, _x(7), training=False)
    assert fused_calls == [kind, kind]


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_recurrent_dropout(kind, fused_calls):
    stock, ours = _pair(kind, recurrent_dropout=0.3, seed=3, return_sequences=True)
    _compare(stock, ours, _x(8), training=False)    # a no-op in inference: fused
    assert fused_calls == [kind]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _compare(stock, ours, _x(8), training=True)  # training: per-gate masks, fused too
    assert fused_calls == [kind, kind]


# ---------------------------------------------------------------------------------------------
# masks
# ---------------------------------------------------------------------------------------------

MASK_OPTS = [
    dict(),
    dict(return_sequences=True),
    dict(return_sequences=True, zero_output_for_mask=True),
    dict(zero_output_for_mask=True),
    dict(go_backwards=True),
    dict(go_backwards=True, return_sequences=True, return_state=True),
    dict(go_backwards=True, return_sequences=True, zero_output_for_mask=True),
]


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("opts", MASK_OPTS,
                         ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default")
def test_right_padded_mask(kind, opts, fused_calls):
    # Lengths differ per row; one row is fully masked (stock: zero outputs, initial state).
    stock, ours = _pair(kind, **opts)
    mask = tf.constant(_right_padded_mask([6, 3, 1, 0]))
    n_states = 2 if kind == "lstm" else 1
    init = [tf.constant(_np_rng(s).normal(size=(B, 5)).astype(np.float32))
            for s in range(n_states)]
    _compare(stock, ours, _x(9), mask=mask, initial_state=init)
    assert fused_calls == [kind]


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_masking_layer(kind, fused_calls):
    x = _x(10)
    x[1, 4:] = 0.0
    x[2, 2:] = 0.0
    stock, ours = _pair(kind, return_sequences=True)
    masking = keras.layers.Masking(0.0)
    mask = masking.compute_mask(x)
    _compare(stock, ours, x, mask=mask)
    assert fused_calls == [kind]


# Masks that are not right-padded (left padding, holes): tests/test_keras_masks.py.


# ---------------------------------------------------------------------------------------------
# Bidirectional, models, training
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("return_sequences", [False, True])
def test_bidirectional(kind, return_sequences, fused_calls):
    stock = keras.layers.Bidirectional(STOCK[kind](4, return_sequences=return_sequences))
    ours = keras.layers.Bidirectional(OURS[kind](4, return_sequences=return_sequences))
    stock.build((B, T, I))
    ours.build((B, T, I))
    assert isinstance(ours.forward_layer, OURS[kind])
    assert isinstance(ours.backward_layer, OURS[kind]) and ours.backward_layer.go_backwards
    _randomize(stock, 11)
    ours.set_weights(stock.get_weights())
    _compare(stock, ours, _x(12))
    _compare(stock, ours, _x(12), mask=tf.constant(_right_padded_mask([6, 5, 2, 1])))
    assert fused_calls == [kind] * 4


def _stack(layers_mod, masking=True):
    """Functional model: Masking -> LSTM(seq) -> GRU -> Dense, with regularizer + constraint."""
    inp = keras.Input((T, I))
    h = keras.layers.Masking(0.0)(inp) if masking else inp
    h = layers_mod["lstm"](6, return_sequences=True, kernel_regularizer="l2",
                           recurrent_constraint=keras.constraints.MaxNorm(0.8))(h)
    h = layers_mod["gru"](4)(h)
    return keras.Model(inp, keras.layers.Dense(2)(h))


def _padded_data(seed, n=32):
    rng = _np_rng(seed)
    x = rng.normal(size=(n, T, I)).astype(np.float32)
    lengths = rng.integers(1, T + 1, size=n)
    x[~_right_padded_mask(lengths)] = 0.0
    y = rng.normal(size=(n, 2)).astype(np.float32)
    return x, y


def test_sequential_model_matches_stock(fused_calls):
    def build(mod):
        keras.utils.set_random_seed(5)
        return keras.Sequential([keras.Input((None, I)), mod["gru"](5, return_sequences=True),
                                 mod["lstm"](3), keras.layers.Dense(1)])
    stock, ours = build(STOCK), build(OURS)
    ours.set_weights(stock.get_weights())
    for steps in (T, 9):     # the time dimension is not fixed
        x = _x(13, shape=(B, steps, I))
        np.testing.assert_allclose(ours(x).numpy(), stock(x).numpy(), rtol=2e-5, atol=2e-5)
        np.testing.assert_allclose(ours.predict(x, verbose=0), stock.predict(x, verbose=0),
                                   rtol=2e-5, atol=2e-5)
    assert fused_calls[:2] == ["gru", "lstm"]


def test_fit_two_epochs_same_weights_as_stock(fused_calls):
    x, y = _padded_data(14)
    models = {}
    for name, mod in (("stock", STOCK), ("ours", OURS)):
        keras.utils.set_random_seed(3)
        models[name] = _stack(mod)
    models["ours"].set_weights(models["stock"].get_weights())
    hist = {}
    for name, model in models.items():
        model.compile(keras.optimizers.SGD(0.1), "mse")
        hist[name] = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    np.testing.assert_allclose(hist["ours"].history["loss"], hist["stock"].history["loss"],
                               rtol=1e-4)
    for a, b in zip(models["ours"].get_weights(), models["stock"].get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    for model in models.values():                                # constraint applied
        rk = model.layers[2].cell.recurrent_kernel.numpy()
        assert np.linalg.norm(rk, axis=0).max() <= 0.8 + 1e-5
    assert "lstm" in fused_calls and "gru" in fused_calls        # traced with the fused op


def test_fused_op_in_traced_graph():
    model = _stack(OURS, masking=False)
    fn = tf.function(lambda t: model(t, training=True))
    types = _op_types(fn.get_concrete_function(tf.TensorSpec([None, T, I])))
    assert "TfRnn>KerasRNN" in types
    assert "While" not in types              # no per-step loop anywhere
    # With Masking (any mask: the fused op too), still no loop and no branch to one.
    model = _stack(OURS, masking=True)
    fn = tf.function(lambda t: model(t))
    types = _op_types(fn.get_concrete_function(tf.TensorSpec([None, T, I])))
    assert "TfRnn>KerasRNN" in types
    assert not types & {"If", "While", "StatelessIf", "StatelessWhile"}, types
    # And its gradient uses the fused backward op.
    x = tf.constant(_x(15))

    @tf.function
    def grads(t):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(t))
        return tape.gradient(loss, model.trainable_weights)

    assert "TfRnn>KerasRNNBackprop" in _op_types(grads.get_concrete_function(x))


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision(kind, policy, fused_calls):
    stock, ours = _pair(kind, dtype=policy, return_sequences=True, return_state=True)
    assert ours.compute_dtype == policy.split("_")[1] and ours.variable_dtype == "float32"
    x = _x(16)
    mask = tf.constant(_right_padded_mask([6, 4, 3, 1]))
    o_out, s_out = _compare(stock, ours, x, dtype=policy.split("_")[1], mask=mask)
    assert ours(x)[0].dtype == policy.split("_")[1]
    # Ours (float accumulation inside the op) is at least as close to float32 as stock is.
    ref, _ = _pair(kind, return_sequences=True, return_state=True, build=False)
    ref.build((B, T, I))
    ref.set_weights(stock.get_weights())
    r_out = [np.asarray(t) for t in _flat(ref(x, mask=mask))]
    err_ours = max(np.abs(a - r).max() for a, r in zip(o_out, r_out))
    err_stock = max(np.abs(a - r).max() for a, r in zip(s_out, r_out))
    assert err_ours <= 1.5 * err_stock + 1e-3, (err_ours, err_stock)
    assert fused_calls[0] == kind


def test_fit_mixed_float16_matches_stock():
    x, y = _padded_data(20, n=16)
    res = {}
    for name, mod in (("stock", STOCK), ("ours", OURS)):
        keras.utils.set_random_seed(2)
        inp = keras.Input((T, I))
        h = mod["lstm"](5, return_sequences=True, dtype="mixed_float16")(inp)
        h = mod["gru"](4, dtype="mixed_float16")(h)
        model = keras.Model(inp, keras.layers.Dense(2)(h))
        if name == "ours":
            model.set_weights(res["stock"][1])
        w0 = model.get_weights()
        model.compile(keras.optimizers.SGD(0.1), "mse")
        hist = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
        res[name] = (hist.history["loss"], w0, model.get_weights())
    np.testing.assert_allclose(res["ours"][0], res["stock"][0], rtol=2e-3)
    for a, b in zip(res["ours"][2], res["stock"][2]):
        np.testing.assert_allclose(a, b, atol=2e-3)
    assert max(np.abs(a - b).max() for a, b in zip(res["ours"][2], res["ours"][1])) > 1e-3


# ---------------------------------------------------------------------------------------------
# unsupported settings, errors, config
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("kw,reason", [
    (dict(activation="elu"), "activation is not tanh, sigmoid"),
    (dict(recurrent_activation="softsign"), "recurrent_activation is not tanh, sigmoid"),
])
def test_unsupported_config_falls_back_with_warning(kind, kw, reason, fused_calls):
    stock, ours = _pair(kind, return_sequences=True, **kw)
    with pytest.warns(UserWarning, match=reason):
        _compare(stock, ours, _x(17))
    with warnings.catch_warnings():
        warnings.simplefilter("error")     # warned once only
        ours(_x(17))
    assert fused_calls == []

    strict = OURS[kind](5, use_cudnn=True, **kw)
    with pytest.raises(ValueError, match=f"use_cudnn=True.*{reason}"):
        strict(_x(17))


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_use_cudnn_false_runs_stock_loop(kind, fused_calls):
    stock, ours = _pair(kind, use_cudnn=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _compare(stock, ours, _x(18))
    assert fused_calls == []


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_bad_arguments(kind):
    with pytest.raises(ValueError, match="units"):
        OURS[kind](0)
    with pytest.raises(ValueError, match="use_cudnn"):
        OURS[kind](3, use_cudnn="yes")
    with pytest.raises((ValueError, TypeError)):
        OURS[kind](3, not_an_argument=1)
    layer = OURS[kind](3)
    with pytest.raises(ValueError, match="ndim=3"):
        layer(np.zeros((2, 4), np.float32))
    with pytest.raises(ValueError, match="ndim=3"):
        layer(np.zeros((2, 4, 3, 1), np.float32))


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_config_and_serialization(kind):
    stock, ours = _pair(kind, units=3, return_sequences=True, go_backwards=True,
                        dropout=0.2, kernel_regularizer="l2")
    cfg_o, cfg_s = ours.get_config(), stock.get_config()
    cfg_o.pop("name"), cfg_s.pop("name")
    assert cfg_o == cfg_s
    again = OURS[kind].from_config(ours.get_config())
    assert type(again) is OURS[kind] and again.go_backwards
    ser = keras.saving.serialize_keras_object(ours)
    assert ser["registered_name"] == f"tf_rnn_ops>{OURS[kind].__name__}"
    back = keras.saving.deserialize_keras_object(ser)
    assert type(back) is OURS[kind] and back.units == 3
    # The op's XLA kernels are loaded (tests/test_xla.py): the stock layer's answer (True on a
    # CPU host, where stock runs its loop).
    assert ours.supports_jit == (stock.supports_jit and tf_rnn_ops.has_xla())


# ---------------------------------------------------------------------------------------------
# SavedModel / .keras reload and tf.distribute, in fresh processes
# ---------------------------------------------------------------------------------------------

def test_save_and_reload_in_fresh_process(tmp_path):
    x, _ = _padded_data(19, n=8)
    model = _stack(OURS)
    expected = model.predict(x, verbose=0)
    model.save(tmp_path / "model.keras")
    tf.saved_model.save(model, str(tmp_path / "saved_model"))
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "expected.npy", expected)
    out = _child("""
        import json
        import numpy as np
        import tensorflow as tf
        import keras
        import tf_rnn_ops
        import tf_rnn_ops.keras   # registers the layer classes and the op library

        x, expected = np.load("x.npy"), np.load("expected.npy")
        model = keras.models.load_model("model.keras")
        kinds = sorted(type(l).__module__ + "." + type(l).__name__ for l in model.layers)
        err_keras = float(np.abs(model.predict(x, verbose=0) - expected).max())
        loaded = tf.saved_model.load("saved_model")
        sig = loaded.signatures["serving_default"]
        got = list(sig(tf.constant(x)).values())[0].numpy()
        err_sm = float(np.abs(got - expected).max())
        ops = set()
        gd = sig.graph.as_graph_def()
        for f in gd.library.function:
            ops |= {n.op for n in f.node_def}
        print(json.dumps(dict(kinds=kinds, err_keras=err_keras, err_sm=err_sm,
                              fused="TfRnn>KerasRNN" in ops)))
    """, tmp_path)
    res = json.loads(out.strip().splitlines()[-1])
    assert "tf_rnn_ops.keras.LSTM" in res["kinds"] and "tf_rnn_ops.keras.GRU" in res["kinds"]
    assert res["err_keras"] <= 1e-6 and res["err_sm"] <= 1e-6, res
    assert res["fused"]


def test_mirrored_strategy_two_cpus_matches_single_device(tmp_path):
    out = _child("""
        import json
        import numpy as np
        import tensorflow as tf

        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        import keras
        import tf_rnn_ops.keras as K

        calls = []
        real = K._keras_rnn
        def counting(**kw):
            calls.append(kw["rnn_mode"])
            return real(**kw)
        K._keras_rnn = counting

        rng = np.random.default_rng(0)
        x = rng.normal(size=(8, 6, 3)).astype("float32")
        y = rng.normal(size=(8, 2)).astype("float32")

        def make():
            keras.utils.set_random_seed(1)
            return keras.Sequential([keras.Input((6, 3)), K.GRU(5, return_sequences=True),
                                     K.LSTM(4), keras.layers.Dense(2)])

        single = make()
        w0 = single.get_weights()
        single.compile(keras.optimizers.SGD(0.5), "mse")
        single.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)

        strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
        with strategy.scope():
            mirrored = make()
            mirrored.set_weights(w0)
            mirrored.compile(keras.optimizers.SGD(0.5), "mse")
        mirrored.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
        diff = max(float(np.abs(a - b).max())
                   for a, b in zip(mirrored.get_weights(), single.get_weights()))
        moved = max(float(np.abs(a - b).max()) for a, b in zip(w0, single.get_weights()))
        print(json.dumps(dict(replicas=strategy.num_replicas_in_sync, diff=diff, moved=moved,
                              calls=calls)))
    """, tmp_path)
    res = json.loads(out.strip().splitlines()[-1])
    assert res["replicas"] == 2
    assert res["moved"] > 1e-3                  # the step changed the weights
    assert res["diff"] <= 1e-5, res
    assert res["calls"].count("lstm") >= 2 and res["calls"].count("gru") >= 2


def test_example_train_sunspots(tmp_path):
    """examples/train_sunspots.py (needs the data file that statsmodels ships)."""
    import importlib.util
    if importlib.util.find_spec("statsmodels") is None:
        pytest.skip("statsmodels (which ships the sunspot data) is not installed")
    proc = subprocess.run(
        [sys.executable, os.path.join(REPO, "examples", "train_sunspots.py"), "--epochs", "2",
         "--window", "24", "--units", "8", "--plot", str(tmp_path / "loss.png")],
        cwd=str(tmp_path), env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "OK: tf_rnn_ops.keras and keras.layers give the same training run" in proc.stdout
    if importlib.util.find_spec("matplotlib") is not None:
        assert (tmp_path / "loss.png").stat().st_size > 0
