"""What the Keras layers emit while a model is traced for TFLite.

``TfRnn>KerasRNN`` exists only in a process that has imported tf_rnn_ops; the TFLite
converter cannot translate it. While a model is traced for TFLite, inside
``tf.lite.TFLiteConverter.from_keras_model(model).convert()`` (``import tf_rnn_ops`` wraps
that method) or inside ``with tf_rnn_ops.keras.tflite_export():`` (export a SavedModel inside
it and convert the directory; a concrete function traced inside it converts too, but freezing
it drops the composite's attributes, so its LSTMs become loops), our layers emit what the
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
  activations, float16 / bfloat16, a dynamic batch size) is a while loop of builtins with the
  input product hoisted out of it (``loop``; the Keras loop's mask rules; outputs grown by
  concatenation when the batch size is dynamic, where tensor lists would need a static
  one); training keeps the stock layer's own loop (dropout).

The converter's fused LSTM clips the cell state to [-10, 10] (the cell_clip it sets; the
Keras layer does not clip), and keeps its final states in its state tensors (variables), so an
invoke starts where the previous one ended unless the interpreter's reset_all_variables() is
called first or the initial states are model inputs.
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


def loop(inputs, states, kernel, bias, go_backwards, step, mask=None, zero_output=True):
    """The recurrence in stock ops, the input product x·kernel + bias hoisted out of the loop
    (one product over every step): a while loop of step(xw_t, states) -> states over the
    batch-major ``inputs`` (states[0] is h), with the Keras loop's mask rules (``mask``
    [B, T]: a masked step keeps the states and emits zeros, or with ``zero_output`` False the
    previous output). (outputs [B, T, H] in processing order, final states, last output)."""
    x = tf.transpose(inputs, [1, 0, 2])
    m = None if mask is None else tf.transpose(tf.cast(mask, tf.bool))[:, :, None]
    if go_backwards:
        x = tf.reverse(x, [0])
        m = None if m is None else tf.reverse(m, [0])
    steps = tf.shape(x)[0]
    xw = tf.einsum("tbi,ik->tbk", x, kernel) + bias
    if states[0].shape.is_fully_defined():
        out = tf.TensorArray(inputs.dtype, size=steps, element_shape=states[0].shape)
        write = lambda out, t, h: out.write(t, h)  # noqa: E731
        invariant = tf.TensorShape(None)
    else:
        # A dynamic batch size: the converter's tensor lists need a static element shape, so
        # the outputs grow by concatenation instead ([steps so far, B, H]).
        out = tf.zeros(tf.concat([[0], tf.shape(states[0])], 0), inputs.dtype)
        write = lambda out, t, h: tf.concat([out, h[None]], 0)  # noqa: E731
        invariant = tf.TensorShape([None]).concatenate(states[0].shape)

    def body(t, out, last, *old):
        new = step(xw[t], list(old))
        if m is None:
            emitted = new[0]
        else:
            new = [tf.where(m[t], n, o) for n, o in zip(new, old)]
            emitted = tf.where(m[t], new[0], tf.zeros_like(last) if zero_output else last)
        return (t + 1, write(out, t, emitted), emitted) + tuple(new)

    shapes = tuple(s.shape for s in states)
    res = tf.while_loop(
        lambda t, *_: t < steps, body,
        (tf.constant(0), out, tf.zeros_like(states[0])) + tuple(states),
        shape_invariants=(tf.TensorShape([]), invariant, shapes[0]) + shapes)
    stacked = res[1].stack() if isinstance(res[1], tf.TensorArray) else res[1]
    outputs = tf.transpose(stacked, [1, 0, 2])
    # Static result shapes: the converter reads the types of a composite's results as ranked
    # tensors (a while loop's results may come out of the import unranked).
    final = [_shaped(s, s0.shape) for s, s0 in zip(res[3:], states)]
    return (_shaped(outputs, inputs.shape[:2] + states[0].shape[1:]), final,
            _shaped(res[2], states[0].shape))


def lstm_step(recurrent_kernel, act=tf.tanh, rec_act=tf.sigmoid):
    """Keras's LSTM step (gates i, f, c, o) on the hoisted input product."""
    def step(xw, states):
        h, c = states
        i, f, g, o = tf.split(xw + tf.matmul(h, recurrent_kernel), 4, axis=1)
        c = rec_act(f) * c + rec_act(i) * act(g)
        return [rec_act(o) * act(c), c]
    return step


def gru_step(recurrent_kernel, recurrent_bias, reset_after, act, rec_act):
    """Keras's GRU step (gates z, r, h; reset_after: the recurrent product with its bias
    before the reset gate multiplies it, else (r ⊙ h)·R_h without a recurrent bias)."""
    units = recurrent_kernel.shape[0]

    def step(xw, states):
        h = states[0]
        x_z, x_r, x_h = tf.split(xw, 3, axis=1)
        if reset_after:
            r_z, r_r, r_h = tf.split(tf.matmul(h, recurrent_kernel) + recurrent_bias, 3, axis=1)
            z, r = rec_act(x_z + r_z), rec_act(x_r + r_r)
            hh = act(x_h + r * r_h)
        else:
            r_z, r_r = tf.split(tf.matmul(h, recurrent_kernel[:, :2 * units]), 2, axis=1)
            z, r = rec_act(x_z + r_z), rec_act(x_r + r_r)
            hh = act(x_h + tf.matmul(r * h, recurrent_kernel[:, 2 * units:]))
        return [z * h + (1.0 - z) * hh]
    return step


def rnn_step(recurrent_kernel, act):
    """Keras's SimpleRNN step."""
    return lambda xw, states: [act(xw + tf.matmul(states[0], recurrent_kernel))]


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
        outputs, (h, c), _ = loop(inputs, [init_h, init_c], kernel, bias, go_backwards,
                                  lstm_step(recurrent_kernel))
        return h, outputs, h, c, tf.constant(0.0)

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
