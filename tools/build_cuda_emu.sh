#!/usr/bin/env bash
# Builds the CUDA engine's sources (cc/gpu/) with g++ alone, against the host emulation of the
# CUDA runtime and cuBLAS in cc/gpu/emu/ (see cuda_emu.h), into a library with the same C API
# as tf_rnn_ops/_tfrnn_engine_cuda.so that runs on a CPU:
#   build/cuda_emu/_tfrnn_engine_cuda_emu.so     (TF_RNN_OPS_CUDA_EMU_OUT overrides)
# tests/test_cuda_emulated.py runs the GPU checks (tests/gpu/) on it. No GPU, nvcc or
# TensorFlow needed. Prints one line per compiled file. Compiles the sources listed in
# cc/gpu/SOURCES (the same list as tools/build_cuda.sh); an object is compiled again only when a
# file named in its dependency file (g++ -MMD) is newer, or the compiler or its flags changed
# (tools/cuda_build_common.sh). TF_RNN_OPS_CUDA_EMU_CXXFLAGS adds compiler flags (the sanitizer
# build in tests/test_cuda_emulated.py).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
CXX="${CXX:-g++}"
OUT="${TF_RNN_OPS_CUDA_EMU_OUT:-$ROOT/build/cuda_emu/_tfrnn_engine_cuda_emu.so}"
OBJ="$(dirname "$OUT")/obj-$(basename "$OUT" .so)"
mkdir -p "$OBJ" "$(dirname "$OUT")"
. "$ROOT/tools/cuda_build_common.sh"
cuda_sources
cuda_compiler_id "$CXX"
FLAGS=(-std=c++17 -O1 -g -fPIC -fvisibility=hidden -Wall -Werror -Wno-unknown-pragmas -DTFRNN_CUDA_EMULATE=1
       -U_FORTIFY_SOURCE  # the fibers' _longjmp between stacks (cuda_emu_coop.h)
       -I"$ROOT/cc/gpu/emu" -I"$ROOT" ${TF_RNN_OPS_CUDA_EMU_CXXFLAGS:-})
start=$(date +%s)
objs=()
for src in "${CUDA_SRCS[@]}"; do
  obj="$OBJ/$(basename "$src").o"
  objs+=("$obj")
  cmd=("$CXX" "${FLAGS[@]}" -MMD -MF "$obj.d" -x c++ -c "$src" -o "$obj")
  cuda_object_stale "$obj" "${cmd[@]}" || continue
  echo "[build_cuda_emu] compiling $src"
  cuda_compile_bg "$obj" "${cmd[@]}"
done
cuda_wait_objects "${objs[@]}"
"$CXX" -shared -o "$OUT.tmp" "${objs[@]}" ${TF_RNN_OPS_CUDA_EMU_CXXFLAGS:-} -Wl,-z,defs -ldl -lpthread
mv -f "$OUT.tmp" "$OUT"
echo "[build_cuda_emu] $(basename "$OUT") built in $(( $(date +%s) - start )) s -> $OUT"
