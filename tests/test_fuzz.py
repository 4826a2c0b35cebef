"""Property-based fuzzing of every op (issue #8), a small budget for CI: each op gets
FUZZ_EXAMPLES drawn cases (default 16; env TF_RNN_OPS_FUZZ_EXAMPLES), run in a child process so
that a crash is a reported failure with its inputs (see fuzz_ops.py for the rule each case
must satisfy). The long campaign is tools/fuzz_campaign.py.
"""

import os

import pytest

import fuzz_ops
import op_specs as S

EXAMPLES = int(os.environ.get("TF_RNN_OPS_FUZZ_EXAMPLES", "16"))
SPECS = S.all_specs()


@pytest.fixture(scope="module")
def runner(ours):
    r = fuzz_ops.Runner(timeout=120)
    yield r
    r.close()


@pytest.mark.parametrize("spec", SPECS, ids=[S.spec_id(s) for s in SPECS])
def test_fuzz(runner, spec):
    stats, _ = fuzz_ops.fuzz_op(spec, runner, EXAMPLES, derandomize=True)
    # the budget was spent on calls (a strategy that draws nothing would pass vacuously)
    assert sum(v for k, v in stats.items() if k != "seconds") >= EXAMPLES


def test_runner_reports_a_crash_with_its_inputs(runner):
    """The harness itself: a case whose worker dies is a 'crash', and the next case runs in a
    fresh worker."""
    import signal
    status, _ = runner.run({"op": "__kill__", "sig": signal.SIGKILL})
    assert status == "crash"
    spec = SPECS[0]
    case = {"op": S.spec_id(spec), "dims": dict(spec.dims), "attrs": dict(spec.attrs),
            "dtype": "float32", "seed": 1, "mutations": []}
    assert runner.run(case) == ("ok", "")
