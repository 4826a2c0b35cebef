"""A mixed_bfloat16 Keras layer's training on its float32 variables: TfRnn>KerasRNNMixed and
TfRnn>KerasRNNMixedBackprop on the bfloat16 sequences (tf_rnn_ops/keras.py _bf16_products, the
gradient in tf_rnn_ops/_grads.py), and TfRnn>KerasRNN / KerasRNNBackprop in float32 with
bf16_products. Their products round their operands to bfloat16 as a bfloat16 op's do, so on
operands that bfloat16 holds exactly the outputs and every gradient, rounded to bfloat16, are
the bfloat16 ops' bits (through TensorFlow and through XLA); the layers take the mixed pair in
every training call, and their gradients match stock Keras in float64."""
import numpy as np
import pytest
import tensorflow as tf

keras = pytest.importorskip("keras")

import tf_rnn_ops.keras as K  # noqa: E402
from tf_rnn_ops._loader import has_xla, load_library  # noqa: E402
from mixed_bf16_util import exact, mixed, operands  # noqa: E402

BF16 = tf.bfloat16
# (mode, T, B, I, H): the pipelined chains, unit blocks, the lanes (AVX-512), a GRU's two
# biases, and weight gradients past one slab of the pool products
SIZES = [("lstm", 12, 6, 24, 200), ("gru", 12, 12, 24, 200), ("lstm", 10, 32, 16, 64),
         ("lstm", 4, 48, 80, 840), ("gru", 4, 32, 80, 840), ("lstm", 3, 40, 520, 136),
         ("rnn_tanh", 8, 16, 24, 72)]
NAMES = ["input", "input_h", "input_c", "kernel", "recurrent_kernel", "bias"]


@pytest.mark.parametrize("training", [True, False], ids=["train", "infer"])
@pytest.mark.parametrize("op", ["mixed", "float32"])
@pytest.mark.parametrize("jit", [False, True], ids=["tf", "xla"])
@pytest.mark.parametrize("mode,T,B,I,H", SIZES,
                         ids=[f"{s[0]}-B{s[2]}-I{s[3]}-H{s[4]}" for s in SIZES])
def test_ops_with_bf16_products_give_the_bf16_ops_gradient_bits(mode, T, B, I, H, jit, training,
                                                                 op):
    """The forward (in training, or at inference, whose gradient runs it again with a reserve)
    and the registered gradient of the mixed pair (bfloat16 sequences, float32 weights) and of
    the float32 pair with bf16_products: outputs, and the gradients of every input of a
    weighted sum of them, rounded to bfloat16, are the bfloat16 ops' bits."""
    if jit and not has_xla():
        pytest.skip("the XLA kernels are not built")
    lib = load_library()
    rng = np.random.default_rng(11)
    ops = operands(rng, mode, T, B, I, H)
    if mode != "lstm":
        ops["input_c"] = tf.zeros([B, H])
    weights = [exact(rng, (B, T, H)), exact(rng, (B, H)), exact(rng, (B, H))]

    def run(inputs, dtype, fn=lib.tf_rnn_keras_rnn, **attrs):
        inputs = {k: tf.cast(v, dtype) for k, v in inputs.items()}
        inputs["recurrent_mask"] = tf.zeros([0], dtype)
        if fn is lib.tf_rnn_keras_rnn_mixed:
            inputs = mixed(inputs)
        with tf.GradientTape() as tape:
            tape.watch(list(inputs.values()))
            outs = fn(**inputs, sequence_lengths=tf.zeros([0], tf.int32), rnn_mode=mode,
                      is_training=training, **attrs)[:3]
            loss = tf.add_n([tf.reduce_sum(tf.cast(o, tf.float32) * w)
                             for o, w in zip(outs, weights) if o.shape.num_elements()])
        grads = tape.gradient(loss, [inputs[k] for k in NAMES])
        return [tf.cast(t, BF16) for t in list(outs) + grads]

    fn = lib.tf_rnn_keras_rnn_mixed if op == "mixed" else lib.tf_rnn_keras_rnn

    @tf.function(jit_compile=jit)
    def both():
        return run(ops, tf.float32, fn, bf16_products=True), run(ops, BF16)
    got, want = both()
    names = ["output", "output_h", "output_c"] + ["d" + n for n in NAMES]
    for name, g, w in zip(names, got, want):
        if mode != "lstm" and name in ("output_c", "dinput_c"):
            continue
        np.testing.assert_array_equal(
            tf.bitcast(g, tf.uint16).numpy(), tf.bitcast(w, tf.uint16).numpy(),
            err_msg=f"{name}: max diff "
                    f"{np.abs(g.numpy().astype(np.float32) - w.numpy().astype(np.float32)).max()}")


@pytest.fixture
def mixed_policy():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    yield
    keras.mixed_precision.set_global_policy("float32")


LAYERS = {"lstm": "LSTM", "gru": "GRU", "simple": "SimpleRNN"}


@pytest.mark.parametrize("mode", sorted(LAYERS))
def test_the_mixed_layer_trains_as_stock_keras_in_float64(mode, mixed_policy):
    """Our mixed_bfloat16 layer in a training step (the float32 ops with bf16 products: no
    bfloat16 op in its graph) against stock Keras's layer in float64 on the same weights: the
    output and the gradients of x and of every variable, which are float32."""
    H, T, B, I = 72, 9, 20, 24
    rng = np.random.default_rng(12)
    x = tf.constant(rng.normal(size=(B, T, I)), tf.float32)
    ours = getattr(K, LAYERS[mode])(H, return_sequences=True)
    ours(x)
    stock = getattr(keras.layers, LAYERS[mode])(H, return_sequences=True, dtype="float64")
    stock(tf.cast(x, tf.float64))
    stock.set_weights(ours.get_weights())
    dy = rng.normal(size=(B, T, H))

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = ours(x, training=True)
            loss = tf.reduce_sum(tf.cast(y, tf.float32) * tf.constant(dy, tf.float32))
        return y, tape.gradient(loss, [x] + ours.trainable_variables)
    graph = step.get_concrete_function().graph
    rnn = [(op.type, op.get_attr("T"), op.get_attr("bf16_products"))
           for op in graph.get_operations() if op.type.startswith("TfRnn>KerasRNN")]
    assert sorted(rnn) == [("TfRnn>KerasRNNMixed", BF16, True),
                           ("TfRnn>KerasRNNMixedBackprop", BF16, True)], rnn
    y, grads = step()
    assert y.dtype == BF16 and all(g.dtype == tf.float32 for g in grads)

    x64 = tf.cast(x, tf.float64)
    with tf.GradientTape() as tape:
        tape.watch(x64)
        y64 = stock(x64, training=True)
        loss = tf.reduce_sum(y64 * tf.constant(dy, tf.float64))
    want = tape.gradient(loss, [x64] + stock.trainable_variables)
    np.testing.assert_allclose(y.numpy().astype(np.float64), y64.numpy(), rtol=0, atol=5e-2)
    for k, (g, w) in enumerate(zip(grads, want)):
        w = w.numpy()
        # bfloat16 products: about 3 significant digits per operand, errors growing with the
        # sums' lengths (B·T rows in the weights' gradients)
        np.testing.assert_allclose(g.numpy(), w, rtol=0, atol=3e-2 * np.abs(w).max(),
                                   err_msg=f"gradient {k}")
