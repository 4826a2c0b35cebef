"""Bitwise repeatability of the sequence engine: the same call gives the same bits call after
call, and while several Python threads call the op at once (each call then shares TensorFlow's
intra-op pool with the others, so its step loop's items run on whichever threads are free).

The step loop (cc/engine/pool_helpers.h StepLoop) lets each thread run its own unit blocks first
and any block nobody has claimed next; an item computes the same thing on any thread, so the
results must not depend on the schedule. The sizes reach the step loop over several unit
blocks (B above the pipelined chain's 32 rows), a block whose last panel is a masked partial
packet (H 300), the fused input projection (small weights), and the pipelined chain (B 6), in
training (forward with a reserve, then the backward) and at inference.
"""
import threading

import numpy as np
import pytest
import tensorflow as tf

import test_cudnn_rnn as C
import test_cudnn_rnn_grads as G

F32 = tf.float32
# (mode, T, B, I, H)
CASES = [("lstm", 12, 40, 24, 200), ("gru", 12, 40, 24, 300), ("lstm", 12, 40, 16, 64),
         ("gru", 30, 6, 12, 72)]
THREADS, CALLS = 4, 3


def _step(ours, rng, mode, T, B, I, H):
    """A tf.function running CudnnRNNV3 forward (training) and CudnnRNNBackpropV3 and the
    inference forward, returning every output and gradient."""
    kw = C.model_kw(mode, 1, H, I)
    x, h0, c0, params = [tf.constant(v, F32) for v in C.make_inputs(rng, kw, T, B)]
    lens = tf.fill([B], T)
    a = C.attrs_of(kw)
    dy = tf.constant(rng.normal(size=(T, B, H)), F32)
    dh = tf.constant(rng.normal(size=(1, B, H)), F32)
    dc = tf.constant(rng.normal(size=(1, B, H)) if mode == "lstm" else np.zeros((1, B, H)), F32)

    @tf.function
    def step():
        common = dict(input=x, input_h=h0, input_c=c0, params=params, sequence_lengths=lens,
                      num_proj=0, time_major=True, **a)
        y, hn, cn, reserve, host = ours.CudnnRNNV3(**common, is_training=True)
        grads = ours.CudnnRNNBackpropV3(
            **common, output=y, output_h=hn, output_c=cn, output_backprop=dy,
            output_h_backprop=dh, output_c_backprop=dc, reserve_space=reserve,
            host_reserved=host)
        infer = ours.CudnnRNNV3(**common, is_training=False)[:3]
        return [y, hn, cn] + list(grads) + list(infer)
    return step


def _bits(outs):
    return [o.numpy().copy() for o in outs]


def _assert_same(got, want, what):
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(g, w, err_msg=f"{what}: output {k}")


@pytest.mark.parametrize("mode,T,B,I,H", CASES, ids=[f"{c[0]}-B{c[2]}-H{c[4]}" for c in CASES])
def test_same_bits_alone_and_concurrently(ours, rng, mode, T, B, I, H):
    step = _step(ours, rng, mode, T, B, I, H)
    want = _bits(step())
    for _ in range(CALLS):
        _assert_same(_bits(step()), want, "repeated call")
    results, errors = [], []

    def worker():
        try:
            for _ in range(CALLS):
                results.append(_bits(step()))
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)
    threads = [threading.Thread(target=worker) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(results) == THREADS * CALLS
    for r in results:
        _assert_same(r, want, "concurrent call")


def test_outputs_match_reference(ours, rng):
    """The repeatable bits are also the right ones: the step-loop case against the float64
    reference (forward and every gradient)."""
    kw = C.model_kw("lstm", 1, 200, 24)
    x, h0, c0, params = C.make_inputs(rng, kw, 12, 40)
    outs = C.call_fwd(ours, "V3", x, h0, c0, params, kw, F32)
    C.assert_fwd(outs, C.ref_fwd(x, h0, c0, params, kw), "lstm", C.FWD_TOL[F32])
    dy, dh, dc = G.upstream(rng, outs, "lstm")
    _, want = G.ref_grads(x, h0, c0, params, kw, dy, dh, dc)
    got = G.call_backprop(ours, "V3", x, h0, c0, params, outs, dy, dh, dc, kw, F32)
    G.assert_grads(got, want, "lstm", G.GRAD_TOL[F32])
