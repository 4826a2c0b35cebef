"""tf_rnn_ops.keras in the calls the fused op serves without a training reserve or without
packing its weights, against the stock Keras 3 layers (same weights, same seed):

* a stateful layer called one time step at a time (the streaming step of a served model) gives
  the stock layer's outputs and states over the whole sequence;
* sequences on both sides of the engine's unpacked-step threshold (types.h RnnStepsUnpacked:
  steps · batch <= 32), plain and with recurrent dropout, outputs and every gradient;
* an inference call (training off) emits no reserve, and differentiating through it still
  gives the stock layer's gradients (the registered gradient runs the forward again);
* integer features are cast to the compute dtype, as the stock layer's product does.
"""
import numpy as np
import pytest
import tensorflow as tf

keras = pytest.importorskip("keras")

import tf_rnn_ops.keras as K  # noqa: E402
from test_keras_layers import _assert_close, _compare, count_calls, make_pair  # noqa: E402

LAYERS = {
    "lstm": (keras.layers.LSTM, K.LSTM, {}),
    "gru": (keras.layers.GRU, K.GRU, {}),
    "gru_reset_before": (keras.layers.GRU, K.GRU, {"reset_after": False}),
    "simple": (keras.layers.SimpleRNN, K.SimpleRNN, {}),
}
I = 3


def _pair(kind, shape, units=5, **kw):
    stock_cls, ours_cls, extra = LAYERS[kind]
    return make_pair(stock_cls, ours_cls, units, shape, units + len(kind), **dict(extra, **kw))


def _x(seed, shape):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


@pytest.fixture
def fused_calls(monkeypatch):
    return count_calls(monkeypatch, K, "_keras_rnn")


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_streaming_steps_match_stock_sequence(kind, batch, fused_calls):
    steps = 7
    x = _x(1, (batch, steps, I))
    stock, _ = _pair(kind, (batch, steps, I), return_sequences=True, return_state=True)
    expected, *s_states = stock(x)
    _, ours = _pair(kind, (batch, 1, I), stateful=True)
    ours.set_weights(stock.get_weights())

    @tf.function
    def step(x1):
        return ours(x1, training=False)
    got = np.stack([np.asarray(step(x[:, t:t + 1])) for t in range(steps)], axis=1)
    _assert_close([got], [np.asarray(expected)], what="streamed outputs")
    # The states the stream left are the stock sequence's final states.
    for o, s in zip(ours.states, s_states):
        np.testing.assert_allclose(o.numpy(), np.asarray(s), rtol=2e-5, atol=2e-5)
    assert fused_calls and set(fused_calls) <= {"lstm", "gru", "rnn_tanh"}


@pytest.mark.parametrize("steps,batch", [(1, 1), (1, 6), (3, 5), (8, 4), (9, 4), (20, 4)])
@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_sizes_across_the_unpacked_threshold(kind, steps, batch, fused_calls):
    shape = (batch, steps, I)
    stock, ours = _pair(kind, shape, return_sequences=True, return_state=True)
    _compare(stock, ours, _x(2, shape), training=True)
    _compare(stock, ours, _x(3, shape), training=False)
    stock, ours = _pair(kind, shape, recurrent_dropout=0.3, seed=4, return_sequences=True)
    _compare(stock, ours, _x(4, shape), training=True)
    assert len(fused_calls) == 3


@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_inference_call_has_no_reserve_and_exact_gradients(kind, monkeypatch):
    shape = (4, 6, I)
    stock, ours = _pair(kind, shape, return_sequences=True)
    reserves = []
    real = K._keras_rnn

    def recording(**kw):
        out = real(**kw)
        reserves.append((kw["is_training"], int(tf.size(out[3]))))
        return out
    monkeypatch.setattr(K, "_keras_rnn", recording)
    _compare(stock, ours, _x(5, shape), training=False)
    _compare(stock, ours, _x(6, shape), training=True)
    assert reserves[0] == (False, 0)
    assert reserves[1][0] is True and reserves[1][1] > 0


@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_integer_features(kind):
    stock, ours = _pair(kind, (1, 2, 2), units=2)
    feats = np.array([[[1, 2], [3, 4]]])          # int64, as in the issue
    for x in (feats, tf.constant(feats, tf.int32)):
        got, want = ours(x), stock(x)
        assert got.dtype == want.dtype == tf.float32
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5, atol=2e-5)
    inp = keras.Input((2, 2), dtype="int32")
    model_s = keras.Model(inp, stock(inp))
    model_o = keras.Model(inp, ours(inp))
    np.testing.assert_allclose(model_o.predict(feats, verbose=0),
                               model_s.predict(feats, verbose=0), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_mixed_precision_step_runs_in_float32_on_the_variables(kind, policy, monkeypatch):
    """A mixed-precision call on the CPU, a streaming step, a long call or a training call,
    runs the mixed op on the 16-bit input and the float32 variables (no cast of the weights
    and back; mixed_bfloat16's with bf16 products). Outputs and gradients stay the stock
    layer's, in the compute dtype's tolerance."""
    dtypes = []
    real = K._keras_rnn

    def recording(**kw):
        dtypes.append((kw["mixed"], kw["input"].dtype, kw["kernel"].dtype))
        return real(**kw)
    monkeypatch.setattr(K, "_keras_rnn", recording)
    keras.mixed_precision.set_global_policy(policy)
    try:
        compute = tf.as_dtype(policy.split("_")[1])
        step_shape, long_shape = (2, 1, I), (4, 20, I)
        stock, ours = _pair(kind, step_shape, return_sequences=True)
        got, want = ours(_x(7, step_shape), training=False), stock(_x(7, step_shape))
        assert got.dtype == want.dtype == compute
        _assert_close([np.asarray(tf.cast(got, tf.float64))],
                      [np.asarray(tf.cast(want, tf.float64))], dtype=compute.name,
                      what="mixed step")
        assert dtypes[-1] == (True, compute, tf.float32)
        _compare(stock, ours, _x(8, step_shape), training=False, dtype=compute.name)
        stock, ours = _pair(kind, long_shape, return_sequences=True)
        ours(_x(9, long_shape), training=False)
        assert dtypes[-1] == (True, compute, tf.float32)
        ours(_x(9, step_shape[:1] + long_shape[1:]), training=True)
        # training: the mixed pair (mixed_bfloat16's with bf16 products,
        # test_mixed_bf16_training.py)
        assert dtypes[-1] == (True, compute, tf.float32)
    finally:
        keras.mixed_precision.set_global_policy("float32")
