"""pytest face of gpu_checks.py: the CUDA engine against cuDNN (PyTorch), a float64 reference
and cuDNN's real weight layout.  Every test skips where the engine .so or PyTorch with CUDA is
missing (CPU CI); tools/gpu_tests.sh runs them on a GPU machine."""

import pytest

import gpu_common

(pytestmark, gpu_checks, CUDNN_CASES, REF_CASES, LAYOUT_CASES,
 case_id) = gpu_common.pytest_face("gpu_checks", "CUDNN_CASES", "REF_CASES", "LAYOUT_CASES")


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
