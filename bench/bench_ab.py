"""Before/after: bench_rnn.py on two builds of the libraries, interleaved in one session.

    .venv/bin/python bench/bench_ab.py BEFORE_DIR AFTER_DIR [--rounds 2] -- [bench_rnn args]

BEFORE_DIR and AFTER_DIR hold the built shared objects (_tf_rnn_ops.so, _tfrnn_engine_*.so,
...), e.g. a copy of tf_rnn_ops/*.so taken before a change and bazel-bin/cc after it. Each is
put beside a copy of this tree's tf_rnn_ops/ and bench/ in a temporary root, and bench_rnn.py
runs there in turns, in ABBA order (before, after, after, before, ...), so both builds see the
same machine state and neither always runs second. Prints, per benchmark, size and peer, the median over rounds of our time and of the
peer/ours ratio for each build, and after/before of our time (1.00: no change).
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _root(tmp, name, libdir):
    root = os.path.join(tmp, name)
    shutil.copytree(os.path.join(REPO_ROOT, "tf_rnn_ops"), os.path.join(root, "tf_rnn_ops"),
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    shutil.copytree(os.path.join(REPO_ROOT, "bench"), os.path.join(root, "bench"),
                    ignore=shutil.ignore_patterns("out", "results", "__pycache__"))
    libs = glob.glob(os.path.join(libdir, "*.so"))
    if not libs:
        sys.exit(f"bench_ab: no .so files in {libdir}")
    for lib in libs:
        shutil.copy(lib, os.path.join(root, "tf_rnn_ops"))
    return root


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("--rounds", type=int, default=4)
    argv = sys.argv[1:] if argv is None else list(argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    a = p.parse_args(argv[:cut])
    extra = argv[cut + 1:]  # after --: arguments for bench_rnn.py
    runs = {"before": [], "after": []}
    with tempfile.TemporaryDirectory() as tmp:
        roots = {"before": _root(tmp, "before", a.before), "after": _root(tmp, "after", a.after)}
        for k in range(a.rounds):
            # ABBA order: a variant run second in a round measured up to ~10 % slower on a
            # shared VM, whichever it was; alternating the order cancels that.
            for name in (("before", "after"), ("after", "before"))[k % 2]:
                out = os.path.join(tmp, f"{name}{k}.json")
                print(f"[bench_ab] round {k + 1}/{a.rounds}: {name}", flush=True)
                cmd = [sys.executable, os.path.join(roots[name], "bench", "bench_rnn.py"),
                       "--no-memory", "--png", os.path.join(tmp, "x.png"), "--json", out] + extra
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
                with open(out) as f:
                    runs[name].append(json.load(f)["comparisons"])
    table = {}
    for name, rounds in runs.items():
        for comps in rounds:
            for c in comps:
                key = (c["bench"], "x".join(map(str, c["size"])), c["dtype"], c["peer"])
                entry = table.setdefault(key, {"before": ([], []), "after": ([], [])})
                if c["ours_ms"]:  # a peer that did not run (--no-torch): our time only
                    entry[name][0].append(c["ours_ms"])
                if c["ratio"]:
                    entry[name][1].append(c["ratio"])
    print(f"{'bench':<20} {'size':<16} {'dtype':<9} {'peer':<16} {'ours ms b/a':>17} "
          f"{'peer/ours b/a':>15} {'a/b':>6}")
    for (bench, size, dtype, peer), e in sorted(table.items()):
        (mb, rb), (ma, ra) = e["before"], e["after"]
        if not (mb and ma):
            continue
        b_ms, a_ms = float(np.median(mb)), float(np.median(ma))
        ratios = (f"{np.median(rb):7.2f}/{np.median(ra):<7.2f}" if (rb and ra)
                  else f"{'n/a':>15}")
        print(f"{bench:<20} {size:<16} {dtype:<9} {peer:<16} {b_ms:8.3f}/{a_ms:<8.3f} "
              f"{ratios} {a_ms / b_ms:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
