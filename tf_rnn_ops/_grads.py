"""Registered gradients of the forward ops (tf.GradientTape, tf.gradients, tf.function).

Unlike stock TensorFlow (docs/SEMANTICS.md §3, §5), these are the exact gradients of the forward
functions:
* BlockLSTMV2 is differentiated in its own IFCO gate order (stock calls the ICFO BlockLSTMGrad);
* gradients arriving at every output (i, cs, f, o, ci, co, h) are used (stock drops five);
* cell clipping is differentiated exactly: no gradient through a clipped cell value
  (stock is straight-through);
* LSTMBlockCell and GRUBlockCell have gradients at all (stock TF2 has none); GRUBlockCell's
  includes the weight and bias gradients and the gradients arriving at r, u and c.
They run the internal ops TfRnn>BlockLSTMGradExact and TfRnn>GRUBlockCellGradExact.
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


@tf.RegisterGradient("TfRnn>GRUBlockCell")
def _gru_block_cell_grad(op, *grads):
    x, h_prev, w_ru, w_c, b_ru, b_c = op.inputs
    r, u, c, h = op.outputs
    g_r, g_u, g_c, g_h = _or_zeros(grads, op.outputs)
    d_x, d_h_prev, d_c_bar, d_r_bar_u_bar = load_library().tf_rnn_gru_block_cell_grad_exact(
        x=x, h_prev=h_prev, w_ru=w_ru, w_c=w_c, b_ru=b_ru, b_c=b_c, r=r, u=u, c=c, d_h=g_h,
        r_grad=g_r, u_grad=g_u, c_grad=g_c)
    # Weight and bias gradients (docs/SEMANTICS.md §2.7): [x, h_prev]ᵀ·d_r_bar_u_bar,
    # [x, h_prev ⊙ r]ᵀ·d_c_bar and the batch sums.
    x_h_prev = tf.concat([x, h_prev], 1)
    x_h_prev_r = tf.concat([x, h_prev * r], 1)
    d_w_ru = tf.matmul(x_h_prev, d_r_bar_u_bar, transpose_a=True)
    d_w_c = tf.matmul(x_h_prev_r, d_c_bar, transpose_a=True)
    d_b_ru = tf.reduce_sum(d_r_bar_u_bar, 0)
    d_b_c = tf.reduce_sum(d_c_bar, 0)
    return [d_x, d_h_prev, d_w_ru, d_w_c, d_b_ru, d_b_c]


# --- cuDNN RNN family (docs/SEMANTICS.md §3.3) ----------------------------------------------

def _cudnn_common_attrs(op):
    return {k: op.get_attr(k) for k in ("dropout", "seed", "seed2", "rnn_mode", "input_mode",
                                        "direction")}


def _check_training(op):
    if not op.get_attr("is_training"):
        raise ValueError("To use CudnnRNN in gradients, is_training must be set to True.")


def _cudnn_backprop_inputs(op, grads):
    out, out_h, out_c = op.outputs[:3]
    g = _or_zeros(grads[:3], [out, out_h, out_c])
    return dict(input=op.inputs[0], input_h=op.inputs[1], input_c=op.inputs[2],
                params=op.inputs[3], output=out, output_h=out_h, output_c=out_c,
                output_backprop=g[0], output_h_backprop=g[1], output_c_backprop=g[2],
                reserve_space=op.outputs[3])


@tf.RegisterGradient("TfRnn>CudnnRNN")
def _cudnn_rnn_grad(op, *grads):
    _check_training(op)
    return list(load_library().tf_rnn_cudnn_rnn_backprop(
        **_cudnn_backprop_inputs(op, grads), **_cudnn_common_attrs(op)))


@tf.RegisterGradient("TfRnn>CudnnRNNV2")
def _cudnn_rnn_v2_grad(op, *grads):
    _check_training(op)
    return list(load_library().tf_rnn_cudnn_rnn_backprop_v2(
        **_cudnn_backprop_inputs(op, grads), host_reserved=op.outputs[4],
        **_cudnn_common_attrs(op)))


@tf.RegisterGradient("TfRnn>CudnnRNNV3")
def _cudnn_rnn_v3_grad(op, *grads):
    _check_training(op)
    kw = _cudnn_backprop_inputs(op, grads)
    out = load_library().tf_rnn_cudnn_rnn_backprop_v3(
        **kw, sequence_lengths=op.inputs[4], host_reserved=op.outputs[4],
        num_proj=op.get_attr("num_proj"), time_major=op.get_attr("time_major"),
        **_cudnn_common_attrs(op))
    return list(out) + [None]


# The attrs both ops have (bf16_products: the backprop's products as the forward's).
_KERAS_ATTRS = ("rnn_mode", "activation", "recurrent_activation", "reset_after",
                "preprojected", "bf16_products")


def _keras_rnn_grad(forward, backprop, op, grads):
    inputs = list(op.inputs)
    attrs = {k: op.get_attr(k) for k in _KERAS_ATTRS}
    reserve = op.outputs[3]
    if not op.get_attr("is_training"):
        # An inference call (no reserve): run the forward again with one, so that the
        # gradient through it is exact.
        reserve = forward(*inputs, is_training=True, **attrs)[3]
    dy, dh, dc = _or_zeros(grads[:3], op.outputs[:3])
    # A tape that wants no gradient of x (a model's first layer: GradientTape passes the inputs
    # it skips; tf.gradients' ops have no skip_input_indices) gets none: the backprop skips
    # its products, under XLA too, where the graph cannot tell the kernel that nothing reads it.
    input_grad = 0 not in (getattr(op, "skip_input_indices", None) or ())
    out = list(backprop(*inputs, output_backprop=dy, output_h_backprop=dh,
                        output_c_backprop=dc, reserve_space=reserve, input_grad=input_grad,
                        **attrs))
    if not input_grad:
        out[0] = None
    # No gradient for the sequence lengths and the recurrent (dropout) mask.
    return out + [None, None]


@tf.RegisterGradient("TfRnn>KerasRNN")
def _keras_rnn_float_grad(op, *grads):
    lib = load_library()
    return _keras_rnn_grad(lib.tf_rnn_keras_rnn, lib.tf_rnn_keras_rnn_backprop, op, grads)


@tf.RegisterGradient("TfRnn>KerasRNNMixed")
def _keras_rnn_mixed_grad(op, *grads):
    lib = load_library()
    return _keras_rnn_grad(lib.tf_rnn_keras_rnn_mixed, lib.tf_rnn_keras_rnn_mixed_backprop,
                           op, grads)
