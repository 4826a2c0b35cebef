"""Deploying without the plugin: ``tf_rnn_ops.keras.to_stock``, TFLite, and SavedModel /
``.keras`` files loaded in a process that cannot import tf_rnn_ops.

``to_stock`` models are compared with the originals: layer classes, configs, weights, and the
outputs, which the original computes with the fused ``TfRnn>KerasRNN`` op and the copy with
the stock Keras loop (counted: the copy must not call our op). The files are loaded by one
child process whose working directory and PYTHONPATH do not contain the repository (and that
drops the editable install's finder), which checks first that ``tf_rnn_ops`` cannot be found
there.
"""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

keras = pytest.importorskip("keras")

from export_util import tflite_interpreter  # noqa: E402
import tf_rnn_ops  # noqa: E402,F401
import tf_rnn_ops.keras as K  # noqa: E402
from tf_rnn_ops import raw_ops  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
L = keras.layers
B, T, I = 3, 6, 4

# Outputs are O(1): (rtol, atol relative to max(1, max|expected|)) per compute dtype.
TOL = {"float32": (2e-5, 2e-5), "float64": (1e-10, 1e-10), "float16": (2e-2, 2e-2),
       "bfloat16": (8e-2, 8e-2)}


# ---------------------------------------------------------------------------------------------
# models and helpers
# ---------------------------------------------------------------------------------------------

def sequential_model(dtype="float32"):
    return keras.Sequential([keras.Input((T, I)),
                             K.GRU(5, return_sequences=True, dtype=dtype),
                             K.LSTM(4, dtype=dtype), L.Dense(2, dtype=dtype)])


def deploy_model():
    """One input; our layers in a nested model, in Bidirectional (forward LSTM, backward GRU)
    and after TimeDistributed."""
    inp = keras.Input((T, I))
    inner = keras.Sequential([keras.Input((T, I)), K.GRU(5, return_sequences=True)],
                             name="inner")
    h = inner(inp)
    h = L.Bidirectional(K.LSTM(4, return_sequences=True),
                        backward_layer=K.GRU(4, return_sequences=True, go_backwards=True))(h)
    h = L.TimeDistributed(L.Dense(3))(h)
    return keras.Model(inp, K.LSTM(3)(h), name="deploy")


def two_input_model():
    """deploy_model's layers, plus our LSTM inside TimeDistributed and after Masking."""
    seq = keras.Input((T, I))
    groups = keras.Input((2, T, I))
    a = deploy_model()(seq)
    b = L.TimeDistributed(K.LSTM(3, go_backwards=True))(groups)
    c = K.GRU(2, return_state=True)(L.Masking(0.0)(seq))
    return keras.Model([seq, groups], [a, b] + list(c))


def _inputs(model, seed):
    rng = np.random.default_rng(seed)
    xs = [rng.normal(size=(B,) + tuple(t.shape[1:])).astype("float32") for t in model.inputs]
    xs[0][1, T - 2:] = 0.0      # masked steps where there is a Masking layer
    return xs if len(xs) > 1 else xs[0]


def _randomize(model, seed):
    rng = np.random.default_rng(seed)
    model.set_weights([rng.uniform(-0.6, 0.6, size=w.shape).astype(w.dtype)
                       for w in model.get_weights()])
    return model


def _outputs(model, x):
    out = model(x)
    out = out if isinstance(out, (list, tuple)) else [out]
    return [np.asarray(tf.cast(o, tf.float64)) for o in out]


def _assert_close(actual, expected, dtype, what=""):
    rtol, atol = TOL[dtype]
    assert len(actual) == len(expected), what
    for k, (a, e) in enumerate(zip(actual, expected)):
        assert a.shape == e.shape, f"{what}[{k}]: {a.shape} != {e.shape}"
        scale = max(1.0, float(np.max(np.abs(e))))
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol * scale, err_msg=f"{what}[{k}]")


def _layers(model):
    return list(model._flatten_layers(include_self=True, recursive=True))  # noqa: SLF001


def _ours(model):
    mixin = K._FusedRNNMixin  # noqa: SLF001
    return [layer for layer in _layers(model) if isinstance(layer, mixin)]


@pytest.fixture
def op_calls(monkeypatch):
    """Calls of the layers' fused op TfRnn>KerasRNN (eager and at trace time); `forbid[0] =
    True` makes a call an error."""
    calls, forbid = [], [False]
    real = K._keras_rnn  # noqa: SLF001

    def counting(**kw):
        assert not forbid[0], "the stock copy called TfRnn>KerasRNN"
        calls.append(kw["rnn_mode"])
        return real(**kw)

    monkeypatch.setattr(K, "_keras_rnn", counting)
    return calls, forbid


BUILDERS = {"sequential": sequential_model, "deploy": deploy_model, "two_inputs": two_input_model}


# ---------------------------------------------------------------------------------------------
# to_stock
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_to_stock_replaces_every_layer_and_keeps_config_and_weights(name):
    model = _randomize(BUILDERS[name](), seed=1)
    model.compile("adam", "mse")
    ours_before = [(layer.name, type(layer)) for layer in _ours(model)]
    stock = K.to_stock(model)

    assert type(stock) is type(model) and stock is not model
    assert _ours(stock) == []
    assert [(layer.name, type(layer)) for layer in _ours(model)] == ours_before  # untouched
    pairs = list(zip(_layers(model), _layers(stock)))
    assert len(_layers(model)) == len(_layers(stock))
    replaced = 0
    for a, b in pairs:
        assert a.name == b.name
        if isinstance(a, K._FusedRNNMixin):  # noqa: SLF001
            stock_cls = keras.layers.LSTM if isinstance(a, K.LSTM) else keras.layers.GRU
            assert type(b) is stock_cls, (a.name, type(b))
            replaced += 1
        else:
            assert type(b) is type(a), a.name
        # (Wrappers and models hold the serialized classes in their configs; what they hold
        # is compared on its own.)
        if not isinstance(a, (keras.Model, L.InputLayer, L.Bidirectional, L.TimeDistributed)):
            assert b.get_config() == a.get_config(), a.name
    assert replaced == len(ours_before) > 0
    for va, vb in zip(model.weights, stock.weights):
        np.testing.assert_array_equal(vb.numpy(), va.numpy(), err_msg=va.path)
    assert stock.compiled and stock.loss == "mse"
    # Independent copies: training one does not move the other.
    stock.weights[0].assign(stock.weights[0] + 1.0)
    assert not np.array_equal(stock.weights[0].numpy(), model.weights[0].numpy())


@pytest.mark.parametrize("name,dtype", [("sequential", "float32"), ("sequential", "float64"),
                                        ("sequential", "mixed_bfloat16"),
                                        ("deploy", "float32"), ("two_inputs", "float32")])
def test_to_stock_outputs_equal_original(name, dtype, op_calls):
    calls, forbid = op_calls
    model = BUILDERS[name](dtype) if name == "sequential" else BUILDERS[name]()
    _randomize(model, seed=2)
    x = _inputs(model, seed=3)
    expected = _outputs(model, x)
    assert len(calls) >= len(_ours(model))           # the original ran the fused op
    stock = K.to_stock(model)
    forbid[0] = True
    got = _outputs(stock, x)
    compute = keras.mixed_precision.Policy(dtype).compute_dtype
    _assert_close(got, expected, compute, f"{name} {dtype}")


def test_to_stock_single_layers():
    lstm = K.LSTM(4, return_sequences=True, go_backwards=True)
    x = np.random.default_rng(4).normal(size=(B, T, I)).astype("float32")
    lstm(x)
    _randomize(lstm, seed=5)
    stock = K.to_stock(lstm)
    assert type(stock) is keras.layers.LSTM and stock.go_backwards
    _assert_close(_outputs(stock, x), _outputs(lstm, x), "float32")

    unbuilt = K.GRU(3, reset_after=True, name="g")
    copy = K.to_stock(unbuilt)
    assert type(copy) is keras.layers.GRU and not copy.built
    assert copy.get_config() == unbuilt.get_config()

    dense = L.Dense(2)                   # nothing of ours: a plain copy
    assert type(K.to_stock(dense)) is L.Dense


def test_to_stock_stateful_states_and_use_cudnn():
    model = keras.Sequential([keras.Input(batch_shape=(B, T, I)),
                              K.LSTM(4, stateful=True, return_sequences=True),
                              K.GRU(3, stateful=True, use_cudnn=True)])
    _randomize(model, seed=12)
    x = _inputs(model, seed=13)
    model(x)                                     # the states move away from zero
    stock = K.to_stock(model)
    assert model.layers[1].use_cudnn is True and stock.layers[1].use_cudnn == "auto"
    # Both continue from the same states (on this host stock use_cudnn=True would raise).
    _assert_close(_outputs(stock, x), _outputs(model, x), "float32")


def test_to_stock_bad_input():
    with pytest.raises(TypeError, match="expected a Keras model or layer, got str"):
        K.to_stock("model.keras")
    with pytest.raises(TypeError, match="got Module"):
        K.to_stock(tf.Module())

    class MyLSTM(K.LSTM):
        pass

    with pytest.raises(ValueError, match=r"layer 'mine' is a .*MyLSTM, a subclass of a "
                                         r"tf_rnn_ops\.keras layer"):
        K.to_stock(keras.Sequential([keras.Input((T, I)), MyLSTM(2, name="mine")]))


@keras.saving.register_keras_serializable(package="test_deploy")
class _HoldsOurLSTM(keras.layers.Layer):
    """Creates our layer in its own code: its config does not contain it."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.rnn = K.LSTM(2)

    def build(self, input_shape):
        self.rnn.build(input_shape)

    def call(self, x):
        return self.rnn(x)


class _Scale(keras.layers.Layer):
    """Not registered: Keras can write its config but not find the class again."""

    def __init__(self, scale, **kwargs):
        super().__init__(**kwargs)
        self.scale = scale

    def call(self, x):
        return x * self.scale


def test_to_stock_layers_outside_the_config():
    held = keras.Sequential([keras.Input((T, I)), _HoldsOurLSTM(name="holder")])
    with pytest.raises(ValueError, match=r"'lstm\w*' \(LSTM\) are created by a layer's own "
                                         r"code"):
        K.to_stock(held)
    # A tensor argument: Keras cannot make a config of it.
    no_config = keras.Sequential([keras.Input((T, I)), K.LSTM(2), _Scale(tf.constant(2.0))],
                                 name="nc")
    with pytest.raises(ValueError, match=r"Keras cannot serialize Sequential 'nc'"):
        K.to_stock(no_config)
    unregistered = keras.Sequential([keras.Input((T, I)), K.LSTM(2), _Scale(2.0)], name="ur")
    with pytest.raises(ValueError, match=r"Keras cannot rebuild Sequential 'ur' from its "
                                         r"config"):
        K.to_stock(unregistered)


# ---------------------------------------------------------------------------------------------
# TFLite
# ---------------------------------------------------------------------------------------------

def _fixed_batch(model):
    """TFLite lowers the stock loop only with a static batch size (the converter's tensor
    lists need a static element shape)."""
    inp = keras.Input(batch_shape=(B, T, I))
    return keras.Model(inp, model(inp))


def _converter(model):
    conv = tf.lite.TFLiteConverter.from_keras_model(_fixed_batch(model))
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]   # no Flex, no custom
    return conv


def test_tflite_runs_the_stock_copy_with_builtin_ops():
    model = _randomize(deploy_model(), seed=6)
    x = _inputs(model, seed=7)
    expected = _outputs(model, x)[0]
    content = _converter(K.to_stock(model)).convert()
    interp = tflite_interpreter(content)
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], x)
    interp.invoke()
    got = interp.get_tensor(interp.get_output_details()[0]["index"])
    _assert_close([got.astype(np.float64)], [expected], "float32", "tflite")


def test_tflite_converts_our_layers_without_to_stock():
    """Our layers convert as they are (tests/test_tflite.py has the cases): the converter's
    trace emits TFLite's forms, and the interpreter computes our outputs."""
    model = _randomize(sequential_model(), seed=8)
    x = _inputs(model, seed=9)
    interp = tflite_interpreter(_converter(model).convert())
    interp.allocate_tensors()
    interp.reset_all_variables()
    interp.set_tensor(interp.get_input_details()[0]["index"], x)
    interp.invoke()
    got = interp.get_tensor(interp.get_output_details()[0]["index"])
    _assert_close([got.astype(np.float64)], _outputs(model, x), "float32", "tflite")


# ---------------------------------------------------------------------------------------------
# files loaded in a process without tf_rnn_ops
# ---------------------------------------------------------------------------------------------

class _RawModule(tf.Module):
    """A SavedModel with our raw op: a one-layer LSTM through TfRnn>CudnnRNNV3."""

    def __init__(self, params):
        super().__init__()
        self.params = tf.Variable(params)

    @tf.function(input_signature=[tf.TensorSpec([B, T, I], tf.float32)])
    def __call__(self, x):
        h0 = tf.zeros([B, 1, 5])
        out, _, _, _, _ = raw_ops.CudnnRNNV3(
            input=x, input_h=h0, input_c=h0, params=self.params,
            sequence_lengths=tf.fill([B], T), time_major=False, is_training=False)
        return out


CHILD = """
    import importlib.util, json, sys
    # configure.sh installs the project into its venv editable (a finder that maps tf_rnn_ops to
    # the checkout, loaded at start-up): without it this Python stands for one that lacks
    # tf_rnn_ops, as a serving host's does.
    sys.meta_path[:] = [f for f in sys.meta_path
                        if type(f).__module__ != "_tf_rnn_ops_editable_finder"]
    import numpy as np
    import tensorflow as tf
    import keras

    res = {"findable": importlib.util.find_spec("tf_rnn_ops") is not None}
    x = np.load("x.npy")

    def err(got, name):
        return float(np.abs(np.asarray(got, np.float64) - np.load(name)).max())

    def classes(model):
        return sorted({type(l).__module__ + "." + type(l).__name__
                       for l in model._flatten_layers() if type(l).__name__ in ("LSTM", "GRU")})

    stock_sm = tf.saved_model.load("stock_savedmodel")       # model.export: serving endpoint
    res["stock_sm"] = err(stock_sm.serve(x), "expected.npy")

    try:
        keras.models.load_model("ours.keras")
        res["ours_keras_error"] = ""
    except Exception as e:
        res["ours_keras_error"] = f"{type(e).__name__}: {e}"
    m = keras.models.load_model("ours.keras", custom_objects={
        "tf_rnn_ops>LSTM": keras.layers.LSTM, "tf_rnn_ops>GRU": keras.layers.GRU})
    res["ours_keras_mapped"] = err(m(x), "expected.npy")
    res["ours_keras_classes"] = classes(m)
    m = keras.models.load_model("stock.keras")
    res["stock_keras"] = err(m(x), "expected.npy")
    res["stock_keras_classes"] = classes(m)

    try:
        tf.saved_model.load("raw_savedmodel")
        res["raw_error"] = ""
    except Exception as e:
        res["raw_error"] = f"{type(e).__name__}: {e}"
    res["imported"] = sorted(m for m in sys.modules if m.startswith("tf_rnn_ops"))

    sys.path.insert(0, sys.argv[1])          # now with the package: the remedy the error needs
    import tf_rnn_ops
    raw = tf.saved_model.load("raw_savedmodel")
    res["raw_after_import"] = err(raw(tf.constant(x)), "raw_expected.npy")
    print(json.dumps(res))
"""


@pytest.fixture(scope="module")
def no_plugin(tmp_path_factory):
    """Files written here, loaded by a child process that has no tf_rnn_ops; its findings."""
    work = tmp_path_factory.mktemp("no_plugin")
    model = _randomize(deploy_model(), seed=9)
    x = _inputs(model, seed=10)
    np.save(work / "x.npy", x)
    np.save(work / "expected.npy", _outputs(model, x)[0])
    model.save(work / "ours.keras")
    stock = K.to_stock(model)
    stock.save(work / "stock.keras")
    stock.export(str(work / "stock_savedmodel"), verbose=False)

    rng = np.random.default_rng(11)
    raw = _RawModule(rng.uniform(-0.5, 0.5, size=4 * 5 * (I + 5) + 8 * 5).astype("float32"))
    np.save(work / "raw_expected.npy", raw(tf.constant(x)).numpy())
    tf.saved_model.save(raw, str(work / "raw_savedmodel"))

    (work / "child.py").write_text(textwrap.dedent(CHILD))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    proc = subprocess.run([sys.executable, "child.py", REPO], cwd=str(work), env=env,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, f"child failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_child_cannot_import_tf_rnn_ops(no_plugin):
    assert not no_plugin["findable"]
    assert no_plugin["imported"] == []


def test_stock_saved_model_loads_without_plugin(no_plugin):
    assert no_plugin["stock_sm"] <= TOL["float32"][1], no_plugin


def test_keras_file_with_our_layers_fails_without_plugin_and_loads_mapped(no_plugin):
    error = no_plugin["ours_keras_error"]
    # Keras names the class it cannot find, with our registered name in the config it prints.
    assert "Could not locate class" in error and "tf_rnn_ops>" in error, error
    assert no_plugin["ours_keras_mapped"] <= TOL["float32"][1], no_plugin
    assert no_plugin["ours_keras_classes"] == ["keras.src.layers.rnn.gru.GRU",
                                               "keras.src.layers.rnn.lstm.LSTM"]


def test_keras_file_after_to_stock_loads_without_plugin(no_plugin):
    assert no_plugin["stock_keras"] <= TOL["float32"][1], no_plugin
    assert no_plugin["stock_keras_classes"] == no_plugin["ours_keras_classes"]


def test_saved_model_with_raw_op_needs_the_import(no_plugin):
    error = no_plugin["raw_error"]
    # What TensorFlow prints (it cannot know about us); docs/DEPLOYING.md quotes it.
    first = "Op type not registered 'TfRnn>CudnnRNNV3' in binary running on"
    assert first in error, error
    with open(os.path.join(REPO, "docs", "DEPLOYING.md")) as f:
        doc = f.read()
    assert first in doc and "import tf_rnn_ops" in doc
    assert no_plugin["raw_after_import"] <= TOL["float32"][1], no_plugin
