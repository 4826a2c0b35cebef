"""tf_rnn_ops.keras layers in the configurations cuDNN cannot run, fused in TfRnn>KerasRNN, against
the stock Keras 3 layers (same weights, same seed): recurrent dropout in training (one mask per
gate, as Keras 3 draws them with implementation=1), implementation=1 input dropout (one mask per
gate: pre-projected input), LSTM/GRU activations other than tanh/sigmoid (relu, linear, sigmoid,
Keras's hard_sigmoid = relu6(x + 3) / 6), GRU reset_after=False; with masks, go_backwards,
Bidirectional, mixed precision. Outputs, final states and gradients of inputs, initial states
and every weight; the traced training step has the fused op and no loop. Bad inputs of the op
raise InvalidArgumentError naming the input.
"""
import warnings

import numpy as np
import pytest
import tensorflow as tf

keras = pytest.importorskip("keras")

import tf_rnn_ops.keras as K  # noqa: E402
from tf_rnn_ops._loader import load_library  # noqa: E402
from test_keras_layers import (B, I, T, _compare, _np_rng, _op_types, _randomize,  # noqa: E402
                               _x, fused_calls, make_pair)  # noqa: F401  (fixture)
from test_keras_masks import MASKS  # noqa: E402

KINDS = {
    "lstm": (keras.layers.LSTM, K.LSTM, "lstm"),
    "gru": (keras.layers.GRU, K.GRU, "gru"),
    "simple": (keras.layers.SimpleRNN, K.SimpleRNN, "rnn_tanh"),
}


@pytest.fixture(autouse=True)
def _no_fallback():
    """None of these configurations may fall back to the stock loop (it warns)."""
    K._warned.clear()
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*running the stock Keras loop.*")
        yield


def _pair(kind, units=5, input_shape=(B, T, I), **kw):
    stock_cls, ours_cls, _ = KINDS[kind]
    return make_pair(stock_cls, ours_cls, units, input_shape, units, **kw)


def _states(kind, units=5):
    n = 2 if kind == "lstm" else 1
    return [tf.constant(_np_rng(60 + s).normal(size=(B, units)).astype(np.float32))
            for s in range(n)]


RDROP_OPTS = [
    dict(),
    dict(return_sequences=True),
    dict(return_sequences=True, return_state=True, go_backwards=True),
    dict(dropout=0.3),                      # implementation=1: one input mask per gate
    dict(dropout=0.3, return_sequences=True, use_bias=False),
]


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("opts", RDROP_OPTS,
                         ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default")
def test_recurrent_dropout_in_training(kind, opts, fused_calls):
    stock, ours = _pair(kind, recurrent_dropout=0.4, seed=11, **opts)
    _compare(stock, ours, _x(41), training=True, initial_state=_states(kind))
    assert fused_calls == [KINDS[kind][2]]
    # The masks are the cell's: training differs from inference, which is cuDNN's op.
    def first(o):
        return np.asarray(o[0] if isinstance(o, (list, tuple)) else o)
    assert not np.allclose(first(ours(_x(41), training=True)),
                           first(ours(_x(41), training=False)))


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("batch,steps,units", [(8, 48, 20), (256, 6, 128)])
def test_recurrent_dropout_many_rows(kind, batch, steps, units, fused_calls):
    # 8 x 48 = 384 time rows: each gate's recurrent-weight gradient multiplies more rows than
    # one K chunk of the engine's kernels (320 floats on AVX and AVX2), so its sum spans chunks;
    # 256 x 6 = 1536 at 128 units: more than one slab of packed::GemmTN's bounded buffers too.
    # (Few steps: with these weights at 256 units the layer is chaotic, stock's own outputs
    # moving by 7e-4 at step 20 and 1.8 at step 96 when x moves by 1e-6, so ours and stock part
    # past the tolerance after 10-20 steps.)
    shape = (batch, steps, 3)
    stock, ours = _pair(kind, units=units, input_shape=shape, recurrent_dropout=0.4, seed=13,
                        return_sequences=True)
    _compare(stock, ours, _x(44, shape), training=True)
    assert fused_calls == [KINDS[kind][2]]


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("mask_name", ["left", "holes", "mixed"])
def test_recurrent_dropout_with_masks(kind, mask_name, fused_calls):
    stock, ours = _pair(kind, recurrent_dropout=0.3, dropout=0.2, seed=5,
                        return_sequences=True)
    _compare(stock, ours, _x(42), training=True, mask=tf.constant(MASKS[mask_name]))
    assert fused_calls == [KINDS[kind][2]]


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_input_dropout_one_mask_per_gate(kind, fused_calls):
    # implementation=1 without recurrent dropout: the per-gate input projections are computed
    # outside the op (preprojected input).
    stock, ours = _pair(kind, dropout=0.4, seed=7, implementation=1, return_sequences=True)
    stock.use_cudnn = False  # stock Keras 3.15's cuDNN attempt breaks on the mask list
    _compare(stock, ours, _x(43), training=True)
    _compare(stock, ours, _x(43), training=False)
    assert fused_calls == [kind, kind]  # training (pre-projected) and inference


ACTS = [("relu", "sigmoid"), ("linear", "hard_sigmoid"), ("sigmoid", "tanh"),
        ("tanh", "hard_sigmoid"), ("hard_sigmoid", "linear")]


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("acts", ACTS, ids=lambda a: f"{a[0]}-{a[1]}")
def test_activations(kind, acts, fused_calls):
    stock, ours = _pair(kind, activation=acts[0], recurrent_activation=acts[1],
                        return_sequences=True, return_state=True)
    _compare(stock, ours, _x(44), initial_state=_states(kind))
    assert fused_calls == [kind]


def test_hard_sigmoid_is_keras_not_mps():
    # Keras 3: relu6(x + 3) / 6, slope 1/6 (MPSGraph's hard sigmoid is 0.2·x + 0.5).
    x = tf.constant([-4.0, -2.0, 0.0, 1.5, 2.9, 3.5])
    np.testing.assert_allclose(keras.activations.hard_sigmoid(x).numpy(),
                               np.clip(x.numpy() / 6 + 0.5, 0, 1), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("opts", [dict(), dict(use_bias=False), dict(recurrent_dropout=0.3),
                                  dict(go_backwards=True, activation="relu")],
                         ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default")
def test_gru_reset_before(opts, fused_calls):
    stock, ours = _pair("gru", reset_after=False, seed=9, return_sequences=True, **opts)
    _compare(stock, ours, _x(45), training=True, initial_state=_states("gru"))
    _compare(stock, ours, _x(46), mask=tf.constant(MASKS["left"]))
    assert fused_calls == ["gru", "gru"]


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_bidirectional_recurrent_dropout(kind, fused_calls):
    def make(cls):
        return keras.layers.Bidirectional(cls(4, recurrent_dropout=0.3, seed=3,
                                              return_sequences=True))
    stock, ours = make(KINDS[kind][0]), make(KINDS[kind][1])
    stock.build((B, T, I))
    ours.build((B, T, I))
    _randomize(stock, 12)
    ours.set_weights(stock.get_weights())
    _compare(stock, ours, _x(47), training=True, mask=tf.constant(MASKS["left"]))
    assert fused_calls == [kind, kind]


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_mixed_precision(kind, policy, fused_calls):
    keras.mixed_precision.set_dtype_policy(policy)
    try:
        stock, ours = _pair(kind, recurrent_dropout=0.3, seed=4, return_sequences=True,
                            activation="relu", recurrent_activation="hard_sigmoid")
        _compare(stock, ours, _x(48), dtype=policy.split("_")[1], training=True)
    finally:
        keras.mixed_precision.set_dtype_policy("float32")
    assert fused_calls == [kind]


@pytest.mark.parametrize("kind", list(KINDS))
def test_fit_train_function_has_fused_op_and_no_loop(kind):
    model = keras.Sequential([keras.Input((T, I)),
                              KINDS[kind][1](4, recurrent_dropout=0.25, dropout=0.1, seed=1),
                              keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x, y = _x(49), _np_rng(50).normal(size=(B, 1)).astype(np.float32)
    model.fit(x, y, epochs=1, batch_size=B, verbose=0)
    # The step model.fit traces (Keras 3 TensorFlow trainer: train_step in a tf.function).
    step = tf.function(model.train_step)
    types = _op_types(step.get_concrete_function((tf.constant(x), tf.constant(y))))
    assert "TfRnn>KerasRNN" in types and "TfRnn>KerasRNNBackprop" in types, sorted(types)
    assert not types & {"While", "StatelessWhile"}, types


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_saved_model_and_keras_round_trip(kind, tmp_path):
    layer_kw = dict(recurrent_dropout=0.3, activation="relu", recurrent_activation="hard_sigmoid")
    if kind == "gru":
        layer_kw["reset_after"] = False
    model = keras.Sequential([keras.Input((T, I)), KINDS[kind][1](4, **layer_kw),
                              keras.layers.Dense(1)])
    x = _x(51)
    expected = np.asarray(model(x))
    model.save(tmp_path / "m.keras")
    again = keras.models.load_model(tmp_path / "m.keras")
    assert type(again.layers[0]) is KINDS[kind][1]
    np.testing.assert_allclose(np.asarray(again(x)), expected, rtol=1e-6, atol=1e-6)
    model.export(str(tmp_path / "sm"), verbose=False)
    loaded = tf.saved_model.load(str(tmp_path / "sm"))
    np.testing.assert_allclose(np.asarray(loaded.serve(tf.constant(x))), expected, rtol=1e-6,
                               atol=1e-6)


# --- the op itself: bad inputs ----------------------------------------------------------------

def _op_kw(mode="lstm", H=3, I_=2, mask_cols=None, preprojected=False, two_biases=False,
           **extra):
    K_ = {"lstm": 4, "gru": 3, "rnn_tanh": 1}[mode]
    rng = _np_rng(70)
    x_cols = K_ * H if preprojected else I_

    def r(*shape):
        return tf.constant(rng.normal(size=shape) * 0.3, tf.float32)
    kw = dict(input=r(2, 4, x_cols),  # batch-major [B, T, I]
              input_h=tf.zeros([2, H]), input_c=tf.zeros([2, H]),
              kernel=tf.zeros([0, K_ * H]) if preprojected else r(I_, K_ * H),
              recurrent_kernel=r(H, K_ * H), bias=r(2, K_ * H) if two_biases else r(K_ * H),
              sequence_lengths=tf.constant([2, 1], tf.int32),
              recurrent_mask=tf.ones([2, K_ * H if mask_cols is None else mask_cols]),
              rnn_mode=mode, preprojected=preprojected)
    kw.update(extra)
    return kw


def test_op_runs_and_bad_inputs_name_the_input():
    lib = load_library()
    out = lib.tf_rnn_keras_rnn(**_op_kw())
    assert out[0].shape == (2, 4, 3)
    lib.tf_rnn_keras_rnn(**_op_kw(recurrent_mask=tf.zeros([0])))           # no mask
    lib.tf_rnn_keras_rnn(**_op_kw(sequence_lengths=tf.zeros([0], tf.int32)))  # full lengths
    lib.tf_rnn_keras_rnn(**_op_kw(mode="gru", preprojected=True, reset_after=False))
    lib.tf_rnn_keras_rnn(**_op_kw(mode="gru", two_biases=True))
    cases = [
        (_op_kw(mask_cols=5), "recurrent_mask"),
        (_op_kw(recurrent_mask=tf.ones([3, 12])), "recurrent_mask"),
        (_op_kw(recurrent_mask=tf.ones([2, 12, 1])), "recurrent_mask"),
        (_op_kw(recurrent_mask=tf.ones([0, 0])), "recurrent_mask"),
        (dict(_op_kw(), input=tf.ones([2, 4, 7]), preprojected=True), "input"),
        (_op_kw(sequence_lengths=tf.constant([5, 1], tf.int32)), "sequence_lengths"),
        (_op_kw(sequence_lengths=tf.constant([1, 1, 1], tf.int32)), "sequence_lengths"),
        (_op_kw(kernel=tf.ones([2, 11])), "kernel"),
        (_op_kw(kernel=tf.ones([3, 12])), "kernel"),
        (_op_kw(recurrent_kernel=tf.ones([3, 9])), "recurrent_kernel"),
        (_op_kw(recurrent_kernel=tf.ones([12])), "recurrent_kernel"),
        (_op_kw(bias=tf.ones([11])), "bias"),
        (_op_kw(bias=tf.ones([3, 12])), "bias"),
        (_op_kw(input_h=tf.zeros([3, 3])), "input_h"),
        (_op_kw(input_c=tf.zeros([2, 4])), "input_c"),
        (_op_kw(input=tf.ones([2, 4])), "input"),
    ]
    for kw, name in cases:
        with pytest.raises((tf.errors.InvalidArgumentError, ValueError), match=name):
            lib.tf_rnn_keras_rnn(**kw)
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError, TypeError)):
        lib.tf_rnn_keras_rnn(**_op_kw(activation="softplus"))
    # An internal op: TensorFlow's own dtype check names the position (recurrent_mask is #7).
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError), match="#7"):
        lib.tf_rnn_keras_rnn(**_op_kw(recurrent_mask=tf.ones([2, 12], tf.float64)))