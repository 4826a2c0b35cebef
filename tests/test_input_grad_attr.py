"""The Keras backprop ops' input_grad attr (cc/ops/keras_rnn_ops.cc): false, input_backprop is
zeros and the engine skips the input gradient's products, under XLA too (the custom call's dx
result has no elements), where a graph's consumers cannot tell the kernel. The registered
gradient sets it where GradientTape asks for no gradient of the input (skip_input_indices: a
model's first layer); tf.gradients, whose ops carry no such list, keeps it true. The other
gradients keep their bits. test_unused_input_grad.py: the graph's own pruning without XLA."""
import numpy as np
import pytest
import tensorflow as tf

keras = pytest.importorskip("keras")

from tf_rnn_ops._loader import has_xla, load_library  # noqa: E402
import tf_rnn_ops.keras as K  # noqa: E402

from unused_grads_util import (SIZE_IDS, SIZES, bits_equal, keras_case,  # noqa: E402
                               variables_grads)

BACKPROPS = ("TfRnn>KerasRNNBackprop", "TfRnn>KerasRNNMixedBackprop")


def _layer_case(kind, policy, T, B, I, H):
    x, w, layer, _ = keras_case(kind, policy, T, B, I, H, seed=11)
    return variables_grads(x, w, layer)


def _backprops(graph):
    return [op for op in graph.get_operations() if op.type in BACKPROPS]


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_tape_sets_input_grad_from_its_skipped_inputs(policy):
    grads = _layer_case("LSTM", policy, 6, 4, 5, 8)
    for with_x in (False, True):
        graph = tf.function(lambda: grads(with_x)).get_concrete_function().graph
        ops = _backprops(graph)
        assert len(ops) == 1
        assert ops[0].get_attr("input_grad") == with_x


def test_tf_gradients_keeps_the_input_gradient():
    with tf.Graph().as_default() as g:
        x = tf.constant(np.ones((4, 6, 5), np.float32))
        layer = K.GRU(8, return_sequences=True)
        dw = tf.gradients(tf.reduce_sum(layer(x, training=True)), layer.trainable_variables)
        assert all(d is not None for d in dw)
        assert [op.get_attr("input_grad") for op in _backprops(g)] == [True]


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16", "mixed_float16"])
@pytest.mark.parametrize("kind", ["LSTM", "GRU", "SimpleRNN"])
@pytest.mark.parametrize("T,B,I,H", SIZES, ids=SIZE_IDS)
def test_xla_step_without_the_input_gradient(kind, policy, T, B, I, H):
    """Under XLA (where every output counts as consumed) the first layer's custom call computes
    no input gradient, and the weights' gradients are those of the step that computes it."""
    if not has_xla():
        pytest.skip("the XLA kernels are not built")
    grads = _layer_case(kind, policy, T, B, I, H)
    rest = tf.function(lambda: grads(False), jit_compile=True)
    all_ = tf.function(lambda: grads(True), jit_compile=True)
    got, want = rest(), all_()
    assert len(got) == len(want) - 1
    for g, w in zip(got, want[1:]):
        assert bits_equal(g, w), "a weight's gradient changed without dx"
    calls = [line for line in rest.experimental_get_compiler_ir()(stage="hlo").splitlines()
             if "custom-call" in line and "Backprop" in line.split("=")[0]]
    assert calls and all(line.split("=", 1)[1].lstrip().startswith("(f32[0]{0},")
                         for line in calls), calls


@pytest.mark.parametrize("jit", [False, True], ids=["tf", "xla"])
@pytest.mark.parametrize("mixed", [False, True], ids=["float32", "mixed-bf16"])
@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_backprop_op_with_input_grad_false(mode, mixed, jit):
    """A direct call: input_backprop zeros of its shape and type, every other output the bits
    of the call with input_grad true (eager, where every output counts as required, and XLA)."""
    if jit and not has_xla():
        pytest.skip("the XLA kernels are not built")
    lib = load_library()
    rng = np.random.default_rng(5)
    T, B, I, H = 7, 6, 5, 9
    KH = (4 if mode == "lstm" else 3) * H
    seq = tf.bfloat16 if mixed else tf.float32

    def f(shape, dt=tf.float32):
        return tf.cast(rng.uniform(-0.5, 0.5, shape).astype(np.float32), dt)

    ins = dict(input=f((B, T, I), seq), input_h=f((B, H), seq), input_c=f((B, H), seq),
               kernel=f((I, KH)), recurrent_kernel=f((H, KH)),
               bias=f((2, KH) if mode == "gru" else (KH,)),
               sequence_lengths=tf.constant([T - b % 3 for b in range(B)], tf.int32),
               recurrent_mask=tf.zeros([0], seq))
    fwd = lib.tf_rnn_keras_rnn_mixed if mixed else lib.tf_rnn_keras_rnn
    bwd = lib.tf_rnn_keras_rnn_mixed_backprop if mixed else lib.tf_rnn_keras_rnn_backprop
    y, hn, cn, reserve = fwd(**ins, rnn_mode=mode, is_training=True)
    grads = dict(output_backprop=f((B, T, H), seq), output_h_backprop=f((B, H), seq),
                 output_c_backprop=f((B, H), seq), reserve_space=reserve)

    def call(input_grad):
        return bwd(**ins, **grads, rnn_mode=mode, input_grad=input_grad)
    run = tf.function(call, jit_compile=True) if jit else call
    without, with_ = run(False), run(True)
    assert without[0].dtype == seq and without[0].shape == ins["input"].shape
    assert not np.any(tf.cast(without[0], tf.float32).numpy())
    assert np.any(tf.cast(with_[0], tf.float32).numpy())
    for k in range(1, 6):
        if mode != "lstm" and k == 2:
            continue
        assert bits_equal(without[k], with_[k]), k
