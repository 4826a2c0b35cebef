"""The CUDA engine (cc/gpu/) on a machine without a GPU: its sources built with g++ against the
host emulation of the CUDA runtime and cuBLAS in cc/gpu/emu/ (tools/build_cuda_emu.sh; kernels
run thread by thread on the CPU), then the GPU checks of tests/gpu/ run on that build:

- CPU-vs-CUDA parity (tests/gpu/cpu_parity.py): the CPU engine (verified against stock
  TensorFlow and float64 references) and the CUDA engine's code on the same inputs, forward and
  backward, float32 and float64, dropout masks bit-equal. numpy only. On each of the
  engine's paths (PATHS): the persistent kernels, the per-step path, the cluster kernels, the
  fused step kernels.
- the full GPU check list (tests/gpu/run_gpu_checks.py) when PyTorch is installed, on the
  persistent and cluster kernels and on the tensor-core persistent kernels: vs PyTorch's
  RNNs (cuDNN's stand-in on CPU), vs the float64 reference (half, bfloat16, float, double), the
  LSTM block engine and GRU block cell, determinism, bad input. The checks that need a real GPU
  (cuDNN's weight buffer) skip.

- the warp tensor-core product that the half and bfloat16 kernels build on (cc/gpu/mma.cuh,
  tests/gpu/mma_checks.py): its fragment layout, on the emulation's shuffle path, against numpy.

- the XLA custom calls' CUDA targets (cc/xla/rnn_ffi_gpu.cc) run by JAX's XLA
  (tests/gpu/xla_ffi_checks.py): every result equal to the CPU engine's.

- the parity check again on a build with AddressSanitizer and UndefinedBehaviorSanitizer (the
  emulation's stand-in for compute-sanitizer's memcheck: reads and writes past the caller's
  buffers, and undefined behaviour in the kernels' index arithmetic).

What emulation cannot show (races, launch limits, speed) stays for
tools/gpu_session.sh on a GPU machine (docs/GPU.md)."""

import importlib.util
import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GPU_TESTS = os.path.join(REPO, "tests", "gpu")
sys.path.insert(0, GPU_TESTS)
import cuda_engine as ce  # noqa: E402


def _build(out, cxxflags=""):
    try:
        return ce.build_emulation(out, cxxflags)
    except FileNotFoundError as e:
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def emulated_engine():
    return _build(ce.EMULATED_SO)


def _run_checks(script, so, *args, env_extra=None):
    """Runs a tests/gpu script on the emulation; returns (summary counts, output)."""
    env = dict(os.environ, TF_RNN_OPS_CUDA_EMULATED="1", TF_RNN_OPS_CUDA_ENGINE=so,
               PYTHONUNBUFFERED="1", **(env_extra or {}))
    r = subprocess.run([sys.executable, os.path.join(GPU_TESTS, script), *args], cwd=REPO,
                       env=env, capture_output=True, text=True, timeout=1800)
    out = r.stdout + r.stderr
    m = re.search(r"summary: \{'PASS': (\d+), 'FAIL': (\d+), 'SKIP': (\d+)\}", out)
    assert m, f"{script} printed no summary (exit {r.returncode}):\n{out[-4000:]}"
    counts = dict(zip(("PASS", "FAIL", "SKIP"), map(int, m.groups())))
    failed = [ln for ln in out.splitlines() if ln.startswith("FAIL")]
    assert counts["FAIL"] == 0 and r.returncode == 0, "\n".join(failed) or out[-4000:]
    return counts, out


# The engine's paths, by environment: its defaults (DefaultBwd in
# rnn_gpu_persistent_kernels.cuh: the persistent backward for one or two batch rows, the cluster
# backward up to 16 rows at Hs <= 512); the persistent forward and backward kernels wherever
# they fit (small batch; every thread a fiber of a cooperative launch); the per-step path
# everywhere; the cluster kernels with clusters of 2 blocks (two clusters on the emulated
# device, so the batch is split between them) and of 4 (one cluster).
PATHS = {
    "default": dict(TFRNN_CUDA_TRACE="1"),
    "persistent": dict(TFRNN_CUDA_PERSISTENT="1", TFRNN_CUDA_PERSISTENT_BWD="1"),
    "per_step": dict(TFRNN_CUDA_PERSISTENT="0"),
    "cluster2": dict(TFRNN_CUDA_CLUSTER="1", TFRNN_CUDA_CLUSTER_SIZE="2", TFRNN_CUDA_TRACE="1"),
    "cluster4": dict(TFRNN_CUDA_CLUSTER="1", TFRNN_CUDA_CLUSTER_SIZE="4", TFRNN_CUDA_TRACE="1"),
    # The fused step kernels, batch rows in groups of 3 (so the parity cases' B = 4 spans two
    # groups, the second partial).
    "fused_step": dict(TFRNN_CUDA_PERSISTENT="0", TF_RNN_OPS_CUDA_FUSED_STEP="1",
                       TF_RNN_OPS_CUDA_FUSED_GROUP="3", TFRNN_CUDA_TRACE="1"),
}


def _check_ran(path, out):
    """With TFRNN_CUDA_TRACE=1 the engine names the kernel of every layer: the cluster kernels
    must have run both ways (not only the fallback paths)."""
    if path == "default":
        bwd = [(int(b), int(h), k) for b, h, k in re.findall(
            r"tfrnn_cuda backward B=(\d+) H=(\d+): (cluster|persistent|per-step)", out)]
        assert any(k == "persistent" for b, h, k in bwd if b <= 2), bwd
        assert any(k == "cluster" for b, h, k in bwd if 2 < b <= 16 and h <= 512), bwd
        assert not any(k != "per-step" for b, h, k in bwd if b > 16 or h > 512), bwd
        assert not any(k == "persistent" for b, h, k in bwd if b > 2), bwd
        return
    if path == "fused_step":
        for d in ("forward", "backward"):
            assert re.search(rf"tfrnn_cuda {d} B=4 .*: fused-step .*group=3 ", out), (
                f"no {d} layer ran on the fused step kernel in two groups")
        return
    size = PATHS[path].get("TFRNN_CUDA_CLUSTER_SIZE")
    if size is None:
        return
    for d in ("forward", "backward"):
        assert re.search(rf"tfrnn_cuda {d} .*: cluster .*cluster={size} ", out), (
            f"no {d} layer ran on the cluster kernel ({path})")


@pytest.mark.parametrize("path", list(PATHS))
def test_cpu_engine_parity(emulated_engine, path):
    counts, out = _run_checks("cpu_parity.py", emulated_engine, env_extra=PATHS[path])
    _check_ran(path, out)
    if "SKIP all" in out:
        pytest.skip(out.strip().splitlines()[-2])
    assert counts["PASS"] >= 24, out  # 10 cases x 2 dtypes + 4 dropout-mask checks


# The check list's paths: two of PATHS, the tensor-core persistent kernels wherever they fit
# (rnn_gpu_persistent_mma.cu, TFRNN_CUDA_MMA=1), and the tensor-core cluster kernels
# (rnn_gpu_cluster_mma.cu, with TFRNN_CUDA_CLUSTER=1; clusters of 2, so that B = 20 spans two
# clusters), which its half and bfloat16 cases with a hidden size that is a multiple of 16 run
# both ways (and compare with the CUDA-core kernels of the same path).
GPU_CHECK_PATHS = {
    "persistent": PATHS["persistent"],
    "cluster2": PATHS["cluster2"],
    "mma": dict(TFRNN_CUDA_MMA="1", TFRNN_CUDA_TRACE="1"),
    "cluster_mma": dict(PATHS["cluster2"], TFRNN_CUDA_MMA="1"),
}
# The hidden sizes of the check list's tensor-core cases, and the filters that select them.
MMA_SIZES = ("16", "32", "80", "144")
MMA_CASES = tuple(f"-H={h}-" for h in MMA_SIZES)


def _check_mma_ran(out, kernel):
    """Every tensor-core case ran on `kernel` both ways (lstm, rnn_tanh, gru)."""
    for d in ("forward", "backward"):
        ran = re.findall(rf"tfrnn_cuda {d} B=\d+ H=(\d+): {kernel} ", out)
        assert set(MMA_SIZES) <= set(ran), (d, kernel, ran)


@pytest.mark.parametrize("path", list(GPU_CHECK_PATHS))
def test_gpu_checks(emulated_engine, path):
    if importlib.util.find_spec("torch") is None:
        pytest.skip("PyTorch is not installed (the check list builds its operands with it)")
    counts, out = _run_checks("run_gpu_checks.py", emulated_engine,
                              env_extra=GPU_CHECK_PATHS[path])
    if path == "mma":
        _check_mma_ran(out, "persistent-mma")
    elif path == "cluster_mma":
        _check_mma_ran(out, "cluster-mma")
    else:
        _check_ran(path, out)
    assert counts["PASS"] >= 100, out
    skipped = [ln for ln in out.splitlines() if ln.startswith("SKIP")]
    assert all("needs a real GPU" in ln for ln in skipped), "\n".join(skipped)


def test_tensor_core_defaults(emulated_engine):
    """Without TFRNN_CUDA_MMA the engine takes the tensor-core kernels only where they measured
    faster: the forward at H = 144 with B = 9 and 20, the backward only with B = 20; never at
    H = 16 (below 129 units)."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("PyTorch is not installed (the check list builds its operands with it)")
    env = dict(TFRNN_CUDA_TRACE="1")
    _, out = _run_checks("run_gpu_checks.py", emulated_engine, "-H=144-", "B=20-H=16-",
                         env_extra=env)
    ran = {(d, int(b), int(h)): k for d, b, h, k in re.findall(
        r"tfrnn_cuda (forward|backward) B=(\d+) H=(\d+): (\S+) ", out)}
    assert ran[("forward", 9, 144)] == "persistent-mma", ran
    assert ran[("forward", 20, 144)] == "persistent-mma", ran
    assert ran[("backward", 20, 144)] == "persistent-mma", ran
    assert ran[("backward", 9, 144)] != "persistent-mma", ran
    assert all(k != "persistent-mma" for (d, b, h), k in ran.items() if h == 16), ran


def test_tensor_core_clusters_of_four(emulated_engine):
    """The tensor-core cluster kernels with clusters of 4 blocks on the tensor-core cases: U
    rounded up to 8 units leaves the last block fewer units (H = 80, 144) or none (H = 16), and
    one cluster takes B = 20 in two 16-row tiles."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("PyTorch is not installed (the check list builds its operands with it)")
    env = dict(PATHS["cluster4"], TFRNN_CUDA_MMA="1")
    counts, out = _run_checks("run_gpu_checks.py", emulated_engine, *MMA_CASES, env_extra=env)
    _check_mma_ran(out, "cluster-mma")
    assert re.search(r"tfrnn_cuda forward B=20 H=16: cluster-mma .*group=20 units=8 ", out), out
    assert counts["PASS"] == 8, out


def test_tensor_core_clusters_of_eight_rows(emulated_engine):
    """Where a block with 16-row vectors does not fit the device's shared memory (the half LSTM
    backward at H = 512 on an H100), the tensor-core cluster kernels take groups of at most 8
    batch rows, in half tiles: an emulated device with 90000 bytes a block, where the gru case
    at B = 9, H = 144 needs 93312 (forward) and 95616 (backward) with 16 rows, 78944 and 81536
    with 8, runs it in two clusters of 5 and 4 rows both ways."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("PyTorch is not installed (the check list builds its operands with it)")
    env = dict(PATHS["cluster2"], TFRNN_CUDA_MMA="1", TFRNN_EMU_SMEM_OPTIN="90000")
    counts, out = _run_checks("run_gpu_checks.py", emulated_engine, "-H=144-", env_extra=env)
    for d in ("forward", "backward"):
        assert re.search(rf"tfrnn_cuda {d} B=9 H=144: cluster-mma .*cluster=2 group=5 ", out), out
    assert counts["PASS"] == 2, out


def test_tensor_core_product(emulated_engine):
    counts, _ = _run_checks("mma_checks.py", emulated_engine)
    assert counts["PASS"] == 13  # 4 shapes x 2 dtypes + 5 refusals


def test_xla_custom_call_targets_through_jax(emulated_engine):
    pytest.importorskip("jax")
    counts, _ = _run_checks("xla_ffi_checks.py", emulated_engine)
    assert counts["PASS"] >= 15 and counts["SKIP"] == 0  # 12 cases, 3 bad inputs


def _sanitized():
    """The ASan + UBSan build of the emulation and the environment that preloads its runtimes."""
    libs = []
    for name in ("libasan.so", "libubsan.so"):
        r = subprocess.run([os.environ.get("CXX", "g++"), f"-print-file-name={name}"],
                           capture_output=True, text=True)
        lib = r.stdout.strip()
        if r.returncode != 0 or not os.path.isabs(lib) or not os.path.exists(lib):
            pytest.skip(f"no {name} for this compiler")
        libs.append(lib)
    so = _build(os.path.join(REPO, "build", "cuda_emu_asan", "_tfrnn_engine_cuda_emu.so"),
                "-fsanitize=address,undefined -fno-sanitize-recover=undefined "
                "-fno-omit-frame-pointer")
    return so, dict(LD_PRELOAD=" ".join(libs), ASAN_OPTIONS="detect_leaks=0:abort_on_error=1")


# One dtype per path under the sanitizers (the float32 and float64 instances share their index
# arithmetic; the unsanitized runs above take both): the suite's slowest test otherwise.
@pytest.mark.parametrize("path,dtype", [("persistent", "float32"), ("cluster2", "float64")])
def test_cpu_engine_parity_sanitized(path, dtype):
    """cpu_parity on an ASan + UBSan build (numpy only; the sanitizer runtimes preloaded)."""
    so, env = _sanitized()
    counts, out = _run_checks("cpu_parity.py", so, "--dtypes", dtype,
                              env_extra=dict(PATHS[path], **env))
    _check_ran(path, out)
    if "SKIP all" in out:
        pytest.skip(out.strip().splitlines()[-2])
    assert counts["PASS"] >= 22, out  # every case and dropout-mask check of one dtype
    assert "runtime error" not in out and "AddressSanitizer" not in out, out[-4000:]


def test_tensor_core_product_sanitized():
    """mma_checks on the ASan + UBSan build: the fragment loads and stores stay in bounds."""
    so, env = _sanitized()
    counts, out = _run_checks("mma_checks.py", so, env_extra=env)
    assert counts["PASS"] == 13, out
    assert "runtime error" not in out and "AddressSanitizer" not in out, out[-4000:]
