"""The backprop kernels skip the weights' gradients when the graph consumes none of them
(OpKernelContext::output_required; the engine's backward with dW, dR and dbW null, or dparams
null): a frozen layer inside a model (its input's gradient needed, its variables' not), or a
CudnnRNNBackprop whose params_backprop is unused. The gradients that are computed keep their
bits: the input's and the initial states' against a graph that also takes the weights'."""
import numpy as np
import pytest
import tensorflow as tf

keras = pytest.importorskip("keras")

from unused_grads_util import SIZE_IDS, SIZES, bits_equal, cudnn_case, keras_case  # noqa: E402


def _check(grads, n_kept):
    """grads(with_weights): the first n_kept gradients, then (with_weights) the weights'. In a
    tf.function without the weights' (nothing consumes them), the kept ones have the bits they
    have beside them."""
    kept = tf.function(lambda: grads(False))()
    both = tf.function(lambda: grads(True))()
    assert len(kept) == n_kept and len(both) > n_kept
    for k, (got, want) in enumerate(zip(kept, both[:n_kept])):
        assert bits_equal(got, want), f"gradient {k} changed without the weights' gradients"


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16", "mixed_float16"])
@pytest.mark.parametrize("kind", ["LSTM", "GRU", "SimpleRNN"])
@pytest.mark.parametrize("T,B,I,H", SIZES, ids=SIZE_IDS)
def test_frozen_keras_layer(kind, policy, T, B, I, H):
    x, w, layer, states = keras_case(kind, policy, T, B, I, H, seed=17, h0=True)
    h0 = states[0]

    def grads(with_weights):
        with tf.GradientTape() as tape:
            tape.watch([x, h0])
            y = layer(x, initial_state=states, training=True)
            loss = tf.reduce_sum(tf.cast(y, tf.float32) * w)
        return tape.gradient(loss, [x, h0] + (layer.trainable_variables if with_weights else []))

    _check(grads, 2)


@pytest.mark.parametrize("mode", ["lstm", "gru", "rnn_tanh"])
@pytest.mark.parametrize("direction,layers", [("unidirectional", 1), ("bidirectional", 2)])
@pytest.mark.parametrize("T,B,I,H", SIZES, ids=SIZE_IDS)
def test_cudnn_backprop_without_params_backprop(ours, mode, direction, layers, T, B, I, H):
    rng = np.random.default_rng(9)
    ins, lengths, w = cudnn_case(ours, rng, mode, direction, layers, T, B, I, H)
    names = ["input", "input_h"] + (["input_c"] if mode == "lstm" else [])

    def grads(with_params):
        srcs = [ins[k] for k in names] + ([ins["params"]] if with_params else [])
        with tf.GradientTape() as tape:
            tape.watch(srcs)
            y = ours.CudnnRNNV3(**ins, sequence_lengths=lengths, rnn_mode=mode,
                                direction=direction, is_training=True)[0]
            loss = tf.reduce_sum(y * w)
        return tape.gradient(loss, srcs)

    _check(grads, len(names))
