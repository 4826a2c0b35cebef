"""tf_rnn_ops.keras layers on a GPU host: what stock Keras runs on cuDNN stays on the stock
layer; what stock runs in its generic loop there (recurrent dropout, other activations, GRU
reset_after=False, SimpleRNN, no bias, unroll, masks that are not right-padded) runs on the
fused op, which has GPU kernels (cc/kernels/keras_rnn_gpu_kernels.cc).

This host has no GPU: the tests make the layers believe they are on one (``_gpu_host``) and
check the routing by counting the fused op's calls; the stock path then runs stock Keras's
generic loop here (its cuDNN path needs a GPU), so every result is also compared with the stock
layer's. The GPU kernels' engine calls are checked on the CUDA emulation
(tests/gpu/cpu_parity.py, the keras-* cases) and on a GPU machine (tools/gpu_session.sh)."""
import numpy as np
import pytest
import tensorflow as tf

keras = pytest.importorskip("keras")

import tf_rnn_ops.keras as K  # noqa: E402
from test_keras_layers import TOL, count_calls, make_pair  # noqa: E402

B, T, I, H = 3, 5, 4, 6


@pytest.fixture
def fused_calls(monkeypatch):
    return count_calls(monkeypatch, K, "_keras_rnn")


@pytest.fixture
def gpu_host(monkeypatch):
    """The layers see a GPU host whose op library has the GPU kernels."""
    monkeypatch.setattr(K, "_gpu_host", lambda: True)
    monkeypatch.setattr(K, "_gpu_kernels", lambda: True)
    monkeypatch.delenv("TF_RNN_OPS_KERAS_GPU", raising=False)


def _x(seed=0):
    return tf.constant(np.random.default_rng(seed).standard_normal((B, T, I)), tf.float32)


def _check_equal(stock, ours, x, **call):
    want, got = stock(x, **call), ours(x, **call)
    for w, g in zip(tf.nest.flatten(want), tf.nest.flatten(got)):
        atol = TOL["float32"][0] * max(1.0, float(np.abs(w).max()))
        np.testing.assert_allclose(g, w, atol=atol, rtol=0)


STOCK_CUDNN = [  # what stock Keras runs on cuDNN on a GPU host
    ("lstm", keras.layers.LSTM, K.LSTM, {}),
    ("gru", keras.layers.GRU, K.GRU, {}),
    ("lstm-dropout", keras.layers.LSTM, K.LSTM, dict(dropout=0.2)),
]

STOCK_GENERIC = [  # what stock Keras runs in its generic loop on a GPU host
    ("lstm-recurrent-dropout", keras.layers.LSTM, K.LSTM, dict(recurrent_dropout=0.3)),
    ("gru-reset-before", keras.layers.GRU, K.GRU, dict(reset_after=False)),
    ("simple-rnn", keras.layers.SimpleRNN, K.SimpleRNN, {}),
    ("lstm-relu-hard-sigmoid", keras.layers.LSTM, K.LSTM,
     dict(activation="relu", recurrent_activation="hard_sigmoid")),
    ("gru-no-bias", keras.layers.GRU, K.GRU, dict(use_bias=False)),
    ("lstm-unroll", keras.layers.LSTM, K.LSTM, dict(unroll=True)),
]


@pytest.mark.parametrize("name,stock_cls,ours_cls,kw", STOCK_CUDNN, ids=[c[0] for c in STOCK_CUDNN])
def test_what_stock_runs_on_cudnn_stays_stock(gpu_host, fused_calls, name, stock_cls, ours_cls,
                                              kw):
    stock, ours = make_pair(stock_cls, ours_cls, H, (B, T, I), 1, return_sequences=True, **kw)
    _check_equal(stock, ours, _x())
    assert fused_calls == []


@pytest.mark.parametrize("name,stock_cls,ours_cls,kw", STOCK_GENERIC,
                         ids=[c[0] for c in STOCK_GENERIC])
def test_what_stock_loops_over_runs_fused(gpu_host, fused_calls, name, stock_cls, ours_cls, kw):
    stock, ours = make_pair(stock_cls, ours_cls, H, (B, T, I), 2, return_sequences=True,
                            return_state=True, **kw)
    _check_equal(stock, ours, _x(1))  # inference: recurrent dropout off, still stock's loop
    assert len(fused_calls) == 1
    assert ours.supports_jit is False  # no XLA kernel for the GPU yet (stock says so for cuDNN)


def test_recurrent_dropout_in_training_runs_fused(gpu_host, fused_calls):
    stock, ours = make_pair(keras.layers.GRU, K.GRU, H, (B, T, I), 3, recurrent_dropout=0.4,
                            seed=5, return_sequences=True)
    x = _x(2)
    out = ours(x, training=True)
    assert len(fused_calls) == 1
    # Some recurrent units dropped: the training output differs from inference's.
    assert not np.allclose(out, ours(x, training=False))


@pytest.mark.parametrize("padding", ["right", "left"])
def test_mask_routes_on_the_data(gpu_host, fused_calls, padding):
    """A mask goes to stock cuDNN when it is right-padded (stock's condition) and to the fused
    op otherwise (stock cuDNN refuses it); both give the stock generic loop's results."""
    stock, ours = make_pair(keras.layers.LSTM, K.LSTM, H, (B, T, I), 4, return_sequences=True)
    keep = np.ones((B, T), bool)
    keep[1, 3:] = keep[2, 2:] = False
    if padding == "left":
        keep = keep[:, ::-1].copy()
    mask = tf.constant(keep)
    x = _x(3)
    want = stock(x, mask=mask)
    got = tf.function(lambda x, m: ours(x, mask=m))(x, mask)
    np.testing.assert_allclose(got, want, atol=2e-5, rtol=0)
    assert len(fused_calls) == 1  # traced once, in the cond's fused branch


def test_cudnn_mask_condition():
    ok = lambda rows: bool(K._cudnn_mask_ok(tf.constant(np.array(rows, bool))))  # noqa: E731
    assert ok([[1, 1, 0], [1, 1, 1]])
    assert not ok([[0, 1, 1], [1, 1, 1]])  # left-padded
    assert not ok([[1, 0, 1], [1, 1, 1]])  # a hole
    assert not ok([[0, 0, 0], [1, 1, 1]])  # a fully masked row


def test_switch_turns_routing_off(gpu_host, fused_calls, monkeypatch):
    monkeypatch.setenv("TF_RNN_OPS_KERAS_GPU", "0")
    stock, ours = make_pair(keras.layers.GRU, K.GRU, H, (B, T, I), 5, reset_after=False)
    _check_equal(stock, ours, _x(4))
    assert fused_calls == []


def test_no_gpu_kernels_means_stock(gpu_host, fused_calls, monkeypatch):
    monkeypatch.setattr(K, "_gpu_kernels", lambda: False)
    stock, ours = make_pair(keras.layers.SimpleRNN, K.SimpleRNN, H, (B, T, I), 6)
    _check_equal(stock, ours, _x(5))
    assert fused_calls == []


def test_gpu_kernels_follow_the_build():
    import os
    so = os.path.join(os.path.dirname(K.__file__), "_tfrnn_engine_cuda.so")
    assert K._gpu_kernels() == os.path.exists(so)


def test_cpu_host_unchanged(fused_calls, monkeypatch):
    monkeypatch.setattr(K, "_gpu_host", lambda: False)
    stock, ours = make_pair(keras.layers.LSTM, K.LSTM, H, (B, T, I), 7)
    _check_equal(stock, ours, _x(6))
    assert len(fused_calls) == 1
