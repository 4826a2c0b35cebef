"""What the tests of gradients nobody reads share (test_unused_input_grad.py,
test_unused_weight_grads.py, test_input_grad_attr.py): the sizes that take the backward's two
roads, bit equality, and the cases they differentiate."""
import numpy as np
import tensorflow as tf

# (T, B, I, H): the pipelined backward (its step chain beside the gradients' chunks) and the
# split one (B > 64: the input and weight gradients as products after the chain)
SIZES = [(12, 8, 24, 40), (5, 80, 24, 40)]
SIZE_IDS = [f"B{s[1]}" for s in SIZES]


def bits_equal(a, b):
    return np.array_equal(tf.cast(a, tf.float64).numpy(), tf.cast(b, tf.float64).numpy())


def keras_case(kind, policy, T, B, I, H, seed, h0=False):
    """x [B, T, I] in the policy's compute dtype, a weight w [B, T, H] for y's sum, and the
    built layer (tf_rnn_ops.keras `kind`, return_sequences); with h0, initial states (one
    tensor, twice for the LSTM) in x's dtype, the layer built with them."""
    import keras
    import tf_rnn_ops.keras as K
    rng = np.random.default_rng(seed)
    x = tf.constant(rng.standard_normal((B, T, I)).astype(np.float32))
    h = tf.constant(rng.standard_normal((B, H)).astype(np.float32) * 0.5)
    if policy != "float32":
        dt = keras.mixed_precision.Policy(policy).compute_dtype
        x, h = tf.cast(x, dt), tf.cast(h, dt)
    w = tf.constant(rng.standard_normal((B, T, H)).astype(np.float32))
    layer = getattr(K, kind)(H, return_sequences=True, dtype=policy)
    states = None if not h0 else [h, h] if kind == "LSTM" else [h]
    layer(x[:, :2], initial_state=states)
    return x, w, layer, states


def variables_grads(x, w, layer):
    """grads(with_x): the layer's variables' gradients of sum(y · w) in a training call, x's
    first where with_x (the tape then watches x)."""
    def grads(with_x):
        with tf.GradientTape() as tape:
            if with_x:
                tape.watch(x)
            loss = tf.reduce_sum(tf.cast(layer(x, training=True), tf.float32) * w)
        return tape.gradient(loss, ([x] if with_x else []) + layer.trainable_variables)
    return grads


def cudnn_case(ours, rng, mode, direction, layers, T, B, I, H):
    """CudnnRNN's inputs (uniform in ±0.3), sequence lengths in [1, T] (the first T), and a
    weight for y's sum."""
    D = 2 if direction == "bidirectional" else 1
    n = int(tf.reshape(ours.CudnnRNNParamsSize(
        num_layers=layers, num_units=H, input_size=I, T=tf.float32, S=tf.int32,
        rnn_mode=mode, direction=direction), [-1])[0])
    f = lambda *s: tf.constant(rng.uniform(-0.3, 0.3, s).astype(np.float32))  # noqa: E731
    lengths = rng.integers(1, T + 1, size=B).astype(np.int32)
    lengths[0] = T
    return dict(input=f(T, B, I), input_h=f(layers * D, B, H), input_c=f(layers * D, B, H),
                params=f(n)), tf.constant(lengths), f(T, B, D * H)
