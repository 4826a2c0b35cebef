"""XLA: the GRU block family (GRUBlockCell, GRUBlockCellGrad, GRUBlockCellGradExact) and the
LSTM block family (LSTMBlockCell, BlockLSTM, BlockLSTMV2, BlockLSTMGrad, BlockLSTMGradV2,
BlockLSTMGradExact) compile inside tf.function(jit_compile=True) as one custom call per op
(cc/xla/gru_block_xla.cc, lstm_block_xla.cc), forward and gradients equal to the TensorFlow
kernels (themselves checked against stock and float64 elsewhere) and to stock GRUBlockCell and
BlockLSTM (float32).
"""

import numpy as np
import pytest
import tensorflow as tf

import tf_rnn_ops  # noqa: F401
from tf_rnn_ops import raw_ops
from xla_test_util import assert_all_close, needs_xla

pytestmark = needs_xla

TOL = {tf.float64: 1e-12, tf.float32: 1e-5, tf.float16: 5e-3, tf.bfloat16: 3e-2}


def _close(got, want, dtype, what):
    assert_all_close(got, want, TOL[dtype], what)


def _gru_inputs(dtype, B=3, I=4, H=5, seed=0):
    rng = np.random.default_rng(seed)
    c = lambda *s: tf.constant(rng.standard_normal(s) * 0.5, dtype)  # noqa: E731
    return dict(x=c(B, I), h_prev=c(B, H), w_ru=c(I + H, 2 * H), w_c=c(I + H, H),
                b_ru=c(2 * H), b_c=c(H))


def _fwd_and_grads(ops):
    def f(**k):
        wrt = list(k.values())
        with tf.GradientTape() as tape:
            tape.watch(wrt)
            r, u, c, h = ops.GRUBlockCell(**k)
            loss = (tf.reduce_sum(tf.cast(h, tf.float32) ** 2) + tf.reduce_sum(tf.cast(r, tf.float32))
                    + tf.reduce_sum(tf.cast(u, tf.float32) * 0.5)
                    + tf.reduce_sum(tf.cast(c, tf.float32) * 2))
        return [r, u, c, h] + tape.gradient(loss, wrt)
    return f


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64, tf.float16, tf.bfloat16],
                         ids=lambda d: d.name)
def test_gru_cell_and_its_gradient_under_jit(dtype):
    inp = _gru_inputs(dtype)
    f = _fwd_and_grads(raw_ops)
    jit = tf.function(f, jit_compile=True)
    _close(jit(**inp), tf.function(f)(**inp), dtype, dtype.name)
    hlo = jit.experimental_get_compiler_ir(**inp)(stage="hlo")
    assert hlo.count('custom_call_target="tfrnn_block_call"') == 2  # forward, exact gradient


def test_gru_cell_under_jit_matches_stock():
    inp = _gru_inputs(tf.float32, seed=1)
    got = tf.function(lambda **k: raw_ops.GRUBlockCell(**k), jit_compile=True)(**inp)
    _close(got, tf.raw_ops.GRUBlockCell(**inp), tf.float32, "vs stock")


def test_raw_grad_op_under_jit():
    inp = _gru_inputs(tf.float64, seed=2)
    r, u, c, _ = raw_ops.GRUBlockCell(**inp)
    d_h = tf.constant(np.random.default_rng(3).standard_normal((3, 5)), tf.float64)
    args = dict(inp, r=r, u=u, c=c, d_h=d_h)
    got = tf.function(lambda **k: raw_ops.GRUBlockCellGrad(**k), jit_compile=True)(**args)
    _close(got, raw_ops.GRUBlockCellGrad(**args), tf.float64, "GRUBlockCellGrad")


def test_stepped_over_a_sequence_with_scan():
    """A GRU cell stepped by tf.scan inside one XLA cluster, with the gradient of the loop."""
    T, B, I, H = 6, 2, 3, 4
    rng = np.random.default_rng(4)
    xs = tf.constant(rng.standard_normal((T, B, I)), tf.float32)
    inp = _gru_inputs(tf.float32, B=B, I=I, H=H, seed=5)
    weights = [inp[k] for k in ("w_ru", "w_c", "b_ru", "b_c")]

    def f(xs, *w):
        with tf.GradientTape() as tape:
            tape.watch(list(w))
            step = lambda h, x: raw_ops.GRUBlockCell(  # noqa: E731
                x=x, h_prev=h, w_ru=w[0], w_c=w[1], b_ru=w[2], b_c=w[3])[3]
            hs = tf.scan(step, xs, inp["h_prev"])
            loss = tf.reduce_sum(hs ** 2)
        return [hs] + tape.gradient(loss, list(w))
    _close(tf.function(f, jit_compile=True)(xs, *weights), tf.function(f)(xs, *weights),
           tf.float32, "scan")


@pytest.mark.parametrize("B,H", [(0, 4), (3, 0)])
def test_empty_problems_under_jit(B, H):
    inp = _gru_inputs(tf.float32, B=B, H=H)
    f = _fwd_and_grads(raw_ops)
    _close(tf.function(f, jit_compile=True)(**inp), tf.function(f)(**inp), tf.float32,
           f"B={B} H={H}")


def test_bad_shape_fails_at_compile_time_naming_the_input():
    inp = _gru_inputs(tf.float32)
    inp["w_c"] = inp["w_c"][:, :-1]
    f = tf.function(lambda **k: raw_ops.GRUBlockCell(**k), jit_compile=True)
    # (the shape function names it at trace time; the XLA kernel's own check would next)
    with pytest.raises((ValueError, tf.errors.InvalidArgumentError), match="w_c"):
        f(**inp)


# --- the LSTM block family -----------------------------------------------------------------

def _lstm_inputs(dtype, T=5, B=3, I=4, H=6, seed=0, cell=False):
    rng = np.random.default_rng(seed)
    c = lambda *s: tf.constant(rng.standard_normal(s) * 0.5, dtype)  # noqa: E731
    return dict(x=c(B, I) if cell else c(T, B, I), cs_prev=c(B, H), h_prev=c(B, H),
                w=c(I + H, 4 * H), wci=c(H), wcf=c(H), wco=c(H), b=c(4 * H))


def _lstm_fwd_and_grads(op, **attrs):
    def f(**k):
        wrt = list(k.values())
        with tf.GradientTape() as tape:
            tape.watch(wrt)
            outs = op(**k, **attrs)
            loss = tf.add_n([tf.reduce_sum(tf.cast(o, tf.float32) * (j + 1.0))
                             for j, o in enumerate(outs)])
        return list(outs) + tape.gradient(loss, wrt)
    return f


LSTM_CASES = [
    ("BlockLSTM", tf.float32, 5, dict(cell_clip=0.5, forget_bias=0.7, use_peephole=True)),
    ("BlockLSTM", tf.float64, 3, dict(use_peephole=False)),
    ("BlockLSTMV2", tf.float32, 2, dict(cell_clip=0.0, use_peephole=True)),
    ("BlockLSTMV2", tf.float16, 5, dict(use_peephole=True)),
    ("BlockLSTM", tf.bfloat16, 4, dict()),
]


@pytest.mark.parametrize("name,dtype,slm,attrs", LSTM_CASES,
                         ids=[f"{n}-{d.name}-slm{s}" for n, d, s, _ in LSTM_CASES])
def test_block_lstm_and_its_gradient_under_jit(name, dtype, slm, attrs):
    inp = _lstm_inputs(dtype)
    op = getattr(raw_ops, name)
    f = _lstm_fwd_and_grads(lambda **k: op(seq_len_max=slm, **k, **attrs))
    jit = tf.function(f, jit_compile=True)
    _close(jit(**inp), tf.function(f)(**inp), dtype, f"{name} {dtype.name}")
    hlo = jit.experimental_get_compiler_ir(**inp)(stage="hlo")
    assert hlo.count('custom_call_target="tfrnn_block_call"') == 2  # forward, exact gradient
    assert "while(" not in hlo


def test_block_lstm_under_jit_matches_stock():
    # (every step: stock leaves the outputs past seq_len_max uninitialised, SEMANTICS.md §5)
    inp = _lstm_inputs(tf.float32, seed=1)
    f = lambda **k: raw_ops.BlockLSTM(seq_len_max=5, **k, use_peephole=True)  # noqa: E731
    stock = tf.raw_ops.BlockLSTM(seq_len_max=tf.constant(5, tf.int64), **inp, use_peephole=True)
    _close(tf.function(f, jit_compile=True)(**inp), stock, tf.float32, "vs stock")


@pytest.mark.parametrize("name", ["BlockLSTMGrad", "BlockLSTMGradV2"])
def test_raw_block_lstm_grad_ops_under_jit(name):
    inp = _lstm_inputs(tf.float64, seed=2)
    fwd = raw_ops.BlockLSTMV2 if name.endswith("V2") else raw_ops.BlockLSTM
    outs = fwd(seq_len_max=4, **inp, use_peephole=True)
    rng = np.random.default_rng(3)
    g = lambda: tf.constant(rng.standard_normal((5, 3, 6)), tf.float64)  # noqa: E731
    args = dict(inp, **dict(zip("i cs f o ci co h".split(), outs)), cs_grad=g(), h_grad=g())
    op = getattr(raw_ops, name)
    want = op(seq_len_max=4, **args, use_peephole=True)
    got = tf.function(lambda **k: op(seq_len_max=4, **k, use_peephole=True),
                      jit_compile=True)(**args)
    _close(got, want, tf.float64, name)


def test_lstm_block_cell_and_its_gradient_under_jit():
    inp = _lstm_inputs(tf.float32, cell=True, seed=4)
    f = _lstm_fwd_and_grads(lambda **k: raw_ops.LSTMBlockCell(**k, use_peephole=True))
    _close(tf.function(f, jit_compile=True)(**inp), tf.function(f)(**inp), tf.float32, "cell")


def test_seq_len_max_is_checked_at_run_time():
    inp = _lstm_inputs(tf.float32)
    f = tf.function(lambda n, **k: raw_ops.BlockLSTM(seq_len_max=n, **k), jit_compile=True)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"seq_len_max must be in \[0, "):
        f(tf.constant(9, tf.int64), **inp)


@pytest.mark.parametrize("B,H", [(0, 4), (3, 0)])
def test_block_lstm_empty_problems_under_jit(B, H):
    inp = _lstm_inputs(tf.float32, B=B, H=H)
    f = _lstm_fwd_and_grads(lambda **k: raw_ops.BlockLSTM(seq_len_max=5, **k))
    _close(tf.function(f, jit_compile=True)(**inp), tf.function(f)(**inp), tf.float32,
           f"B={B} H={H}")


def test_raw_lstm_block_cell_grad_under_jit():
    inp = _lstm_inputs(tf.float64, cell=True, seed=6)
    outs = raw_ops.LSTMBlockCell(**inp, use_peephole=True)
    rng = np.random.default_rng(7)
    g = lambda: tf.constant(rng.standard_normal((3, 6)), tf.float64)  # noqa: E731
    args = dict(inp, **dict(zip("i cs f o ci co".split(), outs[:6])), cs_grad=g(), h_grad=g())
    op = lambda **k: raw_ops.LSTMBlockCellGrad(**k, use_peephole=True)  # noqa: E731
    _close(tf.function(op, jit_compile=True)(**args), op(**args), tf.float64,
           "LSTMBlockCellGrad")
