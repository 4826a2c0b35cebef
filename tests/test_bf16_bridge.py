"""The float <-> bfloat16 conversions at a bfloat16 op's boundary (cc/kernels/bf16_convert.h),
called in the op library through ctypes, against TensorFlow's own casts: bit for bit on
rounding ties, infinities, denormals and random floats of every magnitude, at lengths that
leave vector tails; a NaN of either sign to a quiet NaN (TensorFlow's cast makes every NaN
0x7fc0; the bridge keeps the sign, as Eigen's conversion does)."""
import ctypes

import numpy as np
import pytest
import tensorflow as tf

from tf_rnn_ops._loader import library_path, load_library

_TO_BF16 = "_ZN5tfrnn15FloatToBf16BitsEPKfPtl"
_FROM_BF16 = "_ZN5tfrnn15Bf16ToFloatBitsEPKtPfl"


@pytest.fixture(scope="module")
def lib():
    load_library()
    return ctypes.CDLL(library_path())


def _special_floats(n, seed):
    rng = np.random.default_rng(seed)
    # Random bit patterns cover every exponent, NaN payloads and denormals.
    bits = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    # Rounding ties (low half exactly 0x8000) with an even and an odd kept half.
    bits[: n // 8] = (bits[: n // 8] & 0xFFFF0000) | 0x8000
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-40, -1e-40,
                        3.4028235e38, -3.4028235e38, 1.0, -1.0], np.float32).view(np.uint32)
    k = min(len(special), n - n // 8)
    bits[n // 8: n // 8 + k] = special[:k]
    if n > 1:
        bits[-1] = 0x7F800001  # a signalling NaN
    return bits.view(np.float32)


@pytest.mark.parametrize("n", [1, 15, 16, 17, 1000, 70001])
def test_float_to_bf16_matches_tf_cast(lib, n):
    x = _special_floats(n, n)
    out = np.zeros(n, np.uint16)
    getattr(lib, _TO_BF16)(x.ctypes.data_as(ctypes.c_void_p),
                            out.ctypes.data_as(ctypes.c_void_p), ctypes.c_long(n))
    want = tf.bitcast(tf.cast(tf.constant(x), tf.bfloat16), tf.uint16).numpy()
    nan = np.isnan(x)
    assert np.all(out[nan] & 0x7FC0 == 0x7FC0), "a NaN must become a quiet NaN"
    assert np.array_equal(out[nan] & 0x8000, x[nan].view(np.uint32) >> 16 & 0x8000)
    bad = np.nonzero((out != want) & ~nan)[0]
    assert bad.size == 0, [(hex(x.view(np.uint32)[i]), hex(out[i]), hex(want[i]))
                           for i in bad[:8]]


@pytest.mark.parametrize("n", [1, 17, 70001])
def test_bf16_to_float_matches_tf_cast(lib, n):
    bits = np.random.default_rng(n).integers(0, 2**16, size=n, dtype=np.uint64).astype(np.uint16)
    out = np.zeros(n, np.float32)
    getattr(lib, _FROM_BF16)(bits.ctypes.data_as(ctypes.c_void_p),
                             out.ctypes.data_as(ctypes.c_void_p), ctypes.c_long(n))
    want = tf.cast(tf.bitcast(tf.constant(bits), tf.bfloat16), tf.float32).numpy()
    assert np.array_equal(out.view(np.uint32), want.view(np.uint32))
