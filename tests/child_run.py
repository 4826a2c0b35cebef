"""Runs a check script of tests/ in a child process: for the switches the library reads once
per process (TF_RNN_OPS_ISA, TF_RNN_OPS_BF16_GEMM, TF_RNN_OPS_CPU_CHAIN), each setting needs a
fresh one. The child sees this environment with TensorFlow's logging quiet, the repository
on PYTHONPATH, the names in `unset` removed and then `env` set. The check scripts themselves
use the helpers at the end (their pool size, and their cases run and counted); the tests call
assert_check_passes."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run_check(script, env=None, unset=(), timeout=900):
    child = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
                 PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    for name in unset:
        child.pop(name, None)
    child.update(env or {})
    return subprocess.run([sys.executable, os.path.join(HERE, script)], env=child,
                          capture_output=True, text=True, timeout=timeout)


def assert_check_passes(script, env=None, unset=(), expect="FAILURES 0"):
    """Runs `script` as run_check does and asserts that its output has `expect` (its count of
    failed cases) and that it exited with 0; on failure shows the end of its output."""
    p = run_check(script, env=env, unset=unset)
    out = p.stdout + p.stderr
    assert expect in p.stdout, out[-6000:]
    assert p.returncode == 0, out[-6000:]


# ---- in a check script (the child) ----------------------------------------------------------

def intra_op_threads_from(var):
    """Sets TensorFlow's intra-op pool size from the environment variable `var` (unset or 0:
    TensorFlow's default); call it before the script's first op."""
    import tensorflow as tf
    n = int(os.environ.get(var, "0"))
    if n:
        tf.config.threading.set_intra_op_parallelism_threads(n)


def run_cases(cases, label):
    """Runs each (name, fn) of `cases`: a line per case (ok, or FAIL with the assertion's
    message), then `label`, the pool size and "FAILURES n". Returns the exit status."""
    import tensorflow as tf
    failures = 0
    for name, fn in cases:
        try:
            fn()
            print("ok  ", name, flush=True)
        except AssertionError as e:
            failures += 1
            print("FAIL", name, str(e)[:2000], flush=True)
    print(label, "THREADS", tf.config.threading.get_intra_op_parallelism_threads(),
          "CASES", len(cases), "FAILURES", failures)
    return 1 if failures else 0
