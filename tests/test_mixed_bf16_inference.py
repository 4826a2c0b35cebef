"""A mixed_bfloat16 Keras layer's inference on its float32 variables (TfRnn>KerasRNNMixed on the
bfloat16 sequences; tf_rnn_ops/keras.py _bf16_products), and the float32 op with bf16_products:
products that round their operands to bfloat16 as a bfloat16 op's do. On operands that bfloat16
holds exactly, their outputs (rounded to bfloat16) are the bfloat16 op's bits (with or without
AVX512_BF16: without it all compute float products), through TensorFlow and through XLA; the
layers that take the mixed op match
stock Keras under the same policy; the layers take it in every call on the CPU (training in
test_mixed_bf16_training.py), and keep their weights' packing (reuse_packed_weights) at
inference."""
import numpy as np
import pytest
import tensorflow as tf

keras = pytest.importorskip("keras")

import tf_rnn_ops.keras as K  # noqa: E402
from tf_rnn_ops._loader import has_xla, load_library  # noqa: E402
from mixed_bf16_util import exact, mixed, operands  # noqa: E402

BF16 = tf.bfloat16
# (mode, T, B, I, H): the pipelined chain, the unit blocks, batch blocks, the lanes (AVX-512)
SIZES = [("lstm", 12, 6, 24, 200), ("gru", 12, 12, 24, 200), ("lstm", 10, 32, 16, 64),
         ("lstm", 4, 48, 80, 840), ("gru", 4, 32, 80, 840)]


def _operands(rng, mode, T, B, I, H):
    return dict(operands(rng, mode, T, B, I, H), sequence_lengths=tf.zeros([0], tf.int32),
                recurrent_mask=tf.zeros([0]))


@pytest.mark.parametrize("jit", [False, True], ids=["tf", "xla"])
@pytest.mark.parametrize("mode,T,B,I,H", SIZES, ids=[f"{s[0]}-B{s[2]}-H{s[4]}" for s in SIZES])
def test_float32_op_with_bf16_products_gives_the_bf16_ops_bits(mode, T, B, I, H, jit):
    if jit and not has_xla():
        pytest.skip("the XLA kernels are not built")
    lib = load_library()
    ops = _operands(np.random.default_rng(3), mode, T, B, I, H)
    ops16 = {k: (v if v.dtype == tf.int32 else tf.cast(v, BF16)) for k, v in ops.items()}

    @tf.function(jit_compile=jit)
    def run(reuse):
        f32 = lib.tf_rnn_keras_rnn(**ops, rnn_mode=mode, is_training=False, bf16_products=True,
                                   reuse_packed_weights=reuse)[:3]
        mix = lib.tf_rnn_keras_rnn_mixed(**mixed(ops), rnn_mode=mode, is_training=False,
                                         bf16_products=True, reuse_packed_weights=reuse)[:3]
        b16 = lib.tf_rnn_keras_rnn(**ops16, rnn_mode=mode, is_training=False)[:3]
        return [tf.cast(t, BF16) for t in f32], list(mix), b16
    for reuse in (False, True, True):
        got, got_mixed, want = run(reuse)
        for k, (g, m, w) in enumerate(zip(got, got_mixed, want)):
            assert m.dtype == BF16
            np.testing.assert_array_equal(g.numpy().astype(np.float32),
                                          w.numpy().astype(np.float32), err_msg=f"output {k}")
            np.testing.assert_array_equal(m.numpy().astype(np.float32),
                                          w.numpy().astype(np.float32),
                                          err_msg=f"mixed op: output {k}")


@pytest.fixture
def mixed_policy():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    yield
    keras.mixed_precision.set_global_policy("float32")


def _traced_attrs(fn, x):
    """(op, T, bf16_products, reuse_packed_weights) of each forward op in fn's graph."""
    g = tf.function(fn).get_concrete_function(x).graph
    return [(op.type[len("TfRnn>"):], op.get_attr("T"), op.get_attr("bf16_products"),
             op.get_attr("reuse_packed_weights"))
            for op in g.get_operations() if op.type in ("TfRnn>KerasRNN", "TfRnn>KerasRNNMixed")]


@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_the_layer_takes_the_mixed_op_in_every_call(mode, mixed_policy):
    H = 64  # gates × units: 256 (lstm), 192 (gru)
    layer = {"lstm": K.LSTM, "gru": K.GRU}[mode](H, return_sequences=True)
    rng = np.random.default_rng(4)

    def x_of(T, B):
        return tf.cast(tf.constant(rng.normal(size=(B, T, 8)), tf.float32), BF16)
    layer(x_of(4, 4))
    # rows (steps × batch) under and over gates × units, and a streaming step
    for x in (x_of(12, 16), x_of(40, 16), x_of(1, 8)):
        assert _traced_attrs(lambda x: layer(x, training=False), x) == [
            ("KerasRNNMixed", BF16, True, True)]
        # Training (test_mixed_bf16_training.py): no packing kept
        assert _traced_attrs(lambda x: layer(x, training=True), x) == [
            ("KerasRNNMixed", BF16, True, False)]


@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_the_layer_matches_stock_keras_and_sees_weight_changes(mode, mixed_policy):
    H, T, B, I = 96, 10, 24, 16
    rng = np.random.default_rng(5)
    x = tf.cast(tf.constant(rng.normal(size=(B, T, I)), tf.float32), BF16)
    stock = {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU}[mode](H, return_sequences=True)
    ours = {"lstm": K.LSTM, "gru": K.GRU}[mode](H, return_sequences=True)
    stock(x)
    ours(x)
    ours.set_weights([w + rng.normal(size=w.shape) * 0.05 for w in stock.get_weights()])
    fn = tf.function(lambda x: ours(x, training=False))
    assert _traced_attrs(lambda x: ours(x, training=False), x)[0][2]
    for step in range(3):
        stock.set_weights(ours.get_weights())
        want = stock(x, training=False).numpy().astype(np.float32)
        got = fn(x)
        assert got.dtype == BF16
        np.testing.assert_allclose(got.numpy().astype(np.float32), want, rtol=0, atol=8e-2,
                                   err_msg=f"step {step}")
        ours.cell.recurrent_kernel.assign(ours.cell.recurrent_kernel * 0.8)


# (mode, T, B, I, H): weights past the batch blocks' 8 MiB, not fused into the steps (gru; an
# lstm whose batch is off the lanes): the input's projection is one product of all rows, on W
# packed beside R and kept with it.
WHOLE_W = [("gru", 3, 16, 512, 1024), ("lstm", 3, 72, 512, 1024)]


@pytest.mark.parametrize("op", ["float32", "mixed", "bfloat16"])
@pytest.mark.parametrize("mode,T,B,I,H", WHOLE_W, ids=[f"{s[0]}-B{s[2]}" for s in WHOLE_W])
def test_the_kept_input_weights_follow_every_change(mode, T, B, I, H, op):
    """Calls that keep the packing (reuse_packed_weights) on variables: each call's outputs are
    the bits of a call that packs afresh (the bfloat16 op without the attr), on the values of
    that call, after the kernel alone, the recurrent kernel alone, or neither changed. op: the
    float32 op with bf16 products, the mixed op on float32 variables (the mixed policy's
    inference), or the bfloat16 op on bfloat16 variables (a bfloat16 policy's), whose kept W is
    packed from its words."""
    lib = load_library()
    rng = np.random.default_rng(6)
    ops = _operands(rng, mode, T, B, I, H)
    dtype = BF16 if op == "bfloat16" else tf.float32
    kernel = tf.Variable(tf.cast(ops.pop("kernel"), dtype))
    recurrent = tf.Variable(tf.cast(ops.pop("recurrent_kernel"), dtype))
    ops16 = {k: (v if v.dtype == tf.int32 else tf.cast(v, BF16)) for k, v in ops.items()}

    @tf.function
    def run():
        fn, inputs = {"float32": (lib.tf_rnn_keras_rnn, ops),
                      "mixed": (lib.tf_rnn_keras_rnn_mixed, mixed(ops)),
                      "bfloat16": (lib.tf_rnn_keras_rnn, ops16)}[op]
        kept = fn(**inputs, kernel=kernel, recurrent_kernel=recurrent, rnn_mode=mode,
                  is_training=False, bf16_products=op != "bfloat16", reuse_packed_weights=True)[:3]
        fresh = lib.tf_rnn_keras_rnn(**ops16, kernel=tf.cast(kernel, BF16),
                                     recurrent_kernel=tf.cast(recurrent, BF16), rnn_mode=mode,
                                     is_training=False)[:3]
        return [tf.cast(t, BF16) for t in kept], fresh
    changes = [None, None, kernel, None, recurrent, kernel]
    for i, var in enumerate(changes):
        if var is not None:
            var.assign(tf.cast(exact(rng, var.shape, 0.1), dtype))
        got, want = run()
        for k, (g, w) in enumerate(zip(got, want)):
            np.testing.assert_array_equal(g.numpy().astype(np.float32),
                                          w.numpy().astype(np.float32),
                                          err_msg=f"call {i}: output {k}")
