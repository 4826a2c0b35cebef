"""XLA: the MPSGraph-style LSTM and GRU (TfRnn>LSTM, LSTMGradients, GRU, GRUGradients) compile
inside tf.function(jit_compile=True) as stacked-RNN custom calls with MPSGraph's operands packed
and unpacked in HLO (cc/xla/mps_rnn_xla.cc). Forward outputs, the raw gradients ops and tape
gradients through the registered gradient equal the TensorFlow kernels' (themselves checked
against float64 references in test_mps_lstm.py / test_mps_gru.py) for every descriptor option
that changes the packing: bidirectional, reverse, no input_weight, masks of either rank,
peephole, produce_cell, secondary bias, gate orders; float64 ones also against the reference.
"""

import numpy as np
import pytest
import tensorflow as tf

import tf_rnn_ops  # noqa: F401
from tf_rnn_ops import mps
from xla_test_util import assert_all_close, needs_xla

pytestmark = needs_xla

TOL = {tf.float64: 1e-12, tf.float32: 2e-5, tf.float16: 5e-3, tf.bfloat16: 3e-2}


def _operands(gates, dtype, T=4, B=3, I=5, H=4, D=1, W=True, bias=True, state=True, cell=False,
              mask=None, peephole=False, bias2=False, seed=0):
    rng = np.random.default_rng(seed)
    c = lambda *s: tf.constant(rng.standard_normal(s) * 0.5, dtype)  # noqa: E731
    KH = gates * H
    k = dict(source=c(T, B, I if W else D * KH),
             recurrent_weight=c(KH, H) if D == 1 else c(2, KH, H))
    if W:
        k["input_weight"] = c(D * KH, I)
    if bias:
        k["bias"] = c(D * KH)
    if state:
        k["init_state"] = c(B, D * H)
    if cell:
        k["init_cell"] = c(B, D * H)
    if mask == "step":
        m = rng.uniform(0, 1.5, (T, B, D * H)) * (rng.uniform(size=(T, B, D * H)) > .2)
        k["mask"] = tf.constant(m, dtype)
    elif mask == "fixed":
        k["mask"] = tf.constant(rng.uniform(0, 1.5, (B, D * H)), dtype)
    if peephole:
        k["peephole"] = c(4 * H) if D == 1 else c(2, 4 * H)
    if bias2:
        k["secondary_bias"] = c(D * H)
    return k


def _loss_and_grads(fwd, desc, inputs):
    """Forward outputs and the tape gradients of a loss over every output, w.r.t. every operand."""
    def f(**k):
        wrt = list(k.values())
        with tf.GradientTape() as tape:
            tape.watch(wrt)
            outs = fwd(**k, descriptor=desc)
            # z_state has no gradient (MPSGraph's training state): leave it out of the loss.
            used = outs[:-1] if desc.training else outs
            loss = sum(tf.reduce_sum(tf.cast(o, tf.float32) * (j + 1) * tf.cast(o, tf.float32))
                       for j, o in enumerate(used))
        return list(outs) + tape.gradient(loss, wrt,
                                          unconnected_gradients=tf.UnconnectedGradients.ZERO)
    return f


LSTM_CASES = {
    "plain": (dict(), dict()),
    "bidi_cell_peephole": (dict(bidirectional=True, produce_cell=True, training=True),
                           dict(D=2, cell=True, peephole=True)),
    "reverse_step_mask": (dict(reverse=True, training=True, forget_gate_last=True),
                          dict(mask="step", cell=True)),
    "preprojected_fixed_mask": (dict(produce_cell=True, input_gate_activation="hard_sigmoid",
                                     activation="relu"),
                                dict(W=False, bias=False, state=False, mask="fixed",
                                     peephole=True)),
    "bidi_preprojected": (dict(bidirectional=True, training=True), dict(D=2, W=False, mask="step")),
}

GRU_CASES = {
    "plain": (dict(), dict()),
    "reset_after_bias2_bidi": (dict(reset_after=True, bidirectional=True, training=True),
                               dict(D=2, bias2=True, mask="step")),
    "reset_first_flip_reverse": (dict(reset_gate_first=True, flip_z=True, reverse=True),
                                 dict(state=False, mask="fixed")),
    "preprojected": (dict(training=True, update_gate_activation="hard_sigmoid"),
                     dict(W=False, bias=False)),
}


def _check(fwd, desc_cls, gates, case, dtype):
    desc_kw, op_kw = case
    desc = desc_cls(**desc_kw)
    inputs = _operands(gates, dtype, **op_kw)
    f = _loss_and_grads(fwd, desc, inputs)
    jit = tf.function(f, jit_compile=True)
    assert_all_close(jit(**inputs), tf.function(f)(**inputs), TOL[dtype], dtype.name)
    hlo = jit.experimental_get_compiler_ir(**inputs)(stage="hlo")
    assert hlo.count('custom_call_target="tfrnn_rnn_forward"') == 2  # forward; gradient's rerun
    assert hlo.count('custom_call_target="tfrnn_rnn_backward"') == 1
    assert " while(" not in hlo


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64, tf.float16, tf.bfloat16],
                         ids=lambda d: d.name)
@pytest.mark.parametrize("case", sorted(LSTM_CASES))
def test_lstm_and_its_gradient_under_jit(case, dtype):
    if dtype in (tf.float16, tf.bfloat16) and case != "bidi_cell_peephole":
        pytest.skip("half types: one case covers the conversions")
    _check(mps.lstm, mps.LSTMDescriptor, 4, LSTM_CASES[case], dtype)


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64, tf.bfloat16], ids=lambda d: d.name)
@pytest.mark.parametrize("case", sorted(GRU_CASES))
def test_gru_and_its_gradient_under_jit(case, dtype):
    if dtype == tf.bfloat16 and case != "reset_after_bias2_bidi":
        pytest.skip("half types: one case covers the conversions")
    _check(mps.gru, mps.GRUDescriptor, 3, GRU_CASES[case], dtype)


def test_raw_gradients_ops_under_jit_with_state_and_cell_gradients():
    """LSTMGradients called directly with every optional gradient (state, cell, cell sequence)."""
    desc = mps.LSTMDescriptor(produce_cell=True, training=True, bidirectional=True)
    k = _operands(4, tf.float64, D=2, cell=True, peephole=True, mask="fixed", seed=3)
    h, c, z = mps.lstm(**k, descriptor=desc)
    rng = np.random.default_rng(4)
    g = lambda t: tf.constant(rng.standard_normal(t.shape), tf.float64)  # noqa: E731
    args = dict(k, source_gradient=g(h), z_state=z, cell_output_fwd=c,
                state_gradient=g(k["init_state"]), cell_gradient=g(k["init_cell"]),
                cell_output_gradient=g(c))
    f = lambda **a: mps.lstm_gradients(**a, descriptor=desc)  # noqa: E731
    got = tf.function(f, jit_compile=True)(**args)
    assert len(got) == 7
    assert_all_close(got, f(**args), TOL[tf.float64], "LSTMGradients")


def test_raw_gru_gradients_op_under_jit():
    desc = mps.GRUDescriptor(reset_after=True, training=True)
    k = _operands(3, tf.float64, bias2=True, mask="step", seed=5)
    h, z = mps.gru(**k, descriptor=desc)
    rng = np.random.default_rng(6)
    args = dict(k, source_gradient=tf.constant(rng.standard_normal(h.shape), tf.float64),
                z_state=z, output_fwd=h,
                state_gradient=tf.constant(rng.standard_normal((3, 4)), tf.float64))
    f = lambda **a: mps.gru_gradients(**a, descriptor=desc)  # noqa: E731
    got = tf.function(f, jit_compile=True)(**args)
    assert len(got) == 6
    assert_all_close(got, f(**args), TOL[tf.float64], "GRUGradients")


def test_empty_batch_and_time_under_jit():
    for T, B in ((0, 3), (4, 0)):
        k = _operands(4, tf.float32, T=T, B=B, cell=True)
        desc = mps.LSTMDescriptor(produce_cell=True, training=True)
        f = lambda **a: mps.lstm(**a, descriptor=desc)  # noqa: E731
        assert_all_close(tf.function(f, jit_compile=True)(**k), f(**k), 1e-6, f"T={T} B={B}")


def test_bad_shapes_fail_at_compile_time_naming_the_operand():
    k = _operands(4, tf.float32)
    k["bias"] = tf.zeros([7])
    f = tf.function(lambda **a: mps.lstm(**a), jit_compile=True)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"TfRnn>LSTM.*bias"):
        f(**k)
    g = _operands(3, tf.float32, bias2=True)
    f = tf.function(lambda **a: mps.gru(**a), jit_compile=True)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"secondary_bias.*reset_after"):
        f(**g)


def test_optional_operand_given_twice_fails_naming_it():
    """An optional operand is a list of 0 or 1 tensors: two are an InvalidArgument naming it,
    from the TensorFlow kernel and from the XLA kernel (at compile time)."""
    from tf_rnn_ops._loader import load_library
    k = _operands(4, tf.float32)
    bias = k.pop("bias")
    lists = {n: [k.pop(n)] for n in ("input_weight", "init_state")}
    raw = lambda **a: load_library().tf_rnn_lstm(  # noqa: E731
        **a, bias=[bias, bias], init_cell=[], mask=[], peephole=[], **lists)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"TfRnn>LSTM: bias is optional"):
        raw(**k)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"TfRnn>LSTM: bias is optional"):
        tf.function(raw, jit_compile=True)(**k)
