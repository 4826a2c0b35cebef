"""Bad input to the six LSTM block ops (eager mode): every wrong rank, mismatched size, empty
batch, out-of-range seq_len_max and wrong dtype raises tf.errors.InvalidArgumentError whose
message names the offending input, and the process keeps working afterwards.

Stock TF aborts the process on several of these (docs/SEMANTICS.md §2.4, §2.8, §5 #4, #8); the one
test that shows it runs stock in a subprocess.
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

import lstm_util as U

F32 = tf.float32
T, B, I, C = 4, 2, 3, 5            # all distinct, so a wrong dimension never matches by chance


def _valid_args(op, rng, T=T, B=B, I=I, C=C):
    args = {}
    for n, shape in U.input_shapes(op, T, B, I, C).items():
        if n == "seq_len_max":
            args[n] = U.slm_tensor(T)
        elif n in U.BLOCK_ACT_NAMES:
            args[n] = U.to_tensor(rng.uniform(0.05, 0.95, size=shape), F32)
        else:
            args[n] = U.to_tensor(0.5 * rng.normal(size=shape), F32)
    return args


def _call(ours, op, args, use_peephole=True):
    return getattr(ours, op)(**args, use_peephole=use_peephole)


def _assert_still_works(ours, op, rng):
    outs = _call(ours, op, _valid_args(op, rng))
    for o in outs:
        assert np.all(np.isfinite(U.to_numpy(o)))


def _word(name):
    return rf"\b{name}\b"


# ---------------------------------------------------------------------------------------------
# the catalogue: (op, case id, mutate(args, rng) -> args, regex the message must match, peephole)
# ---------------------------------------------------------------------------------------------

def _replace(name, shape_fn):
    def mutate(args, rng):
        shape = shape_fn(tuple(args[name].shape))
        return dict(args, **{name: U.to_tensor(rng.normal(size=shape), F32)})
    return mutate


def _rank_up(name):
    def mutate(args, rng):
        return dict(args, **{name: tf.expand_dims(args[name], 0)})
    return mutate


def _rank_down(name):
    def mutate(args, rng):
        return dict(args, **{name: args[name][0]})
    return mutate


def _cast(name, dtype):
    def mutate(args, rng):
        return dict(args, **{name: tf.cast(args[name], dtype)})
    return mutate


def _set_slm(value):
    def mutate(args, rng):
        return dict(args, seq_len_max=U.slm_tensor(value))
    return mutate


def _empty_batch(op):
    def mutate(args, rng):
        return _valid_args(op, rng, B=0)
    return mutate


def _inc(axis, by=1):
    def shape_fn(shape):
        s = list(shape)
        s[axis] += by
        return tuple(s)
    return shape_fn


def _catalogue():
    cases = []

    def add(op, cid, mutate, regex, peep=True):
        cases.append(pytest.param(op, mutate, regex, peep, id=f"{op}-{cid}"))

    for op in U.ALL_OPS:
        blk, grad = U.is_block(op), U.is_grad(op)
        shapes = U.input_shapes(op, T, B, I, C)
        # wrong rank, every input
        for n in U.OP_INPUTS[op]:
            add(op, f"rank+1-{n}", _rank_up(n), _word(n))
            if len(shapes[n]) >= 1:
                add(op, f"rank-1-{n}", _rank_down(n), _word(n))
        # mismatched sizes (only inputs whose size is over-determined by the others)
        add(op, "cs_prev-batch", _replace("cs_prev", _inc(0)), _word("cs_prev"))
        add(op, "h_prev-batch", _replace("h_prev", _inc(0)), _word("h_prev"))
        add(op, "h_prev-cells", _replace("h_prev", _inc(1)), _word("h_prev"))
        add(op, "w-rows", _replace("w", _inc(0)), _word("w"))
        add(op, "w-cols", _replace("w", _inc(1)), _word("w"))
        add(op, "b-len", _replace("b", _inc(0)), _word("b"))
        for n, by in (("wci", 1), ("wcf", -1), ("wco", 1)):
            for peep in (True, False):
                add(op, f"{n}-len{by:+d}-peep{int(peep)}", _replace(n, _inc(0, by)), _word(n),
                    peep)
        if grad:
            tail = -1
            for n in (U.BLOCK_ACT_NAMES if blk else U.ACT_NAMES) + ("cs_grad", "h_grad"):
                add(op, f"{n}-cells", _replace(n, _inc(tail)), _word(n))
            bax = 1 if blk else 0
            add(op, "cs_grad-batch", _replace("cs_grad", _inc(bax)), _word("cs_grad"))
            add(op, "h_grad-batch", _replace("h_grad", _inc(bax)), _word("h_grad"))
            if blk:
                add(op, "cs_grad-time+1", _replace("cs_grad", _inc(0)), _word("cs_grad"))
                add(op, "h_grad-time-1", _replace("h_grad", _inc(0, -1)), _word("h_grad"))
                add(op, "i-time+1", _replace("i", _inc(0)), _word("i"))
        # empty batch: only LSTMBlockCell rejects it (as stock does); the other ops compute an
        # empty result (test_catalogue.py, test_zero_size_matches_stock)
        if op == "LSTMBlockCell":
            add(op, "empty-batch", _empty_batch(op), _word("x"))
        # seq_len_max out of range
        if blk:
            for v in (-1, T + 1, 1 << 40):
                add(op, f"seq_len_max={v}", _set_slm(v), _word("seq_len_max"))
        # wrong dtype: x is float32, the offending input is not
        for n in U.OP_INPUTS[op]:
            if n == "seq_len_max":
                add(op, "dtype-seq_len_max-int32", _cast(n, tf.int32), _word(n))
            elif n != "x":
                add(op, f"dtype-{n}-float64", _cast(n, tf.float64), _word(n))
        add(op, "dtype-cs_prev-float16", _cast("cs_prev", tf.float16), _word("cs_prev"))
    return cases


CASES = _catalogue()


@pytest.mark.parametrize("op,mutate,regex,peep", CASES)
def test_bad_input(ours, rng, op, mutate, regex, peep):
    args = mutate(_valid_args(op, rng), rng)
    with pytest.raises(tf.errors.InvalidArgumentError, match=regex):
        _call(ours, op, args, use_peephole=peep)
    _assert_still_works(ours, op, rng)          # the process (and the op) survive


@pytest.mark.parametrize("op", U.ALL_OPS)
def test_valid_args_are_valid(ours, rng, op):
    """The unmutated arguments of the catalogue run (so each failure above is the mutation's)."""
    for peep in (True, False):
        outs = _call(ours, op, _valid_args(op, rng), use_peephole=peep)
        for o in outs:
            assert o.dtype == F32
            assert np.all(np.isfinite(U.to_numpy(o)))


@pytest.mark.parametrize("op", ["BlockLSTM", "BlockLSTMV2", "BlockLSTMGrad", "BlockLSTMGradV2"])
@pytest.mark.parametrize("slm", [0, T])
def test_seq_len_max_bounds_are_valid(ours, rng, op, slm):
    """0 and T are the ends of the valid range."""
    args = dict(_valid_args(op, rng), seq_len_max=U.slm_tensor(slm))
    outs = _call(ours, op, args)
    for o in outs:
        assert np.all(np.isfinite(U.to_numpy(o)))


def test_stock_aborts_on_out_of_range_seq_len_max():
    """Documents why ours validates: stock TF 2.21 BlockLSTM with seq_len_max > T aborts the
    process (CHECK failure in Tensor::Slice).  Run in a subprocess; needs no plugin."""
    code = textwrap.dedent(f"""
        import tensorflow as tf
        T, B, I, C = {T}, {B}, {I}, {C}
        tf.raw_ops.BlockLSTM(
            seq_len_max=tf.constant(T + 1, tf.int64), x=tf.zeros([T, B, I]),
            cs_prev=tf.zeros([B, C]), h_prev=tf.zeros([B, C]), w=tf.zeros([I + C, 4 * C]),
            wci=tf.zeros([C]), wcf=tf.zeros([C]), wco=tf.zeros([C]), b=tf.zeros([4 * C]))
        print("SURVIVED")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert proc.returncode != 0 and "SURVIVED" not in proc.stdout, (
        "stock TF no longer aborts here; update docs/SEMANTICS.md §5 #4")
