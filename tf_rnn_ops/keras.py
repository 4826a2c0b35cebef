"""Keras 3 ``LSTM``, ``GRU`` and ``SimpleRNN`` layers that run the whole sequence in one fused
CPU op.

    import tf_rnn_ops.keras
    layer = tf_rnn_ops.keras.LSTM(64, return_sequences=True)   # was: keras.layers.LSTM(64, ...)

``tf_rnn_ops.keras.LSTM``, ``GRU`` and ``SimpleRNN`` are subclasses of the Keras 3 layers
(TensorFlow backend). Everything except the sequence loop is the stock layer's: constructor
arguments, weights and their names and shapes, ``get_config``, initializers, regularizers,
constraints, ``stateful``, ``go_backwards``, ``return_sequences`` / ``return_state``, masking,
input dropout, ``Bidirectional``, serialization. ``set_weights(stock.get_weights())`` works in
both directions. ``to_stock(model)`` returns a copy of a model with every one of our layers the
stock layer (same config and weights), to deploy where tf_rnn_ops is not installed (TF
Serving, TFLite).

The sequence loop (``inner_loop``) runs in one fused CPU op with a registered gradient:
``TfRnn>CudnnRNNV3`` for what cuDNN computes (``lstm``, ``gru`` with reset_after, ``rnn_tanh``
/ ``rnn_relu`` for SimpleRNN), and ``TfRnn>KerasRNN`` (the same kernel and engine, plus what
cuDNN lacks) for the rest:

* recurrent dropout in training: the cell's own masks (``get_recurrent_dropout_mask``, drawn
  by the stock ``RNN.call``, so a stock layer and ours with the same ``seed`` draw the same
  ones), one per gate as Keras 3 applies them (it forces ``implementation=1``): gate k's
  recurrent product multiplies ``h_prev ⊙ mask_k``;
* input dropout with ``implementation=1`` (one mask per gate): each gate's input projection
  ``(x ⊙ mask_k) · kernel_k`` is computed outside the op, which takes the projections;
* LSTM/GRU ``activation`` and ``recurrent_activation`` among tanh, sigmoid, relu, linear and
  Keras's ``hard_sigmoid`` (relu6(x + 3) / 6);
* GRU ``reset_after=False`` (the candidate multiplies ``r ⊙ h_prev`` by its recurrent kernel).

The Keras weights are converted to the cuDNN params layout by differentiable TensorFlow ops,
so gradients reach the Keras variables. The results equal the stock layer's generic
(non-cuDNN) loop, which is what stock Keras runs on a CPU-only host, including its masked-step
rules.

Any mask runs fused: left-padded (``keras.utils.pad_sequences``' default), right-padded, holes,
fully masked rows, with ``go_backwards`` and ``Bidirectional``. A masked step keeps the state,
so each row's unmasked steps are gathered to its front (``_compact``), run with sequence
lengths, and the outputs gathered back to their steps (a masked step emits zeros with
``zero_output_for_mask``, else the previous output); no ``tf.cond``, no loop in the graph.

The fused path runs when the Keras backend is TensorFlow, the host has no GPU (with a GPU the
stock layer runs, and with it stock cuDNN) and the activations are among those above
(SimpleRNN: tanh or relu). ``use_bias`` may be False (zero biases are passed); ``unroll=True``
gives the same numbers fused; any dtype policy, including ``mixed_float16`` and
``mixed_bfloat16`` (the op runs in the compute dtype).

Otherwise (a custom activation) the layer runs the stock Keras loop
(``keras.layers.RNN.inner_loop``) and gives the stock results, warning once per layer class and
reason (``UserWarning``), except ``use_cudnn=False``, which asks for the stock loop. With
``use_cudnn=True`` an unsupported configuration raises ``ValueError`` instead, as stock Keras
does. The ops have no XLA kernel, so the layers set ``supports_jit = False``.
"""
import threading
import warnings

import keras
import tensorflow as tf

from tf_rnn_ops import raw_ops
from tf_rnn_ops._loader import load_library

__all__ = ["LSTM", "GRU", "SimpleRNN", "to_stock"]

# The op must be registered before a SavedModel that uses it is loaded, so a process that
# imports these layers can also load one.
load_library()

_warned = set()
_warned_lock = threading.Lock()

_TANH = frozenset(f for f in (keras.activations.tanh, keras.ops.tanh, tf.tanh, tf.math.tanh,
                              tf.nn.tanh) if f is not None)
_SIGMOID = frozenset(f for f in (keras.activations.sigmoid, keras.ops.sigmoid, tf.sigmoid,
                                 tf.math.sigmoid, tf.nn.sigmoid) if f is not None)
_RELU = frozenset(f for f in (keras.activations.relu, keras.ops.relu, tf.nn.relu)
                  if f is not None)
# The activations TfRnn>KerasRNN computes (for LSTM and GRU), by the function the cell holds.
# Keras 3's hard_sigmoid is relu6(x + 3) / 6.
_ACT_NAMES = {}
for _name, _fns in (("tanh", _TANH), ("sigmoid", _SIGMOID), ("relu", _RELU),
                    ("linear", (keras.activations.linear,)),
                    ("hard_sigmoid", (keras.activations.hard_sigmoid, keras.ops.hard_sigmoid))):
    for _f in _fns:
        _ACT_NAMES[_f] = _name


def _warn_once(cls_name, reason):
    key = (cls_name, reason)
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(f"tf_rnn_ops.keras.{cls_name}: {reason}; running the stock Keras loop "
                  "instead of the fused op.", UserWarning, stacklevel=3)


def _is_on(training):
    """training may be a Python bool, None or a tensor; a tensor counts as 'maybe on'."""
    if training is None:
        return False
    if isinstance(training, (tf.Tensor, tf.Variable)):
        return True
    return bool(training)


def _value(v):
    """A Keras variable's value (autocast inside the layer's call), or the tensor itself."""
    return v.value if isinstance(v, keras.Variable) else v


def _gates_matrix(kernel, gates, order):
    """[in, G*N] Keras kernel -> flat G matrices [N, in] row-major, in gate order `order`."""
    rows = tf.shape(kernel)[0]
    k = tf.reshape(kernel, [rows, gates, -1])           # [in, G, N]
    if order is not None:
        k = tf.gather(k, order, axis=1)
    return tf.reshape(tf.transpose(k, [1, 2, 0]), [-1])  # [G, N, in]


def _gates_vector(bias, gates, order):
    if order is None:
        return tf.reshape(bias, [-1])
    return tf.reshape(tf.gather(tf.reshape(bias, [gates, -1]), order, axis=0), [-1])


# The configurations CudnnRNNV3 computes; the others run TfRnn>KerasRNN.
_CUDNN_EXTRAS = dict(activation="tanh", recurrent_activation="sigmoid", reset_after=True,
                     preprojected=False)


def _keras_rnn(**kw):
    """TfRnn>KerasRNN (one place, so that tests can count the layers' calls)."""
    return load_library().tf_rnn_keras_rnn(**kw)


def _compact(x, mask):
    """Moves each row's unmasked steps to its front, in order: (x_compacted, lengths, idx).

    A masked step keeps the state unchanged, so running a row's unmasked steps one after the
    other (lengths = their count) gives the stock loop's states; idx[b, t] is the slot of the
    last unmasked step at or before t (-1 before the first), where step t's output is found.
    """
    m = tf.cast(mask, tf.int32)
    order = tf.argsort(1 - m, axis=1, stable=True)      # unmasked times first, in order
    idx = tf.cumsum(m, axis=1) - 1
    return tf.gather(x, order, batch_dims=1), tf.reduce_sum(m, axis=1), idx


class _FusedRNNMixin:
    """Replaces the stock layers' inner_loop with one fused op where it is exact."""

    _RNN_MODE = None   # "lstm" or "gru"
    _GATES = None      # 4 or 3
    _ORDER = None      # Keras gate order -> cuDNN gate order (None: same)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The fused ops have no XLA kernel: keep model.compile(jit_compile="auto") off XLA.
        self.supports_jit = False

    # --- what the fused op can do -------------------------------------------------------

    def _config_fallback_reason(self, training):
        """None if the fused op computes exactly what the stock loop would; else why not."""
        cell = self.cell
        if keras.backend.backend() != "tensorflow":
            return f"the Keras backend is {keras.backend.backend()!r}, not 'tensorflow'"
        if self._RNN_MODE is None:  # SimpleRNN: rnn_tanh or rnn_relu
            if self._rnn_mode() is None:
                return "activation is not tanh or relu"
        elif cell.activation not in _ACT_NAMES:
            return "activation is not tanh, sigmoid, relu, linear or hard_sigmoid"
        elif cell.recurrent_activation not in _ACT_NAMES:
            return "recurrent_activation is not tanh, sigmoid, relu, linear or hard_sigmoid"
        return None

    def _generic_loop(self, sequences, initial_state, mask, training):
        last, outputs, states = keras.layers.RNN.inner_loop(
            self, sequences, list(initial_state), mask=mask, training=training)
        return last, outputs, list(states)

    # --- the fused op ---------------------------------------------------------------------

    def _rnn_mode(self):
        if self._RNN_MODE is not None:
            return self._RNN_MODE
        act = self.cell.activation
        return "rnn_tanh" if act in _TANH else "rnn_relu" if act in _RELU else None

    def _params(self, dtype, input_matrices=True):
        """The Keras weights in the cuDNN params layout (without the input matrices when the
        input is pre-projected)."""
        cell = self.cell
        recurrent = tf.cast(_value(cell.recurrent_kernel), dtype)
        n = cell.units
        g, order = self._GATES, self._ORDER
        if cell.use_bias:
            bias = tf.cast(_value(cell.bias), dtype)
            if self._RNN_MODE == "gru" and cell.reset_after:  # [2, 3N]: (input, recurrent)
                b_in, b_rec = bias[0], bias[1]
            else:                         # one bias: the input bias, recurrent bias zero
                b_in, b_rec = bias, tf.zeros([g * n], dtype)
            biases = [_gates_vector(b_in, g, order), _gates_vector(b_rec, g, order)]
        else:
            biases = [tf.zeros([2 * g * n], dtype)]
        weights = [_gates_matrix(recurrent, g, order)]
        if input_matrices:
            kernel = tf.cast(_value(cell.kernel), dtype)
            weights.insert(0, _gates_matrix(kernel, g, order))
        return tf.concat(weights + biases, axis=0)

    def _engine_order(self, per_gate):
        """A list in Keras gate order -> the same list in the op's gate-block order."""
        return list(per_gate) if self._ORDER is None else [per_gate[k] for k in self._ORDER]

    def _recurrent_mask(self, h0, dtype):
        """Keras's recurrent dropout masks (the cell's own, drawn by the stock RNN.call) as the
        op's recurrent_mask [B, K·N], one mask per gate block; a SimpleRNN cell has one."""
        masks = self.cell.get_recurrent_dropout_mask(h0)
        if not isinstance(masks, (list, tuple)):
            masks = [masks] * self._GATES
        return tf.concat([tf.cast(m, dtype) for m in self._engine_order(masks)], axis=1)

    def _preprojected(self, sequences, dp_masks, dtype):
        """implementation=1 input dropout: gate k's projection (x ⊙ mask_k) · kernel_k outside
        the op (then TfRnn>KerasRNN's preprojected input), [B, T, K·N] in the op's order."""
        kernel = tf.cast(_value(self.cell.kernel), dtype)
        n = self.cell.units
        parts = [tf.einsum("bti,in->btn", sequences * tf.expand_dims(tf.cast(m, dtype), 1),
                           kernel[:, k * n:(k + 1) * n]) for k, m in enumerate(dp_masks)]
        return tf.concat(self._engine_order(parts), axis=-1)

    def _fused_loop(self, sequences, initial_state, mask, training):
        cell = self.cell
        dtype = sequences.dtype
        preprojected = False
        if _is_on(training) and 0.0 < cell.dropout < 1.0:
            # The same input mask at every step, as the stock loop (and stock cuDNN) apply it;
            # implementation=1 draws one per gate.
            dp_mask = cell.get_dropout_mask(sequences[:, 0, :])
            if isinstance(dp_mask, (list, tuple)):
                sequences = self._preprojected(sequences, dp_mask, dtype)
                preprojected = True
            else:
                sequences = sequences * tf.expand_dims(tf.cast(dp_mask, dtype), 1)
        if _is_on(training) and 0.0 < cell.recurrent_dropout < 1.0:
            rec_mask = self._recurrent_mask(initial_state[0], dtype)
        else:
            rec_mask = None

        # Processing order: go_backwards reverses the steps (and the mask) first; the outputs
        # stay in processing order, as the stock loop returns them.
        x = tf.reverse(sequences, [1]) if self.go_backwards else sequences
        if mask is None:
            shape = tf.shape(x)
            lengths = tf.fill([shape[0]], shape[1])
        else:
            mask = tf.cast(mask, tf.bool)
            if self.go_backwards:
                mask = tf.reverse(mask, [1])
            x, lengths, idx = _compact(x, mask)
        h0 = tf.expand_dims(tf.cast(initial_state[0], dtype), 1)     # [B, 1, N]
        lstm = self._RNN_MODE == "lstm"
        c0 = tf.expand_dims(tf.cast(initial_state[1], dtype), 1) if lstm else tf.zeros([], dtype)
        gates = self._RNN_MODE is not None
        kw = dict(input=x, input_h=h0, input_c=c0,
                  params=self._params(dtype, input_matrices=not preprojected),
                  sequence_lengths=tf.cast(lengths, tf.int32), rnn_mode=self._rnn_mode(),
                  input_mode="linear_input", direction="unidirectional", is_training=True,
                  time_major=False)
        extras = dict(
            activation=_ACT_NAMES[cell.activation] if gates else "tanh",
            recurrent_activation=_ACT_NAMES[cell.recurrent_activation] if gates else "sigmoid",
            reset_after=bool(getattr(cell, "reset_after", True)), preprojected=preprojected)
        if rec_mask is None and extras == _CUDNN_EXTRAS:
            out, h, c, _, _ = raw_ops.CudnnRNNV3(**kw)   # what cuDNN computes
        else:
            if rec_mask is None:
                rec_mask = tf.zeros([0], dtype)
            out, h, c, _, _ = _keras_rnn(**kw, recurrent_mask=rec_mask, **extras)
        h = tf.squeeze(h, 1)
        states = [h, tf.squeeze(c, 1)] if lstm else [h]

        if mask is None:
            last = h
            outputs = out if self.return_sequences else tf.expand_dims(h, 1)
            return last, outputs, states

        # The stock loop's rules for masked steps (keras backend.rnn): a masked step emits
        # zeros (zero_output_for_mask) or the previous output, which starts as zeros; the
        # last output is the one emitted at the last step. Step t's own output, when it is
        # unmasked, and else the previous one, are both in slot idx[b, t] of the op's output.
        keep = mask if self.zero_output_for_mask else idx >= 0
        if not self.return_sequences:
            at = tf.gather(out, tf.maximum(idx[:, -1:], 0), batch_dims=1)[:, 0]
            last = tf.where(keep[:, -1:], at, tf.zeros_like(at))
            return last, tf.expand_dims(last, 1), states
        outputs = tf.gather(out, tf.maximum(idx, 0), batch_dims=1)
        outputs = tf.where(tf.expand_dims(keep, 2), outputs, tf.zeros_like(outputs))
        return outputs[:, -1], outputs, states

    # --- Keras hook -----------------------------------------------------------------------

    def inner_loop(self, sequences, initial_state, mask, training=False):
        if keras.tree.is_nested(mask):
            mask = mask[0]
        if not keras.tree.is_nested(initial_state):
            initial_state = [initial_state]
        initial_state = list(initial_state)

        if getattr(self, "use_cudnn", "auto") is False:
            return self._generic_loop(sequences, initial_state, mask, training)
        if keras.backend.backend() == "tensorflow" and tf.config.list_logical_devices("GPU"):
            # On a GPU host the stock layer (and with it stock cuDNN) is the fast path.
            return super().inner_loop(sequences, initial_state, mask, training=training)
        reason = self._config_fallback_reason(training)
        if reason is not None:
            if getattr(self, "use_cudnn", "auto") is True:
                raise ValueError(
                    f"{type(self).__name__} '{self.name}': use_cudnn=True was specified, but "
                    f"the fused op does not support this configuration: "
                    f"{reason}. Pass use_cudnn='auto' to fall back to the stock Keras loop.")
            _warn_once(type(self).__name__, reason)
            return self._generic_loop(sequences, initial_state, mask, training)

        return self._fused_loop(sequences, initial_state, mask, training)


@keras.saving.register_keras_serializable(package="tf_rnn_ops")
class LSTM(_FusedRNNMixin, keras.layers.LSTM):
    """``keras.layers.LSTM`` whose sequence loop runs in one fused op (see module doc).

    Keras LSTM gates are i, f, c, o, the cuDNN order; the Keras bias becomes the cuDNN input
    bias and the recurrent bias is zero.
    """

    _RNN_MODE = "lstm"
    _GATES = 4
    _ORDER = None


@keras.saving.register_keras_serializable(package="tf_rnn_ops")
class GRU(_FusedRNNMixin, keras.layers.GRU):
    """``keras.layers.GRU`` whose sequence loop runs in one fused op (see module doc).

    Keras GRU gates are z, r, h; cuDNN's are r, z, h. With ``reset_after=True`` the Keras bias
    ``[2, 3N]`` is (input bias, recurrent bias); with ``reset_after=False`` it is ``[3N]``, the
    input bias (TfRnn>KerasRNN's reset-before candidate has no recurrent bias to add).
    """

    _RNN_MODE = "gru"
    _GATES = 3
    _ORDER = [1, 0, 2]


@keras.saving.register_keras_serializable(package="tf_rnn_ops")
class SimpleRNN(_FusedRNNMixin, keras.layers.SimpleRNN):
    """``keras.layers.SimpleRNN`` whose sequence loop runs in one fused op (see module doc): ``rnn_tanh`` for ``activation='tanh'``, ``rnn_relu`` for ``'relu'``.

    h_t = act(x_t · kernel + bias + h_{t-1} · recurrent_kernel): the Keras bias becomes the
    cuDNN input bias and the recurrent bias is zero.
    """

    _RNN_MODE = None   # from the activation (_rnn_mode)
    _GATES = 1
    _ORDER = None


from tf_rnn_ops._to_stock import to_stock  # noqa: E402  (needs the classes above)
