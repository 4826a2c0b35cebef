"""Every environment switch the project reads has a row in docs/ENVIRONMENT.md's table, and every
row names a switch the project still reads."""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = r"(?:TF_RNN_OPS|TFRNN)_[A-Z0-9_]+"
# How the sources read a variable: C/C++ getenv, the CPU and CUDA engines' helpers, Python's
# os.environ, and shell parameter expansion.
READS = [
    re.compile(r'(?:getenv|EnvIs|EnvCount|EnvChoice)\(\s*"(' + NAME + ')"'),
    re.compile(r'environ(?:\.get|\.setdefault|\.pop)?[\(\[]\s*"(' + NAME + ')"'),
    re.compile(r"\$\{(" + NAME + r")[:}\-=]"),
]
DIRS = ("cc", "tf_rnn_ops", "tools", "bench", "tests", "build_backend")
EXTS = (".cc", ".h", ".cu", ".cuh", ".py", ".sh")
EXTRA = ("configure.sh", os.path.join(".ci", "run"))


def _sources():
    for d in DIRS:
        for base, _, files in os.walk(os.path.join(ROOT, d)):
            for f in files:
                if f.endswith(EXTS):
                    yield os.path.join(base, f)
    for f in EXTRA:
        p = os.path.join(ROOT, f)
        if os.path.exists(p):
            yield p


def _read_names():
    names = {}
    for path in _sources():
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for rx in READS:
            for m in rx.finditer(text):
                names.setdefault(m.group(1), os.path.relpath(path, ROOT))
    return names


def _table_names():
    with open(os.path.join(ROOT, "docs", "ENVIRONMENT.md"), encoding="utf-8") as f:
        return set(re.findall(r"^\| `(" + NAME + ")` \|", f.read(), re.M))


def test_the_scan_finds_the_switches():
    names = _read_names()
    # Switches of each kind of source: C++ engine, CUDA engine, Python package, shell tools.
    for n in ("TF_RNN_OPS_BF16_GEMM", "TFRNN_CUDA_PERSISTENT", "TF_RNN_OPS_KERAS_GPU",
              "TF_RNN_OPS_VENV"):
        assert n in names, n


def test_every_switch_read_has_a_row():
    table = _table_names()
    missing = {n: where for n, where in _read_names().items() if n not in table}
    assert not missing, f"environment switches without a row in docs/ENVIRONMENT.md: {missing}"


def test_every_row_is_read_somewhere():
    stale = _table_names() - set(_read_names())
    assert not stale, f"docs/ENVIRONMENT.md rows for switches nothing reads: {sorted(stale)}"
