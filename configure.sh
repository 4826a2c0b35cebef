#!/usr/bin/env bash
# Sets up tf_rnn_ops on a fresh machine, offline-friendly, idempotent:
#   1. a virtual environment ($TF_RNN_OPS_VENV, default .venv) with TensorFlow, NumPy, pytest,
#      and the test/example extras hypothesis, statsmodels, matplotlib;
#   2. Bazel (Debian's bazel-bootstrap) if missing;
#   3. .bazelrc with the TensorFlow header/library locations taken from tf.sysconfig
#      (tools/bazelrc.sh);
#   4. installs the project into the venv with `pip install --no-build-isolation -e .` (skip with
#      --no-build), whose build backend (pyproject.toml) builds the op library with Bazel into
#      the package; when nvcc is found (PATH or /usr/local/cuda/bin) also the TF-free CUDA
#      engine, and the op library then registers GPU kernels for the TfRnn>CudnnRNN* ops
#      (docs/GPU.md).
# Environment:
#   TF_RNN_OPS_VENV        virtual environment path (default: <repo>/.venv)
#   TF_RNN_OPS_TF_VERSION  TensorFlow version to install and build against (e.g. 2.19.0).
#                          Unset: build against the TensorFlow the venv already has, or install
#                          2.21.0 when it has none.
#   TF_RNN_OPS_TF_PACKAGE  full requirement instead (e.g. tf-nightly-cpu); overrides the above.
#   TF_RNN_OPS_CUDA=0      CPU-only build even where nvcc exists.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$ROOT"
VENV="${TF_RNN_OPS_VENV:-$ROOT/.venv}"
DEFAULT_TF_VERSION=2.21.0
BUILD=1
for arg in "$@"; do
  case "$arg" in
    --no-build) BUILD=0 ;;
    -h|--help) sed -n 2,12p "$0"; exit 0 ;;
    *) echo "configure.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done

log() { echo "[configure] $*"; }

# --- 1. Python environment ---------------------------------------------------------------
PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  log "creating virtual environment $VENV"
  "$PY" -m venv "$VENV"
fi
VPY="$VENV/bin/python"
have="$("$VPY" -c 'import tensorflow as tf; print(tf.__version__)' 2>/dev/null | tail -1 || true)"
if [ -n "${TF_RNN_OPS_TF_PACKAGE:-}" ]; then
  log "installing $TF_RNN_OPS_TF_PACKAGE numpy pytest into $VENV"
  "$VPY" -m pip install -q --disable-pip-version-check "$TF_RNN_OPS_TF_PACKAGE" numpy pytest
elif [ -n "${TF_RNN_OPS_TF_VERSION:-}" ] && [ "$have" != "$TF_RNN_OPS_TF_VERSION" ]; then
  log "installing tensorflow-cpu==$TF_RNN_OPS_TF_VERSION numpy pytest into $VENV"
  "$VPY" -m pip install -q --disable-pip-version-check "tensorflow-cpu==$TF_RNN_OPS_TF_VERSION" \
    numpy pytest
elif [ -z "$have" ]; then
  log "installing tensorflow-cpu==$DEFAULT_TF_VERSION numpy pytest into $VENV"
  "$VPY" -m pip install -q --disable-pip-version-check "tensorflow-cpu==$DEFAULT_TF_VERSION" \
    numpy pytest
fi
"$VPY" -c 'import numpy, pytest' 2>/dev/null || "$VPY" -m pip install -q --disable-pip-version-check numpy pytest
# Test and example extras: hypothesis (fuzzer), statsmodels (ships the sunspot data the example
# trains on; nothing is downloaded at run time) and matplotlib (the example's plot).
"$VPY" -c 'import hypothesis, statsmodels, matplotlib' 2>/dev/null ||
  "$VPY" -m pip install -q --disable-pip-version-check hypothesis statsmodels matplotlib
# ONNX export (tf_rnn_ops/onnx_export.py, tests/test_onnx.py): pinned; their declared
# dependencies (numpy, protobuf, onnx) are all met by TensorFlow's, so pip changes none of them.
"$VPY" -c 'import tf2onnx, onnx, onnxruntime' 2>/dev/null ||
  "$VPY" -m pip install -q --disable-pip-version-check tf2onnx==1.17.0 onnx==1.23.2 \
    onnxruntime==1.32.0
# JAX (tests/gpu/xla_ffi_checks.py: the XLA custom calls' CUDA targets run by JAX's XLA on the
# CUDA emulation, in a process of their own): pinned; its dependencies (numpy, scipy,
# ml_dtypes, opt_einsum) are TensorFlow's, at versions it accepts, so pip adds only jax and
# jaxlib. Nothing imports it beside TensorFlow.
"$VPY" -c 'import jax' 2>/dev/null ||
  "$VPY" -m pip install -q --disable-pip-version-check jax==0.10.2 jaxlib==0.10.2

# --- 2. Bazel ----------------------------------------------------------------------------
if ! command -v bazel >/dev/null 2>&1; then
  log "installing Bazel (Debian bazel-bootstrap)"
  SUDO=""; [ "$(id -u)" != 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get install -y -q bazel-bootstrap >/dev/null 2>&1 || {
    $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q bazel-bootstrap >/dev/null; }
fi

# --- 3. .bazelrc (TensorFlow locations from tf.sysconfig) -------------------------------
"$ROOT/tools/bazelrc.sh" "$VPY"
CUDA=0
if [ "${TF_RNN_OPS_CUDA:-1}" != 0 ]; then
  if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then CUDA=1; fi
fi

# --- 4. build and install ----------------------------------------------------------------
# The same path as a user's `pip install`: the project's build backend (pyproject.toml) runs
# tools/build.sh against the venv's TensorFlow; editable, so the libraries stay in tf_rnn_ops/
# and the venv imports the checkout. -v shows the build's progress lines.
if [ "$BUILD" = 1 ]; then
  log "pip install --no-build-isolation -e . (the Bazel build; its progress follows)"
  TF_RNN_OPS_CUDA="$CUDA" "$VPY" -m pip install -v --disable-pip-version-check \
    --no-build-isolation --no-deps -e "$ROOT"
fi
log "done"
