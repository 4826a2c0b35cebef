"""What the XLA tests (tests/test_xla*.py) share: the skip rule and the comparison."""
import os

import numpy as np
import pytest
import tensorflow as tf

import tf_rnn_ops

# TensorFlow 2.21 (the version this project is built and tested with) must have the XLA
# kernels; another version may lack what they need (tools/compat_matrix.sh's xla column), and
# TF_RNN_OPS_XLA=0 turns them off.
_REQUIRED = tf.__version__.startswith("2.21.") and os.environ.get("TF_RNN_OPS_XLA") != "0"
needs_xla = pytest.mark.skipif(not _REQUIRED and not tf_rnn_ops.has_xla(),
                               reason=f"XLA kernels not loaded: {tf_rnn_ops.xla_status()}")


def assert_all_close(got, want, tol, what):
    """Each pair equal to tol relative, tol · max(1, max |want|) absolute, shapes equal."""
    assert len(got) == len(want), what
    for k, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(tf.cast(g, tf.float64))
        w = np.asarray(tf.cast(w, tf.float64))
        assert g.shape == w.shape, f"{what}[{k}]: {g.shape} != {w.shape}"
        scale = max(1.0, float(np.max(np.abs(w)))) if w.size else 1.0
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * scale, err_msg=f"{what}[{k}]")
