"""pytest face of lstm_block_checks.py: the CUDA LSTM block engine (BlockLSTM / BlockLSTMV2
maths) and GRU block cell against float64 references.  Skips where the engine .so or PyTorch with CUDA is missing
(CPU CI); tools/gpu_tests.sh runs it on a GPU machine."""

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
    import lstm_block_checks  # noqa: E402  (imports torch)
    CASES = lstm_block_checks.LSTM_BLOCK_CASES
    GRU_CASES = lstm_block_checks.GRU_CELL_CASES
    case_id = lstm_block_checks.case_id
else:
    CASES = GRU_CASES = [{}]
    case_id = str


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_lstm_block_vs_float64_reference(case):
    lstm_block_checks.check_lstm_block(case)


def test_lstm_block_deterministic():
    lstm_block_checks.check_lstm_block_deterministic()


@pytest.mark.parametrize("case", GRU_CASES, ids=case_id)
def test_gru_cell_vs_float64_reference(case):
    lstm_block_checks.check_gru_cell(case)
