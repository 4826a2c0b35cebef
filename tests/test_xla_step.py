"""XLA: a streaming call of TfRnn>KerasRNN (one time step of at most 32 rows, at inference)
compiles to HLO (cc/xla/keras_step_hlo.h) instead of a custom call into the engine; every
other call keeps the custom call.

References: the op's CPU kernel without XLA (the engine, checked against stock and float64
elsewhere: an independent implementation of the step) and the stock Keras layers, stateful,
compiled with XLA.
"""
import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf

import tf_rnn_ops.keras as K
from tf_rnn_ops.keras import _keras_rnn
from xla_test_util import GATES, assert_all_close, keras_op_inputs, needs_xla

pytestmark = needs_xla

TOL = {tf.float64: 1e-12, tf.float32: 1e-5, tf.float16: 2e-3, tf.bfloat16: 2e-2}


def _hlo(fn):
    return tf.function(fn, jit_compile=True).experimental_get_compiler_ir()(stage="hlo")


def _cases():
    acts = ["tanh", "relu", "linear", "sigmoid", "hard_sigmoid"]
    for mode, act, rec_act, reset_after, two in itertools.product(
            GATES, acts, ["sigmoid", "hard_sigmoid", "tanh"], [True, False], [False, True]):
        if mode != "gru" and (not reset_after or two):
            continue  # reset_after and the [2, 3H] bias are GRU's
        if mode.startswith("rnn") and (act, rec_act) != ("tanh", "sigmoid"):
            continue  # the mode is the activation
        yield mode, act, rec_act, reset_after, two


def _check_step(B, dtype, cases):
    for k, (mode, act, rec_act, reset_after, two) in enumerate(cases):
        kw = keras_op_inputs(mode, dtype, B=B, T=1, I=6, H=4, lengths=False, two_biases=two,
                             seed=k)

        def step():
            return _keras_rnn(**kw, rnn_mode=mode, activation=act, recurrent_activation=rec_act,
                              reset_after=reset_after, is_training=False)
        what = f"{mode} {act}/{rec_act} reset_after={reset_after} two={two}"
        assert "custom-call" not in _hlo(step), what
        assert_all_close(tf.function(step, jit_compile=True)(), step(), TOL[dtype], what)


@pytest.mark.parametrize("B", [1, 32])
def test_step_in_hlo_equals_the_kernel(B):
    """Every mode, activation pair, GRU form and bias form, float32."""
    cases = list(_cases())
    # lstm: 5 · 3 activations; gru: 5 · 3 · reset_after · bias; rnn_tanh; rnn_relu
    assert len(cases) == 15 + 60 + 2
    _check_step(B, tf.float32, cases)


@pytest.mark.parametrize("dtype", [tf.float64, tf.float16, tf.bfloat16], ids=lambda d: d.name)
def test_step_in_hlo_other_dtypes(dtype):
    """One configuration per form (half and bf16 computed in float, as the engine does)."""
    cases = [("lstm", "tanh", "sigmoid", True, False),
             ("lstm", "relu", "hard_sigmoid", True, False),
             ("gru", "tanh", "sigmoid", True, True),
             ("gru", "tanh", "sigmoid", False, False),
             ("rnn_tanh", "tanh", "sigmoid", True, False),
             ("rnn_relu", "tanh", "sigmoid", True, False)]
    _check_step(5, dtype, cases)


@pytest.mark.parametrize("what", ["two steps", "training", "33 rows", "lengths", "mask"])
def test_other_calls_keep_the_custom_call(what):
    B, T = (33, 1) if what == "33 rows" else (3, 2) if what == "two steps" else (3, 1)
    kw = keras_op_inputs("lstm", tf.float32, B=B, T=T, I=6, H=4,
                         lengths=[1, 0, 1] if what == "lengths" else False, mask=what == "mask")
    training = what in ("training", "mask")

    def call():
        return _keras_rnn(**kw, rnn_mode="lstm", is_training=training)
    assert "tfrnn_rnn_forward" in _hlo(call)
    assert_all_close(tf.function(call, jit_compile=True)(), call(), TOL[tf.float32], what)


@pytest.mark.parametrize("layer,kw", [
    ("LSTM", {}), ("GRU", {}), ("GRU", {"reset_after": False}), ("SimpleRNN", {}),
    ("LSTM", {"activation": "relu", "recurrent_activation": "hard_sigmoid"}),
    ("SimpleRNN", {"activation": "relu"})], ids=str)
def test_stateful_streaming_layer_matches_stock_under_jit(layer, kw):
    """Ten calls of one time step each: the states carried by the layers, ours in HLO."""
    x = tf.constant(np.random.default_rng(1).normal(size=(10, 2, 1, 5)), tf.float32)
    stock = getattr(keras.layers, layer)(7, stateful=True, **kw)
    ours = getattr(K, layer)(7, stateful=True, **kw)
    stock(x[0])
    ours(x[0])
    ours.set_weights(stock.get_weights())
    for layer_ in (stock, ours):
        layer_.reset_states()
    f_stock = tf.function(lambda v: stock(v, training=False), jit_compile=True)
    f_ours = tf.function(lambda v: ours(v, training=False), jit_compile=True)
    assert "custom-call" not in f_ours.experimental_get_compiler_ir(x[0])(stage="hlo")
    for t in range(10):
        assert_all_close([f_ours(x[t])], [f_stock(x[t])], 1e-5, f"{layer} step {t}")
    assert_all_close([s.value for s in ours.states], [s.value for s in stock.states], 1e-5,
                     f"{layer} states")


def test_gradient_through_a_streaming_call_under_jit():
    """An inference call differentiated: the registered gradient reruns the forward with a
    reserve (a custom call) and the backward; equal to the same without XLA."""
    kw = keras_op_inputs("gru", tf.float64, B=4, T=1, I=6, H=5, lengths=False, two_biases=True)

    def grads():
        with tf.GradientTape() as tape:
            tape.watch(list(kw.values())[:6])
            y, h, _, _ = _keras_rnn(**kw, rnn_mode="gru", is_training=False)
            loss = tf.reduce_sum(y * y) + tf.reduce_sum(h)
        return tape.gradient(loss, [kw[k] for k in ("input", "input_h", "kernel",
                                                    "recurrent_kernel", "bias")])
    assert_all_close(tf.function(grads, jit_compile=True)(), grads(), 1e-10, "grads")
