"""Operands of TfRnn>KerasRNN that bfloat16 holds exactly, for the checks that a float32 op with
bf16_products, and the mixed op on bfloat16 sequences and float32 weights, give the bfloat16
op's bits (test_mixed_bf16_inference.py, test_mixed_bf16_training.py; half too in
test_keras_mixed_op.py)."""
import tensorflow as tf

BF16 = tf.bfloat16
GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1}


def exact(rng, shape, scale=1.0, dtype=BF16):
    """float32 values that `dtype` (bfloat16, or half) holds exactly."""
    v = tf.constant(rng.normal(size=shape) * scale, tf.float32)
    return tf.cast(tf.cast(v, dtype), tf.float32)


def operands(rng, mode, T, B, I, H):
    """input, input_h, input_c ([0] but for lstm), kernel, recurrent_kernel and bias (a GRU's
    two), in Keras's layout."""
    KH = GATES[mode] * H
    bias = (2, KH) if mode == "gru" else (KH,)
    return dict(input=exact(rng, (B, T, I)), input_h=exact(rng, (B, H), 0.5),
                input_c=exact(rng, (B, H), 0.5) if mode == "lstm" else tf.zeros([0]),
                kernel=exact(rng, (I, KH), 0.1), recurrent_kernel=exact(rng, (H, KH), 0.1),
                bias=exact(rng, bias, 0.5))


# The mixed op's inputs of the sequences' type (the rest are float32 or int32).
SEQUENCE_INPUTS = ("input", "input_h", "input_c", "recurrent_mask")


def mixed(ops, dtype=BF16):
    """TfRnn>KerasRNNMixed's operands from the float32 op's: the sequences, states and mask
    cast to `dtype`, the weights as they are."""
    return {k: tf.cast(v, dtype) if k in SEQUENCE_INPUTS else v for k, v in ops.items()}
