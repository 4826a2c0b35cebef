#!/usr/bin/env bash
# The GPU tests, for a lent GPU machine: it has nvcc, PyTorch with CUDA (cuDNN) and CuPy but no
# TensorFlow and no Bazel. Builds the TF-free CUDA engine with nvcc alone (for this GPU's SM
# version), then runs tests/gpu (ours vs cuDNN through torch.nn, vs a float64 reference, and
# cuDNN's real weight layout), with pytest when it is installed, else run_gpu_checks.py.
#   tools/gpu_tests.sh            build + tests
#   tools/gpu_tests.sh --bench    also bench/gpu_bench.py (ours vs cuDNN, forward+backward)
# Environment: PYTHON (default python3), TF_RNN_OPS_CUDA_ARCHS (default: this GPU's).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
BENCH=0
for arg in "$@"; do
  case "$arg" in
    --bench) BENCH=1 ;;
    *) echo "gpu_tests.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done
if [ -z "${TF_RNN_OPS_CUDA_ARCHS:-}" ] && command -v nvidia-smi >/dev/null 2>&1; then
  cap="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')"
  [ -n "$cap" ] && export TF_RNN_OPS_CUDA_ARCHS="$cap"
fi
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader 2>/dev/null || true
"$ROOT/tools/build_cuda.sh"
[ -f tf_rnn_ops/_tfrnn_engine_cuda.so ] || { echo "gpu_tests.sh: engine not built" >&2; exit 1; }
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
"cudnn", torch.backends.cudnn.version(), "available", torch.cuda.is_available())'
status=0
if "$PY" -c 'import pytest' 2>/dev/null; then
  # --confcutdir: tests/conftest.py imports TensorFlow, which these machines do not have.
  "$PY" -m pytest -q -p no:cacheprovider --confcutdir=tests/gpu tests/gpu -rs || status=$?
else
  "$PY" tests/gpu/run_gpu_checks.py || status=$?
fi
if [ "$BENCH" = 1 ]; then
  "$PY" bench/gpu_bench.py || status=$?
fi
exit "$status"
