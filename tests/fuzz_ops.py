"""Property-based fuzzer of every op in op_specs.py (issue #8).

Hypothesis draws, per op: dimensions (0 included), attrs, dtype, a value seed and up to two
mutations (wrong rank, a resized axis, empty or huge-but-empty tensors, another dtype, NaN /
Inf / 1e30 values, integer inputs set to extreme values, list lengths, the op's value cases).
Each case runs in a child process (a persistent worker, started again after a crash), so a
crash (abort, segfault) is reported as a failure with its inputs instead of killing the run.

The rule every case must satisfy:
  * a valid call (no mutation, or only non-finite values) returns outputs of the shapes the
    spec gives;
  * any other call returns normally or raises InvalidArgumentError whose message names an
    input or attr of the op;
  * nothing else: no other exception type, no crash, no hang (timeout).

Used by tests/test_fuzz.py (a small budget in CI) and tools/fuzz_campaign.py (long runs).
"""

import multiprocessing
import os
import sys
import time
import traceback

_HERE = os.path.dirname(os.path.abspath(__file__))
for _p in (_HERE, os.path.dirname(_HERE)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

MAX_DIM = {"T": 5, "B": 3, "I": 6, "H": 4, "L": 3}
EXTREME_INTS = (-2**63, -2**31, -1, 0, 1, 2**31 - 1, 2**62)
POISON = (float("nan"), float("inf"), float("-inf"), 1e30)


# ---------------------------------------------------------------------------------------------
# child side
# ---------------------------------------------------------------------------------------------

def run_case(case):
    """Runs one case (in the worker). Returns (status, detail): status 'ok', 'invalid' (an
    accepted InvalidArgumentError), or 'fail'."""
    import numpy as np
    import tensorflow as tf

    import op_specs as S

    if case["op"] == "__kill__":  # the harness's own test: a crashing case
        os.kill(os.getpid(), case["sig"])
    spec = S.by_id(case["op"])
    rng = np.random.default_rng(case["seed"])
    dims, attrs = dict(case["dims"]), S.attrs_for(spec, case["dims"], case["attrs"])
    dtype = tf.as_dtype(case["dtype"])
    muts = case["mutations"]
    names = {i.name for i in spec.inputs} | set(attrs) | {
        "num_params", "num_params_weights", "num_params_biases", "T", "S", "weights", "biases"}
    if not spec.wrapper:  # internal ops: TensorFlow's own dtype check names the position
        names.add(r"input #\d+\(zero-based\)")
    iae = tf.errors.InvalidArgumentError
    try:
        kw = spec.make(rng, dims, attrs, dtype)
    except iae as e:  # e.g. a backprop op whose forward rejects the drawn sizes
        valid_dims = all(dims[k] > 0 or spec.zero_ok.get(k, True) for k in dims)
        if valid_dims and not _attrs_invalid(spec, attrs):
            return "fail", f"building a valid call failed: {e.message}"
        return "invalid", "make: " + e.message.splitlines()[0][:200]
    for m in muts:
        kw, attrs = S.apply_mutation(spec, kw, attrs, dims, m, rng)
    values_only = all(m[0] == "poison" for m in muts)
    valid = values_only and all(dims[k] > 0 or spec.zero_ok.get(k, True) for k in dims)
    try:
        outs = S.call_spec(spec, kw, attrs)
    except iae as e:
        if valid:
            return "fail", f"valid call raised InvalidArgumentError: {e.message}"
        if not S.names_message(e.message, names):
            return "fail", f"message names no input or attr: {e.message!r}"
        return "invalid", e.message.splitlines()[0][:200]
    except tf.errors.ResourceExhaustedError as e:
        # A huge dimension can ask for a genuinely huge output (e.g. T=0 and a batch of 2^31):
        # TensorFlow's allocator refusing it is a clean error, not a crash.
        if any(m[0] == "huge" for m in muts):
            return "invalid", "resource: " + e.message.splitlines()[0][:200]
        return "fail", "ResourceExhaustedError on moderate sizes: " + e.message[:2000]
    except Exception as e:  # noqa: BLE001
        return "fail", f"{type(e).__name__} (not InvalidArgumentError): " + "".join(
            traceback.format_exception_only(type(e), e)).strip()[:2000]
    if valid:
        problem = S.check_outputs(spec, outs, dims, attrs)
        if problem:
            return "fail", problem
        if not muts:
            opaque = S.opaque_outputs(spec, dims, attrs)
            problem = S.check_plausible(outs, opaque=opaque)
            if problem and dtype != tf.float64:
                # Large values can be genuine (linear activations grow without bound, and half
                # overflows at 65504): the same call in float64 tells uninitialised memory
                # (plausible there) from real growth (implausible there too).
                kw64 = spec.make(np.random.default_rng(case["seed"]), dims, attrs, tf.float64)
                outs64 = [tf.cast(o, dtype) if o.dtype == tf.float64 else o
                          for o in S.call_spec(spec, kw64, attrs)]  # rounded to the dtype
                if S.check_plausible(outs64, opaque=opaque):
                    problem = None
            if problem:
                return "fail", problem
    return "ok", ""


def _attrs_invalid(spec, attrs):
    return False


def _worker_main(conn):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tf_rnn_ops  # noqa: F401  (loads the op library once)
    conn.send(("ready", os.getpid()))
    while True:
        case = conn.recv()
        if case is None:
            return
        try:
            result = run_case(case)
        except Exception as e:  # noqa: BLE001 - a bug of the harness, reported as a failure
            result = ("fail", "harness: " + "".join(traceback.format_exception(e))[-2000:])
        conn.send(result)


# ---------------------------------------------------------------------------------------------
# parent side
# ---------------------------------------------------------------------------------------------

class Runner:
    """Sends cases to a worker process; a dead worker is a crash of that case."""

    def __init__(self, timeout=120.0):
        self.timeout = timeout
        self.ctx = multiprocessing.get_context("spawn")
        self.proc = None
        self.restarts = 0

    def _start(self):
        parent, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_worker_main, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        self.conn = parent
        if not self.conn.poll(300):
            raise RuntimeError("fuzz worker did not start")
        self.conn.recv()

    def run(self, case):
        if self.proc is None or not self.proc.is_alive():
            self._start()
        try:
            self.conn.send(case)
            if self.conn.poll(self.timeout):
                return self.conn.recv()
            status, detail = "fail", f"timeout after {self.timeout} s (hang)"
            self.proc.kill()
        except (EOFError, OSError, BrokenPipeError):
            status, detail = "crash", ""
        self.proc.join(10)
        code = self.proc.exitcode
        self.proc = None
        self.restarts += 1
        if status == "crash":
            detail = f"worker process died (exit code {code}; negative = signal)"
            return "crash", detail
        return status, detail

    def close(self):
        if self.proc is not None and self.proc.is_alive():
            try:
                self.conn.send(None)
            except OSError:
                pass
            self.proc.join(10)
            if self.proc.is_alive():
                self.proc.kill()
        self.proc = None


# ---------------------------------------------------------------------------------------------
# strategies
# ---------------------------------------------------------------------------------------------

class _Draw:
    """The small drawing API the specs' attr_space functions use."""

    def __init__(self, draw):
        import hypothesis.strategies as st
        self._draw, self._st = draw, st

    def booleans(self):
        return self._draw(self._st.booleans())

    def sampled_from(self, xs):
        return self._draw(self._st.sampled_from(list(xs)))

    def integers(self, lo, hi):
        return self._draw(self._st.integers(lo, hi))


def case_strategy(spec):
    import hypothesis.strategies as st

    import op_specs as S

    @st.composite
    def cases(draw):
        dims = {}
        for k, default in spec.dims.items():
            lo = 0 if k in spec.zero_ok else 1
            dims[k] = draw(st.integers(lo, max(MAX_DIM.get(k, default), lo)))
        dims, attrs = spec.attr_space(_Draw(draw), dims) if spec.attr_space else (
            dims, dict(spec.attrs))
        attrs = {**{k: v for k, v in spec.attrs.items() if k in ("T", "S")}, **attrs}
        dtype = draw(st.sampled_from(["float32", "float32", "float64", "float16", "bfloat16"]))
        names = [i.name for i in spec.inputs]
        mutation = st.one_of(
            st.tuples(st.just("rank_up"), st.sampled_from(names)),
            st.tuples(st.just("rank_down"), st.sampled_from(names)),
            st.tuples(st.just("resize"), st.sampled_from(names), st.integers(0, 3),
                      st.integers(0, 7)),
            st.tuples(st.just("empty"), st.sampled_from(names)),
            st.tuples(st.just("huge"), st.sampled_from(names), st.integers(0, 3),
                      st.integers(0, 3), st.sampled_from([2**31 + 1, 2**50 + 1, 2**62])),
            st.tuples(st.just("dtype"), st.sampled_from(names),
                      st.sampled_from(["float64", "float16", "int32", "int64"])),
            st.tuples(st.just("poison"), st.sampled_from(names), st.sampled_from(POISON),
                      st.floats(0, 1)),
            st.tuples(st.just("int"), st.sampled_from(names), st.sampled_from(EXTREME_INTS)),
            st.tuples(st.just("list_len"), st.sampled_from(names), st.sampled_from([-1, 1])),
        )
        n_values = len(spec.values(spec.dims, S.attrs_for(spec, spec.dims, spec.attrs))) \
            if spec.values else 0
        if n_values:
            mutation = st.one_of(mutation, st.tuples(st.just("value"),
                                                      st.integers(0, n_values - 1)))
        muts = draw(st.one_of(st.just([]), st.lists(mutation, min_size=1, max_size=2)))
        return {"op": S.spec_id(spec), "dims": dims, "attrs": attrs, "dtype": dtype,
                "seed": draw(st.integers(0, 2**32 - 1)), "mutations": [tuple(m) for m in muts]}

    return cases()


def describe(case):
    return (f"{case['op']} dims={case['dims']} attrs={case['attrs']} dtype={case['dtype']} "
            f"seed={case['seed']} mutations={case['mutations']}")


def fuzz_op(spec, runner, examples, *, stats=None, failures=None, stop_on_failure=True,
            derandomize=False, seed=None):
    """Runs `examples` drawn cases of one op. With stop_on_failure, the first failing case is
    raised (hypothesis shrinks it); otherwise failures are collected."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    stats = stats if stats is not None else {}
    failures = failures if failures is not None else []
    phases = [Phase.generate] + ([Phase.shrink] if stop_on_failure else [])

    @settings(max_examples=examples, deadline=None, database=None, derandomize=derandomize,
              phases=phases, suppress_health_check=list(HealthCheck))
    @given(case=case_strategy(spec))
    def prop(case):
        status, detail = runner.run(case)
        stats[status] = stats.get(status, 0) + 1
        if status in ("fail", "crash"):
            msg = f"{status}: {detail}\n  case: {describe(case)}"
            if stop_on_failure:
                raise AssertionError(msg)
            failures.append(msg)

    if seed is not None:
        prop = hseed(seed)(prop)
    t0 = time.time()
    prop()
    stats["seconds"] = stats.get("seconds", 0.0) + time.time() - t0
    return stats, failures
