"""The "stock TensorFlow" columns of docs/DIFFERENCES.md that the installed (CPU) TensorFlow
can show, checked against it, so that the table stays true for the TensorFlow we test with.
What needs a GPU (cuDNN's behaviour) is marked [R] in the table: read in the source, not
checked here. These tests need no plugin.
"""

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.framework import op_def_registry

Z = tf.zeros


def _build(fn):
    """fn() in a fresh graph: None when it builds, else the exception."""
    with tf.Graph().as_default():
        try:
            fn()
        except Exception as e:  # noqa: BLE001 (the caller checks the type)
            return e
    return None


def _backprop_args(**over):
    args = dict(input=Z([2, 2, 3]), input_h=Z([1, 2, 3]), input_c=Z([1, 2, 3]), params=Z([10]),
                output=Z([2, 2, 3]), output_h=Z([1, 2, 3]), output_c=Z([1, 2, 3]),
                output_backprop=Z([2, 2, 3]), output_h_backprop=Z([1, 2, 3]),
                output_c_backprop=Z([1, 2, 3]), reserve_space=Z([1]))
    return dict(args, **over)


def test_stock_cudnn_rnn_ops_are_stateful():
    for name in ("CudnnRNN", "CudnnRNNV2", "CudnnRNNV3", "CudnnRNNBackprop",
                 "CudnnRNNBackpropV2", "CudnnRNNBackpropV3"):
        assert op_def_registry.get(name).is_stateful, name


def test_stock_backprop_shape_functions_check_no_rank():
    assert _build(lambda: tf.raw_ops.CudnnRNNBackprop(**_backprop_args(input=Z([2, 3])))) \
        is None


def test_stock_canonical_lists_are_checked_while_building():
    def c2p(n_weights, n_biases, last=tf.float32):
        return lambda: tf.raw_ops.CudnnRNNCanonicalToParams(
            num_layers=1, num_units=2, input_size=2,
            weights=[Z([2, 2]) for _ in range(n_weights - 1)] + [Z([2, 2], last)] * (
                n_weights > 0), biases=[Z([2])] * n_biases)
    assert isinstance(_build(c2p(8, 7)), ValueError)                        # lengths differ
    assert isinstance(_build(c2p(0, 0)), ValueError)                        # empty
    assert isinstance(_build(c2p(8, 8, tf.float64)), TypeError)             # dtypes


def test_stock_host_reserved_of_another_dtype_is_a_type_error():
    err = _build(lambda: tf.raw_ops.CudnnRNNBackpropV2(**_backprop_args(host_reserved=Z([2]))))
    assert isinstance(err, TypeError) and "host_reserved" in str(err)


def test_stock_gradient_without_training_is_a_value_error():
    def grad():
        x, h = Z([2, 2, 3]), Z([1, 2, 3])
        y = tf.raw_ops.CudnnRNN(input=x, input_h=h, input_c=h, params=Z([100]),
                                is_training=False)
        tf.gradients(tf.reduce_sum(y[0]), x)
    err = _build(grad)
    assert isinstance(err, ValueError) and "is_training must be set to True" in str(err)


def test_stock_lstm_block_cell_peephole_lengths():
    """Without use_peephole stock runs with wci/wcf/wco of any length (ours rejects them); a
    rank-0 wci builds into a graph and fails only when it runs (issue #37's example)."""
    out = tf.raw_ops.LSTMBlockCell(x=Z([2, 3]), cs_prev=Z([2, 4]), h_prev=Z([2, 4]),
                                   w=Z([7, 16]), wci=Z([0]), wcf=Z([1]), wco=Z([9]), b=Z([16]),
                                   use_peephole=False)
    assert all(tuple(o.shape) == (2, 4) for o in out)
    g = tf.Graph()
    with g.as_default():
        out = tf.raw_ops.LSTMBlockCell(x=Z([2, 3]), cs_prev=Z([2, 4]), h_prev=Z([2, 4]),
                                       w=Z([7, 16]), wci=Z([]), wcf=Z([4]), wco=Z([4]),
                                       b=Z([16]))
        with tf.compat.v1.Session(graph=g) as sess:
            with pytest.raises(tf.errors.InvalidArgumentError,
                               match="wci_tensor must be rank 1 but is rank 0"):
                sess.run(out)


@pytest.mark.parametrize("op", ["BlockLSTMGrad", "GRUBlockCellGrad"])
def test_stock_empty_problems_run(op):
    """An empty batch / cell runs in stock (ours computes the same, with zeros where stock's
    outputs are uninitialised: tests/test_catalogue.py test_zero_size_matches_stock)."""
    rng = np.random.default_rng(0)
    t = lambda *s: tf.constant(rng.normal(size=s).astype(np.float32))  # noqa: E731
    B, H, I, T = 0, 4, 2, 3
    if op == "GRUBlockCellGrad":
        out = tf.raw_ops.GRUBlockCellGrad(x=t(B, I), h_prev=t(B, H), w_ru=t(I + H, 2 * H),
                                          w_c=t(I + H, H), b_ru=t(2 * H), b_c=t(H), r=t(B, H),
                                          u=t(B, H), c=t(B, H), d_h=t(B, H))
    else:
        acts = {k: t(T, B, H) for k in ("i", "cs", "f", "o", "ci", "co", "h", "cs_grad",
                                        "h_grad")}
        out = tf.raw_ops.BlockLSTMGrad(
            seq_len_max=tf.constant(T, tf.int64), x=t(T, B, I), cs_prev=t(B, H),
            h_prev=t(B, H), w=t(I + H, 4 * H), wci=t(H), wcf=t(H), wco=t(H), b=t(4 * H),
            **acts, use_peephole=True)
    assert len(out) in (4, 8)
