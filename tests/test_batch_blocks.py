"""The forward in batch blocks, at inference and in training (with the backward that reads its
reserve; tests/batch_block_checks.py, one child process per setting), against the float64
reference: on 2 intra-op threads (two blocks), on 3 (three blocks of 13-14 rows at B = 40), on
4 (up to four), with TF_RNN_OPS_CPU_BATCH_BLOCKS=0 (the roads over the whole batch), and with
TF_RNN_OPS_CPU_FUSE_WIDE=0 (the AVX2 engine's larger weights projected apart, as elsewhere). The
bits of a call repeated and of calls made at once are tests/test_repeatable.py's (its cases of
40 rows run in blocks)."""
import pytest

from child_run import assert_check_passes


@pytest.mark.parametrize("blocks,fuse_wide,threads", [("auto", "auto", 2), ("auto", "auto", 3),
                                                      ("auto", "auto", 4), ("0", "auto", 2),
                                                      ("auto", "0", 2)])
def test_batch_blocks_match_reference(blocks, fuse_wide, threads):
    env = {"BATCH_CHECK_THREADS": str(threads)}
    if blocks != "auto":
        env["TF_RNN_OPS_CPU_BATCH_BLOCKS"] = blocks
    if fuse_wide != "auto":
        env["TF_RNN_OPS_CPU_FUSE_WIDE"] = fuse_wide
    assert_check_passes("batch_block_checks.py", env=env,
                        unset=("TF_RNN_OPS_CPU_BATCH_BLOCKS", "TF_RNN_OPS_CPU_FUSE_WIDE"))
