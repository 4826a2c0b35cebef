"""Child of test_host_cache.py: BlockLSTM with outputs past glibc's 32 MB mmap ceiling (each
of its seven outputs 33.5 MB), called six times; prints the page faults of each of our calls
("FAULTS k n", the process's minor faults over the call), the pages of one call's outputs
("PAGES n"), and compares our outputs with stock BlockLSTM's on the first and last inputs.
The last call's outputs land in blocks that held the call before's, so an output element the
engine did not write would show the previous call's value (an O(1) error); the tolerances
allow 256 float32 steps summed in another order."""
import resource

import numpy as np
import tensorflow as tf

from tf_rnn_ops import raw_ops as R

T, B, I, H = 256, 4096, 8, 8  # T·B·H = 2^23 floats a output


def _compare(k, ours, stock, cases):
    """Our outputs against stock's; holds no tensor past its return."""
    for j, (o, s) in enumerate(zip(ours, stock)):
        try:
            np.testing.assert_allclose(o.numpy(), s.numpy(), rtol=1e-3, atol=1e-3)
            print("ok   call", k, "output", j, flush=True)
        except AssertionError as e:
            cases.append(f"call {k} output {j}: {str(e)[:600]}")


def main():
    rng = np.random.default_rng(3)
    f32 = lambda *s, scale=1.0: (rng.normal(size=s) * scale).astype(np.float32)
    fixed = dict(seq_len_max=np.int64(T), cs_prev=f32(B, H), h_prev=f32(B, H),
                 w=f32(I + H, 4 * H, scale=0.3), wci=f32(H), wcf=f32(H), wco=f32(H),
                 b=f32(4 * H), forget_bias=1.0, cell_clip=3.0, use_peephole=True)
    print("PAGES", 7 * T * B * H * 4 // 4096, flush=True)
    cases = []
    for k in range(6):
        kw = dict(fixed, x=tf.constant(f32(T, B, I)))
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        ours = R.BlockLSTM(**kw)
        print("FAULTS", k, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before,
              flush=True)
        if k in (0, 5):
            _compare(k, ours, tf.raw_ops.BlockLSTM(**kw), cases)
        del ours  # its blocks go back for the next call
    for c in cases:
        print("FAIL", c)
    print("FAILURES", len(cases))
    return 1 if cases else 0


if __name__ == "__main__":
    raise SystemExit(main())
