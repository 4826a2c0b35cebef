"""Apple MPSGraph's LSTM and GRU APIs as TensorFlow ops (``TfRnn>LSTM``,
``TfRnn>LSTMGradients``, ``TfRnn>GRU``, ``TfRnn>GRUGradients``).

A model written against ``MPSGraph.LSTM(...)`` / ``MPSGraph.LSTMGradients(...)`` runs and
trains in TensorFlow with the same operands, layouts and descriptor options::

    from tf_rnn_ops import mps
    d = mps.LSTMDescriptor(bidirectional=True, training=True, produce_cell=True)
    h, c, z = mps.lstm(source, recurrent_weight, input_weight=w, bias=b, descriptor=d)
    grads = mps.lstm_gradients(source, recurrent_weight, dh, z, c, input_weight=w, bias=b,
                               descriptor=d)   # [d_source, d_recurrent_weight, d_w, d_b]

Layouts (T time, B batch, I input, H hidden, D = 2 when bidirectional):

=================  ===========================  ================================
operand            unidirectional               bidirectional
=================  ===========================  ================================
source             [T, B, I] ([T, B, 4H] with   [T, B, I] ([T, B, 8H] without W:
                   no input weight)             forward 4H then backward 4H)
recurrent_weight   [4H, H]                      [2, 4H, H]
input_weight       [4H, I]                      [8H, I] (forward rows first)
bias               [4H]                         [8H]
init_state/cell    [B, H]                       [B, 2H] (forward half first)
mask               [B, H] or [T, B, H]          [B, 2H] or [T, B, 2H]
peephole           [4H]                         [2, 4H]
state, cell        [T, B, H]                    [T, B, 2H]
z_state            [T, B, 4H]                   [T, B, 8H]
=================  ===========================  ================================

Gate blocks in every 4H axis: i, f, z, o (z: the cell gate), or i, z, f, o with
``forget_gate_last``. Per step: ``gates = act((h[t-1] ⊙ mask)·Rᵀ + x[t]·Wᵀ + b + p ⊙ c[t-1])``
(each gate with its activation; the peephole term on all four gates), ``c = f⊙c[t-1] + i⊙z``,
``h = o ⊙ activation(c)``. ``hard_sigmoid`` is MPS's ``clamp(0.2·x + 0.5, 0, 1)``.
``reverse`` runs from the last step to the first (ignored when bidirectional, where the
second direction always runs in reverse).

GRU (``gru``, ``gru_gradients``, ``GRUDescriptor``): layouts as above with 3H in place of 4H
(no cell, no peephole); ``secondary_bias`` is [H] ([2H] bidirectional). Gate blocks in every
3H axis: z, r, o, or r, z, o with ``reset_gate_first``. Per step, with ``hm = h[t-1] ⊙ mask``::

    z = fz(hm·R_zᵀ + x·W_zᵀ + b_z),   r = fr(hm·R_rᵀ + x·W_rᵀ + b_r)
    c = (r ⊙ hm)·R_oᵀ                       (reset_after=False, the default)
    c = (hm·R_oᵀ + secondary_bias) ⊙ r      (reset_after=True)
    o = fo(c + x·W_oᵀ + b_o)
    h = (1-z) ⊙ h[t-1] + z ⊙ o              (flip_z=False, the default)
    h = z ⊙ h[t-1] + (1-z) ⊙ o              (flip_z=True; Keras/cuDNN's convention)

MPSGraph's header documents both blends for the default; we follow the documentation of
``MPSGraphGRUDescriptor.flipZ`` (see docs/DIFFERENCES.md). ``secondary_bias`` is only valid
with ``reset_after=True``. z_state holds the activated gates [z, r, o] (descriptor order).

TensorFlow encoding of MPSGraph's optional operands: each is a list input of length 0
(absent) or 1 (present) of the op; these functions take ``None`` for absent.
``LSTMGradients`` recomputes the forward activations from its operands, so ``z_state`` and
``cell_output_fwd`` are only checked for shape (an empty tensor is accepted).
"""
import dataclasses

import tensorflow as tf

from tf_rnn_ops._loader import load_library
from tf_rnn_ops.raw_ops import _ALLOWED, _dtype, _invalid, _is_tensor

ACTIVATIONS = ("none", "relu", "tanh", "sigmoid", "hard_sigmoid")

__all__ = ["LSTMDescriptor", "lstm", "lstm_gradients", "GRUDescriptor", "gru",
           "gru_gradients", "ACTIVATIONS"]


@dataclasses.dataclass(frozen=True)
class _Descriptor:
    """What both descriptors have: reverse, bidirectional and training first; every field
    ending in 'activation' names one of ACTIVATIONS; the fields are the op's attrs."""
    reverse: bool = False
    bidirectional: bool = False
    training: bool = False

    def __post_init__(self):
        for f in dataclasses.fields(self):
            if f.name.endswith("activation") and getattr(self, f.name) not in ACTIVATIONS:
                raise ValueError(f"{type(self).__name__}.{f.name} must be one of {ACTIVATIONS}, "
                                 f"got {getattr(self, f.name)!r}")

    def attrs(self):
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class LSTMDescriptor(_Descriptor):
    """MPSGraphLSTMDescriptor: defaults as in MPSGraph."""
    produce_cell: bool = False
    forget_gate_last: bool = False
    input_gate_activation: str = "sigmoid"
    forget_gate_activation: str = "sigmoid"
    cell_gate_activation: str = "tanh"
    output_gate_activation: str = "sigmoid"
    activation: str = "tanh"


def _source(op, source):
    """source as a tensor; its (base) dtype is the op's T (InvalidArgumentError if not
    allowed)."""
    source = tf.convert_to_tensor(source)
    if _dtype(source) not in _ALLOWED:
        raise _invalid(op, f"input 'source' has dtype {_dtype(source).name}; T must be one of "
                           "half, bfloat16, float32, float64")
    return source


def _operand(op, name, x, dtype):
    """x as a tensor of dtype; a tensor of another dtype is an InvalidArgumentError naming it
    (a reference counts as its base dtype)."""
    if _is_tensor(x):
        if _dtype(x) != dtype:
            raise _invalid(op, f"input '{name}' has dtype {_dtype(x).name} but 'source' has "
                               f"{dtype.name}; all of them must have one dtype T")
        return x
    return tf.convert_to_tensor(x, dtype=dtype)


def _opt(x, dtype, op="LSTM", name="operand"):
    return [] if x is None else [_operand(op, name, x, dtype)]


def _run(raw, op, source, recurrent_weight, descriptor, name, required=(), optional=()):
    """What the four wrappers share: the raw op ``raw`` on source (its dtype is T),
    recurrent_weight and the ``required`` operands (pairs name, value: tensors of dtype T), the
    ``optional`` ones (pairs name, value or None: lists of 0 or 1 tensors of dtype T), with the
    descriptor's fields as attrs.  Operands are converted (dtype errors raised) in that order."""
    source = _source(op, source)
    dt = _dtype(source)
    inputs = {k: _operand(op, k, v, dt)
              for k, v in (("recurrent_weight", recurrent_weight),) + tuple(required)}
    inputs.update((k, _opt(v, dt, op, k)) for k, v in optional)
    return getattr(load_library(), raw)(source=source, name=name, **inputs,
                                        **descriptor.attrs())


def _flat(out):
    """A gradients op's outputs as one list: d_source, d_recurrent_weight, then each optional
    operand's gradient group (0 or 1 tensors) in order."""
    return [out[0], out[1]] + [g for group in out[2:] for g in group]


def _gradients(raw, op, source, recurrent_weight, descriptor, name, source_gradient, z_state,
               fwd_out, optional):
    """What both gradients wrappers share: the raw op ``raw`` with the required
    source_gradient, z_state and forward output (``fwd_out``: pair name, value) after source
    and recurrent_weight, the ``optional`` operands (as in ``_run``), the outputs flattened."""
    return _flat(_run(raw, op, source, recurrent_weight, descriptor, name,
                      required=[("source_gradient", source_gradient), ("z_state", z_state),
                                fwd_out],
                      optional=optional))


def lstm(source, recurrent_weight, input_weight=None, bias=None, init_state=None,
         init_cell=None, mask=None, peephole=None, descriptor=None, name=None):
    """MPSGraph.LSTM: returns [state] + [cell] (produce_cell) + [z_state] (training)."""
    d = descriptor or LSTMDescriptor()
    state, cell, z = _run(
        "tf_rnn_lstm", "LSTM", source, recurrent_weight, d, name,
        optional=[("input_weight", input_weight), ("bias", bias), ("init_state", init_state),
                  ("init_cell", init_cell), ("mask", mask), ("peephole", peephole)])
    return [state] + ([cell] if d.produce_cell else []) + ([z] if d.training else [])


def lstm_gradients(source, recurrent_weight, source_gradient, z_state, cell_output_fwd,
                   state_gradient=None, cell_gradient=None, input_weight=None, bias=None,
                   init_state=None, init_cell=None, mask=None, peephole=None, descriptor=None,
                   cell_output_gradient=None, name=None):
    """MPSGraph.LSTMGradients: returns the gradients of source, recurrent_weight, and of
    input_weight, bias, peephole, init_state, init_cell when given (in that order).

    ``cell_output_gradient`` ([T, B, D·H], an extension) adds gradients arriving at the cell
    sequence output of a produce_cell forward."""
    return _gradients(
        "tf_rnn_lstm_gradients", "LSTMGradients", source, recurrent_weight,
        descriptor or LSTMDescriptor(), name, source_gradient, z_state,
        ("cell_output_fwd", cell_output_fwd),
        [("state_gradient", state_gradient), ("cell_gradient", cell_gradient),
         ("input_weight", input_weight), ("bias", bias), ("init_state", init_state),
         ("init_cell", init_cell), ("mask", mask), ("peephole", peephole),
         ("cell_output_gradient", cell_output_gradient)])


def _grad_inputs(op, d_state, d_z, desc_cls, keys):
    """What both registered gradients start with: the descriptor attrs, the optional operand
    groups (keys, in input order) and their lengths, and d_state (zeros when None) behind a
    check that no gradient arrives at z_state."""
    checks = []
    if d_z is not None and d_z.shape.num_elements() != 0:
        # The tape may hand zeros to an unused output; a real gradient is unsupported.
        checks.append(tf.debugging.assert_equal(
            tf.reduce_all(tf.equal(d_z, 0)), True,
            message=f"{op.type}: gradients arriving at z_state (the training state) are not "
                    "supported"))
    attrs = {f.name: op.get_attr(f.name) for f in dataclasses.fields(desc_cls)}
    inputs = list(op.inputs)
    n, groups, pos = {}, {}, 2
    for key in keys:
        n[key] = op.get_attr("n_" + key)
        groups[key] = inputs[pos:pos + n[key]]
        pos += n[key]
    if d_state is None:
        d_state = tf.zeros_like(op.outputs[0])
    with tf.control_dependencies(checks):
        d_state = tf.identity(d_state)
    return attrs, inputs, n, groups, d_state


def _input_gradients(out, n, keys, with_grad):
    """The gradients op's outputs ``out`` (d_source, d_recurrent_weight, then one group per
    operand of ``with_grad``, in that order) as the gradient list in the forward op's input
    order: source, recurrent_weight, then each optional group of ``keys`` (None for each tensor
    of a group without a gradient: the mask)."""
    grads = dict(zip(with_grad, out[2:]))
    return [out[0], out[1]] + [g for key in keys
                               for g in (list(grads[key]) if key in grads else [None] * n[key])]


@tf.RegisterGradient("TfRnn>LSTM")
def _lstm_grad(op, d_state, d_cell, d_z):
    keys = ("input_weight", "bias", "init_state", "init_cell", "mask", "peephole")
    attrs, inputs, n, groups, d_state = _grad_inputs(op, d_state, d_z, LSTMDescriptor, keys)
    source, R = inputs[0], inputs[1]
    state, cell, z = op.outputs
    d_cell_seq = [d_cell] if (d_cell is not None and attrs["produce_cell"]) else []
    out = load_library().tf_rnn_lstm_gradients(
        source=source, recurrent_weight=R, source_gradient=d_state, z_state=z,
        cell_output_fwd=cell, state_gradient=[], cell_gradient=[],
        cell_output_gradient=d_cell_seq, **groups, **attrs)
    return _input_gradients(out, n, keys,
                            ("input_weight", "bias", "peephole", "init_state", "init_cell"))


@dataclasses.dataclass(frozen=True)
class GRUDescriptor(_Descriptor):
    """MPSGraphGRUDescriptor: defaults as in MPSGraph."""
    reset_gate_first: bool = False
    reset_after: bool = False
    flip_z: bool = False
    update_gate_activation: str = "sigmoid"
    reset_gate_activation: str = "sigmoid"
    output_gate_activation: str = "tanh"


def gru(source, recurrent_weight, input_weight=None, bias=None, init_state=None, mask=None,
        secondary_bias=None, descriptor=None, name=None):
    """MPSGraph.GRU: returns [state] + [z_state] (training)."""
    d = descriptor or GRUDescriptor()
    state, z = _run(
        "tf_rnn_gru", "GRU", source, recurrent_weight, d, name,
        optional=[("input_weight", input_weight), ("bias", bias), ("init_state", init_state),
                  ("mask", mask), ("secondary_bias", secondary_bias)])
    return [state] + ([z] if d.training else [])


def gru_gradients(source, recurrent_weight, source_gradient, z_state, output_fwd,
                  state_gradient=None, input_weight=None, bias=None, init_state=None,
                  mask=None, secondary_bias=None, descriptor=None, name=None):
    """MPSGraph.GRUGradients: returns the gradients of source, recurrent_weight, and of
    input_weight, bias, init_state, secondary_bias when given (in that order)."""
    return _gradients(
        "tf_rnn_gru_gradients", "GRUGradients", source, recurrent_weight,
        descriptor or GRUDescriptor(), name, source_gradient, z_state, ("output_fwd", output_fwd),
        [("state_gradient", state_gradient), ("input_weight", input_weight), ("bias", bias),
         ("init_state", init_state), ("mask", mask), ("secondary_bias", secondary_bias)])


@tf.RegisterGradient("TfRnn>GRU")
def _gru_grad(op, d_state, d_z):
    keys = ("input_weight", "bias", "init_state", "mask", "secondary_bias")
    attrs, inputs, n, groups, d_state = _grad_inputs(op, d_state, d_z, GRUDescriptor, keys)
    state, z = op.outputs
    out = load_library().tf_rnn_gru_gradients(
        source=inputs[0], recurrent_weight=inputs[1], source_gradient=d_state, z_state=z,
        output_fwd=state, state_gradient=[], **groups, **attrs)
    return _input_gradients(out, n, keys, ("input_weight", "bias", "init_state", "secondary_bias"))
