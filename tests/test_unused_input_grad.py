"""The backprop kernels skip the input gradient when the graph does not consume it
(OpKernelContext::output_required; ComputeBridge::OutIfRequired, RnnBwdArgs::dx null): a Keras
layer's training step that differentiates only its variables (the first layer of a model), or
CudnnRNNBackprop whose input_backprop is unused. The other gradients keep their bits, and an
input gradient that a graph does consume is the one an eager call computes (where every output
is required)."""
import numpy as np
import pytest
import tensorflow as tf

keras = pytest.importorskip("keras")

import tf_rnn_ops.keras as K  # noqa: E402
from unused_grads_util import (SIZE_IDS, SIZES, bits_equal, cudnn_case,  # noqa: E402
                               keras_case, variables_grads)


def _check(grads, what):
    """grads(with_input): the gradients, the input's first where with_input. In a tf.function
    without the input's, the others keep the bits they have with it; the input's, consumed by a
    tf.function, is the eager call's (where every output is required)."""
    all_fn = tf.function(lambda: grads(True))()
    rest_fn = tf.function(lambda: grads(False))()
    eager = grads(True)
    assert len(rest_fn) == len(all_fn) - 1
    for got, want in zip(rest_fn, all_fn[1:]):
        assert bits_equal(got, want), f"a gradient changed without {what}"
    assert bits_equal(all_fn[0], eager[0]), f"{what} consumed by the graph differs from eager's"


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16", "mixed_float16"])
@pytest.mark.parametrize("kind", ["LSTM", "GRU", "SimpleRNN"])
@pytest.mark.parametrize("T,B,I,H", SIZES, ids=SIZE_IDS)
def test_keras_step_without_the_input_gradient(kind, policy, T, B, I, H):
    x, w, layer, _ = keras_case(kind, policy, T, B, I, H, seed=7)
    _check(variables_grads(x, w, layer), "dx")


@pytest.mark.parametrize("mode", ["lstm", "gru"])
@pytest.mark.parametrize("direction,layers", [("unidirectional", 1), ("bidirectional", 2)])
@pytest.mark.parametrize("T,B,I,H", SIZES, ids=SIZE_IDS)
def test_cudnn_backprop_without_the_input_gradient(ours, mode, direction, layers, T, B, I, H):
    rng = np.random.default_rng(3)
    ins, lengths, w = cudnn_case(ours, rng, mode, direction, layers, T, B, I, H)

    def grads(with_input):
        names = ["input", "input_h", "input_c", "params"][0 if with_input else 1:]
        with tf.GradientTape() as tape:
            tape.watch([ins[k] for k in names])
            y = ours.CudnnRNNV3(**ins, sequence_lengths=lengths, rnn_mode=mode,
                                direction=direction, is_training=True)[0]
            loss = tf.reduce_sum(y * w)
        return tape.gradient(loss, [ins[k] for k in names])

    _check(grads, "input_backprop")


@pytest.mark.parametrize("use_peephole", [False, True])
@pytest.mark.parametrize("T,B,I,H", SIZES, ids=SIZE_IDS)
def test_block_lstm_gradient_without_the_input_gradient(ours, use_peephole, T, B, I, H):
    """BlockLSTM's registered gradient (BlockLSTMGradExact), with seq_len_max short of T."""
    rng = np.random.default_rng(5)
    f = lambda *s: tf.constant(rng.uniform(-0.5, 0.5, s).astype(np.float32))  # noqa: E731
    ins = dict(x=f(T, B, I), cs_prev=f(B, H), h_prev=f(B, H), w=f(I + H, 4 * H), wci=f(H),
               wcf=f(H), wco=f(H), b=f(4 * H))
    w = f(T, B, H)

    def grads(with_input):
        names = list(ins)[0 if with_input else 1:]
        with tf.GradientTape() as tape:
            tape.watch([ins[k] for k in names])
            h = ours.BlockLSTM(seq_len_max=tf.constant(T - 1, tf.int64), **ins, cell_clip=0.0,
                               use_peephole=use_peephole)[6]
            loss = tf.reduce_sum(h * w)
        return tape.gradient(loss, [ins[k] for k in names])

    _check(grads, "x_grad")


@pytest.mark.parametrize("training", [False, True], ids=["infer", "train"])
@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16", "mixed_float16"])
@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_keras_layer_whose_sequence_output_nobody_reads(kind, policy, training):
    """return_sequences=False in a tf.function: nothing consumes the op's output sequence, so
    the kernel lets the engine write it into scratch (no conversion or transpose into the
    output); the layer's output and its variables' gradients are the eager call's bits."""
    rng = np.random.default_rng(3)
    x = tf.cast(tf.constant(rng.standard_normal((16, 9, 7)).astype(np.float32)),
                keras.mixed_precision.Policy(policy).compute_dtype)
    layer = getattr(K, kind)(11, return_sequences=False, dtype=policy)
    layer(x)

    def run():
        with tf.GradientTape() as tape:
            y = layer(x, training=training)
            loss = tf.reduce_sum(tf.cast(y, tf.float32) ** 2)
        return [y] + tape.gradient(loss, layer.trainable_variables)
    for got, want in zip(tf.function(run)(), run()):
        assert bits_equal(got, want)
