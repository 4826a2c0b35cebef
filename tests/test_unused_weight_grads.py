"""The backprop kernels skip the weights' gradients when the graph consumes none of them
(OpKernelContext::output_required; the engine's backward with dW, dR and dbW null, or dparams
null): a frozen layer inside a model (its input's gradient needed, its variables' not), or a
CudnnRNNBackprop whose params_backprop is unused. The gradients that are computed keep their
bits: the input's and the initial states' against a graph that also takes the weights'."""
import numpy as np
import pytest
import tensorflow as tf

keras = pytest.importorskip("keras")

import tf_rnn_ops.keras as K  # noqa: E402

# (T, B, I, H): the pipelined backward (its step chain beside the gradients' chunks) and the
# split one (B > 64: the weights' gradients as products after the chain)
SIZES = [(12, 8, 24, 40), (5, 80, 24, 40)]


def _bits_equal(a, b):
    return np.array_equal(tf.cast(a, tf.float64).numpy(), tf.cast(b, tf.float64).numpy())


def _check(grads, n_kept):
    """grads(with_weights): the first n_kept gradients, then (with_weights) the weights'. In a
    tf.function without the weights' (nothing consumes them), the kept ones have the bits they
    have beside them."""
    kept = tf.function(lambda: grads(False))()
    both = tf.function(lambda: grads(True))()
    assert len(kept) == n_kept and len(both) > n_kept
    for k, (got, want) in enumerate(zip(kept, both[:n_kept])):
        assert _bits_equal(got, want), f"gradient {k} changed without the weights' gradients"


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16", "mixed_float16"])
@pytest.mark.parametrize("kind", ["LSTM", "GRU", "SimpleRNN"])
@pytest.mark.parametrize("T,B,I,H", SIZES, ids=[f"B{s[1]}" for s in SIZES])
def test_frozen_keras_layer(kind, policy, T, B, I, H):
    rng = np.random.default_rng(17)
    x = tf.constant(rng.standard_normal((B, T, I)).astype(np.float32))
    h0 = tf.constant(rng.standard_normal((B, H)).astype(np.float32) * 0.5)
    if policy != "float32":
        dt = keras.mixed_precision.Policy(policy).compute_dtype
        x, h0 = tf.cast(x, dt), tf.cast(h0, dt)
    w = tf.constant(rng.standard_normal((B, T, H)).astype(np.float32))
    layer = getattr(K, kind)(H, return_sequences=True, dtype=policy)
    states = [h0, h0] if kind == "LSTM" else [h0]
    layer(x[:, :2], initial_state=states)

    def grads(with_weights):
        with tf.GradientTape() as tape:
            tape.watch([x, h0])
            y = layer(x, initial_state=states, training=True)
            loss = tf.reduce_sum(tf.cast(y, tf.float32) * w)
        return tape.gradient(loss, [x, h0] + (layer.trainable_variables if with_weights else []))

    _check(grads, 2)


@pytest.mark.parametrize("mode", ["lstm", "gru", "rnn_tanh"])
@pytest.mark.parametrize("direction,layers", [("unidirectional", 1), ("bidirectional", 2)])
@pytest.mark.parametrize("T,B,I,H", SIZES, ids=[f"B{s[1]}" for s in SIZES])
def test_cudnn_backprop_without_params_backprop(ours, mode, direction, layers, T, B, I, H):
    rng = np.random.default_rng(9)
    D = 2 if direction == "bidirectional" else 1
    n = int(tf.reshape(ours.CudnnRNNParamsSize(
        num_layers=layers, num_units=H, input_size=I, T=tf.float32, S=tf.int32,
        rnn_mode=mode, direction=direction), [-1])[0])
    f = lambda *s: tf.constant(rng.uniform(-0.3, 0.3, s).astype(np.float32))  # noqa: E731
    lengths = rng.integers(1, T + 1, size=B).astype(np.int32)
    lengths[0] = T
    ins = dict(input=f(T, B, I), input_h=f(layers * D, B, H), input_c=f(layers * D, B, H),
               params=f(n))
    w = f(T, B, D * H)
    names = ["input", "input_h"] + (["input_c"] if mode == "lstm" else [])

    def grads(with_params):
        srcs = [ins[k] for k in names] + ([ins["params"]] if with_params else [])
        with tf.GradientTape() as tape:
            tape.watch(srcs)
            y = ours.CudnnRNNV3(**ins, sequence_lengths=tf.constant(lengths), rnn_mode=mode,
                                direction=direction, is_training=True)[0]
            loss = tf.reduce_sum(y * w)
        return tape.gradient(loss, srcs)

    _check(grads, len(names))
