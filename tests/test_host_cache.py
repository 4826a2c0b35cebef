"""The CPU kernels' large outputs and workspaces come from blocks kept between calls
(cc/kernels/scratch_cache.h): a call after the first faults in no fresh pages for them, and
TF_RNN_OPS_HOST_CACHE_MB=0 keeps none (every call faults its outputs in again, as glibc's
mmap'd allocations of this size do). Outputs in reused blocks match stock."""
import re

import child_run


def _run(env):
    p = child_run.run_check("host_cache_checks.py", env=env)
    out = p.stdout + p.stderr
    assert "FAILURES 0" in p.stdout and p.returncode == 0, out[-6000:]
    pages = int(re.search(r"PAGES (\d+)", p.stdout).group(1))
    faults = [int(n) for n in re.findall(r"FAULTS \d+ (\d+)", p.stdout)]
    assert len(faults) == 6, out[-6000:]
    return pages, faults, out


def test_kept_outputs_fault_no_fresh_pages():
    pages, faults, out = _run({})
    # Calls 1..5 find the blocks the call before gave back (the child holds no output past
    # its call and comparison).
    assert max(faults[1:]) < pages // 10, (pages, faults, out[-3000:])


def test_cache_off_faults_every_call():
    pages, faults, out = _run({"TF_RNN_OPS_HOST_CACHE_MB": "0"})
    assert min(faults[1:]) > pages // 2, (pages, faults, out[-3000:])
