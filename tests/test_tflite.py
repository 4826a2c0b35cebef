"""TFLite conversion of models with our layers (tf_rnn_ops/_tflite.py).

The stock converter, ``tf.lite.TFLiteConverter.from_keras_model``, builtin ops only: an LSTM
it can fuse becomes ``UNIDIRECTIONAL_SEQUENCE_LSTM`` (no ``WHILE``); everything else converts to
the stock loop's ``WHILE``. The reference is our layer's own output in TensorFlow (the fused
op, which other tests hold against stock Keras); the TFLite interpreter is the independent
implementation under test here.
"""
import numpy as np
import pytest
import tensorflow as tf

keras = pytest.importorskip("keras")

from export_util import tflite_interpreter  # noqa: E402
import tf_rnn_ops.keras as K  # noqa: E402

L = keras.layers
B, T, I = 2, 7, 4
FUSED = "UNIDIRECTIONAL_SEQUENCE_LSTM"
# The interpreter's fused LSTM and its WHILE loop against the TF kernel, float32.
RTOL, ATOL = 2e-5, 2e-5


def _randomize(model, seed):
    rng = np.random.default_rng(seed)
    model.set_weights([rng.uniform(-0.5, 0.5, size=w.shape).astype(w.dtype)
                       for w in model.get_weights()])
    return model


def _model(body, inputs=None, seed=0):
    """A functional model with static batch B around `body` (a function of the input)."""
    inputs = inputs or [keras.Input(batch_shape=(B, T, I))]
    out = body(*inputs)
    return _randomize(keras.Model(inputs, out), seed)


def _convert(model):
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]   # no Flex, no custom
    return conv.convert()


def _run(content, model, xs, invokes=1, reset=True):
    """The interpreter's outputs (in the model's output order) and op names, after `invokes`
    invokes, each with the inputs set again (fed by name: the converter orders them by name)
    and, with `reset`, the variable tensors (the fused LSTM's states) zeroed first."""
    interp = tflite_interpreter(content)
    interp.allocate_tensors()
    by_name = {d["name"]: d["index"] for d in interp.get_input_details()}
    for _ in range(invokes):
        if reset:
            interp.reset_all_variables()
        for t, x in zip(model.inputs, xs):
            index = by_name[f"serving_default_{t.name}:0"] if len(xs) > 1 else min(by_name.values())
            interp.set_tensor(index, x)
        interp.invoke()
    # Output names sort as the model's outputs (StatefulPartitionedCall:0, :1, ...).
    outs = sorted(interp.get_output_details(), key=lambda d: d["name"])
    ops = [op["op_name"] for op in interp._get_ops_details()]  # noqa: SLF001
    return [interp.get_tensor(d["index"]) for d in outs], ops


def _inputs(model, seed, masked=False):
    rng = np.random.default_rng(seed)
    xs = [rng.normal(size=tuple(t.shape)).astype("float32") for t in model.inputs]
    if masked:                  # row 0 right-padded, row 1 left-padded (Masking(0.0))
        xs[0][0, T - 3:] = 0.0
        xs[0][1, :2] = 0.0
    return xs


def _check(model, xs, fused, what):
    expected = model(xs if len(xs) > 1 else xs[0], training=False)
    expected = expected if isinstance(expected, (list, tuple)) else [expected]
    got, ops = _run(_convert(model), model, xs, invokes=2)
    assert ops.count(FUSED) == fused, f"{what}: {ops}"
    assert ("WHILE" in ops) == (fused == 0), f"{what}: {ops}"
    assert len(got) == len(expected), what
    for k, (g, e) in enumerate(zip(got, expected)):
        e = np.asarray(e)
        assert g.shape == e.shape, f"{what}[{k}]: {g.shape} != {e.shape}"
        np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL * max(1.0, np.abs(e).max()),
                                   err_msg=f"{what}[{k}]")
    return ops


FUSABLE = {
    "last": (lambda x: K.LSTM(5)(x), 1),
    "sequences": (lambda x: K.LSTM(5, return_sequences=True)(x), 1),
    "go_backwards": (lambda x: K.LSTM(5, return_sequences=True, go_backwards=True)(x), 1),
    "no_bias": (lambda x: K.LSTM(5, use_bias=False)(x), 1),
    "stacked": (lambda x: K.LSTM(3)(K.LSTM(5, return_sequences=True)(x)), 2),
    "bidirectional": (lambda x: L.Bidirectional(K.LSTM(4, return_sequences=True))(x), 2),
    "bidirectional_last": (lambda x: L.Bidirectional(K.LSTM(4), merge_mode="sum")(x), 2),
    "conv_lstm_dense": (lambda x: L.Dense(2)(K.LSTM(6)(L.Conv1D(3, 2, padding="same")(x))), 1),
}


@pytest.mark.parametrize("name", sorted(FUSABLE))
def test_fusable_lstm_becomes_the_builtin_sequence_lstm(name):
    body, fused = FUSABLE[name]
    model = _model(body, seed=len(name))
    _check(model, _inputs(model, seed=1), fused, name)


def test_stock_layer_converts_to_a_while_loop():
    """What stock Keras 3 gives (the baseline of the fused form above)."""
    model = _model(lambda x: L.LSTM(5)(x), seed=2)
    _check(model, _inputs(model, seed=3), 0, "stock")


NOT_FUSABLE = {
    "gru": lambda x: K.GRU(5, return_sequences=True)(x),
    "gru_reset_before": lambda x: K.GRU(5, reset_after=False)(x),
    "simple_rnn": lambda x: K.SimpleRNN(5, return_sequences=True)(x),
    "simple_rnn_relu": lambda x: K.SimpleRNN(5, activation="relu")(x),
    "return_state": lambda x: K.LSTM(5, return_state=True)(x),
    "mask": lambda x: K.LSTM(5, return_sequences=True)(L.Masking(0.0)(x)),
    "hard_sigmoid": lambda x: K.LSTM(5, recurrent_activation="hard_sigmoid")(x),
    "bidirectional_gru": lambda x: L.Bidirectional(K.GRU(4))(x),
    "gru_backwards_no_bias": lambda x: K.GRU(5, go_backwards=True, use_bias=False)(x),
    "gru_softsign": lambda x: K.GRU(5, activation="softsign")(x),
    "lstm_stateful_states": lambda x: K.LSTM(5, return_state=True, go_backwards=True)(x)[1:],
    "mask_gru_backwards": lambda x: K.GRU(5, go_backwards=True)(L.Masking(0.0)(x)),
    "mask_simple_rnn_last": lambda x: K.SimpleRNN(5)(L.Masking(0.0)(x)),
    "mask_bidirectional": lambda x: L.Bidirectional(K.LSTM(4, return_sequences=True))(
        L.Masking(0.0)(x)),
}


WHY = {"gru": "no GRU op", "gru_reset_before": "no GRU op", "bidirectional_gru": "no GRU op",
       "gru_backwards_no_bias": "no GRU op", "gru_softsign": "no GRU op",
       "simple_rnn": "UNIDIRECTIONAL_SEQUENCE_RNN", "simple_rnn_relu": "SEQUENCE_RNN",
       "return_state": "return_state", "lstm_stateful_states": "return_state",
       "mask": "a mask", "hard_sigmoid": "other than tanh", "mask_gru_backwards": "no GRU op",
       "mask_simple_rnn_last": "SEQUENCE_RNN", "mask_bidirectional": "a mask"}


@pytest.mark.parametrize("name", sorted(NOT_FUSABLE))
def test_what_cannot_fuse_converts_to_a_loop_and_says_why(name):
    model = _model(NOT_FUSABLE[name], seed=len(name))
    with pytest.warns(UserWarning, match=f"TFLite gets a WHILE loop.*{WHY[name]}"):
        _check(model, _inputs(model, seed=4, masked=name.startswith("mask")), 0, name)


def test_initial_state_inputs():
    """States passed in are the fused op's state inputs: every invoke starts from the states
    set for it."""
    x = keras.Input(batch_shape=(B, T, I), name="x")
    h0, c0 = keras.Input(batch_shape=(B, 5), name="h0"), keras.Input(batch_shape=(B, 5), name="c0")
    model = _model(lambda x, h, c: K.LSTM(5, return_sequences=True)(x, initial_state=[h, c]),
                   inputs=[x, h0, c0], seed=5)
    xs = _inputs(model, seed=6)
    got, ops = _run(_convert(model), model, xs, invokes=2, reset=False)
    assert ops.count(FUSED) == 1 and "WHILE" not in ops, ops
    np.testing.assert_allclose(got[0], np.asarray(model(xs)), rtol=RTOL, atol=ATOL)


def test_fused_state_carries_over_without_reset():
    """TFLite's fused LSTM keeps its final state in its state tensors (variables), so an
    invoke without reset_all_variables() starts where the previous one ended (docs/DEPLOYING.md):
    the documented reason for the reset."""
    model = _model(lambda x: K.LSTM(5, return_sequences=True)(x), seed=13)
    xs = _inputs(model, seed=14)
    expected = np.asarray(model(xs[0]))
    content = _convert(model)
    once, _ = _run(content, model, xs, invokes=1, reset=False)
    twice, _ = _run(content, model, xs, invokes=2, reset=False)
    np.testing.assert_allclose(once[0], expected, rtol=RTOL, atol=ATOL)
    assert np.abs(twice[0] - expected).max() > 1e-3


def test_integer_features():
    x = keras.Input(batch_shape=(B, T, I), dtype="int32")
    model = _model(lambda x: K.LSTM(5)(x), inputs=[x], seed=7)
    xs = [np.random.default_rng(8).integers(-2, 3, size=(B, T, I)).astype("int32")]
    _check(model, xs, 1, "int32")


def test_saved_model_exported_inside_tflite_export(tmp_path):
    """The SavedModel route: export inside the block, convert the directory."""
    model = _model(lambda x: K.LSTM(5, return_sequences=True)(x), seed=9)
    with K.tflite_export():
        model.export(str(tmp_path / "sm"), verbose=False,
                     input_signature=[tf.TensorSpec([B, T, I], tf.float32)])
    conv = tf.lite.TFLiteConverter.from_saved_model(str(tmp_path / "sm"))
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    xs = _inputs(model, seed=10)
    got, ops = _run(conv.convert(), model, xs)
    assert FUSED in ops and "WHILE" not in ops, ops
    np.testing.assert_allclose(got[0], np.asarray(model(xs[0])), rtol=RTOL, atol=ATOL)


def test_concrete_function_traced_inside_tflite_export():
    """from_concrete_functions freezes the function, which loses the composite's attributes:
    the LSTM converts to the loop (correct, not fused); docs/DEPLOYING.md says to take the
    SavedModel route for the fused op."""
    model = _model(lambda x: K.LSTM(5, return_sequences=True)(x), seed=17)
    fn = tf.function(lambda x: model(x, training=False))
    with K.tflite_export():
        concrete = fn.get_concrete_function(tf.TensorSpec([B, T, I], tf.float32))
    conv = tf.lite.TFLiteConverter.from_concrete_functions([concrete])
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    xs = _inputs(model, seed=18)
    got, ops = _run(conv.convert(), model, xs)
    assert "WHILE" in ops or FUSED in ops, ops
    np.testing.assert_allclose(got[0], np.asarray(model(xs[0])), rtol=RTOL, atol=ATOL)


def test_export_outside_the_block_keeps_our_op(tmp_path):
    """A SavedModel exported outside the block runs our op (and needs tf_rnn_ops)."""
    model = _model(lambda x: K.LSTM(5, return_sequences=True)(x), seed=15)
    model.export(str(tmp_path / "sm"), verbose=False)
    ops = (tmp_path / "sm" / "saved_model.pb").read_bytes()
    assert b"TfRnn>KerasRNN" in ops


def test_model_still_runs_the_fused_op_after_conversion(monkeypatch):
    """The converter's trace is the only one that sees the TFLite form."""
    model = _model(lambda x: K.LSTM(5)(x), seed=11)
    _convert(model)
    calls = []
    real = K._keras_rnn  # noqa: SLF001
    monkeypatch.setattr(K, "_keras_rnn", lambda **kw: calls.append(1) or real(**kw))
    model.predict(_inputs(model, seed=12)[0], verbose=0)
    assert calls, "the model no longer calls TfRnn>KerasRNN after a TFLite conversion"


@pytest.mark.parametrize("name", ["lstm", "gru", "simple_rnn_backwards", "masked_lstm"])
def test_dynamic_batch_converts_to_a_loop_that_takes_any_batch(name):
    """With batch None the converter cannot fuse (nor lower the stock loop's tensor lists);
    ours converts to a while loop that runs at any batch size."""
    layer = {"lstm": lambda x: K.LSTM(5, return_sequences=True)(x),
             "gru": lambda x: K.GRU(5)(x),
             "simple_rnn_backwards": lambda x: K.SimpleRNN(5, go_backwards=True)(x),
             "masked_lstm": lambda x: K.LSTM(5, return_sequences=True)(L.Masking(0.0)(x))}[name]
    inp = keras.Input((T, I))
    model = _randomize(keras.Model(inp, layer(inp)), seed=16)
    with pytest.warns(UserWarning, match="TFLite gets a WHILE loop"):
        interp = tflite_interpreter(_convert(model))
    ops = [op["op_name"] for op in interp._get_ops_details()]  # noqa: SLF001
    assert "WHILE" in ops and FUSED not in ops, ops
    index = interp.get_input_details()[0]["index"]
    for batch in (3, 1):
        x = np.random.default_rng(batch).normal(size=(batch, T, I)).astype("float32")
        x[0, :2] = x[-1, T - 3:] = 0.0       # masked steps where there is a Masking layer
        interp.resize_tensor_input(index, [batch, T, I])
        interp.allocate_tensors()
        interp.set_tensor(index, x)
        interp.invoke()
        got = interp.get_tensor(interp.get_output_details()[0]["index"])
        np.testing.assert_allclose(got, np.asarray(model(x)), rtol=RTOL, atol=ATOL)
