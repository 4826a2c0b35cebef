"""Registered gradients of the forward ops (tf.GradientTape, tf.gradients, tf.function).

Unlike stock TensorFlow (SEMANTICS.md §3, §5), these are the exact gradients of the forward
functions:
* BlockLSTMV2 is differentiated in its own IFCO gate order (stock calls the ICFO BlockLSTMGrad);
* gradients arriving at every output (i, cs, f, o, ci, co, h) are used (stock drops five);
* cell clipping is differentiated exactly: no gradient through a clipped cell value
  (stock is straight-through);
* LSTMBlockCell has a gradient at all (stock TF2 has none).
They run the internal op TfRnn>BlockLSTMGradExact.
"""
import tensorflow as tf

from tf_rnn_ops._loader import load_library


def _or_zeros(grads, outputs):
    return [tf.zeros_like(out) if g is None else g for g, out in zip(grads, outputs)]


def _exact(seq_len_max, inputs, outputs, grads, use_peephole, cell_clip, gate_order):
    x, cs_prev, h_prev, w, wci, wcf, wco, b = inputs
    i, cs, f, o, ci, co, h = outputs
    gi, gcs, gf, go, gci, gco, gh = grads
    return load_library().tf_rnn_block_lstm_grad_exact(
        seq_len_max=seq_len_max, x=x, cs_prev=cs_prev, h_prev=h_prev, w=w, wci=wci, wcf=wcf,
        wco=wco, b=b, i=i, cs=cs, f=f, o=o, ci=ci, co=co, h=h, cs_grad=gcs, h_grad=gh,
        i_grad=gi, f_grad=gf, o_grad=go, ci_grad=gci, co_grad=gco, use_peephole=use_peephole,
        cell_clip=cell_clip, gate_order=gate_order)


def _sequence_grad(op, grads, gate_order):
    grads = _or_zeros(grads, op.outputs)
    out = _exact(op.inputs[0], list(op.inputs[1:]), list(op.outputs), grads,
                 op.get_attr("use_peephole"), op.get_attr("cell_clip"), gate_order)
    return [None] + list(out)


@tf.RegisterGradient("TfRnn>BlockLSTM")
def _block_lstm_grad(op, *grads):
    return _sequence_grad(op, grads, "icfo")


@tf.RegisterGradient("TfRnn>BlockLSTMV2")
def _block_lstm_v2_grad(op, *grads):
    return _sequence_grad(op, grads, "ifco")


@tf.RegisterGradient("TfRnn>LSTMBlockCell")
def _lstm_block_cell_grad(op, *grads):
    # One step = a sequence of length 1: add a time axis, reuse the sequence gradient.
    grads = _or_zeros(grads, op.outputs)
    inputs = list(op.inputs)
    inputs[0] = tf.expand_dims(inputs[0], 0)
    outputs = [tf.expand_dims(t, 0) for t in op.outputs]
    grads = [tf.expand_dims(g, 0) for g in grads]
    out = _exact(tf.constant(1, tf.int64), inputs, outputs, grads, op.get_attr("use_peephole"),
                 op.get_attr("cell_clip"), "icfo")
    return [tf.squeeze(out[0], 0)] + list(out[1:])
