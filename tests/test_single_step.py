"""The single-step ops' fast paths (LSTMBlockCell, LSTMBlockCellGrad, GRUBlockCell,
GRUBlockCellGrad), which decoding loops call thousands of times:

* the engine's single-step products (cc/engine/packed_gemm.h SmallGemm: register blocks on the
  weights in place up to 32 rows, Eigen's product beyond, a column split over the pool for
  large products) at sizes that reach each of them, against stock tf.raw_ops and the float64
  reference;
* the eager fast path of tf_rnn_ops.raw_ops (straight to TensorFlow's executor) returns the
  op's namedtuple with the same values as the validating path inside tf.function, takes the
  default int attrs, and still names a wrong input;
* bench/bench_cells.py runs (a smoke test; speed is measured there, never asserted here).
"""
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import gru_reference as gref
import lstm_util as U
import reference as ref
import test_gru_block as G

F32, F64 = tf.float32, tf.float64
# (B, I, H): one row (the matrix-vector case, and a 2 MiB weight operand split over the pool),
# row-block tails of the register blocks, more than 32 rows (Eigen's product: 33, 40), and a
# product large enough for the column split over the pool (B = 32, I = H = 256); fewer rows than
# a register block (2, 3, 5, 7: WideRows' panels of 16/R packets, then narrower ones and single
# columns for the rest: 4H = 280, 116, 400, 244) and one row past a block (9).
SIZES = [(1, 7, 37), (1, 200, 300), (13, 9, 50), (17, 20, 33), (32, 256, 256), (2, 64, 70),
         (3, 33, 29), (5, 8, 100), (7, 16, 61), (9, 30, 47), (33, 12, 20), (40, 64, 64)]


def _sid(size):
    return "B{}I{}H{}".format(*size)


def _lstm_params(rng, B, I, H, dtype):
    return {k: U.round_to(v, dtype) for k, v in U.make_params(rng, None, B, I, H).items()}


@pytest.mark.parametrize("dtype", [F32, F64], ids=lambda d: d.name)
@pytest.mark.parametrize("size", SIZES, ids=_sid)
def test_lstm_block_cell(ours, rng, size, dtype):
    B, I, H = size
    p = _lstm_params(rng, B, I, H, dtype)
    attrs = dict(forget_bias=0.5, cell_clip=1.5, use_peephole=H % 2 == 0)
    got = [U.to_numpy(o) for o in U.call_fwd(ours, "LSTMBlockCell", U.tensors(p, dtype),
                                             **attrs)]
    want = U.ref_fwd("LSTMBlockCell", p, **attrs)
    U.assert_all_close(got, want, ref.OUTPUT_NAMES, U.TOL[dtype], prefix="vs reference: ")
    if dtype == F32:
        stock = U.call_fwd(tf.raw_ops, "LSTMBlockCell", U.tensors(p, dtype), **attrs)
        U.assert_all_close(got, [U.to_numpy(o) for o in stock], ref.OUTPUT_NAMES, U.TOL[dtype],
                           prefix="vs stock: ")


@pytest.mark.parametrize("size", SIZES, ids=_sid)
def test_lstm_block_cell_grad(ours, rng, size):
    B, I, H = size
    p = _lstm_params(rng, B, I, H, F32)
    acts = [U.round_to(a, F32) for a in U.ref_fwd("LSTMBlockCell", p, use_peephole=True)]
    inputs = U.grad_inputs("LSTMBlockCellGrad", p, acts,
                           U.round_to(rng.normal(size=(B, H)), F32),
                           U.round_to(rng.normal(size=(B, H)), F32))
    t = U.tensors(inputs, F32)
    got = [U.to_numpy(o) for o in U.call_grad(ours, "LSTMBlockCellGrad", t, use_peephole=True)]
    names = U.grad_output_names("LSTMBlockCellGrad")
    want = U.ref_grad("LSTMBlockCellGrad", inputs, use_peephole=True)
    U.assert_all_close(got, want, names, U.TOL[F32], scale=True, prefix="vs reference: ")


@pytest.mark.parametrize("size", SIZES, ids=_sid)
def test_gru_block_cell_and_grad(ours, rng, size):
    # The GRU family's own checks (vs stock and vs the float64 reference) at these sizes.
    G.test_fwd_float32(ours, rng, size)
    G.test_grad_op_float32(ours, rng, size)


@pytest.mark.parametrize("size", [(16, 40, 24)], ids=_sid)
def test_gru_block_cell_float64(ours, rng, size):
    B, I, H = size
    p = G.rounded(G.make_params(rng, B, I, H), F64)
    got = [U.to_numpy(o) for o in G.call(ours, "GRUBlockCell", p, F64)]
    U.assert_all_close(got, G.ref_fwd(p), gref.FWD_NAMES, U.TOL[F64], prefix="float64: ")


# ---------------------------------------------------------------------------------------------
# the eager fast path of raw_ops
# ---------------------------------------------------------------------------------------------

def _cell_inputs(rng, op, B=3, I=4, H=5):
    if op.startswith("GRU"):
        g = G.grad_op_inputs(rng, B, I, H, F32)
        if op == "GRUBlockCell":
            g = {k: g[k] for k in gref.INPUT_NAMES}
        return U.tensors(g, F32), {}
    p = _lstm_params(rng, B, I, H, F32)
    if op == "LSTMBlockCell":
        return U.tensors(p, F32), {}
    acts = [U.round_to(a, F32) for a in U.ref_fwd("LSTMBlockCell", p)]
    inputs = U.grad_inputs(op, p, acts, rng.normal(size=(B, H)), rng.normal(size=(B, H)))
    return U.tensors(inputs, F32), {"use_peephole": True}


@pytest.mark.parametrize("op", ["LSTMBlockCell", "LSTMBlockCellGrad", "GRUBlockCell",
                                "GRUBlockCellGrad"])
def test_eager_fast_path_equals_function(ours, rng, op):
    kw, attrs = _cell_inputs(rng, op)
    fn = getattr(ours, op)
    eager = fn(**kw, **attrs)
    graph = tf.function(lambda: fn(**kw, **attrs))()
    stock = getattr(tf.raw_ops, op)(**kw, **attrs)
    assert type(eager).__name__ == type(graph).__name__
    assert eager._fields == stock._fields  # the op's namedtuple, field names as stock's
    for name, a, b in zip(eager._fields, eager, graph):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)


def test_eager_fast_path_int_attrs(ours, rng):
    """The defaults forget_bias=1, cell_clip=3 are ints; the fast path needs floats."""
    kw, _ = _cell_inputs(rng, "LSTMBlockCell")
    a = ours.LSTMBlockCell(**kw, forget_bias=1, cell_clip=3)
    b = ours.LSTMBlockCell(**kw, forget_bias=1.0, cell_clip=3.0)
    c = tf.function(lambda: ours.LSTMBlockCell(**kw))()
    for x, y, z in zip(a, b, c):
        np.testing.assert_array_equal(x.numpy(), y.numpy())
        np.testing.assert_array_equal(x.numpy(), z.numpy())


@pytest.mark.parametrize("op", ["LSTMBlockCell", "GRUBlockCellGrad"])
def test_eager_fast_path_still_names_wrong_input(ours, rng, op):
    kw, attrs = _cell_inputs(rng, op)
    kw["h_prev"] = tf.cast(kw["h_prev"], tf.float64)
    with pytest.raises(tf.errors.InvalidArgumentError, match="'h_prev'"):
        getattr(ours, op)(**kw, **attrs)
    # A shape error comes from the kernel, unchanged.
    kw["h_prev"] = tf.cast(kw["h_prev"], tf.float32)[:, :-1]
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"TfRnn>{op}: .* must "):
        getattr(ours, op)(**kw, **attrs)


def test_eager_fast_path_converts_arrays(ours, rng):
    """NumPy inputs take the validating way (converted to the first input's dtype)."""
    kw, _ = _cell_inputs(rng, "GRUBlockCell")
    mixed = dict(kw, h_prev=kw["h_prev"].numpy().tolist())
    for a, b in zip(ours.GRUBlockCell(**mixed), ours.GRUBlockCell(**kw)):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_positional_arguments_refused(ours, rng):
    kw, _ = _cell_inputs(rng, "GRUBlockCell")
    with pytest.raises(TypeError, match="keyword"):
        ours.GRUBlockCell(kw["x"], **{k: v for k, v in kw.items() if k != "x"})


def test_bench_cells_quick():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run(
        [sys.executable, os.path.join(repo, "bench", "bench_cells.py"), "--batch", "1",
         "--hidden", "8", "--reps", "2", "--chain", "2"], cwd=repo, capture_output=True,
        text=True, timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| LSTMBlockCellGrad | 1 | 8 |" in proc.stdout
    assert "[4/4]" in proc.stderr  # a progress line per measurement
