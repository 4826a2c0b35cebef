#!/usr/bin/env bash
# Builds the TF-free CUDA engine tf_rnn_ops/_tfrnn_engine_cuda.so (cc/gpu/, C API in
# cc/gpu/c_api.h) with nvcc alone: no TensorFlow, no Bazel, no cuBLAS at build time (cuBLAS is
# opened at run time). Used by tools/build.sh when nvcc exists and by tools/gpu_tests.sh on the
# GPU machines. Compiles the sources listed in cc/gpu/SOURCES (the same list as
# tools/build_cuda_emu.sh) into build/cuda/; an object is compiled again only when a file named in
# its dependency file (nvcc -MMD) is newer, or the compiler or its flags changed
# (tools/cuda_build_common.sh).
# Environment:
#   TF_RNN_OPS_NVCC         nvcc to use (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc)
#   TF_RNN_OPS_CUDA_ARCHS   SM versions, e.g. "90" (default "80 90": sm_80, sm_90 and PTX for 90)
#   TF_RNN_OPS_CUDA_OUT     output path (default <repo>/tf_rnn_ops/_tfrnn_engine_cuda.so)
# Exits 0 without building when no nvcc is found (prints why).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
NVCC="${TF_RNN_OPS_NVCC:-}"
if [ -z "$NVCC" ]; then
  if command -v nvcc >/dev/null 2>&1; then NVCC="$(command -v nvcc)"
  elif [ -x /usr/local/cuda/bin/nvcc ]; then NVCC=/usr/local/cuda/bin/nvcc
  fi
fi
if [ -z "$NVCC" ] || [ ! -x "$NVCC" ]; then
  echo "[build_cuda] no nvcc found; the CUDA engine is not built"
  exit 0
fi
OUT="${TF_RNN_OPS_CUDA_OUT:-$ROOT/tf_rnn_ops/_tfrnn_engine_cuda.so}"
OBJ="$ROOT/build/cuda"
mkdir -p "$OBJ" "$(dirname "$OUT")"
ARCHS="${TF_RNN_OPS_CUDA_ARCHS:-80 90}"
GENCODE=()
last=""
for a in $ARCHS; do GENCODE+=("-gencode" "arch=compute_$a,code=sm_$a"); last="$a"; done
GENCODE+=("-gencode" "arch=compute_$last,code=compute_$last")   # PTX for newer GPUs

. "$ROOT/tools/cuda_build_common.sh"
cuda_sources
cuda_compiler_id "$NVCC"

start=$(date +%s)
objs=()
for src in "${CUDA_SRCS[@]}"; do
  obj="$OBJ/$(basename "$src").o"
  objs+=("$obj")
  lang=()
  case "$src" in *.cu) lang=("-x" "cu" "${GENCODE[@]}") ;; *) lang=("-x" "c++") ;; esac
  cmd=("$NVCC" -std=c++17 -O3 -I"$ROOT" "${lang[@]}" -Xcompiler -fPIC,-fvisibility=hidden,-Wall
       -MMD -MF "$obj.d" -c "$src" -o "$obj")
  cuda_object_stale "$obj" "${cmd[@]}" || continue
  echo "[build_cuda] compiling $src"
  cuda_compile_bg "$obj" "${cmd[@]}"
done
cuda_wait_objects "${objs[@]}"
# Static CUDA runtime (no libcudart.so needed at run time), its symbols kept local.
"$NVCC" -shared -cudart static -o "$OUT.tmp" "${objs[@]}" \
  -Xlinker --exclude-libs,ALL -Xlinker -z,defs -ldl -lpthread -lrt
mv -f "$OUT.tmp" "$OUT"
echo "[build_cuda] $(basename "$OUT") built in $(( $(date +%s) - start )) s -> $OUT"
