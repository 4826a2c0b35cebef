"""Fixtures for the tf_rnn_ops tests.

* ``ours``: the plugin's ``tf_rnn_ops.raw_ops`` module.  If the plugin cannot be imported every
  test that uses it ERRORS with the import failure (it is never skipped: a missing or broken
  plugin must fail the suite).
* ``rng``: a NumPy Generator seeded from the test's node id (deterministic, order independent).

Helpers shared by the test modules are in lstm_util.py, the float64 references in reference.py.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

_TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
_REPO_ROOT = os.path.dirname(_TESTS_DIR)
for _p in (_TESTS_DIR, _REPO_ROOT):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import lstm_util  # noqa: E402


@pytest.fixture(scope="session")
def ours():
    """tf_rnn_ops.raw_ops; a failed import is an ERROR of every test that needs the plugin."""
    try:
        import tf_rnn_ops  # noqa: F401
        from tf_rnn_ops import raw_ops
    except Exception as e:  # ImportError, NotFoundError from tf.load_op_library, ...
        pytest.fail(
            "tf_rnn_ops could not be imported, so the plugin cannot be tested "
            f"(repo root {_REPO_ROOT} is on sys.path): {type(e).__name__}: {e}",
            pytrace=False)
    missing = [n for n in lstm_util.ALL_OPS if not hasattr(raw_ops, n)]
    if missing:
        pytest.fail(f"tf_rnn_ops.raw_ops lacks {missing}", pytrace=False)
    return raw_ops


@pytest.fixture
def rng(request):
    return np.random.default_rng(lstm_util.seed_for(request.node.nodeid))
