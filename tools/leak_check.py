#!/usr/bin/env python3
"""Leak check (issue #8): CALLS calls of each op in a loop (valid inputs from
tests/op_specs.py, float32), resident memory measured after a warm-up and after the loop;
prints the growth per op and fails (exit 1) if any op grows RSS by 1 % or more.

    .venv/bin/python tools/leak_check.py                 # 10,000 calls per op
    .venv/bin/python tools/leak_check.py --calls 1000 --ops BlockLSTM
"""
import argparse
import gc
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, ROOT)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure(spec, calls, warmup):
    """(rss before, rss after, seconds) for `calls` calls of one op after `warmup` calls."""
    import numpy as np

    import op_specs as S

    rng = np.random.default_rng(0)
    kw, attrs, _ = S.base_call(spec, rng)
    for _ in range(warmup):
        S.call_spec(spec, kw, attrs)
    gc.collect()
    before, t0 = rss_bytes(), time.time()
    for _ in range(calls):
        S.call_spec(spec, kw, attrs)
    gc.collect()
    return before, rss_bytes(), time.time() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=10000)
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--limit", type=float, default=1.0, help="allowed RSS growth in percent")
    ap.add_argument("--ops", nargs="*")
    args = ap.parse_args(argv)

    import tf_rnn_ops  # noqa: F401
    import op_specs as S

    worst, bad = 0.0, []
    print(f"{'op':34s} {'calls':>6s} {'RSS before':>11s} {'growth':>10s} {'%':>7s} {'s':>6s}")
    for spec in S.all_specs():
        ident = S.spec_id(spec)
        if args.ops and ident not in args.ops:
            continue
        before, after, secs = measure(spec, args.calls, args.warmup)
        pct = 100.0 * (after - before) / before
        worst = max(worst, pct)
        print(f"{ident:34s} {args.calls:6d} {before / 2**20:9.1f} MB "
              f"{(after - before) / 2**10:7.0f} kB {pct:6.3f}% {secs:6.1f}", flush=True)
        if pct >= args.limit:
            bad.append(ident)
    print(f"worst growth {worst:.3f} % (limit {args.limit} %)"
          + (f"; over the limit: {bad}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
