"""Batch-major sequences at inference (RnnFwdArgs::batch_major): the CPU engine reads x
[B, T, I] and writes y [B, T, D·Hs] itself, with no transposes, and (not pipelined) keeps its
gate rows batch-major too. CudnnRNNV3(time_major=False, is_training=False) takes that road;
here against the float64 reference (tests/cudnn_reference.py) in every engine road the
forward has: the unpacked steps (T·B <= 32), the pipelined chain (B <= 32, B·H <= 4096, R
in 512 KiB: the input projected per time row from the batch-major x), a small batch with a
larger R (no pipelining), the fused input projection (small weights), the plain step loop
(large weights), and the projection (num_proj); with and
without sequence lengths, one and two directions and layers, every mode.
The Keras layers' inference (tests/test_keras_layers.py, stock Keras as reference) and XLA
(tests/test_xla.py, test_xla_cudnn.py) take the same road.
"""

import numpy as np
import pytest
import tensorflow as tf

import test_cudnn_rnn as C
from xla_test_util import needs_xla

F32, F64 = tf.float32, tf.float64

# name: (T, B, I, H): which road the forward takes on two threads (rnn_cpu.cc LayerForward)
ROADS = {
    "unpacked": (4, 5, 6, 8),    # T·B <= 32: products on the weights in place
    "pipelined": (9, 6, 5, 16),  # B <= 32, B·H <= 4096: chain beside the input projection
    # B <= 32 but R over 2^17 elements (types.h FwdChainPipelined): lstm / gru split over both
    # threads (StepLoop), rnn fused
    "large_r": (6, 8, 20, 370),
    "fused": (7, 40, 6, 16),     # (I + H)·K·H <= 2^18: [x_t, h]·[W; R] per step (not gru)
    "step_loop": (5, 40, 300, 400),  # large weights: one input product, then the steps
}
CASES = [(road, mode, direction, L, lengths)
         for road in ROADS for mode in C.MODES for direction in C.DIRS
         for L, lengths in ((1, False), (2, True))]


def _check(ours, rng, T, B, I, H, mode, direction, L, lengths, num_proj=0):
    kw = C.model_kw(mode, L, H, I, "linear_input", direction, num_proj=num_proj)
    x, h0, c0, params = C.make_inputs(rng, kw, T, B, time_major=False)
    lens = C._lengths(rng, B, T) if lengths else None  # with 0 and T
    for dtype in (F64, F32):
        outs = C.call_fwd(ours, "V3", x, h0, c0, params, kw, dtype, seq_lengths=lens,
                          time_major=False, is_training=False)
        ref = C.ref_fwd(x, h0, c0, params, kw, dtype, seq_lengths=lens, time_major=False)
        C.assert_fwd(outs, ref, mode, C.FWD_TOL[dtype], prefix=f"{dtype.name}: ")
        if lens is not None:
            C._assert_zero_past_lengths(outs[0], lens, time_major=False)


@pytest.mark.parametrize("road,mode,direction,L,lengths", CASES,
                         ids=[f"{r}-{m}-{d[:3]}-L{L}{'-len' if n else ''}"
                              for r, m, d, L, n in CASES])
def test_batch_major_inference_vs_reference(ours, rng, road, mode, direction, L, lengths):
    T, B, I, H = ROADS[road]
    _check(ours, rng, T, B, I, H, mode, direction, L, lengths)


@pytest.mark.parametrize("direction", C.DIRS)
def test_batch_major_inference_projection(ours, rng, direction):
    _check(ours, rng, 6, 7, 5, 12, "lstm", direction, 2, True, num_proj=4)


def test_batch_major_inference_equals_time_major(ours, rng):
    """The same call in either layout, bit for bit (same products in the same order)."""
    T, B, I, H = ROADS["step_loop"]
    kw = C.model_kw("lstm", 1, H, I)
    x, h0, c0, params = C.make_inputs(rng, kw, T, B, time_major=True)
    tm = C.call_fwd(ours, "V3", x, h0, c0, params, kw, F32, time_major=True,
                    is_training=False)
    # time_major=False reads input_h [B, L·D, H] as [L·D, B, H] memory (the stock quirk)
    bm = C.call_fwd(ours, "V3", np.transpose(x, [1, 0, 2]), np.reshape(h0, [B, 1, H]),
                    np.reshape(c0, [B, 1, H]), params, kw, F32, time_major=False,
                    is_training=False)
    np.testing.assert_array_equal(np.transpose(bm[0].numpy(), [1, 0, 2]), tm[0].numpy())
    for k in (1, 2):
        np.testing.assert_array_equal(np.reshape(bm[k].numpy(), [1, B, H]), tm[k].numpy())


XLA_CASES = [("lstm", "unidirectional", "step_loop", False),
             ("gru", "bidirectional", "pipelined", True),
             ("rnn_relu", "unidirectional", "fused", True)]


@needs_xla
@pytest.mark.parametrize("mode,direction,road,lengths", XLA_CASES,
                         ids=[f"{m}-{d[:3]}-{r}{'-len' if n else ''}" for m, d, r, n in XLA_CASES])
def test_batch_major_inference_under_xla(ours, rng, mode, direction, road, lengths):
    """Under jit_compile the forward's custom call takes x and gives y batch-major: no
    transpose in the HLO, and the float64 reference's results."""
    T, B, I, H = ROADS[road]
    kw = C.model_kw(mode, 1, H, I, "linear_input", direction)
    x, h0, c0, params = C.make_inputs(rng, kw, T, B, time_major=False)
    lens = C._lengths(rng, B, T) if lengths else None
    args = [tf.constant(v, F64) for v in (x, h0, c0, params)]
    f = tf.function(lambda *a: C.call_fwd(ours, "V3", *a, kw, F64, seq_lengths=lens,
                                          time_major=False, is_training=False)[:3],
                    jit_compile=True)
    got = f(*args)
    ref = C.ref_fwd(x, h0, c0, params, kw, F64, seq_lengths=lens, time_major=False)
    C.assert_fwd(got, ref, mode, C.FWD_TOL[F64])
    hlo = f.experimental_get_compiler_ir(*args)(stage="hlo")
    assert 'custom_call_target="tfrnn_rnn_forward"' in hlo
    assert "transpose(" not in hlo
