"""The Keras layers' inference keeps the engine's packing of kernel and recurrent_kernel from one
call to the next (TfRnn>KerasRNN's reuse_packed_weights; cc/engine/pack_cache.h,
cc/kernels/kept_weights.h) while they are the same variables' buffers. Every way a user changes
the weights between calls must show in the next call: after each change the layer is compared
with a stock Keras layer given the same weights. Also: batch sizes that change the engine's
road (and the packing's layout) between calls, Python threads calling one layer at once (the
same bits as a lone call), and the raw op with the attr against the op without it.

The sizes reach the roads that pack on 1-2 threads: the pipelined chain (6 rows), the unit
blocks (12 rows), weights over the batch blocks' 8 MiB (80 + 840 inputs by 3360 or 2520 gates)
on 32 and 48 rows (on AVX-512 the batch in the lanes), batch blocks, whose one shared packing is
kept too (32 rows of the small weights on 2 or more threads: two blocks of 16), and the lstm's
input fused with R past the L2 rule, W packed beside R (8 rows, 128 + 256 inputs by 1024 gates,
on 2-4 threads: cc/engine/rnn_cpu_common.h FuseSmallBatch)."""
import threading

import numpy as np
import pytest
import tensorflow as tf

keras = pytest.importorskip("keras")

import tf_rnn_ops.keras as K  # noqa: E402
from tf_rnn_ops._loader import load_library  # noqa: E402

STOCK = {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU}
OURS = {"lstm": K.LSTM, "gru": K.GRU}
TOL = {"float32": 2e-5, "float64": 1e-10}
T, I, H = 12, 24, 200
# (B, I, H) on the packed roads (module docstring)
SIZES = [(6, 24, 200), (12, 24, 200), (32, 80, 840), (48, 80, 840), (32, 24, 200),
         (8, 128, 256)]


def _pair(mode, dtype, rng, B, I=I, units=H):
    keras.utils.set_random_seed(int(rng.integers(2**31)))  # the initial weights too
    x = tf.constant(rng.normal(size=(B, T, I)), dtype)
    stock = STOCK[mode](units, return_sequences=True, return_state=True, dtype=dtype)
    ours = OURS[mode](units, return_sequences=True, return_state=True, dtype=dtype)
    stock(x)
    ours(x)
    ours.set_weights(stock.get_weights())
    return stock, ours


def _check(stock, ours, fn, x, dtype, what):
    """ours' inference (fn) against stock given ours' current weights (float32 sums over
    900 terms differ more: a wider tolerance there, for the largest difference over 12 steps
    of random initial weights, 1e-6 to 9e-5 of the outputs; a stale packing differs by far
    more)."""
    stock.set_weights(ours.get_weights())
    want = stock(x, training=False)
    got = fn(x)
    tol = TOL[dtype] * (16 if ours.cell.units > 500 else 1)
    for k, (g, w) in enumerate(zip(got, want)):
        w = w.numpy()
        np.testing.assert_allclose(g.numpy(), w, rtol=0, atol=tol * max(1, np.abs(w).max()),
                                   err_msg=f"{what}: output {k}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode", ["lstm", "gru"])
@pytest.mark.parametrize("B,I,H", SIZES, ids=[f"B{b}-H{h}" for b, _, h in SIZES])
def test_every_change_of_the_weights_shows(mode, dtype, B, I, H):
    rng = np.random.default_rng(7)
    stock, ours = _pair(mode, dtype, rng, B, I, H)
    x = tf.constant(rng.normal(size=(B, T, I)), dtype)
    fn = tf.function(lambda x: ours(x, training=False))
    cell = ours.cell
    _check(stock, ours, fn, x, dtype, "first call")
    _check(stock, ours, fn, x, dtype, "second call, same weights")
    cell.kernel.assign(cell.kernel * 0.5)
    _check(stock, ours, fn, x, dtype, "kernel.assign")
    cell.recurrent_kernel.assign_add(tf.fill(cell.recurrent_kernel.shape, tf.cast(0.01, dtype)))
    _check(stock, ours, fn, x, dtype, "recurrent_kernel.assign_add")

    @tf.function
    def sub_then_call(x):  # the update and the call in one graph, ordered by the variable
        cell.recurrent_kernel.assign_sub(cell.recurrent_kernel * 0.25)
        return ours(x, training=False)
    got = sub_then_call(x)
    stock.set_weights(ours.get_weights())
    np.testing.assert_allclose(got[0].numpy(), stock(x, training=False)[0].numpy(), rtol=0,
                               atol=TOL[dtype] * 8, err_msg="assign_sub in the calling graph")
    _check(stock, ours, fn, x, dtype, "after the graph's assign_sub")

    ours.set_weights([w * 1.1 for w in ours.get_weights()])
    _check(stock, ours, fn, x, dtype, "set_weights")
    K._raw_value(cell.recurrent_kernel).scatter_nd_update(  # the backend's tf.Variable
        [[0, 1], [3, 7]], tf.constant([2.0, -3.0], dtype))
    _check(stock, ours, fn, x, dtype, "scatter_nd_update")
    _check(stock, ours, lambda x: ours(x, training=False), x, dtype, "eager call")


@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_optimizer_steps_between_calls(mode):
    """Training steps (the optimizer writes the variables) between inference calls."""
    rng = np.random.default_rng(8)
    B, I, H = SIZES[2]
    stock, ours = _pair(mode, "float32", rng, B, I, H)
    x = tf.constant(rng.normal(size=(B, T, I)), "float32")
    y = tf.constant(rng.normal(size=(B, T, H)), "float32")
    inp = keras.Input((T, I))
    model = keras.Model(inp, ours(inp)[0])
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss="mse")
    fn = tf.function(lambda x: ours(x, training=False))
    for step in range(3):
        _check(stock, ours, fn, x, "float32", f"before fit {step}")
        model.fit(x, y, epochs=1, batch_size=B, verbose=0)
        _check(stock, ours, fn, x, "float32", f"after fit {step}")
        np.testing.assert_allclose(model.predict(x, verbose=0), stock(x)[0].numpy(), rtol=0,
                                   atol=TOL["float32"] * 8, err_msg=f"predict after fit {step}")


@pytest.mark.parametrize("size", [2, 4])
@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_batch_sizes_change_the_road_between_calls(mode, size):
    rng = np.random.default_rng(9)
    _, I, H = SIZES[size]
    stock, ours = _pair(mode, "float32", rng, 32, I, H)
    fn = tf.function(lambda x: ours(x, training=False), reduce_retracing=True)
    for B in (32, 16, 48, 6, 32, 1, 48, 12):
        x = tf.constant(rng.normal(size=(B, T, I)), "float32")
        _check(stock, ours, fn, x, "float32", f"batch {B}")


@pytest.mark.parametrize("size", [3, 4])
def test_threads_get_the_bits_of_a_lone_call(size):
    rng = np.random.default_rng(10)
    _, I, H = SIZES[size]
    stock, ours = _pair("lstm", "float32", rng, 48, I, H)
    xs = [tf.constant(rng.normal(size=(B, T, I)), "float32") for B in (48, 32, 48, 6)]
    fn = tf.function(lambda x: ours(x, training=False), reduce_retracing=True)
    want = [[t.numpy() for t in fn(x)] for x in xs]
    errors = []

    def worker(k):
        try:
            for _ in range(4):
                for j in range(len(xs)):
                    i = (j + k) % len(xs)
                    for g, w in zip(fn(xs[i]), want[i]):
                        np.testing.assert_array_equal(g.numpy(), w)
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_the_layer_sets_the_attr_at_inference_only():
    rng = np.random.default_rng(11)
    _, ours = _pair("lstm", "float32", rng, 32)
    x = tf.constant(rng.normal(size=(32, T, I)), "float32")

    def attrs(training):
        g = tf.function(lambda x: ours(x, training=training)).get_concrete_function(x).graph
        return [op.get_attr("reuse_packed_weights") for op in g.get_operations()
                if op.type == "TfRnn>KerasRNN"]
    assert attrs(False) == [True]
    assert attrs(True) == [False]


def test_raw_op_with_and_without_the_attr():
    rng = np.random.default_rng(12)
    B, I, H = SIZES[2]
    KH = 4 * H
    x = tf.constant(rng.normal(size=(B, T, I)), "float32")
    h0 = tf.constant(rng.normal(size=(B, H)), "float32")
    kernel = tf.Variable(rng.normal(size=(I, KH)) * 0.1, dtype="float32")
    rec = tf.Variable(rng.normal(size=(H, KH)) * 0.1, dtype="float32")
    bias = tf.constant(rng.normal(size=(KH,)), "float32")

    @tf.function
    def call(reuse):
        return load_library().tf_rnn_keras_rnn(
            input=x, input_h=h0, input_c=h0, kernel=kernel, recurrent_kernel=rec, bias=bias,
            sequence_lengths=tf.zeros([0], tf.int32), recurrent_mask=tf.zeros([0]),
            rnn_mode="lstm", is_training=False, reuse_packed_weights=reuse)[:3]
    for step in range(3):
        want = [t.numpy() for t in call(False)]
        for _ in range(2):
            for g, w in zip(call(True), want):
                np.testing.assert_array_equal(g.numpy(), w, err_msg=f"step {step}")
        rec.assign(rec * 0.9)
        kernel.assign_add(tf.fill(kernel.shape, 0.01))
