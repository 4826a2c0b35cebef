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
Serving). TFLite's converter and tf2onnx take our layers as they are: while the TFLite
converter traces a model the layers emit TFLite's fused LSTM or a loop of builtins
(``_tflite.py``), and tf2onnx maps the fused op to ONNX LSTM / GRU / RNN nodes
(``onnx_export.py``).

The sequence loop (``inner_loop``) runs in one fused CPU op with a registered gradient,
``TfRnn>KerasRNN`` (cc/ops/keras_rnn_ops.cc): the stacked engine of the CudnnRNN ops, reading
the cell's ``kernel``, ``recurrent_kernel`` and ``bias`` as Keras holds them (layout and gate
order), so a call runs no conversion ops and the gradients arrive in the variables' layout.
It computes what cuDNN does (``lstm``, ``gru`` with reset_after, ``rnn_tanh`` / ``rnn_relu``
for SimpleRNN) and what cuDNN lacks:

* recurrent dropout in training: the cell's own masks (``get_recurrent_dropout_mask``, drawn
  by the stock ``RNN.call``, so a stock layer and ours with the same ``seed`` draw the same
  ones), one per gate as Keras 3 applies them (it forces ``implementation=1``): gate k's
  recurrent product multiplies ``h_prev ⊙ mask_k``;
* input dropout with ``implementation=1`` (one mask per gate): each gate's input projection
  ``(x ⊙ mask_k) · kernel_k`` is computed outside the op, which takes the projections;
* LSTM/GRU ``activation`` and ``recurrent_activation`` among tanh, sigmoid, relu, linear and
  Keras's ``hard_sigmoid`` (relu6(x + 3) / 6);
* GRU ``reset_after=False`` (the candidate multiplies ``r ⊙ h_prev`` by its recurrent kernel).

A call with ``training`` off (``predict``, ``evaluate``, a streaming step) keeps no training
reserve; differentiating through such a call still gives exact gradients (the registered
gradient runs the forward again with one). A call of a few steps of a small batch (a
streaming step) runs its products on the weights in place, without packing them. The results
equal the stock layer's generic (non-cuDNN) loop, which is what stock Keras runs on a CPU-only
host, including its masked-step rules. Integer inputs are cast to the compute dtype, as the
stock layer's product with its float kernel does.

Any mask runs fused: left-padded (``keras.utils.pad_sequences``' default), right-padded, holes,
fully masked rows, with ``go_backwards`` and ``Bidirectional``. A masked step keeps the state,
so each row's unmasked steps are gathered to its front (``_compact``), run with sequence
lengths, and the outputs gathered back to their steps (a masked step emits zeros with
``zero_output_for_mask``, else the previous output); no ``tf.cond``, no loop in the graph.

The fused path runs when the Keras backend is TensorFlow and the activations are among those
above (SimpleRNN: tanh or relu). On a GPU host (TensorFlow sees a GPU) what stock Keras runs
on cuDNN stays on the stock layer: LSTM and GRU (reset_after) with tanh / sigmoid, a bias, no
recurrent dropout, not unrolled, and a mask only when it is right-padded with no empty row
(decided on the data, ``tf.cond``). What stock Keras runs in its generic loop there (recurrent
dropout, other activations, GRU reset_after=False, SimpleRNN, no bias, unroll, any other mask)
runs on the fused op's GPU kernels (cc/kernels/keras_rnn_gpu_kernels.cc), when the op library
was built with CUDA; ``TF_RNN_OPS_KERAS_GPU=0`` keeps every call on a GPU host on the stock
layer. ``use_bias`` may be False (zero biases are passed); ``unroll=True``
gives the same numbers fused; any dtype policy, including ``mixed_float16`` and
``mixed_bfloat16`` (the op runs in the compute dtype).

Otherwise (a custom activation) the layer runs the stock Keras loop
(``keras.layers.RNN.inner_loop``) and gives the stock results, warning once per layer class and
reason (``UserWarning``), except ``use_cudnn=False``, which asks for the stock loop. With
``use_cudnn=True`` an unsupported configuration raises ``ValueError`` instead, as stock Keras
does.

The op has XLA kernels (a custom call into the same engine, ``_tf_rnn_ops_xla.so``):
``tf.function(jit_compile=True)`` and ``model.compile(jit_compile=True)`` compile the layers
with the rest of the model. ``supports_jit`` is what the stock layer says (False where stock
runs cuDNN), False when the XLA kernels are not loaded (``tf_rnn_ops.xla_status()`` says
why) and False on a GPU host (the XLA kernels are CPU-only so far); ``jit_compile="auto"``
follows Keras's own rules.
"""
import functools
import os
import threading
import warnings

import keras
import tensorflow as tf
from tensorflow.python.ops import resource_variable_ops

from tf_rnn_ops._loader import has_xla, load_library
from tf_rnn_ops._tflite import _install_converter_hook, exporting_for_tflite, gru_step
from tf_rnn_ops._tflite import loop as tflite_loop
from tf_rnn_ops._tflite import lstm_composite, lstm_step, rnn_step, tflite_export

__all__ = ["LSTM", "GRU", "SimpleRNN", "to_stock", "tflite_export"]

# The op must be registered before a SavedModel that uses it is loaded, so a process that
# imports these layers can also load one.
load_library()
_install_converter_hook()

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


def _raw_value(v):
    """A Keras variable's own value, without the policy's autocast (TF backend: its tf.Variable,
    whose reads the gradient tape records as reads of the Keras variable)."""
    raw = getattr(v, "_value", None) if isinstance(v, keras.Variable) else None
    return raw if raw is not None else _value(v)


def _static_rows(x):
    """A sequence's rows (batch × steps) where both are known when traced, else None."""
    return x.shape[0] * x.shape[1] if x.shape[:2].is_fully_defined() else None


# On a GPU host, a mixed-precision call of at most this many rows (steps × batch) outside
# training runs the op in float32 on the float32 variables (_FusedRNNMixin._float32_step).
_SMALL_MIXED_ROWS = 64


@functools.lru_cache(maxsize=None)
def _gpu_kernels():
    """Whether the op library registered GPU kernels for TfRnn>KerasRNN (built with CUDA)."""
    from tensorflow.python.framework import kernels
    load_library()
    return any(k.device_type == "GPU"
               for k in kernels.get_registered_kernels_for_op("TfRnn>KerasRNN").kernel)


def _gpu_host():
    """Whether TensorFlow sees a GPU (where stock Keras runs cuDNN when it can)."""
    return bool(tf.config.list_logical_devices("GPU"))


def _gpu_routing():
    """On a GPU host, whether the layers run on our GPU kernels what stock Keras runs in its
    generic loop there (TF_RNN_OPS_KERAS_GPU=0 turns it off: stock everywhere on a GPU host)."""
    return os.environ.get("TF_RNN_OPS_KERAS_GPU", "1") != "0" and _gpu_kernels()


def _cudnn_mask_ok(mask):
    """Stock cuDNN's condition on a mask (keras' _assert_valid_mask): every row right-padded
    and none fully masked. A boolean scalar tensor."""
    m = tf.cast(mask, tf.bool)
    count = tf.reduce_sum(tf.cast(m, tf.int32), axis=1)
    right = tf.reduce_all(tf.equal(m, tf.sequence_mask(count, maxlen=tf.shape(m)[1])))
    return tf.logical_and(right, tf.reduce_all(count > 0))


def _keras_rnn(mixed=False, **kw):
    """TfRnn>KerasRNN, or with `mixed` TfRnn>KerasRNNMixed (16-bit sequences and states, float32
    weights), in one place, so that tests can count the layers' calls."""
    lib = load_library()
    return (lib.tf_rnn_keras_rnn_mixed if mixed else lib.tf_rnn_keras_rnn)(**kw)


def _compact(x, mask):
    """Moves each row's unmasked steps to its front, in order: (x_compacted, lengths, idx).

    A masked step keeps the state unchanged, so running a row's unmasked steps one after the
    other (lengths = their count) gives the stock loop's states; idx[b, t] is the slot of the
    last unmasked step at or before t (-1 before the first), where step t's output is found.
    In a graph, the layers that compact the same tensors share one compaction (a
    Bidirectional's two directions: ONNX export then sees one tensor read by both).
    """
    graph = getattr(x, "graph", None)
    if tf.executing_eagerly() or graph is None:
        return _compact_now(x, mask)
    # The cache lives in the graph (a collection), so that it goes with the graph.
    store = graph.get_collection_ref("tf_rnn_ops_compactions")
    if not store:
        store.append({})
    cache = store[0]
    key = (x.ref(), mask.ref())
    if key not in cache:
        cache[key] = _compact_now(x, mask)
    return cache[key]


def _compact_now(x, mask):
    m = tf.cast(mask, tf.int32)
    order = tf.argsort(1 - m, axis=1, stable=True)      # unmasked times first, in order
    idx = tf.cumsum(m, axis=1) - 1
    return tf.gather(x, order, batch_dims=1), tf.reduce_sum(m, axis=1), idx


class _FusedRNNMixin:
    """Replaces the stock layers' inner_loop with one fused op where it is exact."""

    _RNN_MODE = None   # "lstm" or "gru"
    _GATES = None      # 4, 3 or 1

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The stock layer's own answer (False where it runs cuDNN), unless the op's XLA
        # kernels are not loaded.
        if not has_xla():
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

    def _stock_cudnn_ok(self):
        """Whether stock Keras runs this layer on cuDNN on a GPU host (the conditions of its
        LSTM / GRU inner_loop and keras' cudnn_ok): LSTM or GRU (reset_after), tanh and
        sigmoid, a bias, no recurrent dropout, not unrolled, use_cudnn not False. A mask must
        also be right-padded (_cudnn_mask_ok), which only the data says."""
        cell = self.cell
        if self._RNN_MODE is None or getattr(self, "use_cudnn", "auto") is False:
            return False
        return (cell.activation in (keras.activations.tanh, tf.tanh, keras.ops.tanh)
                and cell.recurrent_activation in (keras.activations.sigmoid, tf.sigmoid,
                                                  keras.ops.sigmoid)
                and not self.unroll and cell.use_bias and not cell.recurrent_dropout
                and bool(getattr(cell, "reset_after", True)))

    def _gpu_loop(self, sequences, initial_state, mask, training):
        """On a GPU host: what stock runs on cuDNN stays there (a mask: when it is
        right-padded, decided on the data by tf.cond); what stock runs in its generic loop
        (recurrent dropout, other activations, GRU reset_after=False, SimpleRNN, any other
        mask) runs on our GPU kernels, where the fused op computes it."""
        stock = functools.partial(super().inner_loop, sequences, initial_state, mask,
                                  training=training)
        if not _gpu_routing() or self._config_fallback_reason(training) is not None:
            return stock()
        fused = functools.partial(self._fused_loop, sequences, initial_state, mask, training)
        self.supports_jit = False  # the fused op has no XLA kernel for the GPU yet
        if not self._stock_cudnn_ok():
            return fused()
        if mask is None:
            return stock()
        def branch(loop):  # one output structure for both branches of the cond
            def run():
                last, outputs, states = loop()
                return last, outputs, list(states)
            return run
        return tf.cond(_cudnn_mask_ok(mask), branch(stock), branch(fused))

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

    def _recurrent_mask(self, h0, dtype):
        """Keras's recurrent dropout masks (the cell's own, drawn by the stock RNN.call) as the
        op's recurrent_mask [B, K·H], one mask per gate block in Keras's gate order; a
        SimpleRNN cell has one."""
        masks = self.cell.get_recurrent_dropout_mask(h0)
        if not isinstance(masks, (list, tuple)):
            masks = [masks] * self._GATES
        return tf.concat([tf.cast(m, dtype) for m in masks], axis=1)

    def _preprojected(self, sequences, dp_masks, dtype):
        """implementation=1 input dropout: gate k's projection (x ⊙ mask_k) · kernel_k outside
        the op (then TfRnn>KerasRNN's preprojected input), [B, T, K·H] in Keras's gate order."""
        kernel = tf.cast(_value(self.cell.kernel), dtype)
        n = self.cell.units
        parts = [tf.einsum("bti,in->btn", sequences * tf.expand_dims(tf.cast(m, dtype), 1),
                           kernel[:, k * n:(k + 1) * n]) for k, m in enumerate(dp_masks)]
        return tf.concat(parts, axis=-1)

    def _weights(self, dtype, preprojected, raw=False):
        """kernel, recurrent_kernel and bias as the cell holds them (the op reads Keras's
        layout and gate order): no conversion, only the policy's cast (`raw`: the float32
        variables as they are, not the policy's autocast values)."""
        cell = self.cell
        kn = self._GATES * cell.units
        value = _raw_value if raw else _value
        recurrent = tf.cast(value(cell.recurrent_kernel), dtype)
        if preprojected:
            kernel = tf.zeros([0, kn], dtype)
        else:
            kernel = tf.cast(value(cell.kernel), dtype)
        bias = tf.cast(value(cell.bias), dtype) if cell.use_bias else tf.zeros([kn], dtype)
        return kernel, recurrent, bias

    def _kept_weights(self, dtype):
        """Whether the op may keep its packing of kernel and recurrent_kernel between inference
        calls (reuse_packed_weights): both read from resource variables of the op's dtype, whose
        buffers TensorFlow never writes in place while the op holds them (the policy's cast
        would make new tensors every call anyway)."""
        cell = self.cell
        for v in (cell.kernel, cell.recurrent_kernel):
            raw = _raw_value(v)
            if not (isinstance(raw, tf.Variable) and raw.dtype == dtype
                    and resource_variable_ops.is_resource_variable(raw)):
                return False
        return True

    def _float32_step(self, x, on):
        """Whether a mixed-precision call on a GPU host runs the float32 op on the float32
        variables (x and the states cast to float32): outside training, for at most
        _SMALL_MIXED_ROWS rows (steps × batch, a streaming step), where the policy's cast of
        every weight to the compute dtype and the op's conversion of it back cost more than
        the step's products. (On the CPU every mixed-precision call runs the mixed op.)"""
        if on or x.dtype not in (tf.float16, tf.bfloat16) or self.variable_dtype != "float32":
            return False
        rows = _static_rows(x)
        return rows is not None and rows <= _SMALL_MIXED_ROWS

    def _mixed_op(self, x):
        """Whether a mixed-precision call runs TfRnn>KerasRNNMixed: on the CPU, in every call
        whose input is bfloat16 or half and whose variables are float32. It reads the 16-bit
        sequence and states and the float32 variables as they are: no cast of any weight in
        any call (the 16-bit ops took the policy's copy of every weight and converted it back
        to float, and gave the variables' gradients rounded to 16 bits), the weights' packing
        kept between inference calls (reuse_packed_weights), and at bfloat16 inference x and
        y read and written by the engine as their words; bfloat16 products for bfloat16 (the
        bfloat16 op's bits), float products for half (the half op's). In turns against the
        16-bit ops it replaced, 0-9 % faster in training and inference
        (docs/PERFORMANCE_KERAS.md, "The mixed op"). A GPU host keeps the 16-bit ops' tensor
        cores."""
        return (x.dtype in (tf.bfloat16, tf.float16) and self.variable_dtype == "float32"
                and not _gpu_host())

    def _fused_loop(self, sequences, initial_state, mask, training):
        cell = self.cell
        if not sequences.dtype.is_floating:
            # Integer features: stock Keras multiplies them by the float kernel, whose product
            # is in the compute dtype.
            sequences = tf.cast(sequences, self.compute_dtype)
        dtype = sequences.dtype
        on = _is_on(training)
        preprojected = False
        if on and 0.0 < cell.dropout < 1.0:
            # The same input mask at every step, as the stock loop (and stock cuDNN) apply it;
            # implementation=1 draws one per gate.
            dp_mask = cell.get_dropout_mask(sequences[:, 0, :])
            if isinstance(dp_mask, (list, tuple)):
                sequences = self._preprojected(sequences, dp_mask, dtype)
                preprojected = True
            else:
                sequences = sequences * tf.expand_dims(tf.cast(dp_mask, dtype), 1)
        if on and 0.0 < cell.recurrent_dropout < 1.0:
            rec_mask = self._recurrent_mask(initial_state[0], dtype)
        else:
            rec_mask = tf.zeros([0], dtype)

        # Processing order: go_backwards reverses the steps (and the mask) first; the outputs
        # stay in processing order, as the stock loop returns them.
        if mask is None:
            x = tf.reverse(sequences, [1]) if self.go_backwards else sequences
            lengths = tf.zeros([0], tf.int32)   # every row has every step
        else:
            mask = tf.cast(mask, tf.bool)
            x, lengths, idx = _compact(sequences, mask)
            if self.go_backwards:
                # Each row's unmasked steps in reverse order: the forward direction's
                # compaction reversed within each length (so that a Bidirectional's two ops
                # read one tensor, which ONNX export turns into one bidirectional node).
                x = tf.reverse_sequence(x, lengths, seq_axis=1, batch_axis=0)
                mask = tf.reverse(mask, [1])
                idx = tf.cumsum(tf.cast(mask, tf.int32), axis=1) - 1
        lstm = self._RNN_MODE == "lstm"
        # On the float32 variables: the mixed op (CPU) takes the 16-bit sequences and states
        # as they are (no cast of either in the graph); on a GPU host a streaming step's
        # float32 op takes them cast to float32.
        mixed = self._mixed_op(x)
        bf16_products = mixed and x.dtype == tf.bfloat16
        float32_step = not mixed and self._float32_step(x, on)
        op_dtype = tf.float32 if float32_step else dtype
        w_dtype = tf.float32 if mixed else op_dtype
        x = tf.cast(x, op_dtype)
        h0 = tf.cast(initial_state[0], op_dtype)
        c0 = tf.cast(initial_state[1], op_dtype) if lstm else tf.zeros([0], op_dtype)
        kernel, recurrent, bias = self._weights(w_dtype, preprojected, raw=w_dtype != dtype)
        gates = self._RNN_MODE is not None
        out, h, c, _ = _keras_rnn(
            mixed=mixed, input=x, input_h=h0, input_c=c0, kernel=kernel,
            recurrent_kernel=recurrent, bias=bias, sequence_lengths=tf.cast(lengths, tf.int32),
            recurrent_mask=tf.cast(rec_mask, op_dtype),
            rnn_mode=self._rnn_mode(),
            activation=_ACT_NAMES[cell.activation] if gates else "tanh",
            recurrent_activation=_ACT_NAMES[cell.recurrent_activation] if gates else "sigmoid",
            reset_after=bool(getattr(cell, "reset_after", True)), preprojected=preprojected,
            is_training=on, reuse_packed_weights=not on and self._kept_weights(w_dtype),
            bf16_products=bf16_products)
        out, h, c = (tf.cast(t, dtype) for t in (out, h, c))
        states = [h, c] if lstm else [h]

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

    # --- TFLite ---------------------------------------------------------------------------

    def _tflite_unfused(self, sequences, mask, training):
        """Why TFLite cannot fuse this layer into UNIDIRECTIONAL_SEQUENCE_LSTM, or None."""
        cell = self.cell
        if self._RNN_MODE == "gru":
            return "TFLite has no GRU op"
        if self._RNN_MODE is None:
            return "the converter has no path to UNIDIRECTIONAL_SEQUENCE_RNN"
        why = [(mask is not None, "a mask (the fused op takes none)"),
               (_is_on(training), "training"),
               (self.return_state or self.stateful,
                "return_state / stateful (the converter fuses only when the states are unused)"),
               (sequences.dtype != tf.float32, f"dtype {sequences.dtype.name}, not float32"),
               (_ACT_NAMES.get(cell.activation) != "tanh"
                or _ACT_NAMES.get(cell.recurrent_activation) != "sigmoid",
                "activations other than tanh / sigmoid"),
               (not sequences.shape[:1].is_fully_defined(),
                "a dynamic batch size (the converter fuses only static shapes; set it with "
                "keras.Input(batch_shape=...))")]
        return next((reason for cond, reason in why if cond), None)

    def _tflite_loop(self, sequences, initial_state, mask, training):
        """The TFLite form (tf_rnn_ops/_tflite.py): an LSTM the converter can fuse as its
        Keras-LSTM composite; else, outside training, the recurrence in stock ops with the
        input product hoisted out of the loop; in training the stock loop. A layer that is not
        fused says why (UserWarning)."""
        cell = self.cell
        if not sequences.dtype.is_floating:
            sequences = tf.cast(sequences, self.compute_dtype)
        reason = self._tflite_unfused(sequences, mask, training)
        if reason is not None:
            warnings.warn(f"tf_rnn_ops.keras.{type(self).__name__} '{self.name}': TFLite gets a "
                          f"WHILE loop, not a fused sequence op: {reason}.", UserWarning,
                          stacklevel=3)
        if _is_on(training):
            return self._generic_loop(sequences, initial_state, mask, training)
        dtype = sequences.dtype
        # Values, not variables: the converter reads the weights as the function's tensors.
        kernel, recurrent, bias = (tf.identity(w) for w in self._weights(dtype, False))
        states = [tf.cast(s, dtype) for s in initial_state]
        if self._RNN_MODE == "lstm" and reason is None:
            last, outputs, h, c = lstm_composite(sequences, states[0], states[1], kernel,
                                                 recurrent, bias, self.go_backwards)
            return last, (outputs if self.return_sequences else last[:, None]), [h, c]
        if self._RNN_MODE == "lstm":
            step = lstm_step(recurrent, cell.activation, cell.recurrent_activation)
        elif self._RNN_MODE == "gru":
            reset_after = bool(cell.reset_after)
            rec_bias = None
            if reset_after:   # bias [2, 3H] (input, recurrent); [3H] zeros without use_bias
                bias, rec_bias = ((bias[0], bias[1]) if bias.shape.rank == 2
                                  else (bias, tf.zeros_like(bias)))
            step = gru_step(recurrent, rec_bias, reset_after, cell.activation,
                            cell.recurrent_activation)
        else:
            step = rnn_step(recurrent, cell.activation)
        outputs, states, last = tflite_loop(sequences, states, kernel, bias, self.go_backwards,
                                            step, mask, self.zero_output_for_mask)
        return last, (outputs if self.return_sequences else last[:, None]), states

    # --- Keras hook -----------------------------------------------------------------------

    def inner_loop(self, sequences, initial_state, mask, training=False):
        if keras.tree.is_nested(mask):
            mask = mask[0]
        if not keras.tree.is_nested(initial_state):
            initial_state = [initial_state]
        initial_state = list(initial_state)

        if exporting_for_tflite():
            return self._tflite_loop(sequences, initial_state, mask, training)
        if getattr(self, "use_cudnn", "auto") is False:
            return self._generic_loop(sequences, initial_state, mask, training)
        if keras.backend.backend() == "tensorflow" and _gpu_host():
            return self._gpu_loop(sequences, initial_state, mask, training)
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

    Keras LSTM gates are i, f, c, o; the Keras bias is the input bias (no recurrent bias).
    """

    _RNN_MODE = "lstm"
    _GATES = 4


@keras.saving.register_keras_serializable(package="tf_rnn_ops")
class GRU(_FusedRNNMixin, keras.layers.GRU):
    """``keras.layers.GRU`` whose sequence loop runs in one fused op (see module doc).

    Keras GRU gates are z, r, h (the op reads them in that order). With ``reset_after=True``
    the Keras bias ``[2, 3N]`` is (input bias, recurrent bias); with ``reset_after=False`` it
    is ``[3N]``, the input bias (the reset-before candidate has no recurrent bias to add).
    """

    _RNN_MODE = "gru"
    _GATES = 3


@keras.saving.register_keras_serializable(package="tf_rnn_ops")
class SimpleRNN(_FusedRNNMixin, keras.layers.SimpleRNN):
    """``keras.layers.SimpleRNN`` whose sequence loop runs in one fused op (see module doc): ``rnn_tanh`` for ``activation='tanh'``, ``rnn_relu`` for ``'relu'``.

    h_t = act(x_t · kernel + bias + h_{t-1} · recurrent_kernel).
    """

    _RNN_MODE = None   # from the activation (_rnn_mode)
    _GATES = 1


from tf_rnn_ops._to_stock import to_stock  # noqa: E402  (needs the classes above)
