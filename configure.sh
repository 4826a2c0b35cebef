#!/usr/bin/env bash
# Sets up tf_rnn_ops on a fresh machine, offline-friendly, idempotent:
#   1. a virtual environment ($TF_RNN_OPS_VENV, default .venv) with TensorFlow, NumPy, pytest,
#      and the test/example extras hypothesis, statsmodels, matplotlib;
#   2. Bazel (Debian's bazel-bootstrap) if missing;
#   3. .bazelrc with the TensorFlow header/library locations taken from tf.sysconfig;
#   4. builds the op library and places it in the package (skip with --no-build); when nvcc is
#      found (PATH or /usr/local/cuda/bin) also the TF-free CUDA engine, and the op library then
#      registers GPU kernels for the TfRnn>CudnnRNN* ops (docs/GPU.md).
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

# --- 3. .bazelrc -------------------------------------------------------------------------
read -r TF_VERSION TF_INC TF_LIBDIR TF_LIBNAME TF_CFLAGS < <("$VPY" - <<'PYEOF' 2>/dev/null | tail -1
import tensorflow as tf
cflags = [f for f in tf.sysconfig.get_compile_flags() if not f.startswith("-I")]
lflags = tf.sysconfig.get_link_flags()
lib = [f[3:] for f in lflags if f.startswith("-l:")]
libname = lib[0] if lib else "libtensorflow_framework.so.2"
print(tf.__version__, tf.sysconfig.get_include(), tf.sysconfig.get_lib(), libname, ",".join(cflags))
PYEOF
)
log "TensorFlow $TF_VERSION at $TF_LIBDIR"
CUDA=0
if [ "${TF_RNN_OPS_CUDA:-1}" != 0 ]; then
  if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then CUDA=1; fi
fi
if [ "$CUDA" = 1 ]; then log "nvcc found: building the CUDA engine and GPU kernels"
else log "CPU-only build (no nvcc, or TF_RNN_OPS_CUDA=0)"; fi
{
  echo "# Written by configure.sh; re-run it after changing the TensorFlow install."
  echo "build --override_repository=rules_cc=$ROOT/third_party/bazel_stubs/rules_cc"
  echo "build --override_repository=rules_java=$ROOT/third_party/bazel_stubs/rules_java"
  echo "build --repo_env=TF_HEADER_DIR=$TF_INC"
  echo "build --repo_env=TF_SHARED_LIBRARY_DIR=$TF_LIBDIR"
  echo "build --repo_env=TF_SHARED_LIBRARY_NAME=$TF_LIBNAME"
  echo "build --define=TF_VERSION=$TF_VERSION"
  echo "build --define=PYTHON_BIN=$VPY"
  [ "$CUDA" = 1 ] && echo "build --define=TFRNN_CUDA=1"
  IFS=',' read -ra flags <<< "$TF_CFLAGS"
  for f in "${flags[@]}"; do
    case "$f" in --std=*|-std=*) echo "build --cxxopt=-std=c++17" ;; *) echo "build --copt=$f" ;; esac
  done
  echo "build -c opt"
  echo "build --copt=-O3"
  echo "build --copt=-Wno-deprecated-declarations --copt=-Wno-sign-compare --copt=-Wno-ignored-attributes"
  echo "build --spawn_strategy=standalone"
  echo "build --show_result=0"
  # AddressSanitizer + UndefinedBehaviorSanitizer (tools/asan_tests.sh): the op libraries and
  # the engines loaded with dlopen, in their own output directory (k8-opt-asan) next to the normal one.
  echo "build:asan --copt=-fsanitize=address,undefined --copt=-fno-sanitize=vptr"
  echo "build:asan --copt=-fno-omit-frame-pointer --copt=-O1 --copt=-g"
  echo "build:asan --linkopt=-fsanitize=address,undefined --strip=never"
  # Eigen's AVX-512 GEMM micro-kernel (Eigen/src/Core/arch/AVX512/GemmKernel.h), compiled by GCC
  # with -fsanitize=address, loads B panels outside their buffer: a guard-page test of the bare
  # tensor contraction (no code of ours) faults under ASan and is clean at -O1/-O2/-O3 without it.
  # Sanitized builds use Eigen's generic gebp kernel instead (AVX-512 packets, instrumented).
  echo "build:asan --copt=-DEIGEN_USE_AVX512_GEMM_KERNELS=0"
  # GCC: the null and nonnull checks break constexpr function-pointer comparisons in the abseil headers
  # (GCC bug 71962, abseil issue 1634): off for the files that include TensorFlow headers.
  echo "build:asan --per_file_copt=cc/kernels/.*,cc/ops/.*@-fno-sanitize=null,-fno-sanitize=nonnull-attribute,-fno-sanitize=returns-nonnull-attribute"
  echo "build:asan --platform_suffix=asan --symlink_prefix=bazel-asan-"
  # Flags of this checkout only (e.g. build --disk_cache=~/.cache/tf_rnn_ops-bazel), not versioned.
  echo "try-import %workspace%/.bazelrc.user"
} > "$ROOT/.bazelrc"

# --- 4. build ----------------------------------------------------------------------------
if [ "$BUILD" = 1 ]; then
  TF_RNN_OPS_CUDA="$CUDA" "$ROOT/tools/build.sh"
fi
log "done"
