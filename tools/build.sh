#!/usr/bin/env bash
# Builds the op library with Bazel and places it (with its build info) in the package,
# so that `import tf_rnn_ops` works from the repository root. Needs ./configure.sh first.
# Then builds the TF-free CUDA engine (tools/build_cuda.sh) when nvcc is found, unless
# TF_RNN_OPS_CUDA=0.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
[ -f .bazelrc ] || { echo "build.sh: run ./configure.sh first" >&2; exit 1; }
# Replaces a file by a new inode (install alone rewrites it in place, under any process that
# has the library mapped: the test suite rebuilds the wheel while its libraries are loaded).
place() { install -m 644 "$1" "$2.tmp" && mv -f "$2.tmp" "$2"; }
start=$(date +%s)
bazel build //cc:_tf_rnn_ops.so //cc:_tf_rnn_ops_cudnn_cpu.so //cc:engines //tf_rnn_ops:build_info "$@"
for lib in _tf_rnn_ops.so _tf_rnn_ops_cudnn_cpu.so _tfrnn_engine_avx.so _tfrnn_engine_avx2.so _tfrnn_engine_avx512.so; do
  place "bazel-bin/cc/$lib" "tf_rnn_ops/$lib"
done
place bazel-bin/tf_rnn_ops/_build_info.txt tf_rnn_ops/_build_info.txt
echo "[build] op library built in $(( $(date +%s) - start )) s -> tf_rnn_ops/_tf_rnn_ops.so"
# The XLA kernels: their own library, so that a TensorFlow whose XLA headers or exports do not
# fit costs only XLA support (TF_RNN_OPS_XLA=0 skips them).
rm -f tf_rnn_ops/_tf_rnn_ops_xla.so
if [ "${TF_RNN_OPS_XLA:-1}" = 0 ]; then
  echo "[build] TF_RNN_OPS_XLA=0: XLA kernels not built"
elif mkdir -p build && bazel build //cc:_tf_rnn_ops_xla.so "$@" > build/xla_build.log 2>&1; then
  place bazel-bin/cc/_tf_rnn_ops_xla.so tf_rnn_ops/_tf_rnn_ops_xla.so
  echo "[build] XLA kernels built -> tf_rnn_ops/_tf_rnn_ops_xla.so"
else
  echo "[build] XLA kernels NOT built for this TensorFlow (XLA support off; the ops work" \
       "without it): see build/xla_build.log" >&2
  tail -5 build/xla_build.log >&2
fi
# The TF-free CUDA engine (cc/gpu/), when nvcc exists; TF_RNN_OPS_CUDA=0 skips it.
if [ "${TF_RNN_OPS_CUDA:-1}" != 0 ]; then
  "$ROOT/tools/build_cuda.sh"
else
  rm -f tf_rnn_ops/_tfrnn_engine_cuda.so
  echo "[build] TF_RNN_OPS_CUDA=0: CUDA engine not built"
fi
