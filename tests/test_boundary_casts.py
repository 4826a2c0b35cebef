"""The half and bfloat16 ops' conversions at the boundary (ComputeBridge through the engine's
vectorised conversions) against stock tf.cast, bit for bit: tests/boundary_cast_checks.py in a
child process with the products in float (TF_RNN_OPS_BF16_GEMM=0)."""
from child_run import assert_check_passes


def test_boundary_casts_match_tf_cast():
    assert_check_passes("boundary_cast_checks.py", env={"TF_RNN_OPS_BF16_GEMM": "0"},
                        unset=("TF_RNN_OPS_ISA",))
