"""Every engine variant this CPU supports (avx, avx2, avx512) against the float64 reference, on
sizes that reach each SIMD code path of the recurrent kernel and the pointwise passes
(tests/isa_checks.py, run in a child process per variant: the variant is chosen at load time).
"""
import pytest

from child_run import assert_check_passes
from test_packaging import _supported_isas


@pytest.mark.parametrize("isa", ["avx", "avx2", "avx512"])
def test_engine_variant_matches_reference(isa):
    if isa not in _supported_isas():
        pytest.skip(f"this CPU does not support {isa}")
    assert_check_passes("isa_checks.py", env={"TF_RNN_OPS_ISA": isa},
                        expect=f"ENGINES _tfrnn_engine_{isa}.so FAILURES 0")
