"""Runs every check of gpu_checks.py without pytest (the GPU machines may not have it).
Prints one line per case and a summary; exits 1 if any check failed.
    python tests/gpu/run_gpu_checks.py [substring-filter ...]   (a case runs when any matches)"""

import os
import sys
import time
import traceback
import unittest

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)

import gpu_common  # noqa: E402


def main():
    reason = gpu_common.gpu_unavailable_reason()
    if reason:
        print(f"SKIP all: {reason}")
        return 0
    import gpu_checks
    filters = sys.argv[1:] or [""]
    jobs = [("vs_cudnn", gpu_checks.check_vs_cudnn, c) for c in gpu_checks.CUDNN_CASES]
    jobs += [("vs_reference", gpu_checks.check_vs_reference, c) for c in gpu_checks.REF_CASES]
    jobs += [("layout", gpu_checks.check_cudnn_layout, c) for c in gpu_checks.LAYOUT_CASES]
    import lstm_block_checks
    jobs += [("lstm_block", lstm_block_checks.check_lstm_block, c)
             for c in lstm_block_checks.LSTM_BLOCK_CASES]
    jobs += [("gru_cell", lstm_block_checks.check_gru_cell, c)
             for c in lstm_block_checks.GRU_CELL_CASES]
    jobs += [("lstm_block_deterministic", lstm_block_checks.check_lstm_block_deterministic,
              None)]
    jobs += [("deterministic", gpu_checks.check_deterministic, None),
             ("bad_input", gpu_checks.check_bad_input, None)]
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    for name, fn, case in jobs:
        label = name + ("" if case is None else "[" + gpu_checks.case_id(case) + "]")
        if not any(f in label for f in filters):
            continue
        t0 = time.time()
        try:
            fn(case) if case is not None else fn()
            res, msg = "PASS", ""
        except unittest.SkipTest as e:
            res, msg = "SKIP", str(e)
        except Exception as e:  # noqa: BLE001
            res, msg = "FAIL", f"{type(e).__name__}: {e}"
            traceback.print_exc()
        counts[res] += 1
        print(f"{res} {label} ({time.time() - t0:.1f} s) {msg}", flush=True)
    print(f"summary: {counts}")
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
