"""XLA: the cuDNN RNN family's forward and backprop ops (TfRnn>CudnnRNN, V2, V3) compile inside
tf.function(jit_compile=True) as one custom call each (cc/xla/cudnn_rnn_xla.cc).

References: the float64 reference (cudnn_reference.py) and the same ops without XLA (their CPU
kernels), forward and gradients (the registered gradient's CudnnRNNBackprop[V2|V3]).
"""

import numpy as np
import pytest
import tensorflow as tf

import tf_rnn_ops  # noqa: F401
from tf_rnn_ops import raw_ops
from xla_test_util import assert_all_close, needs_xla
from test_cudnn_rnn import call_fwd, make_inputs, model_kw, ref_fwd

pytestmark = needs_xla

F16, F32, F64 = tf.float16, tf.float32, tf.float64
TOL = {F64: 1e-10, F32: 2e-5, F16: 1e-2}


def _close(got, want, tol, what):
    assert_all_close([got], [want], tol, what)


CASES = [
    # mode, layers, units, input, direction, version, dtype, extra
    ("lstm", 1, 6, 4, "unidirectional", "V3", F32, {}),
    ("lstm", 2, 5, 3, "bidirectional", "V3", F64, {"time_major": False}),
    ("gru", 2, 5, 4, "unidirectional", "V3", F32, {"lengths": [6, 2, 0]}),
    ("rnn_tanh", 1, 4, 4, "bidirectional", "V2", F64, {"input_mode": "skip_input"}),
    ("rnn_relu", 1, 5, 3, "unidirectional", "", F32, {}),
    ("lstm", 1, 6, 4, "unidirectional", "V3", F32, {"num_proj": 3}),
    ("lstm", 1, 6, 4, "unidirectional", "V3", F16, {}),
    # Batches that the forward runs in batch blocks on 2-4 threads (the workspace the custom
    # call allocates covers them; in training the blocks write the reserve in place).
    ("lstm", 2, 12, 5, "bidirectional", "V3", F64, {"batch": 19}),
    ("rnn_tanh", 1, 12, 5, "unidirectional", "V3", F32, {"batch": 40}),
]


@pytest.mark.parametrize("case", CASES, ids=[
    f"{c[0]}-L{c[1]}-{c[4][:3]}-{c[5] or 'V1'}-{c[6].name}-"
    f"{'-'.join(f'{k}{v}' if k == 'batch' else k for k, v in c[7].items()) or 'plain'}"
    for c in CASES])
def test_cudnn_ops_under_jit(case):
    mode, L, H, I, direction, version, dtype, extra = case
    extra = dict(extra)
    tm = extra.pop("time_major", True)
    lengths = extra.pop("lengths", None)
    kw = model_kw(mode, L, H, I, direction=direction, num_proj=extra.pop("num_proj", 0),
                  input_mode=extra.pop("input_mode", "linear_input"))
    T, B = 6, extra.pop("batch", 3)
    x, h0, c0, params = make_inputs(np.random.default_rng(L * 10 + H), kw, T, B, time_major=tm)
    args = [tf.constant(v, dtype) for v in (x, h0, c0, params)]
    v3 = {"seq_lengths": lengths, "time_major": tm} if version == "V3" else {}

    def f(x, h0, c0, params):
        with tf.GradientTape() as tape:
            tape.watch([x, h0, c0, params])
            outs = call_fwd(raw_ops, version, x, h0, c0, params, kw, dtype, **v3)
            loss = (tf.reduce_sum(tf.cast(outs[0], tf.float32) ** 2)
                    + tf.reduce_sum(tf.cast(outs[1], tf.float32) * 1.5)
                    + (tf.reduce_sum(tf.cast(outs[2], tf.float32)) if mode == "lstm" else 0.0))
        grads = tape.gradient(loss, [x, h0, c0, params])
        if mode != "lstm":
            grads[2] = tf.zeros_like(c0)
        return list(outs[:3]) + grads

    want = tf.function(f)(*args)
    jit = tf.function(f, jit_compile=True)
    got = jit(*args)
    for k, (g, w) in enumerate(zip(got, want)):
        _close(g, w, TOL[dtype], f"{version} output {k}")
    if lengths is None and tm and dtype == F64:  # also the float64 reference, forward
        ref = ref_fwd(x, h0, c0, params, kw)
        _close(got[0], ref[0], 1e-10, "output vs float64 reference")
    hlo = jit.experimental_get_compiler_ir(*args)(stage="hlo")
    assert 'custom_call_target="tfrnn_rnn_forward"' in hlo
    assert 'custom_call_target="tfrnn_rnn_backward"' in hlo
    assert "while(" not in hlo


def test_inference_outputs_match_the_kernel():
    kw = model_kw("gru", 1, 5, 3)
    x, h0, c0, params = make_inputs(np.random.default_rng(3), kw, 4, 2)
    args = [tf.constant(v, F32) for v in (x, h0, c0, params)]

    def f(*a):
        return call_fwd(raw_ops, "V3", *a, kw, F32, is_training=False)
    want, got = tf.function(f)(*args), tf.function(f, jit_compile=True)(*args)
    assert len(got) == len(want) == 5
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and g.shape == w.shape, f"output {k}"
        _close(g, w, TOL[F32], f"output {k}")


def test_wrong_params_size_fails_at_compile_time():
    kw = model_kw("lstm", 1, 4, 3)
    x, h0, c0, params = make_inputs(np.random.default_rng(4), kw, 3, 2)
    f = tf.function(lambda: call_fwd(raw_ops, "V3", x, h0, c0, params[:-1], kw, F32),
                    jit_compile=True)
    with pytest.raises(tf.errors.InvalidArgumentError, match="params has"):
        f()


# --- the params converters: plain HLO, sizes as compile-time constants ----------------------

CONVERTER_CASES = [
    # mode, layers, units, input, direction, input_mode, num_proj
    ("lstm", 2, 5, 3, "bidirectional", "linear_input", 0),
    ("gru", 1, 4, 4, "unidirectional", "skip_input", 0),
    ("rnn_relu", 3, 3, 2, "bidirectional", "linear_input", 0),
    ("lstm", 1, 6, 4, "unidirectional", "linear_input", 3),
]


@pytest.mark.parametrize("case", CONVERTER_CASES,
                         ids=lambda c: f"{c[0]}-L{c[1]}-{c[4][:3]}-P{c[6]}")
@pytest.mark.parametrize("v2", [False, True], ids=["V1", "V2"])
def test_params_converters_under_jit(case, v2):
    """ParamsSize, ParamsToCanonical and CanonicalToParams under jit equal their CPU kernels,
    and a round trip through both converters gives params back."""
    mode, L, H, I, direction, input_mode, P = case
    if P and not v2:
        pytest.skip("num_proj is a V2 attr")
    attrs = dict(rnn_mode=mode, direction=direction, input_mode=input_mode)
    if P:
        attrs["num_proj"] = P
    sizes = dict(num_layers=L, num_units=H, input_size=I)
    size = tf.function(lambda: raw_ops.CudnnRNNParamsSize(**sizes, T=F64, S=tf.int64, **attrs),
                       jit_compile=True)()
    assert size.dtype == tf.int64
    want_size = raw_ops.CudnnRNNParamsSize(**sizes, T=F64, S=tf.int64, **attrs)
    np.testing.assert_array_equal(size, want_size)
    params = tf.constant(np.random.default_rng(L * H).standard_normal(int(want_size[0])), F64)
    K = {"lstm": 4, "gru": 3}.get(mode, 1)
    D = 2 if direction == "bidirectional" else 1
    n_w, n_b = L * D * (2 * K + (1 if P else 0)), L * D * 2 * K
    if v2:
        to_c = lambda p: raw_ops.CudnnRNNParamsToCanonicalV2(  # noqa: E731
            **sizes, params=p, num_params_weights=n_w, num_params_biases=n_b, **attrs)
        to_p = lambda w, b: raw_ops.CudnnRNNCanonicalToParamsV2(  # noqa: E731
            **sizes, weights=w, biases=b, **attrs)
    else:
        assert n_w == n_b
        to_c = lambda p: raw_ops.CudnnRNNParamsToCanonical(  # noqa: E731
            **sizes, params=p, num_params=n_w, **attrs)
        to_p = lambda w, b: raw_ops.CudnnRNNCanonicalToParams(  # noqa: E731
            **sizes, weights=w, biases=b, **attrs)
    w, b = tf.function(to_c, jit_compile=True)(params)
    want_w, want_b = to_c(params)
    assert_all_close(list(w) + list(b), list(want_w) + list(want_b), 0, "ParamsToCanonical")
    back = tf.function(to_p, jit_compile=True)(list(want_w), list(want_b))
    assert_all_close([back, back], [to_p(list(want_w), list(want_b)), params], 0,
                     "CanonicalToParams")
    hlo = tf.function(to_p, jit_compile=True).experimental_get_compiler_ir(
        list(want_w), list(want_b))(stage="hlo")
    assert "custom_call" not in hlo


def test_converter_bad_sizes_fail_at_compile_time():
    f = tf.function(lambda p: raw_ops.CudnnRNNParamsToCanonical(
        num_layers=1, num_units=4, input_size=3, params=p, num_params=8), jit_compile=True)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"params has 5 elements"):
        f(tf.zeros([5]))
    g = tf.function(lambda n: raw_ops.CudnnRNNParamsSize(
        num_layers=n, num_units=4, input_size=3, T=F32, S=tf.int32), jit_compile=True)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"num_layers must be positive"):
        g(tf.constant(0))
