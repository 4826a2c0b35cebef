"""The forward's fused-input path (types.h RnnFusesInput: small weights, a batch too large for
the pipelined chain, every sequence full length): [x_t, h_{t-1}] · [W; R] per step and unit
block instead of a separate input projection. Batches of 40 and 70 rows take it on any pool;
the results are compared with stock BlockLSTM and with the float64 CudnnRNN reference. The
BlockLSTM case of 16 rows with I = 128, H = 256 has weights past the L2 rule ((128 + 256) x
1024 floats): the AVX2 engine fuses them too (RnnFusesInput's `wide`), in batch blocks on two
or more threads; the AVX-512 engine projects the input apart."""
import numpy as np
import pytest
import tensorflow as tf

import cudnn_reference as cref
from tf_rnn_ops import raw_ops as R


@pytest.mark.parametrize("T,B,I,H", [(5, 40, 8, 8), (6, 70, 16, 12), (5, 16, 128, 256)])
@pytest.mark.parametrize("peephole", [False, True])
def test_block_lstm_fused_input_vs_stock(T, B, I, H, peephole):
    rng = np.random.default_rng(T * B + peephole)
    f32 = lambda *s, scale=1.0: (rng.normal(size=s) * scale).astype(np.float32)
    # Pre-activations of about unit size at any width (float32 sums of I + H products).
    w_scale = 0.3 if I + H <= 32 else 1.2 / np.sqrt(I + H)
    kw = dict(seq_len_max=np.int64(T), x=f32(T, B, I), cs_prev=f32(B, H), h_prev=f32(B, H),
              w=f32(I + H, 4 * H, scale=w_scale), wci=f32(H), wcf=f32(H), wco=f32(H), b=f32(4 * H),
              forget_bias=1.0, cell_clip=0.5, use_peephole=peephole)
    for ours, stock in zip(R.BlockLSTM(**kw), tf.raw_ops.BlockLSTM(**kw)):
        np.testing.assert_allclose(ours.numpy(), stock.numpy(), rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("mode", ["lstm", "rnn_tanh", "rnn_relu", "gru"])
@pytest.mark.parametrize("direction", ["unidirectional", "bidirectional"])
def test_cudnn_rnn_fused_input_vs_reference(mode, direction):
    rng = np.random.default_rng(7)
    T, B, I, H, L = 5, 40, 6, 8, 2
    D = 2 if direction == "bidirectional" else 1
    kw = dict(mode=mode, num_layers=L, num_units=H, input_size=I, direction=direction)
    p = cref.random_params(rng, **kw)
    x, h, c = rng.normal(size=(T, B, I)), rng.normal(size=(L * D, B, H)), rng.normal(
        size=(L * D, B, H))
    ref = cref.cudnn_rnn_ref(x, h, c, p, **kw)
    f = lambda a: a.astype(np.float32)
    out = R.CudnnRNN(input=f(x), input_h=f(h), input_c=f(c), params=f(p), rnn_mode=mode,
                     direction=direction, is_training=True)
    for want, got in zip(ref[:3], out[:3]):
        if want is not None:
            np.testing.assert_allclose(got.numpy(), np.asarray(want), rtol=1e-5, atol=2e-6)
