"""The Keras benchmarks of bench_rnn.py: tf_rnn_ops.keras layers against the stock Keras 3
layers, run plain (tf.function) and compiled by XLA (tf.function(jit_compile=True), what a
speed-minded CPU user runs: stock Keras on a CPU host runs its generic loop, which XLA compiles
well). "ours" is our layer in a plain tf.function, "ours_xla" the same with jit_compile=True
(our op as one XLA custom call, cc/xla/).

  keras_<kind>           training step: forward, loss, gradients of every weight
  keras_<kind>_infer     inference: the layer called with training=False on the whole batch
  keras_<kind>_stream    streaming: a stateful layer (batch B) called on one time step per
                         call, return_sequences=False; the size's T is not used

Peers: "ours_xla", "keras" (the stock layer, tf.function) and "keras_xla" (the same,
jit_compile=True); bench_rnn.py's "Keras with XLA" table sets ours_xla against keras_xla. The
inference benchmarks also time "torch" (nn.LSTM / nn.GRU under no_grad, bench_rnn.Case).
"""
import numpy as np

from bench_util import tf

KERAS_PEERS = ["ours_xla", "keras", "keras_xla"]


def _policy(dtype_name):
    return "float32" if dtype_name == "float32" else "mixed_bfloat16"


def _pair(kind, dtype_name, build_shape, **kw):
    """A stock layer and ours with the same weights, both built for `build_shape`."""
    import keras
    import tf_rnn_ops.keras as ours_keras
    policy = _policy(dtype_name)
    stock = getattr(keras.layers, kind)(dtype=policy, **kw)
    mine = getattr(ours_keras, kind)(dtype=policy, **kw)
    x = tf.zeros(build_shape)
    stock(x)
    mine(x)
    mine.set_weights(stock.get_weights())
    return stock, mine


def _impls(stock, mine, body):
    """{impl: factory} for the four ways of running `body(layer)`."""
    return {"ours": lambda: tf.function(lambda: body(mine)),
            "ours_xla": lambda: tf.function(lambda: body(mine), jit_compile=True),
            "keras": lambda: tf.function(lambda: body(stock)),
            "keras_xla": lambda: tf.function(lambda: body(stock), jit_compile=True)}


class KerasCases:
    """Mixed into bench_rnn.Case (which holds size, dtype_name, lstm['x'] [T, B, I], dh)."""

    def _keras(self, kind, mask=False, **kw):
        T, B, I, H = self.size
        x = tf.transpose(self.lstm["x"], [1, 0, 2])  # batch-major, as Keras wants
        dy = tf.transpose(self.dh, [1, 0, 2])
        m = None
        if mask:  # left-padded: the last `length` steps of each row are valid
            lengths = np.random.default_rng(5).integers(T // 2, T + 1, size=B)
            m = tf.constant(np.arange(T)[None, :] >= (T - lengths)[:, None])
        stock, mine = _pair(kind, self.dtype_name, x.shape, units=H, return_sequences=True,
                            **kw)

        def body(layer):
            with tf.GradientTape() as tape:
                y = layer(x, mask=m, training=True)
                loss = tf.reduce_sum(tf.cast(y, tf.float32) * tf.cast(dy, tf.float32))
            return tape.gradient(loss, layer.trainable_variables)
        return _impls(stock, mine, body)

    def _keras_infer(self, kind):
        T, B, I, H = self.size
        x = tf.transpose(self.lstm["x"], [1, 0, 2])
        stock, mine = _pair(kind, self.dtype_name, x.shape, units=H, return_sequences=True)
        impls = _impls(stock, mine, lambda layer: layer(x, training=False))
        impls["torch"] = lambda: self._torch_infer(kind)  # bench_rnn.Case
        return impls

    def _keras_stream(self, kind):
        _, B, I, H = self.size
        x1 = tf.transpose(self.lstm["x"][:1], [1, 0, 2])  # [B, 1, I]: one step
        stock, mine = _pair(kind, self.dtype_name, x1.shape, units=H, stateful=True)
        return _impls(stock, mine, lambda layer: layer(x1, training=False))

    def keras_lstm(self):
        return self._keras("LSTM")

    def keras_gru(self):
        return self._keras("GRU")

    def keras_lstm_mask(self):
        return self._keras("LSTM", mask=True)

    def keras_lstm_rdrop(self):
        return self._keras("LSTM", recurrent_dropout=0.25, seed=3)

    def keras_gru_rdrop(self):
        return self._keras("GRU", recurrent_dropout=0.25, seed=3)

    def keras_simple(self):
        return self._keras("SimpleRNN")

    def keras_lstm_infer(self):
        return self._keras_infer("LSTM")

    def keras_gru_infer(self):
        return self._keras_infer("GRU")

    def keras_lstm_stream(self):
        return self._keras_stream("LSTM")

    def keras_gru_stream(self):
        return self._keras_stream("GRU")
