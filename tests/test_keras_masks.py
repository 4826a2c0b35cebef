"""tf_rnn_ops.keras layers with any mask, SimpleRNN and unroll=True, against the stock Keras 3
layers (same weights): outputs, states and gradients of inputs, initial states and weights.

Masks: left-padded (keras.utils.pad_sequences' default), holes in the middle, fully masked
rows, all steps valid, right-padded; with go_backwards, zero_output_for_mask, return_state,
Bidirectional, stateful. The layers run the fused op on every one of them (tf_rnn_ops/keras.py
_compact): the traced graph has TfRnn>KerasRNN and no While or If.
"""
import numpy as np
import pytest
import tensorflow as tf

keras = pytest.importorskip("keras")

import tf_rnn_ops.keras as K  # noqa: E402
from test_keras_layers import (B, I, T, MASK_OPTS, _compare, _np_rng, _op_types,  # noqa: E402
                               _randomize, _x, fused_calls, make_pair)  # noqa: F401

# kind -> (stock class, our class, constructor kwargs, the op's rnn_mode)
KINDS = {
    "lstm": (keras.layers.LSTM, K.LSTM, {}, "lstm"),
    "gru": (keras.layers.GRU, K.GRU, {}, "gru"),
    "simple_tanh": (keras.layers.SimpleRNN, K.SimpleRNN, {}, "rnn_tanh"),
    "simple_relu": (keras.layers.SimpleRNN, K.SimpleRNN, dict(activation="relu"), "rnn_relu"),
}


def _pair(kind, units=5, input_shape=(B, T, I), **kw):
    stock_cls, ours_cls, base, _ = KINDS[kind]
    return make_pair(stock_cls, ours_cls, units, input_shape, units, **base, **kw)


def _states(kind, units=5, batch=B):
    n = 2 if kind == "lstm" else 1
    return [tf.constant(_np_rng(40 + s).normal(size=(batch, units)).astype(np.float32))
            for s in range(n)]


def _masks():
    """name -> [B, T] bool mask (B = 4, T = 6)."""
    right = np.arange(T)[None, :] < np.array([6, 3, 1, 0])[:, None]
    left = right[:, ::-1].copy()
    holes = np.ones((B, T), bool)
    holes[0, [1, 2]] = False
    holes[1, 0] = False
    holes[2, [0, 5]] = False
    holes[3, ::2] = False
    mixed = np.stack([left[0], holes[3], right[2], np.zeros(T, bool)])
    return {"left": left, "holes": holes, "mixed": mixed, "all": np.ones((B, T), bool),
            "right": right}


MASKS = _masks()


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("mask_name", list(MASKS))
@pytest.mark.parametrize("opts", MASK_OPTS,
                         ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default")
def test_any_mask_matches_stock(kind, mask_name, opts, fused_calls):
    stock, ours = _pair(kind, **opts)
    _compare(stock, ours, _x(21), mask=tf.constant(MASKS[mask_name]),
             initial_state=_states(kind))
    assert fused_calls == [KINDS[kind][3]]


@pytest.mark.parametrize("kind", list(KINDS))
def test_no_mask_and_unroll(kind, fused_calls):
    for opts in (dict(return_sequences=True), dict(unroll=True, return_state=True)):
        stock, ours = _pair(kind, **opts)
        _compare(stock, ours, _x(22))
    assert fused_calls == [KINDS[kind][3]] * 2


@pytest.mark.parametrize("kind", ["lstm", "simple_tanh"])
def test_traced_graph_has_fused_op_and_no_loop(kind):
    _, ours = _pair(kind, return_sequences=True)
    fn = tf.function(lambda x, m: ours(x, mask=m))
    concrete = fn.get_concrete_function(tf.constant(_x(23)), tf.constant(MASKS["left"]))
    types = _op_types(concrete)
    assert "TfRnn>KerasRNN" in types
    assert not types & {"While", "StatelessWhile", "If", "StatelessIf"}, types


@pytest.mark.parametrize("kind", ["lstm", "gru", "simple_tanh"])
def test_pad_sequences_embedding_bidirectional_model(kind, fused_calls):
    # keras.utils.pad_sequences pads on the left by default; Embedding(mask_zero=True) makes
    # the mask, Bidirectional runs a go_backwards copy. Training step gradients match stock.
    seqs = [[3, 1, 4], [1, 5, 9, 2, 6], [5], [3, 5, 8, 9, 7, 9]]
    ids = keras.utils.pad_sequences(seqs, maxlen=T)
    assert ids[0, 0] == 0 and ids[0, -1] == 4

    def model(cls):
        base = KINDS[kind][2]
        return keras.Sequential([
            keras.Input((T,), dtype="int32"),
            keras.layers.Embedding(10, I, mask_zero=True),
            keras.layers.Bidirectional(cls(4, return_sequences=True, **base)),
            keras.layers.Bidirectional(cls(3, **base)),
            keras.layers.Dense(1)])

    stock, ours = model(KINDS[kind][0]), model(KINDS[kind][1])
    _randomize(stock, 31)
    ours.set_weights(stock.get_weights())
    y = tf.constant(_np_rng(32).normal(size=(B, 1)).astype(np.float32))

    def step(m):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((m(ids) - y) ** 2)
        return loss, tape.gradient(loss, m.trainable_weights)

    ls, gs = step(stock)
    lo, go = step(ours)
    np.testing.assert_allclose(lo.numpy(), ls.numpy(), rtol=2e-5, atol=2e-6)
    for a, e in zip(go, gs):
        a, e = tf.convert_to_tensor(a), tf.convert_to_tensor(e)  # Embedding: IndexedSlices
        np.testing.assert_allclose(a.numpy(), e.numpy(), rtol=2e-4, atol=2e-5)
    assert fused_calls == [KINDS[kind][3]] * 4


@pytest.mark.parametrize("kind", ["lstm", "gru", "simple_relu"])
def test_stateful_with_left_padded_mask(kind, fused_calls):
    stock, ours = _pair(kind, stateful=True, return_sequences=True)
    for seed in (24, 25):
        _compare(stock, ours, _x(seed), mask=tf.constant(MASKS["left"]))
    for a, e in zip(ours.states, stock.states):
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), rtol=2e-5, atol=2e-5)
    assert fused_calls == [KINDS[kind][3]] * 2


def test_simple_rnn_input_dropout_same_seed(fused_calls):
    stock, ours = _pair("simple_tanh", dropout=0.4, seed=7, return_sequences=True)
    _compare(stock, ours, _x(26), training=True)
    assert fused_calls == ["rnn_tanh"]


def test_simple_rnn_other_activation_falls_back(fused_calls):
    stock, ours = _pair("simple_tanh", activation="sigmoid")
    with pytest.warns(UserWarning, match="activation is not tanh or relu"):
        _compare(stock, ours, _x(27))
    assert fused_calls == []


def test_simple_rnn_config_round_trip():
    _, ours = _pair("simple_relu")
    again = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(ours))
    assert type(again) is K.SimpleRNN and again.get_config() == ours.get_config()


def test_simple_rnn_to_stock():
    model = keras.Sequential([keras.Input((T, I)), K.SimpleRNN(4, activation="relu",
                                                               return_sequences=True)])
    _randomize(model, 33)
    stock = K.to_stock(model)
    assert type(stock.layers[0]) is keras.layers.SimpleRNN
    np.testing.assert_allclose(stock(_x(34)).numpy(), model(_x(34)).numpy(), rtol=2e-5,
                               atol=2e-5)


@pytest.mark.parametrize("kind", list(KINDS))
def test_right_padded_mask_inference_in_batch_blocks(kind, fused_calls):
    # 32 rows at inference run in batch blocks of 8-16 rows on 2-4 intra-op threads
    # (cc/engine/rnn_cpu_stack.cc ForwardBatchBlocks). The first half of the rows full length:
    # the first block fuses the input into its step's product and the others, with shorter
    # rows, project it apart; their packed weights must not be shared.
    batch, steps, width, units = 32, 6, 8, 16
    rng = _np_rng(35)
    lengths = np.concatenate([np.full(batch // 2, steps), rng.integers(0, steps + 1, batch // 2)])
    lengths[-1] = 2
    mask = tf.constant(np.arange(steps)[None, :] < lengths[:, None])
    stock, ours = _pair(kind, units=units, input_shape=(batch, steps, width),
                        return_sequences=True)
    x = rng.normal(size=(batch, steps, width)).astype(np.float32)
    got = ours(x, mask=mask, training=False).numpy()
    want = stock(x, mask=mask, training=False).numpy()
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    assert fused_calls == [KINDS[kind][3]]
