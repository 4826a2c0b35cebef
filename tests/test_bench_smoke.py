"""Smoke test of the benchmark script: bench/bench_rnn.py --quick runs, writes its PNG and JSON.

No timing assertions (times on a shared machine mean nothing); only that every benchmark ran
where it can, with positive times, and that peers that cannot run say n/a instead of failing.
"""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_BENCH = os.path.join(_REPO, "bench", "bench_rnn.py")

# Implementations that must run in every dtype: ours everywhere, and the Keras layers.
_ALWAYS = {"ours", "keras"}


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    png, js = out / "bench.png", out / "bench.json"
    proc = subprocess.run(
        [sys.executable, _BENCH, "--quick", "--reps", "1", "--png", str(png), "--json",
         str(js)], cwd=_REPO, capture_output=True, text=True, timeout=600,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    with open(js) as f:
        data = json.load(f)
    return proc.stdout, png, data


def test_outputs_written(quick_run):
    stdout, png, data = quick_run
    assert png.stat().st_size > 1000
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert set(data) >= {"meta", "gemm", "results", "comparisons", "targets"}
    assert "| benchmark |" in stdout and "Targets" in stdout


def test_meta_and_gemm(quick_run):
    _, _, data = quick_run
    meta = data["meta"]
    assert set(meta) >= {"tensorflow", "torch", "cpus", "reps", "sizes", "dtypes",
                         "memory_method"}
    assert meta["dtypes"] == ["float32", "bfloat16"]
    assert len(data["gemm"]) == len(meta["sizes"]) * len(meta["dtypes"])
    for g in data["gemm"]:
        assert g["gemm_rnn_gflops"] > 0 and g["gemm_square_gflops"] > 0
        torch_rate = g["torch_gemm_rnn_gflops"]
        assert (torch_rate is None) == (not meta["torch"]), (g, meta["torch"])
        assert torch_rate is None or torch_rate > 0, g
        assert g["peak_gflops"] == max(g["gemm_rnn_gflops"], g["gemm_square_gflops"],
                                       torch_rate or 0.0)


def test_results(quick_run):
    _, _, data = quick_run
    rows = data["results"]
    keys = {"bench", "impl", "size", "dtype", "ms", "gflops", "gemm_share", "peak_mib",
            "status", "flops"}
    benches = {r["bench"] for r in rows}
    assert benches == set(data["meta"]["only"])
    has_torch = importlib.util.find_spec("torch") is not None
    for r in rows:
        assert set(r) >= keys
        can_run = (r["impl"] in _ALWAYS or (r["impl"] == "torch" and has_torch)
                   or (r["impl"] == "stock" and r["dtype"] == "float32"))
        if can_run:
            assert r["status"] == "ok", r
        if r["status"] == "ok":
            assert r["ms"] > 0 and r["gflops"] > 0 and r["gemm_share"] > 0, r
        else:
            assert r["status"].startswith("n/a") and r["ms"] is None, r
        if r["impl"] == "torch" and not has_torch:
            assert "not installed" in r["status"]
    # stock BlockLSTM takes half and float only: bfloat16 is n/a, not an error
    assert any(r["impl"] == "stock" and r["dtype"] == "bfloat16" and r["status"] != "ok"
               for r in rows)


def test_memory_and_comparisons(quick_run):
    _, _, data = quick_run
    if data["meta"]["memory_method"].startswith(("not measured", "failed")):
        assert not data["meta"]["memory_method"].startswith("failed"), data["meta"]
        pytest.skip(data["meta"]["memory_method"])
    measured = [r for r in data["results"] if r["peak_mib"] is not None]
    assert measured and all(r["peak_mib"] >= 0 for r in measured)
    assert any(r["bench"] == "block_lstm_grad" and r["impl"] == "ours" for r in measured)
    for c in data["comparisons"]:
        if c["ours_ms"] is not None and c["peer_ms"] is not None:
            assert c["ratio"] > 0
    names = {t["name"] for t in data["targets"]}
    assert "block_lstm_grad stock/ours" in names


def test_sweep(tmp_path):
    """--sweep H at tiny sizes: every value off the 64-grid brings its next multiple of 64, the
    table has a row per value and benchmark with ours' GF/s and the ratio to that neighbour,
    the plot is a PNG."""
    png, js = tmp_path / "sweep.png", tmp_path / "sweep.json"
    proc = subprocess.run(
        [sys.executable, _BENCH, "--sweep", "H", "--sweep-base", "3x2x8", "--sweep-values",
         "20,64", "--dtypes", "float32", "--reps", "1", "--square", "128", "--torch-threads",
         "1", "--only", "keras_lstm_infer,gru_train", "--png", str(png), "--json", str(js)],
        cwd=_REPO, capture_output=True, text=True, timeout=600,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    with open(js) as f:
        data = json.load(f)
    rows = data["sweep"]
    assert sorted({r["value"] for r in rows}) == [20, 64]
    # "% of GEMM" is against the fastest GEMM measured beside the size, never the input
    # shape's rate alone when another ran faster.
    best = {g["size"][3]: max(g["gemm_rnn_gflops"], g["gemm_square_gflops"],
                              g["torch_gemm_rnn_gflops"] or 0.0) for g in data["gemm"]}
    for r in rows:
        assert r["gemm_gflops"] == best[r["value"]], (r, data["gemm"])
    assert {r["bench"] for r in rows} == {"keras_lstm_infer", "gru_train"}
    for r in rows:
        assert r["ours_gflops"] > 0, r
        assert (r["vs_next64"] is None) == (r["value"] == 64), r
    assert "### keras_lstm_infer, float32 (H sweep" in proc.stdout
    assert "vs next 64" in proc.stdout and "Lowest GF/s against the next multiple" in proc.stdout
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_sweep_batch(tmp_path):
    """--sweep B: a row per batch and benchmark with ours' and PyTorch's GF/s (where PyTorch is
    installed), no neighbour column (a batch has no next multiple of 64 to compare with)."""
    js = tmp_path / "sweep.json"
    proc = subprocess.run(
        [sys.executable, _BENCH, "--sweep", "B", "--sweep-base", "3x8x16", "--sweep-values",
         "1,5", "--dtypes", "float32", "--reps", "1", "--square", "128", "--torch-threads", "1",
         "--only", "keras_lstm_infer", "--png", str(tmp_path / "b.png"), "--json", str(js)],
        cwd=_REPO, capture_output=True, text=True, timeout=600,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    with open(js) as f:
        rows = json.load(f)["sweep"]
    assert sorted(r["value"] for r in rows) == [1, 5]
    for r in rows:
        assert r["ours_gflops"] > 0 and r["vs_next64"] is None, r
    assert "### keras_lstm_infer, float32 (B sweep, other sizes 3x8x16)" in proc.stdout
    assert "Lowest GF/s against the next multiple" not in proc.stdout


def test_turns():
    """bench_turns.py --vs-h at a tiny size: a row per side with positive times in order
    (fastest <= p10 <= median <= p90) and a count of page faults a call (>= 0), the GF/s ratio
    line; bad arguments exit with usage."""
    script = os.path.join(_REPO, "bench", "bench_turns.py")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run(
        [sys.executable, script, "--size", "4x3x8x16", "--kind", "gru", "--dtype", "bfloat16",
         "--vs-h", "20", "--rounds", "2", "--calls", "2", "--settle", "0"],
        cwd=_REPO, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    rows = [ln.split("|")[1:-1] for ln in proc.stdout.splitlines()
            if ln.startswith("| ours")]
    assert [r[0].strip() for r in rows] == ["ours", "ours H=20"], proc.stdout
    for r in rows:
        ms = [float(v) for v in r[1:5]]
        assert 0 < ms[0] <= ms[1] <= ms[2] <= ms[3], r
        assert len(r) == 8 and float(r[7]) >= 0, r
    assert "ours H=16 / ours H=20 (GF/s): fastest" in proc.stdout
    assert "round 2/2" in proc.stderr
    bad = subprocess.run([sys.executable, script, "--size", "4x3x8", "--vs-h", "20"],
                         cwd=_REPO, capture_output=True, text=True, timeout=600, env=env)
    assert bad.returncode == 2 and "TxBxIxH" in bad.stderr, bad.stderr[-2000:]


def test_turns_training_against_gemms():
    """bench_turns.py --train --vs-gemm at a tiny size: our training step and the GEMM sides
    (tf.matmul of the input-projection shape and of the square; torch.matmul where PyTorch is
    installed) with positive times in order, and the share of the fastest GEMM for the fastest
    and the median calls; --vs-gemm with --vs-h exits with usage."""
    script = os.path.join(_REPO, "bench", "bench_turns.py")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run(
        [sys.executable, script, "--size", "4x3x8x16", "--kind", "lstm", "--train",
         "--vs-gemm", "--square", "32", "--rounds", "2", "--calls", "2", "--settle", "0"],
        cwd=_REPO, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    assert "LSTM float32 training step, T×B×I×H = 4×3×8×16" in proc.stdout, proc.stdout
    rows = {ln.split("|")[1].strip(): ln.split("|")[2:-1] for ln in proc.stdout.splitlines()
            if ln.startswith("| ") and not ln.startswith("| side")}
    names = set(rows)
    assert {"ours", "tf.matmul 12x24x64", "tf.matmul 32³"} <= names, names
    assert names - {"ours", "tf.matmul 12x24x64", "tf.matmul 32³"} <= {"torch.matmul 12x24x64"}
    for r in rows.values():
        ms = [float(v) for v in r[:4]]
        assert 0 < ms[0] <= ms[1] <= ms[2] <= ms[3], r
    shares = [ln for ln in proc.stdout.splitlines() if ln.startswith("ours / the fastest GEMM")]
    assert len(shares) == 2 and float(shares[0].rsplit(":", 1)[1]) > 0, proc.stdout
    bad = subprocess.run([sys.executable, script, "--vs-gemm", "--vs-h", "20"],
                         cwd=_REPO, capture_output=True, text=True, timeout=600, env=env)
    assert bad.returncode == 2 and "choose one" in bad.stderr, bad.stderr[-2000:]
