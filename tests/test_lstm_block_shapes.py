"""Shape functions of the TfRnn> LSTM block ops: ranks checked, shared dims merged, outputs
inferred, in graph mode (tf.function tracing), compared with what the shapes must be."""
import pytest
import tensorflow as tf

import tf_rnn_ops  # noqa: F401
from tf_rnn_ops import raw_ops as ours

S = tf.TensorSpec
T, B, I, H = 5, 3, 4, 6
PARAMS = ["x", "cs_prev", "h_prev", "w", "wci", "wcf", "wco", "b"]


def specs(t=T, n=B, i=I, h=H, seq=True, **over):
    shapes = dict(x=[t, n, i] if seq else [n, i], cs_prev=[n, h], h_prev=[n, h],
                  w=[None if i is None or h is None else i + h, None if h is None else 4 * h],
                  wci=[h], wcf=[h], wco=[h], b=[None if h is None else 4 * h])
    shapes.update(over)
    return {k: S(v, tf.float32) for k, v in shapes.items()}


def trace(fn, sp):
    names = list(sp)
    return tf.function(lambda *a: fn(**dict(zip(names, a)))).get_concrete_function(
        *sp.values()).structured_outputs


def test_block_lstm_infers_outputs_from_partial_shapes():
    # T and B known only from x, H only from b.
    sp = specs(h=None)
    sp["b"] = S([4 * H], tf.float32)
    sp["cs_prev"] = S([None, None], tf.float32)
    sp["h_prev"] = S([None, None], tf.float32)
    for fn in (ours.BlockLSTM, ours.BlockLSTMV2):
        outs = trace(lambda **k: fn(seq_len_max=tf.constant(T, tf.int64), **k), sp)
        assert len(outs) == 7
        for o in outs:
            assert o.shape.as_list() == [T, B, H]


def test_cell_infers_outputs_and_merges_batch_from_h_prev():
    sp = specs(seq=False)
    sp["x"] = S([None, I], tf.float32)
    sp["cs_prev"] = S([None, H], tf.float32)
    outs = trace(ours.LSTMBlockCell, sp)
    for o in outs:
        assert o.shape.as_list() == [B, H]


@pytest.mark.parametrize("name,shape", [
    ("x", [T, B]),             # wrong rank
    ("cs_prev", [B]),          # wrong rank
    ("w", [I + H]),            # wrong rank
    ("wci", [H, 1]),           # wrong rank
    ("b", [4 * H + 1]),        # not divisible by 4
    ("b", [4 * (H + 1)]),      # H mismatch
    ("w", [I + H + 1, 4 * H]),  # rows != I + H
    ("w", [I + H, 4 * H + 2]),  # cols not 4H
    ("h_prev", [B + 1, H]),    # batch mismatch
    ("wco", [H + 1]),          # peephole length
])
def test_block_lstm_shape_fn_rejects(name, shape):
    sp = specs(**{name: shape})
    with pytest.raises(ValueError, match=rf"\b{name}: "):
        trace(lambda **k: ours.BlockLSTM(seq_len_max=tf.constant(T, tf.int64), **k), sp)


def test_grad_op_shapes_and_activation_checks():
    sp = specs()
    act = {n: S([T, B, H], tf.float32) for n in ["i", "cs", "f", "o", "ci", "co", "h",
                                                   "cs_grad", "h_grad"]}
    for fn in (ours.BlockLSTMGrad, ours.BlockLSTMGradV2):
        outs = trace(lambda **k: fn(seq_len_max=tf.constant(T, tf.int64), use_peephole=True,
                                    **k), {**sp, **act})
        assert [o.shape.as_list() for o in outs] == [
            [T, B, I], [B, H], [B, H], [I + H, 4 * H], [H], [H], [H], [4 * H]]
        bad = dict(act, h_grad=S([T, B, H + 1], tf.float32))
        with pytest.raises(ValueError, match=r"\bh_grad: "):
            trace(lambda **k: fn(seq_len_max=tf.constant(T, tf.int64), use_peephole=True, **k),
                  {**sp, **bad})


def test_cell_grad_shapes():
    sp = specs(seq=False)
    act = {n: S([B, H], tf.float32) for n in ["i", "cs", "f", "o", "ci", "co", "cs_grad",
                                               "h_grad"]}
    outs = trace(lambda **k: ours.LSTMBlockCellGrad(use_peephole=False, **k), {**sp, **act})
    assert [o.shape.as_list() for o in outs] == [[B, H], [B, 4 * H], [H], [H], [H]]


def test_seq_len_max_must_be_scalar_in_shape_fn():
    sp = specs()
    with pytest.raises(ValueError):
        trace(lambda **k: ours.BlockLSTM(seq_len_max=tf.constant([T], tf.int64), **k), sp)


@pytest.mark.parametrize("name,shape", [
    ("h_prev", [B + 1, H]), ("w_ru", [I + H, 2 * H + 1]), ("w_c", [I + H + 1, H]),
    ("b_ru", [2 * H + 2]), ("b_c", [H + 1]), ("x", [B]),
])
def test_gru_shape_fn_names_the_input(name, shape):
    sp = dict(x=[B, I], h_prev=[B, H], w_ru=[I + H, 2 * H], w_c=[I + H, H], b_ru=[2 * H],
              b_c=[H])
    sp[name] = shape
    sp = {k: S(v, tf.float32) for k, v in sp.items()}
    with pytest.raises(ValueError, match=rf"\b{name}: "):
        trace(ours.GRUBlockCell, sp)
