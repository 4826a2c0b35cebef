#!/usr/bin/env python3
"""Long fuzzing campaign over every op (issue #8): the strategies and the rule of
tests/fuzz_ops.py, many more cases, every case in a child process, failures collected (not
shrunk) and printed with their inputs at the end.

    .venv/bin/python tools/fuzz_campaign.py                      # 4,500 cases per op (> 100,000)
    .venv/bin/python tools/fuzz_campaign.py --per-op 200 --ops BlockLSTM CudnnRNNV3
    .venv/bin/python tools/fuzz_campaign.py --seed 7             # another random stream

Exit status 1 if any case failed or crashed.
"""
import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, ROOT)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-op", type=int, default=4500, help="cases per op (default 4500)")
    ap.add_argument("--ops", nargs="*", help="op ids (default: all)")
    ap.add_argument("--seed", type=int, default=None, help="hypothesis seed (default: random)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per case")
    args = ap.parse_args()

    import fuzz_ops
    import op_specs as S

    specs = [s for s in S.all_specs() if not args.ops or S.spec_id(s) in args.ops]
    runner = fuzz_ops.Runner(timeout=args.timeout)
    rows, failures, t0 = [], [], time.time()
    try:
        for spec in specs:
            stats, fails = fuzz_ops.fuzz_op(spec, runner, args.per_op, stop_on_failure=False,
                                            seed=args.seed)
            calls = sum(v for k, v in stats.items() if k != "seconds")
            rows.append((S.spec_id(spec), calls, stats.get("ok", 0), stats.get("invalid", 0),
                         stats.get("fail", 0), stats.get("crash", 0), stats["seconds"]))
            failures += fails
            print(f"{rows[-1][0]:34s} {calls:7d} cases  ok {rows[-1][2]:6d}  invalid "
                  f"{rows[-1][3]:6d}  fail {rows[-1][4]:3d}  crash {rows[-1][5]:3d}  "
                  f"{rows[-1][6]:7.1f} s", flush=True)
    finally:
        runner.close()
    total = sum(r[1] for r in rows)
    print(f"\n{len(rows)} ops, {total} cases in {time.time() - t0:.0f} s; "
          f"{sum(r[4] for r in rows)} failures, {sum(r[5] for r in rows)} crashes, "
          f"{runner.restarts} worker restarts")
    for f in failures:
        print("\n" + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
