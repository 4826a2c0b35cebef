#!/usr/bin/env bash
# Builds the CUDA engine's sources (cc/gpu/) with g++ alone, against the host emulation of the
# CUDA runtime and cuBLAS in cc/gpu/emu/ (see cuda_emu.h), into a library with the same C API
# as tf_rnn_ops/_tfrnn_engine_cuda.so that runs on a CPU:
#   build/cuda_emu/_tfrnn_engine_cuda_emu.so     (TF_RNN_OPS_CUDA_EMU_OUT overrides)
# tests/test_cuda_emulated.py runs the GPU checks (tests/gpu/) on it. No GPU, nvcc or
# TensorFlow needed. Prints one line per compiled file.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
CXX="${CXX:-g++}"
OUT="${TF_RNN_OPS_CUDA_EMU_OUT:-$ROOT/build/cuda_emu/_tfrnn_engine_cuda_emu.so}"
OBJ="$(dirname "$OUT")/obj-$(basename "$OUT" .so)"
mkdir -p "$OBJ" "$(dirname "$OUT")"
SRCS=(cc/gpu/cublas_loader.cc cc/gpu/rnn_gpu_validate.cc cc/gpu/c_api.cc
      cc/gpu/rnn_gpu_forward.cu cc/gpu/rnn_gpu_backward.cu cc/gpu/transpose.cu
      cc/gpu/lstm_gpu.cu cc/gpu/gru_gpu.cu cc/gpu/rnn_gpu_persistent.cu
      cc/gpu/rnn_gpu_persistent_bwd.cu cc/gpu/rnn_gpu_cluster.cu)
HDRS=(cc/engine/types.h cc/gpu/*.h cc/gpu/*.cuh cc/gpu/emu/*.h "$0")
FLAGS=(-std=c++17 -O1 -g -fPIC -fvisibility=hidden -Wall -Werror -Wno-unknown-pragmas -DTFRNN_CUDA_EMULATE=1
       -U_FORTIFY_SOURCE  # the fibers' _longjmp between stacks (cuda_emu_coop.h)
       -I"$ROOT/cc/gpu/emu" -I"$ROOT" ${TF_RNN_OPS_CUDA_EMU_CXXFLAGS:-})
start=$(date +%s)
objs=()
for src in "${SRCS[@]}"; do
  obj="$OBJ/$(basename "$src").o"
  objs+=("$obj")
  stale=0
  [ -f "$obj" ] || stale=1
  for dep in "$src" "${HDRS[@]}"; do [ "$dep" -nt "$obj" ] 2>/dev/null && stale=1; done
  [ "$stale" = 1 ] || continue
  echo "[build_cuda_emu] compiling $src"
  "$CXX" "${FLAGS[@]}" -x c++ -c "$src" -o "$obj"
done
"$CXX" -shared -o "$OUT.tmp" "${objs[@]}" ${TF_RNN_OPS_CUDA_EMU_CXXFLAGS:-} -Wl,-z,defs -ldl -lpthread
mv -f "$OUT.tmp" "$OUT"
echo "[build_cuda_emu] $(basename "$OUT") built in $(( $(date +%s) - start )) s -> $OUT"
