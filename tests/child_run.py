"""Runs a check script of tests/ in a child process: for the switches the library reads once
per process (TF_RNN_OPS_ISA, TF_RNN_OPS_BF16_GEMM, TF_RNN_OPS_CPU_CHAIN), each setting needs a
fresh one. The child sees this environment with TensorFlow's logging quiet, the repository
on PYTHONPATH, the names in `unset` removed and then `env` set."""
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
