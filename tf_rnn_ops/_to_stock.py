"""``to_stock``: the same Keras model with every tf_rnn_ops layer replaced by the stock layer.

A model that contains ``tf_rnn_ops.keras.LSTM`` / ``GRU`` / ``SimpleRNN`` runs
``TfRnn>KerasRNN``, which only a process that has imported ``tf_rnn_ops`` can run: TF
Serving and plain TensorFlow installs cannot (TFLite and ONNX take our layers as they are:
docs/DEPLOYING.md). Our layers are subclasses of the stock
ones with the same config and the same weights, so the deployable model is the same model
with the stock classes:

    stock = tf_rnn_ops.keras.to_stock(model)
    stock.export("serving_dir")     # or tf.saved_model.save, stock.save("m.keras")

How: the model is serialized (``keras.saving.serialize_keras_object``), every serialized
object whose registered name is ``tf_rnn_ops>LSTM`` / ``tf_rnn_ops>GRU`` is pointed at
``keras.layers.LSTM`` / ``keras.layers.GRU`` (the config itself is unchanged), the result is
deserialized, and the weights are copied in order after checking that every variable has the
same layer and variable name and the same shape. This reaches our layers anywhere the config
does: Sequential and functional models, nested models, ``Bidirectional`` (forward and
backward layers), ``TimeDistributed`` and any serializable layer that holds them in its
config.

The current states of ``stateful=True`` layers are copied too. Not carried over: optimizer
state (a compiled model comes back compiled with a fresh optimizer). One config value changes:
``use_cudnn=True`` becomes ``"auto"``, because on our layers it asks for the fused op, while
on the stock layers it demands cuDNN and fails on a host without a GPU.
"""
import keras

__all__ = ["to_stock"]


def _stock_classes():
    """{registered name of ours: stock class}, {our class: stock class}."""
    from tf_rnn_ops import keras as ours  # the layers module imports this one at its end
    pairs = {ours.LSTM: keras.layers.LSTM, ours.GRU: keras.layers.GRU,
             ours.SimpleRNN: keras.layers.SimpleRNN}
    names = {keras.saving.get_registered_name(c): s for c, s in pairs.items()}
    return names, pairs


def _is_ours(layer):
    from tf_rnn_ops.keras import _FusedRNNMixin
    return isinstance(layer, _FusedRNNMixin)


def _all_layers(layer):
    """`layer` and every layer it tracks, at any depth (wrappers and nested models too)."""
    return list(layer._flatten_layers(include_self=True, recursive=True))  # noqa: SLF001


def _point_at_stock(obj, names):
    """Copy of a serialized config with our registered classes replaced by the stock ones."""
    if isinstance(obj, list):
        return [_point_at_stock(v, names) for v in obj]
    if not isinstance(obj, dict):
        return obj
    out = {k: _point_at_stock(v, names) for k, v in obj.items()}
    stock = names.get(obj.get("registered_name"))
    if stock is not None and "config" in obj:
        out["module"] = "keras.layers"
        out["class_name"] = stock.__name__
        out["registered_name"] = None
        if out["config"].get("use_cudnn") is True:
            # Ours: "the fused op or an error"; stock: "cuDNN or an error", which fails on a
            # CPU-only host. The copy is for any host.
            out["config"] = dict(out["config"], use_cudnn="auto")
    return out


def to_stock(model):
    """Returns an equivalent copy of `model` with each tf_rnn_ops layer the stock Keras layer.

    `model` is any Keras layer or model (Sequential, functional, subclassed with a config).
    Every ``tf_rnn_ops.keras.LSTM`` / ``GRU`` in it, at any depth, becomes a
    ``keras.layers.LSTM`` / ``GRU`` with the same config (name included; ``use_cudnn=True``
    becomes ``"auto"``, see the module doc), weights and stateful states; everything else is a
    copy of the original layer with its weights. The original model is not changed. The copy
    runs no tf_rnn_ops op, so it can be saved as a SavedModel or a ``.keras`` file that loads
    without tf_rnn_ops, or converted with ``tf.lite``.

    Raises TypeError when `model` is not a Keras layer, ValueError when it contains a
    subclass of our layers (its extra behaviour has no stock equivalent), when one of our
    layers is created by a layer's code rather than from its config, or when Keras cannot
    serialize the model or rebuild it from its config.
    """
    if not isinstance(model, keras.layers.Layer):
        raise TypeError(f"to_stock: expected a Keras model or layer, got {type(model).__name__}")
    names, pairs = _stock_classes()
    for layer in _all_layers(model):
        if _is_ours(layer) and type(layer) not in pairs:
            raise ValueError(
                f"to_stock: layer '{layer.name}' is a {type(layer).__module__}."
                f"{type(layer).__qualname__}, a subclass of a tf_rnn_ops.keras layer; only "
                "tf_rnn_ops.keras.LSTM and GRU themselves have a stock equivalent")

    try:
        config = keras.saving.serialize_keras_object(model)
    except Exception as e:  # noqa: BLE001 (Keras raises several types here)
        raise ValueError(f"to_stock: Keras cannot serialize {type(model).__name__} "
                         f"'{model.name}' (it needs get_config): {e}") from e
    try:
        # The config comes from a live object in this process, not from a file: lambdas in
        # it are the caller's own code, so Keras's safe mode has nothing to protect here.
        clone = keras.saving.deserialize_keras_object(
            _point_at_stock(config, names), safe_mode=False)
    except Exception as e:  # noqa: BLE001
        raise ValueError(f"to_stock: Keras cannot rebuild {type(model).__name__} "
                         f"'{model.name}' from its config: {e}") from e

    left = [f"'{l.name}' ({type(l).__name__})" for l in _all_layers(clone) if _is_ours(l)]
    if left:
        raise ValueError(
            f"to_stock: tf_rnn_ops layers {', '.join(left)} are created by a layer's own code, "
            "not from the model's config, so they cannot be replaced")
    _copy_weights(model, clone)
    _copy_rnn_states(model, clone)
    return clone


def _copy_rnn_states(src, dst):
    """The current states of stateful RNN layers (not weights: get_weights leaves them out)."""
    for a, b in zip(_all_layers(src), _all_layers(dst)):
        if (isinstance(a, keras.layers.RNN) and a.stateful and getattr(a, "states", None)
                is not None and getattr(b, "states", None) is not None):
            for va, vb in zip(keras.tree.flatten(a.states), keras.tree.flatten(b.states)):
                vb.assign(va)


def _copy_weights(src, dst):
    if src.built and not dst.built:
        raise ValueError(f"to_stock: the copy of '{src.name}' could not be built from its "
                         "config (no build_config); build the model by calling it once first")
    sw, dw = src.weights, dst.weights
    if len(sw) != len(dw):
        raise ValueError(f"to_stock: '{src.name}' has {len(sw)} weights but its stock copy has "
                         f"{len(dw)}")
    for a, b in zip(sw, dw):
        # Paths carry the scope the variable was built in, which differs between a nested
        # model built inside its parent and its copy built from config; the layer and
        # variable names at the end of the path are the same.
        pa, pb = a.path.split("/"), b.path.split("/")
        n = min(len(pa), len(pb))
        if pa[-n:] != pb[-n:] or tuple(a.shape) != tuple(b.shape):
            raise ValueError(f"to_stock: weight {a.path} {tuple(a.shape)} does not match the "
                             f"copy's {b.path} {tuple(b.shape)}")
    dst.set_weights(src.get_weights())
