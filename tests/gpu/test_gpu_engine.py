"""pytest face of gpu_checks.py: the CUDA engine against cuDNN (PyTorch), a float64 reference
and cuDNN's real weight layout.  Every test skips where the engine .so or PyTorch with CUDA is
missing (CPU CI); tools/gpu_tests.sh runs them on a GPU machine."""

import os
import sys

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import gpu_common  # noqa: E402

_REASON = gpu_common.gpu_unavailable_reason()
pytestmark = pytest.mark.skipif(_REASON is not None, reason=_REASON or "")

if _REASON is None:
    import gpu_checks  # noqa: E402  (imports torch)
    CUDNN_CASES = gpu_checks.CUDNN_CASES
    REF_CASES = gpu_checks.REF_CASES
    LAYOUT_CASES = gpu_checks.LAYOUT_CASES
    case_id = gpu_checks.case_id
else:
    CUDNN_CASES = REF_CASES = LAYOUT_CASES = [{}]
    case_id = str


@pytest.mark.parametrize("case", CUDNN_CASES, ids=case_id)
def test_vs_cudnn(case):
    gpu_checks.check_vs_cudnn(case)


@pytest.mark.parametrize("case", REF_CASES, ids=case_id)
def test_vs_float64_reference(case):
    gpu_checks.check_vs_reference(case)


@pytest.mark.parametrize("case", LAYOUT_CASES, ids=case_id)
def test_params_layout_is_cudnns(case):
    gpu_checks.check_cudnn_layout(case)


def test_deterministic():
    gpu_checks.check_deterministic()


def test_bad_input():
    gpu_checks.check_bad_input()
