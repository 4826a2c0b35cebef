"""What the Keras layers emit while a model is traced for TFLite.

``TfRnn>KerasRNN`` exists only in a process that has imported tf_rnn_ops; the TFLite
converter cannot translate it. While a model is traced for TFLite, inside
``tf.lite.TFLiteConverter.from_keras_model(model).convert()`` (``import tf_rnn_ops`` wraps
that method) or inside ``with tf_rnn_ops.keras.tflite_export():`` (for
``from_concrete_functions``: trace the function inside it), our layers emit what the
converter understands:

* an LSTM the converter can fuse becomes a Keras-LSTM composite function: a ``tf.function``
  with the function attributes ``api_implements="lstm_<id>"``, ``time_major`` and
  ``go_backwards`` and the signature ``(input, init_h, init_c, kernel, recurrent_kernel,
  bias) -> (last_output, outputs, new_h, new_c, runtime)``. The converter's composite pass
  (TensorFlow's ``prepare_composite_functions_tf.cc``) replaces its body with the builtin
  ``UNIDIRECTIONAL_SEQUENCE_LSTM``. It fuses only when the batch size is static and only
  ``last_output`` / ``outputs`` are used; otherwise it keeps the body, the LSTM recurrence in
  stock ops (a ``WHILE`` loop), which computes the same thing;
* everything else (GRU, SimpleRNN, a mask, ``return_state``, ``stateful``, other
  activations, float16 / bfloat16, training) is the stock layer's own loop, which the
  converter turns into a ``WHILE`` loop of builtins, as it does for the stock layers.

The converter's fused LSTM clips the cell state to [-10, 10] (the cell_clip it sets); the
Keras layer does not clip.
"""
import contextlib
import functools
import threading
import uuid

import tensorflow as tf

__all__ = ["tflite_export", "exporting_for_tflite", "lstm_composite"]

_state = threading.local()


def exporting_for_tflite():
    """True while a model is traced for TFLite (see the module doc)."""
    return getattr(_state, "depth", 0) > 0


@contextlib.contextmanager
def tflite_export():
    """Traces inside this block emit TFLite's forms of our layers (module doc)."""
    _state.depth = getattr(_state, "depth", 0) + 1
    try:
        yield
    finally:
        _state.depth -= 1


def _recurrence(inputs, init_h, init_c, kernel, recurrent_kernel, bias, go_backwards):
    """The Keras LSTM (gates i, f, c, o; tanh / sigmoid) in stock ops: a while loop over the
    batch-major ``inputs``; outputs in processing order."""
    x = tf.transpose(inputs, [1, 0, 2])
    if go_backwards:
        x = tf.reverse(x, [0])
    steps = tf.shape(x)[0]
    xw = tf.einsum("tbi,ik->tbk", x, kernel) + bias
    out = tf.TensorArray(inputs.dtype, size=steps, element_shape=init_h.shape)

    def step(t, h, c, out):
        z = xw[t] + tf.matmul(h, recurrent_kernel)
        i, f, g, o = tf.split(z, 4, axis=1)
        c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
        h = tf.sigmoid(o) * tf.tanh(c)
        return t + 1, h, c, out.write(t, h)

    _, h, c, out = tf.while_loop(lambda t, *_: t < steps, step,
                                 (tf.constant(0), init_h, init_c, out))
    outputs = tf.transpose(out.stack(), [1, 0, 2])
    # Static result shapes: the converter reads the types of results 2-4 as ranked tensors
    # (a while loop's results may come out of the import unranked).
    h, c = _shaped(h, init_h.shape), _shaped(c, init_c.shape)
    outputs = _shaped(outputs, inputs.shape[:2] + init_h.shape[1:])
    return h, outputs, h, c


def _shaped(t, shape):
    """t reshaped to `shape` where at most one of its sizes is unknown, else t."""
    dims = [-1 if d is None else d for d in shape.as_list()]
    return tf.reshape(t, dims) if dims.count(-1) <= 1 else t


def _composite_attrs(go_backwards):
    """A new function's attributes (one api_implements name per function, as Keras 2 had)."""
    return {"api_implements": f"lstm_{uuid.uuid4().hex}", "api_preferred_device": "CPU",
            "time_major": False, "go_backwards": bool(go_backwards)}


def lstm_composite(inputs, init_h, init_c, kernel, recurrent_kernel, bias, go_backwards):
    """(last_output [B, H], outputs [B, T, H] in processing order, h, c) of a Keras LSTM
    through a function TFLite fuses into UNIDIRECTIONAL_SEQUENCE_LSTM (module doc)."""

    @tf.function(autograph=False, experimental_attributes=_composite_attrs(go_backwards))
    def keras_lstm(inputs, init_h, init_c, kernel, recurrent_kernel, bias):
        last, outputs, h, c = _recurrence(inputs, init_h, init_c, kernel, recurrent_kernel,
                                          bias, go_backwards)
        return last, outputs, h, c, tf.constant(0.0)

    last, outputs, h, c, _ = keras_lstm(inputs, init_h, init_c, kernel, recurrent_kernel, bias)
    return last, outputs, h, c


def _install_converter_hook():
    """Wraps the Keras model converter's ``convert`` so that the model it traces emits the
    TFLite forms (once per process)."""
    try:
        from tensorflow.lite.python import lite
    except ImportError:  # a TensorFlow without TFLite
        return
    cls = getattr(lite, "TFLiteKerasModelConverterV2", None)
    if cls is None or getattr(cls.convert, "_tf_rnn_ops_tflite", False):
        return
    original = cls.convert

    @functools.wraps(original)
    def convert(self, *args, **kwargs):
        with tflite_export():
            return original(self, *args, **kwargs)

    convert._tf_rnn_ops_tflite = True
    cls.convert = convert
