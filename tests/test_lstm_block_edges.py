"""Edge sizes of the LSTM block ops: timelen 0, input_size 0 — valid, correctly shaped, and
equal to the float64 reference (stock accepts them too)."""
import numpy as np
import pytest
import tensorflow as tf

import tf_rnn_ops  # noqa: F401
from tf_rnn_ops import raw_ops as ours


def _inputs(rng, T, B, I, H):
    r = lambda *s: tf.constant(rng.standard_normal(s) * 0.3)  # float64
    return dict(x=r(T, B, I), cs_prev=r(B, H), h_prev=r(B, H), w=r(I + H, 4 * H), wci=r(H),
                wcf=r(H), wco=r(H), b=r(4 * H))


@pytest.mark.parametrize("op", ["BlockLSTM", "BlockLSTMV2"])
def test_timelen_zero(op):
    a = _inputs(np.random.default_rng(0), 0, 2, 3, 4)
    outs = getattr(ours, op)(seq_len_max=0, **a)
    assert all(o.shape == (0, 2, 4) for o in outs)
    grad_op = getattr(ours, op.replace("BlockLSTM", "BlockLSTMGrad"))
    g = grad_op(seq_len_max=0, **a, **dict(zip("i cs f o ci co h".split(), outs)),
                cs_grad=outs[1], h_grad=outs[6], use_peephole=True)
    assert [t.shape.as_list() for t in g] == [[0, 2, 3], [2, 4], [2, 4], [7, 16], [4], [4],
                                              [4], [16]]
    for t in g:
        np.testing.assert_array_equal(t.numpy(), 0.0)


def test_input_size_zero_matches_stock_equations():
    # With I = 0 the gates come from h_prev alone; compare with stock float32 BlockLSTM.
    rng = np.random.default_rng(1)
    a = {k: tf.cast(v, tf.float32) for k, v in _inputs(rng, 3, 2, 0, 4).items()}
    ours_out = ours.BlockLSTM(seq_len_max=3, **a, use_peephole=True, cell_clip=-1.0)
    stock_out = tf.raw_ops.BlockLSTM(seq_len_max=tf.constant(3, tf.int64), **a,
                                     use_peephole=True, cell_clip=-1.0)
    for x, y in zip(ours_out, stock_out):
        np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-5, atol=1e-6)
