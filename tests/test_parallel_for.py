"""The engine's parallel loops over ranges (cc/engine/pool_helpers.h PoolFor, behind
cpu_device.h ParallelFor: the caller claims blocks beside its helpers) compute what Eigen's
parallelFor computed, bit for bit: every block is run once, whichever thread claims it, and no
result depends on how the range was split. tests/parallel_for_checks.py runs the sequence ops
(training forward, backward, inference; float32 and bfloat16; lstm, gru, rnn_tanh) in child
processes with TF_RNN_OPS_CPU_PARALLEL_FOR unset and set to `eigen`, on pools of 2 and 3
threads (3 on a 2-core machine: more threads than cores, so helpers start late or share a
core), and every output must carry the same bits. The stock and float64 references of these
ops are checked elsewhere in the suite, on the default loop."""
import os

import numpy as np
import pytest

from child_run import run_check


def _run(tmp_path, threads, setting):
    out = os.path.join(tmp_path, f"pf_{threads}_{setting or 'pool'}.npz")
    env = {"PARALLEL_FOR_THREADS": str(threads), "PARALLEL_FOR_OUT": out}
    if setting:
        env["TF_RNN_OPS_CPU_PARALLEL_FOR"] = setting
    p = run_check("parallel_for_checks.py", env=env,
                  unset=("TF_RNN_OPS_CPU_PARALLEL_FOR",))
    assert p.returncode == 0 and "FAILURES 0" in p.stdout, (p.stdout + p.stderr)[-6000:]
    with np.load(out) as f:
        return {k: f[k] for k in f.files}


@pytest.mark.parametrize("threads", [2, 3])
def test_pool_for_bits_equal_eigen_parallel_for(tmp_path, threads):
    ours = _run(tmp_path, threads, None)
    eigen = _run(tmp_path, threads, "eigen")
    assert sorted(ours) == sorted(eigen)
    for k in sorted(ours):
        assert np.isfinite(ours[k]).all(), k
        np.testing.assert_array_equal(ours[k], eigen[k], err_msg=k)
