"""TfRnn>KerasRNNMixed / KerasRNNMixedBackprop (cc/ops/keras_rnn_ops.cc): 16-bit sequences,
states and recurrent mask, float32 weights, their gradients and the reserve. On operands that
the 16-bit type holds exactly, every output and gradient, rounded to that type, is the bits of
the op pair of that type (TfRnn>KerasRNN on 16-bit weights), which computes the same thing: for
half (float products) and bfloat16 (bfloat16 products), with sequence lengths, a recurrent
mask, a GRU's two biases, a preprojected input, one step or one row (no transpose), through
TensorFlow and XLA. The bfloat16 cases beside the mixed layers' own: test_mixed_bf16_*.py."""
import numpy as np
import pytest
import tensorflow as tf

from tf_rnn_ops._loader import has_xla, load_library
from mixed_bf16_util import GATES, exact, mixed

NAMES = ["input", "input_h", "input_c", "kernel", "recurrent_kernel", "bias"]
# (mode, T, B, I, H, what): what = lengths, mask, preprojected, plain
CASES = [("lstm", 7, 5, 6, 12, "lengths"), ("gru", 6, 4, 5, 10, "mask"),
         ("lstm", 6, 3, 0, 9, "preprojected"), ("rnn_tanh", 5, 6, 4, 8, "lengths"),
         ("gru", 1, 6, 5, 7, "plain"), ("lstm", 6, 1, 5, 7, "mask"),
         ("lstm", 9, 40, 24, 72, "plain")]


def _operands(rng, mode, T, B, I, H, what, dtype):
    """The float32 op's operands (values exact in dtype) and the call's attrs."""
    KH = GATES[mode] * H
    attrs = dict(rnn_mode=mode, preprojected=what == "preprojected")
    cols = KH if what == "preprojected" else I
    ops = dict(input=exact(rng, (B, T, cols), 1.0, dtype), input_h=exact(rng, (B, H), 0.5, dtype),
               input_c=exact(rng, (B, H), 0.5, dtype),
               kernel=exact(rng, (0 if what == "preprojected" else I, KH), 0.2, dtype),
               recurrent_kernel=exact(rng, (H, KH), 0.2, dtype),
               bias=exact(rng, (2, KH) if mode == "gru" else (KH,), 0.5, dtype),
               sequence_lengths=tf.zeros([0], tf.int32), recurrent_mask=tf.zeros([0]))
    if what == "lengths":
        ops["sequence_lengths"] = tf.constant([T - b % (T + 1) for b in range(B)], tf.int32)
    if what == "mask":
        ops["recurrent_mask"] = tf.cast(rng.uniform(size=(B, KH)) < 0.7, tf.float32) * 1.25
    return ops, attrs


def _outputs_and_grads(fn, inputs, attrs, training, weights):
    with tf.GradientTape() as tape:
        tape.watch([inputs[k] for k in NAMES])
        outs = fn(**inputs, is_training=training, **attrs)[:3]
        loss = tf.add_n([tf.reduce_sum(tf.cast(o, tf.float32) * w)
                         for o, w in zip(outs, weights) if o.shape.num_elements()])
    return list(outs) + tape.gradient(loss, [inputs[k] for k in NAMES])


@pytest.mark.parametrize("jit", [False, True], ids=["tf", "xla"])
@pytest.mark.parametrize("training", [True, False], ids=["train", "infer"])
@pytest.mark.parametrize("dtype", [tf.float16, tf.bfloat16], ids=["half", "bf16"])
@pytest.mark.parametrize("mode,T,B,I,H,what", CASES,
                         ids=[f"{c[0]}-T{c[1]}-B{c[2]}-{c[5]}" for c in CASES])
def test_mixed_pair_gives_the_16bit_pair_bits(mode, T, B, I, H, what, dtype, training, jit):
    if jit and not has_xla():
        pytest.skip("the XLA kernels are not built")
    lib = load_library()
    rng = np.random.default_rng(T * 100 + B)
    ops, attrs = _operands(rng, mode, T, B, I, H, what, dtype)
    weights = [exact(rng, (B, T, H), 1.0, dtype), exact(rng, (B, H), 1.0, dtype),
               exact(rng, (B, H), 1.0, dtype)]
    mixed_ops = mixed(ops, dtype)
    narrow = {k: v if v.dtype == tf.int32 else tf.cast(v, dtype) for k, v in ops.items()}

    @tf.function(jit_compile=jit)
    def both():
        got = _outputs_and_grads(lib.tf_rnn_keras_rnn_mixed, mixed_ops, attrs, training,
                                 weights)
        want = _outputs_and_grads(lib.tf_rnn_keras_rnn, narrow, attrs, training, weights)
        return got, want
    got, want = both()
    names = ["output", "output_h", "output_c"] + ["d" + n for n in NAMES]
    for name, g, w in zip(names, got, want):
        if mode != "lstm" and name in ("output_c", "dinput_c"):
            continue
        # the weights' gradients are float32 (the mixed pair) against the 16-bit pair's
        expect_dtype = tf.float32 if name in ("dkernel", "drecurrent_kernel", "dbias") else dtype
        assert g.dtype == expect_dtype, name
        g = tf.cast(g, dtype)
        assert g.shape == w.shape, (name, g.shape, w.shape)
        if not g.shape.num_elements():
            continue
        np.testing.assert_array_equal(
            tf.bitcast(g, tf.uint16).numpy(), tf.bitcast(w, tf.uint16).numpy(),
            err_msg=f"{name}: max diff "
                    f"{np.abs(g.numpy().astype(np.float32) - w.numpy().astype(np.float32)).max()}")


def test_reserve_and_weight_gradients_are_float32():
    lib = load_library()
    rng = np.random.default_rng(1)
    ops, attrs = _operands(rng, "lstm", 4, 3, 5, 6, "plain", tf.bfloat16)
    mixed_ops = mixed(ops)
    y, hn, cn, reserve = lib.tf_rnn_keras_rnn_mixed(**mixed_ops, is_training=True, **attrs)
    assert (y.dtype, hn.dtype, cn.dtype, reserve.dtype) == (tf.bfloat16,) * 3 + (tf.float32,)
    # a bfloat16 kernel (input 3), float32 sequences (T must be bfloat16 or half)
    with pytest.raises(tf.errors.InvalidArgumentError, match="input #3.*float tensor"):
        lib.tf_rnn_keras_rnn_mixed(**dict(mixed_ops, kernel=tf.cast(ops["kernel"], tf.bfloat16)),
                                   **attrs)
    with pytest.raises(tf.errors.InvalidArgumentError, match="attr 'T' of float"):
        lib.tf_rnn_keras_rnn_mixed(**ops, **attrs)
