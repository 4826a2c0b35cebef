"""Child script of test_boundary_casts.py: the 16-bit ops' conversions at the boundary
(half and bfloat16 tensors to the engine's float and back, through the engine's vectorised
conversions) against stock tf.cast, bit for bit. Run with TF_RNN_OPS_BF16_GEMM=0, so that
the bfloat16 ops compute in float exactly as the float32 op does: then ours in dtype D on
inputs x must equal tf.cast(ours in float32 on tf.cast(x, float32), D) element for element,
NaN for NaN. Sizes on both sides of the conversions' inline limit (2^19 elements)."""
import sys

import numpy as np
import tensorflow as tf

from child_run import run_cases
import tf_rnn_ops.raw_ops as ours


def _same(a, b, what):
    a, b = a.numpy().astype(np.float32), b.numpy().astype(np.float32)
    both_nan = np.isnan(a) & np.isnan(b)
    bad = ~(both_nan | (a.view(np.uint32) == b.view(np.uint32)))
    assert not bad.any(), (f"{what}: {int(bad.sum())} of {a.size} differ, e.g. ours "
                           f"{a[bad][:4]} against tf.cast {b[bad][:4]}")


def _case(dtype, mode, T, B, I, H, training, special):
    def run():
        rng = np.random.default_rng(T * 131 + H)
        size = int(ours.CudnnRNNParamsSize(num_layers=1, num_units=H, input_size=I,
                                           T=tf.float32, S=tf.int32, rnn_mode=mode)[0])
        x = rng.standard_normal((T, B, I)).astype(np.float32)
        if special:  # infinities, NaNs, denormals and huge values in the input
            flat = x.reshape(-1)
            flat[:6] = [np.inf, -np.inf, np.nan, 1e-40, -3e38, 3e38]
        h = rng.standard_normal((1, B, H)).astype(np.float32)
        c = rng.standard_normal((1, B, H)).astype(np.float32)
        p = (rng.standard_normal(size) / np.sqrt(I + H)).astype(np.float32)
        low = [tf.cast(v, dtype) for v in (x, h, c, p)]  # the op's 16-bit inputs
        wide = [tf.cast(v, tf.float32) for v in low]  # the same values in float32
        kw = dict(rnn_mode=mode, is_training=training)
        got = ours.CudnnRNN(input=low[0], input_h=low[1], input_c=low[2], params=low[3], **kw)
        want = ours.CudnnRNN(input=wide[0], input_h=wide[1], input_c=wide[2], params=wide[3],
                             **kw)
        for k, name in enumerate(("output", "output_h", "output_c")):
            _same(got[k], tf.cast(want[k], dtype), name)
    return run


def main():
    cases = []
    for dtype in (tf.bfloat16, tf.float16):
        for mode in ("lstm", "gru"):
            # y has T*B*H elements: 3*5*24 (inline) and 40*64*208 = 532480 (on the pool).
            for (T, B, I, H) in ((3, 5, 7, 24), (40, 64, 33, 208)):
                for training in (False, True):
                    cases.append((f"{dtype.name} {mode} {T}x{B}x{I}x{H} training={training}",
                                  _case(dtype, mode, T, B, I, H, training, special=False)))
            cases.append((f"{dtype.name} {mode} specials",
                          _case(dtype, mode, 4, 3, 5, 16, False, special=True)))
    return run_cases(cases, "BOUNDARY")


if __name__ == "__main__":
    sys.exit(main())
