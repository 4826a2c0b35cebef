"""ONNX export of the layers (tf_rnn_ops/onnx_export.py): tf2onnx turns ``TfRnn>KerasRNN`` into
native ONNX ``LSTM`` / ``GRU`` / ``RNN`` nodes, one per layer (one for a Bidirectional), no
``Loop`` or ``Scan``, and onnxruntime's outputs equal the TensorFlow outputs of our layers
(which run the fused op, independently of the export code). Skipped without tf2onnx or
onnxruntime (``./configure.sh`` installs them).
"""
import subprocess
import sys
import warnings

import numpy as np
import pytest
import tensorflow as tf

keras = pytest.importorskip("keras")
tf2onnx = pytest.importorskip("tf2onnx")
ort = pytest.importorskip("onnxruntime")

import tf_rnn_ops  # noqa: E402,F401
import tf_rnn_ops.keras as K  # noqa: E402
from tf_rnn_ops._loader import load_library  # noqa: E402

L = keras.layers
B, T, I, H = 3, 6, 4, 5
TOL = {"float32": dict(rtol=2e-5, atol=2e-5)}
NATIVE = {"LSTM": "LSTM", "GRU": "GRU", "SimpleRNN": "RNN"}
LAYER = {"LSTM": K.LSTM, "GRU": K.GRU, "SimpleRNN": K.SimpleRNN}


def _data(seed, pad=None):
    """x [B, T, I]; pad 'right' / 'left': rows of 6, 4 and 0 valid steps (zeros elsewhere)."""
    x = np.random.default_rng(seed).standard_normal((B, T, I)).astype(np.float32)
    if pad:
        for b, n in enumerate((T, 4, 0)):
            if pad == "right":
                x[b, n:] = 0
            else:
                x[b, :T - n] = 0
    return x


def export(model, arrays):
    """(onnx model, onnxruntime outputs) of model over arrays, via tf2onnx.from_function."""
    spec = [tf.TensorSpec(a.shape, tf.float32, name=f"in{i}") for i, a in enumerate(arrays)]
    fn = tf.function(lambda *a: model(list(a) if len(a) > 1 else a[0], training=False))
    proto, _ = tf2onnx.convert.from_function(fn, input_signature=spec, opset=17)
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    feed = {i.name: a for i, a in zip(sess.get_inputs(), arrays)}
    return proto, sess.run(None, feed)


def op_types(proto):
    return [n.op_type for n in proto.graph.node]


def check(model, arrays, native, count=1, direction=None):
    proto, got = export(model, arrays)
    want = model(arrays if len(arrays) > 1 else arrays[0], training=False)
    want = [np.asarray(w) for w in (want if isinstance(want, (list, tuple)) else [want])]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, **TOL["float32"])
    ops = op_types(proto)
    assert ops.count(native) == count, ops
    assert not {"Loop", "Scan"} & set(ops), ops
    assert not any(n.op_type.startswith("TfRnn") or n.domain for n in proto.graph.node), ops
    nodes = [n for n in proto.graph.node if n.op_type == native]
    if direction:
        for n in nodes:
            attrs = {a.name: a for a in n.attribute}
            assert attrs["direction"].s.decode() == direction
    return nodes


def seq_model(kind, pad=None, **kw):
    inp = keras.Input((T, I), batch_size=B)
    h = L.Masking(0.0)(inp) if pad else inp
    return keras.Model(inp, LAYER[kind](H, **kw)(h))


@pytest.mark.parametrize("kind,kw", [
    ("LSTM", dict(return_sequences=True)),
    ("LSTM", dict(activation="relu", recurrent_activation="hard_sigmoid")),
    ("GRU", dict(return_sequences=True, reset_after=True)),
    ("GRU", dict(return_sequences=True, reset_after=False)),
    ("GRU", dict(activation="linear", recurrent_activation="hard_sigmoid")),
    ("SimpleRNN", dict(return_sequences=True)),
    ("SimpleRNN", dict(return_sequences=True, activation="relu")),
])
def test_layer(kind, kw):
    nodes = check(seq_model(kind, **kw), [_data(1)], NATIVE[kind], direction="forward")
    if kind == "GRU":
        attrs = {a.name: a.i for a in nodes[0].attribute}
        assert attrs["linear_before_reset"] == int(kw["reset_after"] if "reset_after" in kw
                                                   else True)


@pytest.mark.parametrize("pad", ["right", "left"])
@pytest.mark.parametrize("kind", ["LSTM", "GRU", "SimpleRNN"])
def test_mask(kind, pad):
    """Masking before the layer: sequence_lens (lengths 6, 4, 0), every output, both paddings."""
    model = seq_model(kind, pad, return_sequences=True, return_state=True)
    nodes = check(model, [_data(2, pad)], NATIVE[kind])
    assert nodes[0].input[4], "sequence_lens from the mask"


@pytest.mark.parametrize("pad", [None, "left"])
def test_go_backwards(pad):
    check(seq_model("GRU", pad, return_sequences=True, go_backwards=True), [_data(3, pad)],
          "GRU")


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_initial_state_and_mask(kind):
    """Initial states as model inputs, with a fully masked row (it keeps its initial state)."""
    n_states = 2 if kind == "LSTM" else 1
    inp = keras.Input((T, I), batch_size=B)
    states = [keras.Input((H,), batch_size=B) for _ in range(n_states)]
    out = LAYER[kind](H, return_sequences=True, return_state=True)(
        L.Masking(0.0)(inp), initial_state=states)
    model = keras.Model([inp] + states, out)
    rng = np.random.default_rng(4)
    arrays = [_data(4, "left")] + [rng.standard_normal((B, H)).astype(np.float32)
                                   for _ in range(n_states)]
    check(model, arrays, NATIVE[kind])


def test_stacked():
    inp = keras.Input((T, I), batch_size=B)
    h = K.LSTM(H, return_sequences=True)(L.Masking(0.0)(inp))
    h = K.GRU(H, return_sequences=True)(h)
    model = keras.Model(inp, K.SimpleRNN(3)(h))
    proto, _ = export(model, [_data(5, "right")])
    assert sorted(t for t in op_types(proto) if t in NATIVE.values()) == ["GRU", "LSTM", "RNN"]
    check(model, [_data(5, "right")], "GRU")


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "SimpleRNN"])
def test_bidirectional_one_node(kind):
    inp = keras.Input((T, I), batch_size=B)
    out = L.Bidirectional(LAYER[kind](H, return_sequences=True, return_state=True))(inp)
    check(keras.Model(inp, out), [_data(6)], NATIVE[kind], direction="bidirectional")


@pytest.mark.parametrize("kind,pad", [("LSTM", "left"), ("GRU", "right"),
                                      ("SimpleRNN", "left")])
def test_bidirectional_masked_one_node(kind, pad):
    """With a mask too: the backward op reads the forward op's compacted input reversed within
    each row's length, so the pair is one bidirectional node with sequence_lens."""
    inp = keras.Input((T, I), batch_size=B)
    out = L.Bidirectional(LAYER[kind](H, return_sequences=True, return_state=True))(
        L.Masking(0.0)(inp))
    check(keras.Model(inp, out), [_data(6, pad)], NATIVE[kind], direction="bidirectional")


def test_bidirectional_masked_last_output_concat():
    inp = keras.Input((T, I), batch_size=B)
    out = L.Bidirectional(K.LSTM(H))(L.Masking(0.0)(inp))
    check(keras.Model(inp, out), [_data(7, "left")], "LSTM", direction="bidirectional")


def test_raw_op_lengths_and_steps_past_them():
    """The op itself: rows of 6, 3 and 0 steps with initial states; every output element,
    steps past a row's length included (the op and onnxruntime both write zeros there)."""
    rng = np.random.default_rng(7)
    w = [rng.standard_normal(s).astype(np.float32) * 0.5 for s in ((I, 4 * H), (H, 4 * H),
                                                                    (4 * H,))]

    def fn(x, h0, c0):
        lengths = tf.constant([T, 3, 0], tf.int32)
        out, h, c, _ = load_library().tf_rnn_keras_rnn(
            input=x, input_h=h0, input_c=c0, kernel=w[0], recurrent_kernel=w[1], bias=w[2],
            sequence_lengths=lengths, recurrent_mask=tf.zeros([0]), rnn_mode="lstm",
            is_training=False)
        return out, h, c

    arrays = [_data(7), rng.standard_normal((B, H)).astype(np.float32),
              rng.standard_normal((B, H)).astype(np.float32)]
    spec = [tf.TensorSpec(a.shape, tf.float32) for a in arrays]
    proto, _ = tf2onnx.convert.from_function(tf.function(fn), input_signature=spec, opset=17)
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {i.name: a for i, a in zip(sess.get_inputs(), arrays)})
    want = [np.asarray(t) for t in fn(*arrays)]
    assert np.all(want[0][1, 3:] == 0) and np.all(want[0][2] == 0)
    np.testing.assert_array_equal(want[1][2], arrays[1][2])   # length 0: the initial state
    for g, wnt in zip(got, want):
        np.testing.assert_allclose(g, wnt, **TOL["float32"])
    assert op_types(proto).count("LSTM") == 1


# --- what ONNX cannot express ------------------------------------------------------------

def _export_training(layer, caplog):
    """Exports model(x, training=True): (the handler's logged errors, the model's op types).
    tf2onnx's from_function converts with continue_on_error=True: it logs the handler's
    ValueError and leaves the op unconverted."""
    inp = keras.Input((T, I), batch_size=B)
    model = keras.Model(inp, layer(inp))
    fn = tf.function(lambda x: model(x, training=True))
    caplog.clear()
    proto, _ = tf2onnx.convert.from_function(
        fn, input_signature=[tf.TensorSpec((B, T, I), tf.float32)], opset=17)
    errors = [str(r.exc_info[1]) for r in caplog.records if r.exc_info]
    return errors, op_types(proto)


def test_recurrent_dropout_in_training_says_why(caplog):
    errors, ops = _export_training(K.GRU(H, recurrent_dropout=0.3, seed=1), caplog)
    assert any("recurrent_mask (Keras recurrent dropout" in e and "no ONNX equivalent" in e
               for e in errors), errors
    assert "TfRnn>KerasRNN" in ops and "GRU" not in ops


def test_preprojected_input_in_training_says_why(caplog):
    errors, ops = _export_training(K.LSTM(H, dropout=0.3, implementation=1, seed=1), caplog)
    assert any("preprojected input" in e and "no ONNX equivalent" in e for e in errors), errors
    assert "TfRnn>KerasRNN" in ops and "LSTM" not in ops


def test_custom_activation_converts_unfused_and_says_why(monkeypatch):
    """A custom activation runs the stock loop (the layer warns why); the export still works,
    with a loop instead of a native node, and equals the layer."""
    monkeypatch.setattr(K, "_warned", set())   # the layers warn once per process and reason
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = seq_model("SimpleRNN", return_sequences=True, activation=tf.nn.softsign)
        proto, got = export(model, [_data(8)])
    assert any("activation is not tanh or relu" in str(w.message) for w in caught)
    assert "RNN" not in op_types(proto)
    np.testing.assert_allclose(got[0], model(_data(8)), **TOL["float32"])


def test_import_does_not_import_tf2onnx():
    """``import tf_rnn_ops`` leaves tf2onnx unimported; importing it later registers."""
    code = ("import sys, tf_rnn_ops; assert 'tf2onnx' not in sys.modules\n"
            "import tf2onnx\n"
            "from tf2onnx.handler import tf_op\n"
            "ops = [m for opset in tf_op.get_opsets()[''] for m in opset]\n"
            "assert 'TfRnn>KerasRNN' in ops, 'not registered'\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_from_keras():
    """tf2onnx.convert.from_keras works for this functional model with Keras 3 (it fails for
    some Keras 3 models even with stock layers: KeyError 'keras_tensor_...')."""
    inp = keras.Input((T, I), batch_size=B)
    model = keras.Model(inp, L.Bidirectional(K.GRU(H, return_sequences=True))(inp))
    proto, _ = tf2onnx.convert.from_keras(model, opset=17)
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    x = _data(9)
    got = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    np.testing.assert_allclose(got, model(x), **TOL["float32"])
    assert op_types(proto).count("GRU") == 1 and "Loop" not in op_types(proto)
