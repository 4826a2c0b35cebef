"""Every engine variant this CPU supports (avx, avx2, avx512) against the float64 reference, on
sizes that reach each SIMD code path of the recurrent kernel and the pointwise passes
(tests/isa_checks.py, run in a child process per variant: the variant is chosen at load time).
"""
import os
import subprocess
import sys

import pytest

from test_packaging import _supported_isas

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


@pytest.mark.parametrize("isa", ["avx", "avx2", "avx512"])
def test_engine_variant_matches_reference(isa):
    if isa not in _supported_isas():
        pytest.skip(f"this CPU does not support {isa}")
    env = dict(os.environ, TF_RNN_OPS_ISA=isa, TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, os.path.join(HERE, "isa_checks.py")], env=env,
                       capture_output=True, text=True, timeout=900)
    out = p.stdout + p.stderr
    assert f"ENGINES _tfrnn_engine_{isa}.so FAILURES 0" in p.stdout, out[-6000:]
    assert p.returncode == 0, out[-6000:]
