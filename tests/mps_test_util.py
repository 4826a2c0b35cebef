"""Helpers shared by the MPSGraph LSTM and GRU tests (test_mps_lstm.py, test_mps_gru.py)."""
import zlib

import numpy as np
import pytest
import tensorflow as tf


@pytest.fixture
def rng(request):
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


_ABBR = {"none": "n", "relu": "r", "tanh": "t", "sigmoid": "s", "hard_sigmoid": "h"}


def _mask(rng, shape):
    m = rng.uniform(0.2, 1.5, size=shape)
    m[rng.uniform(size=shape) < 0.25] = 0.0
    return m


def to_t(a, dtype):
    if a is None:
        return None
    return tf.cast(tf.constant(np.asarray(a, dtype=np.float64)), dtype)


def round_to(a, dtype):
    if a is None:
        return None
    return tf.cast(to_t(a, dtype), tf.float64).numpy()


def np64(t):
    return tf.cast(t, tf.float64).numpy()


def assert_close(actual, expected, tol, name, scale=True):
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, f"{name}: shape {actual.shape} != {expected.shape}"
    atol = tol.atol
    if scale and expected.size:
        atol *= max(1.0, float(np.abs(expected).max()))
    np.testing.assert_allclose(actual, expected, rtol=tol.rtol, atol=atol, err_msg=name)


def _apply(rng, ops, changes):
    ops = dict(ops)
    for k, shape in changes.items():
        ops[k] = None if shape is None else rng.normal(size=shape)
    return ops
