"""The backprop kernels skip the weights' gradients when the graph consumes none of them
(OpKernelContext::output_required; the engine's backward with dW, dR and dbW null, or dparams
null): a frozen layer inside a model (its input's gradient needed, its variables' not), a
CudnnRNNBackprop whose params_backprop is unused, a BlockLSTMGrad whose five weight gradients
are (an input's saliency). The gradients that are computed keep their
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


@pytest.mark.parametrize("exact", [False, True], ids=["raw", "registered"])
@pytest.mark.parametrize("use_peephole", [False, True])
@pytest.mark.parametrize("T,B,I,H", SIZES, ids=SIZE_IDS)
def test_block_lstm_grad_without_weight_gradients(ours, use_peephole, exact, T, B, I, H):
    """BlockLSTMGrad (raw) and BlockLSTM's registered gradient (BlockLSTMGradExact), with
    seq_len_max short of T: the gradient of x and the initial states alone (a frozen cell, or
    an input's saliency)."""
    rng = np.random.default_rng(23)
    f = lambda *s: tf.constant(rng.uniform(-0.5, 0.5, s).astype(np.float32))  # noqa: E731
    ins = dict(x=f(T, B, I), cs_prev=f(B, H), h_prev=f(B, H), w=f(I + H, 4 * H), wci=f(H),
               wcf=f(H), wco=f(H), b=f(4 * H))
    cs_grad, h_grad = f(T, B, H), f(T, B, H)
    kept, weights = ["x", "cs_prev", "h_prev"], ["w", "wci", "wcf", "wco", "b"]
    seq = tf.constant(T - 1, tf.int64)
    attrs = dict(cell_clip=0.0, use_peephole=use_peephole)

    def grads(with_weights):
        if not exact:  # the raw op: its outputs 0-2, then the weights' 3-7
            o = ours.BlockLSTM(seq_len_max=seq, **ins, **attrs)
            g = ours.BlockLSTMGrad(seq_len_max=seq, **ins, i=o[0], cs=o[1], f=o[2], o=o[3],
                                   ci=o[4], co=o[5], h=o[6], cs_grad=cs_grad, h_grad=h_grad,
                                   use_peephole=use_peephole)
            return list(g[:3]) + (list(g[3:]) if with_weights else [])
        srcs = [ins[k] for k in kept + (weights if with_weights else [])]
        with tf.GradientTape() as tape:
            tape.watch(srcs)
            o = ours.BlockLSTM(seq_len_max=seq, **ins, **attrs)
            loss = tf.reduce_sum(o[6] * h_grad) + tf.reduce_sum(o[1] * cs_grad)
        return tape.gradient(loss, srcs)

    _check(grads, 3)
