"""Leak check in CI (issue #8): a reduced count per op with a lenient bound; the real check
is tools/leak_check.py (10,000 calls per op, RSS growth under 1 %)."""

import os
import sys

import pytest

import op_specs as S

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tools"))
import leak_check  # noqa: E402

CALLS = int(os.environ.get("TF_RNN_OPS_LEAK_CALLS", "1000"))
SPECS = S.all_specs()


@pytest.mark.parametrize("spec", SPECS, ids=[S.spec_id(s) for s in SPECS])
def test_no_leak(ours, spec):
    # A leak of even one small buffer per call shows: the smallest output is >= 4 bytes and
    # allocations are >= 64 bytes, so 1000 leaked calls would be >= 64 kB per leaked buffer;
    # the bound is lenient because the allocator and Python caches move RSS in page steps.
    # A one-time step (a new malloc arena for a thread the pool started, a cache growing late
    # in a long test run) shows in one window only, while a leak grows in every window: a
    # window over the bound is measured once more, and both must be over it to fail.
    grown = []
    for warmup in (200, 0):
        before, after, _ = leak_check.measure(spec, CALLS, warmup=warmup)
        grown.append(after - before)
        if grown[-1] < 4 * 2**20:
            return
    pytest.fail(f"{S.spec_id(spec)}: RSS grew by "
                f"{', then '.join(f'{g / 2**10:.0f} kB' for g in grown)} over {CALLS} calls")
