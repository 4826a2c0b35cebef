"""XLA: the Keras layers' op pair (TfRnn>KerasRNN, KerasRNNBackprop) compiles inside
tf.function(jit_compile=True) and model.compile(jit_compile=True) as one custom call into the
engine (cc/xla/), with no while loop for the recurrence.

References: the same computation without XLA (the op's CPU kernel, itself checked against
stock and float64 elsewhere) and the stock Keras layers compiled with XLA (their loop).
"""
import os
import re
import subprocess
import sys
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import tf_rnn_ops
import tf_rnn_ops.keras as K
from tf_rnn_ops import raw_ops
from xla_test_util import assert_all_close, keras_op_inputs, needs_xla

pytestmark = needs_xla

# jit vs no jit run the same engine code on the same thread count; the tolerance covers a
# different summation split of the weight gradients (float32) and rounding of half/bf16 outputs.
TOL = {tf.float64: 1e-10, tf.float32: 2e-5, tf.float16: 1e-2, tf.bfloat16: 4e-2}


def test_xla_kernels_are_loaded():
    assert tf_rnn_ops.xla_status() == "", tf_rnn_ops.xla_status()
    assert tf_rnn_ops.has_xla()


def _hlo(fn, *args):
    return fn.experimental_get_compiler_ir(*args)(stage="hlo")


def _assert_close(got, want, dtype, what):
    assert_all_close(got, want, TOL[dtype], what)


def _fwd_and_grads(attrs, training=True):
    """f(inputs) -> outputs and the gradients of a weighted sum of them w.r.t. every float
    input."""
    def f(**inp):
        wrt = [inp[k] for k in ("input", "input_h", "input_c", "kernel", "recurrent_kernel",
                                "bias")]
        with tf.GradientTape() as tape:
            tape.watch(wrt)
            y, h, c, _ = K._keras_rnn(**inp, is_training=training, **attrs)
            loss = (tf.reduce_sum(tf.cast(y, tf.float32) ** 2)
                    + tf.reduce_sum(tf.cast(h, tf.float32) * 1.5)
                    + tf.reduce_sum(tf.cast(c, tf.float32) * 0.7))
        grads = tape.gradient(loss, wrt)
        if attrs["rnn_mode"] != "lstm":
            grads[2] = tf.zeros_like(inp["input_c"]) if grads[2] is None else grads[2]
        return [y, h, c] + grads
    return f


CASES = [
    ("lstm", tf.float32, {}),
    ("lstm", tf.float64, {}),
    ("lstm", tf.float16, {}),
    ("lstm", tf.bfloat16, {}),
    ("gru", tf.float32, {"two_biases": True}),
    ("gru", tf.float32, {"reset_after": False}),
    ("gru", tf.float64, {"two_biases": True, "mask": True}),
    ("lstm", tf.float32, {"mask": True, "lengths": False}),
    ("lstm", tf.float32, {"preprojected": True}),
    ("rnn_tanh", tf.float32, {}),
    ("rnn_relu", tf.float64, {"lengths": False}),
    ("lstm", tf.float32, {"activation": "relu", "recurrent_activation": "hard_sigmoid"}),
]


@pytest.mark.parametrize("mode,dtype,opts", CASES,
                         ids=[f"{m}-{d.name}-{'-'.join(o) or 'plain'}" for m, d, o in CASES])
def test_raw_op_under_jit_equals_the_kernel(mode, dtype, opts):
    opts = dict(opts)
    attrs = {"rnn_mode": mode}
    for k in ("reset_after", "activation", "recurrent_activation"):
        if k in opts:
            attrs[k] = opts.pop(k)
    attrs["preprojected"] = opts.get("preprojected", False)
    inp = keras_op_inputs(mode, dtype, **opts)
    f = _fwd_and_grads(attrs)
    want = tf.function(f)(**inp)
    jit = tf.function(f, jit_compile=True)
    got = jit(**inp)
    _assert_close(got, want, dtype, f"{mode} {dtype.name} {opts}")
    hlo = jit.experimental_get_compiler_ir(**inp)(stage="hlo")
    assert 'custom_call_target="tfrnn_rnn_forward"' in hlo
    assert 'custom_call_target="tfrnn_rnn_backward"' in hlo
    assert " while(" not in hlo and "while(" not in hlo.replace("custom-call", "")


@pytest.mark.parametrize("B,T", [(0, 3), (2, 0), (0, 0)])
@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_empty_problems_under_jit(mode, B, T):
    inp = keras_op_inputs(mode, tf.float32, B=B, T=T, lengths=False)
    f = _fwd_and_grads({"rnn_mode": mode})
    want = tf.function(f)(**inp)
    _assert_close(tf.function(f, jit_compile=True)(**inp), want, tf.float32, f"B={B} T={T}")


def test_inference_call_has_no_reserve_and_exact_gradients():
    inp = keras_op_inputs("lstm", tf.float32)
    attrs = {"rnn_mode": "lstm"}
    res = tf.function(lambda **k: K._keras_rnn(**k, is_training=False, **attrs),
                      jit_compile=True)(**inp)
    assert res[3].shape == (0,)
    want = tf.function(_fwd_and_grads(attrs, training=True))(**inp)
    got = tf.function(_fwd_and_grads(attrs, training=False), jit_compile=True)(**inp)
    _assert_close(got, want, tf.float32, "inference call")


def test_bad_lengths_fail_at_run_time_naming_the_input():
    inp = keras_op_inputs("lstm", tf.float32)
    inp["sequence_lengths"] = tf.constant([5, 9, 0], tf.int32)
    f = tf.function(lambda **k: K._keras_rnn(**k, rnn_mode="lstm"), jit_compile=True)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"sequence_lengths\[1\] = 9"):
        f(**inp)


def test_bad_shapes_fail_at_compile_time_naming_the_input():
    inp = keras_op_inputs("gru", tf.float32)
    inp["recurrent_kernel"] = inp["recurrent_kernel"][:, :-1]
    f = tf.function(lambda **k: K._keras_rnn(**k, rnn_mode="gru"), jit_compile=True)
    with pytest.raises(tf.errors.InvalidArgumentError, match="recurrent_kernel"):
        f(**inp)


def test_op_without_xla_kernel_is_named():
    """Without the XLA kernels (TF_RNN_OPS_XLA=0: not loaded), compiling an op of ours fails
    with TensorFlow's error naming the op (every op has an XLA kernel when they are loaded)."""
    code = (
        "import tensorflow as tf\n"
        "from tf_rnn_ops import mps\n"
        "f = tf.function(lambda s, r: mps.lstm(s, r), jit_compile=True)\n"
        "try:\n"
        "    f(tf.zeros([3, 2, 16]), tf.zeros([16, 4]))\n"
        "except tf.errors.InvalidArgumentError as e:\n"
        "    print('ERROR', e.message)\n")
    env = dict(os.environ, TF_RNN_OPS_XLA="0", TF_CPP_MIN_LOG_LEVEL="2")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300)
    assert re.search(r"ERROR .*TfRnn>LSTM\b", out.stdout), out.stdout + out.stderr


# --- the Keras layers ---------------------------------------------------------------------

def _layer_pair(stock_cls, ours_cls, units, shape, seed, **kw):
    stock, ours = stock_cls(units, **kw), ours_cls(units, **kw)
    stock.build(shape)
    ours.build(shape)
    rng = np.random.default_rng(seed)
    stock.set_weights([rng.uniform(-0.6, 0.6, w.shape).astype(w.dtype)
                       for w in stock.get_weights()])
    ours.set_weights(stock.get_weights())
    return stock, ours


def _layer_fn(layer, jit, **call_kw):
    def f(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            outs = layer(x, **call_kw)
            outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
            loss = tf.add_n([tf.reduce_sum(tf.cast(o, tf.float32) * (k + 1.0))
                             for k, o in enumerate(outs)])
        return outs + tape.gradient(loss, [x] + list(layer.trainable_weights))
    return tf.function(f, jit_compile=jit)


LAYERS = [
    ("LSTM", {}),
    ("LSTM", {"return_sequences": True, "return_state": True, "go_backwards": True}),
    ("GRU", {"return_sequences": True}),
    ("GRU", {"reset_after": False}),
    ("SimpleRNN", {"return_sequences": True}),
    ("LSTM", {"masked": True}),
    ("GRU", {"masked": True, "return_sequences": True}),
    ("LSTM", {"recurrent_dropout": 0.3}),
    ("LSTM", {"bidirectional": True}),
]


@pytest.mark.parametrize("name,kw", LAYERS,
                         ids=[f"{n}-{'-'.join(k) or 'plain'}" for n, k in LAYERS])
def test_layers_under_jit_match_stock_under_jit(name, kw):
    kw = dict(kw)
    masked, bidi = kw.pop("masked", False), kw.pop("bidirectional", False)
    B, T, I, units = 4, 7, 3, 5
    stock, ours = _layer_pair(getattr(keras.layers, name), getattr(K, name), units,
                              (B, T, I), seed=3, **kw)
    if bidi:
        stock, ours = keras.layers.Bidirectional(stock), keras.layers.Bidirectional(ours)
        stock.build((B, T, I))
        ours.build((B, T, I))
        ours.set_weights(stock.get_weights())
    x = tf.constant(np.random.default_rng(4).standard_normal((B, T, I)), tf.float32)
    call_kw = {}
    if masked:
        call_kw["mask"] = tf.constant(np.arange(T)[None, :] < np.array([[7], [4], [1], [0]]))
    if kw.get("recurrent_dropout"):
        call_kw["training"] = False  # dropout's random masks differ between runs
    ours_jit = _layer_fn(ours, True, **call_kw)
    got = ours_jit(x)
    _assert_close(got, _layer_fn(stock, True, **call_kw)(x), tf.float32, "vs stock+XLA")
    _assert_close(got, _layer_fn(ours, False, **call_kw)(x), tf.float32, "vs ours without XLA")
    hlo = _hlo(ours_jit, x)
    assert "tfrnn_rnn_forward" in hlo and "tfrnn_rnn_backward" in hlo
    assert "while(" not in hlo


def test_recurrent_dropout_in_training_compiles_fused():
    layer = K.GRU(6, recurrent_dropout=0.4, return_sequences=True)
    x = tf.constant(np.random.default_rng(5).standard_normal((3, 5, 2)), tf.float32)
    f = _layer_fn(layer, True, training=True)
    outs = f(x)
    assert all(np.isfinite(np.asarray(o)).all() for o in outs)
    hlo = _hlo(f, x)
    assert "tfrnn_rnn_forward" in hlo and "while(" not in hlo


def test_mixed_precision_under_jit():
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        stock, ours = _layer_pair(keras.layers.LSTM, K.LSTM, 5, (3, 6, 4), seed=6,
                                  return_sequences=True)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    x = tf.constant(np.random.default_rng(7).standard_normal((3, 6, 4)), tf.float32)
    got = _layer_fn(ours, True)(x)
    assert got[0].dtype == tf.float16
    _assert_close(got, _layer_fn(ours, False)(x), tf.float16, "ours half, jit vs not")
    _assert_close(got, _layer_fn(stock, True)(x), tf.float16, "vs stock half + XLA")


def _conv_lstm_model(lstm_cls):
    keras.utils.set_random_seed(11)
    inp = keras.Input((12, 5))
    h = keras.layers.Conv1D(6, 3, padding="same")(inp)
    h = lstm_cls(7)(h)
    return keras.Model(inp, keras.layers.Dense(3)(h))


def test_model_compiles_with_xla_and_trains_to_stock_weights(tmp_path):
    rng = np.random.default_rng(8)
    x = rng.standard_normal((16, 12, 5)).astype(np.float32)
    y = rng.standard_normal((16, 3)).astype(np.float32)
    weights = {}
    for name, cls in (("ours", K.LSTM), ("stock", keras.layers.LSTM)):
        model = _conv_lstm_model(cls)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # "doesn't support jit_compile=True" would raise
            model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse", jit_compile=True)
        assert model.jit_compile is True
        model.fit(x, y, epochs=2, batch_size=4, shuffle=False, verbose=0)
        weights[name] = model.get_weights()
        if name == "ours":
            ours_model = model
    for k, (a, b) in enumerate(zip(weights["ours"], weights["stock"])):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=f"weight {k}")
    hlo = _hlo(tf.function(ours_model, jit_compile=True), tf.constant(x[:4]))
    assert "tfrnn_rnn_forward" in hlo and "while(" not in hlo
    path = str(tmp_path / "saved")
    ours_model.export(path, verbose=False)
    loaded = tf.saved_model.load(path)
    np.testing.assert_allclose(loaded.serve(tf.constant(x)), ours_model.predict(x, verbose=0),
                               rtol=1e-5, atol=1e-6)


def test_xla_kernels_register_when_xla_compiled_before_the_import():
    """TensorFlow registers XLA kernels once, at the first XLA compilation; a process that
    compiled before importing tf_rnn_ops must still compile our ops."""
    import subprocess
    import sys
    code = (
        "import numpy as np, tensorflow as tf\n"
        "tf.function(lambda x: x * 2, jit_compile=True)(tf.ones([2]))\n"
        "import tf_rnn_ops\n"
        "from tf_rnn_ops.keras import _keras_rnn\n"
        "c = lambda *s: tf.constant(np.random.default_rng(0).standard_normal(s), tf.float32)\n"
        "k = dict(input=c(2, 3, 4), input_h=c(2, 5), input_c=c(2, 5), kernel=c(4, 20),\n"
        "         recurrent_kernel=c(5, 20), bias=c(20),\n"
        "         sequence_lengths=tf.zeros([0], tf.int32), recurrent_mask=tf.zeros([0]))\n"
        "f = lambda **a: _keras_rnn(**a, rnn_mode='lstm')[0]\n"
        "d = tf.function(f, jit_compile=True)(**k) - tf.function(f)(**k)\n"
        "print('MAXDIFF', float(tf.reduce_max(tf.abs(d))))\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "MAXDIFF 0.0" in p.stdout, p.stdout
