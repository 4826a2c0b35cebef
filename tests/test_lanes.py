"""The batch in the SIMD lanes (cc/engine/lanes_gemm.h; tests/lanes_checks.py, one child
process per setting) against the float64 reference: with TF_RNN_OPS_CPU_LANES=1 (the lanes at
every size the spec allows) on 1, 2, 3 and 4 intra-op threads, unset (by the size of a thread's
slice of R: the large cases), and 0 (packed::Gemm's register blocks, on 2 and 4 threads)."""
import pytest

from child_run import assert_check_passes


@pytest.mark.parametrize("lanes,threads", [("1", 1), ("1", 2), ("1", 3), ("1", 4), ("auto", 2),
                                           ("0", 2), ("0", 4)])
def test_lanes_match_reference(lanes, threads):
    env = {"LANES_CHECK_THREADS": str(threads)}
    if lanes != "auto":
        env["TF_RNN_OPS_CPU_LANES"] = lanes
    assert_check_passes("lanes_checks.py", env=env, unset=("TF_RNN_OPS_CPU_LANES",))
