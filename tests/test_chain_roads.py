"""The step chains' roads (tests/chain_checks.py, one child process each): forced pipelined,
forced split, and the default with 8 intra-op threads (where it splits every step), each
against the float64 reference. The roads sum the weight gradients in different orders, so
they agree with the reference, not bit for bit with each other.
"""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


@pytest.mark.parametrize("road,threads", [("pipelined", 0), ("split", 0), ("auto", 8)])
def test_chain_road_matches_reference(road, threads):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    env.pop("TF_RNN_OPS_CPU_CHAIN", None)
    if road != "auto":
        env["TF_RNN_OPS_CPU_CHAIN"] = road
    if threads:
        env["CHAIN_CHECK_THREADS"] = str(threads)
    p = subprocess.run([sys.executable, os.path.join(HERE, "chain_checks.py")], env=env,
                       capture_output=True, text=True, timeout=900)
    out = p.stdout + p.stderr
    assert "FAILURES 0" in p.stdout, out[-6000:]
    assert p.returncode == 0, out[-6000:]
