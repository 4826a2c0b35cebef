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


GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}


def keras_op_inputs(mode, dtype, B=3, T=5, I=4, H=6, lengths=True, two_biases=False, mask=False,
                    preprojected=False, seed=0):
    """TfRnn>KerasRNN's eight inputs. lengths: True, [T, 2, 0][:B]; False, none ([0]); or the
    lengths themselves."""
    rng = np.random.default_rng(seed)
    K_ = GATES[mode]
    c = lambda a: tf.constant(a, dtype)  # noqa: E731
    xin = K_ * H if preprojected else I
    bias = rng.uniform(-0.5, 0.5, (2, K_ * H) if two_biases else (K_ * H,))
    if lengths is True:
        lengths = [T, 2, 0][:B]
    return dict(
        input=c(rng.standard_normal((B, T, xin))),
        input_h=c(rng.standard_normal((B, H)) * 0.5),
        input_c=c(rng.standard_normal((B, H)) * 0.5),
        kernel=c(rng.uniform(-0.5, 0.5, (0 if preprojected else I, K_ * H))),
        recurrent_kernel=c(rng.uniform(-0.5, 0.5, (H, K_ * H))),
        bias=c(bias),
        sequence_lengths=tf.constant(lengths or [], tf.int32),
        recurrent_mask=c((rng.uniform(size=(B, K_ * H)) > 0.3) * 1.4 if mask
                         else np.zeros([0])))


def assert_all_close(got, want, tol, what):
    """Each pair equal to tol relative, tol · max(1, max |want|) absolute, shapes equal."""
    assert len(got) == len(want), what
    for k, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(tf.cast(g, tf.float64))
        w = np.asarray(tf.cast(w, tf.float64))
        assert g.shape == w.shape, f"{what}[{k}]: {g.shape} != {w.shape}"
        scale = max(1.0, float(np.max(np.abs(w)))) if w.size else 1.0
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * scale, err_msg=f"{what}[{k}]")
