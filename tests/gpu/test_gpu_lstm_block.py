"""pytest face of lstm_block_checks.py: the CUDA LSTM block engine (BlockLSTM / BlockLSTMV2
maths) and GRU block cell against float64 references.  Skips where the engine .so or PyTorch with CUDA is missing
(CPU CI); tools/gpu_tests.sh runs it on a GPU machine."""

import pytest

import gpu_common

(pytestmark, lstm_block_checks, CASES, GRU_CASES,
 case_id) = gpu_common.pytest_face("lstm_block_checks", "LSTM_BLOCK_CASES", "GRU_CELL_CASES")


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_lstm_block_vs_float64_reference(case):
    lstm_block_checks.check_lstm_block(case)


def test_lstm_block_deterministic():
    lstm_block_checks.check_lstm_block_deterministic()


@pytest.mark.parametrize("case", GRU_CASES, ids=case_id)
def test_gru_cell_vs_float64_reference(case):
    lstm_block_checks.check_gru_cell(case)
