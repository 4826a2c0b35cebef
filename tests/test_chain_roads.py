"""The step chains' roads (tests/chain_checks.py, one child process each): forced pipelined,
forced split, and the default with 8 intra-op threads (where it splits every step), each
against the float64 reference. The roads sum the weight gradients in different orders, so
they agree with the reference, not bit for bit with each other.
"""
import pytest

from child_run import assert_check_passes


@pytest.mark.parametrize("road,threads", [("pipelined", 0), ("split", 0), ("auto", 8)])
def test_chain_road_matches_reference(road, threads):
    env = {} if road == "auto" else {"TF_RNN_OPS_CPU_CHAIN": road}
    if threads:
        env["CHAIN_CHECK_THREADS"] = str(threads)
    assert_check_passes("chain_checks.py", env=env, unset=("TF_RNN_OPS_CPU_CHAIN",))
