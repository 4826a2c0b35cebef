#!/usr/bin/env bash
# Writes .bazelrc for the TensorFlow of the given Python: its header and library locations and
# compile flags (tf.sysconfig), the offline rule stand-ins, the CUDA switch and the asan config.
#   tools/bazelrc.sh PYTHON
# Used by configure.sh and by the build backend (build_backend/tf_rnn_ops_backend.py), so that
# every build, `pip install .` included, builds against the TensorFlow of the Python running it.
# Environment: TF_RNN_OPS_CUDA=0 writes a CPU-only configuration even where nvcc exists.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VPY="${1:?usage: tools/bazelrc.sh PYTHON}"
log() { echo "[configure] $*"; }
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
  echo "# Written by tools/bazelrc.sh (configure.sh, pip install): re-run after changing TensorFlow."
  echo "build --override_repository=rules_cc=$ROOT/third_party/bazel_stubs/rules_cc"
  echo "build --override_repository=rules_java=$ROOT/third_party/bazel_stubs/rules_java"
  echo "build --repo_env=TF_HEADER_DIR=$TF_INC"
  echo "build --repo_env=TF_SHARED_LIBRARY_DIR=$TF_LIBDIR"
  echo "build --repo_env=TF_SHARED_LIBRARY_NAME=$TF_LIBNAME"
  echo "build --define=TF_VERSION=$TF_VERSION"
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
