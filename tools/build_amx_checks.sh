#!/usr/bin/env bash
# Builds tests/amx_checks.cc (the bf16 products on AMX tiles, cc/engine/amx_gemm.h, against a
# double reference) with g++ against TensorFlow's Eigen headers from .venv:
#   tools/build_amx_checks.sh [OUT]           the tile instructions themselves (a CPU with AMX
#                                             runs it: tools/gpu_session.sh's amx_cpu stage,
#                                             on the GPU machine's Intel host; carry OUT)
#   EMULATE=1 tools/build_amx_checks.sh [OUT] the instructions emulated in C++ (any CPU with
#                                             AVX512_BF16; tests/test_amx.py)
# OUT defaults to build/amx_checks (build/amx_checks_emu with EMULATE=1).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
EMU="${EMULATE:-0}"
SUFFIX=""
[ "$EMU" = 1 ] && SUFFIX=_emu
OUT="${1:-build/amx_checks$SUFFIX}"
INC="$(ls -d .venv/lib/python3*/site-packages/tensorflow/include 2>/dev/null | head -1)"
if [ -z "$INC" ]; then
  echo "build_amx_checks.sh: no TensorFlow headers under .venv (run ./configure.sh)" >&2
  exit 1
fi
mkdir -p "$(dirname "$OUT")"
FLAGS=(-O2 -std=c++17 -w -DEIGEN_MAX_ALIGN_BYTES=64 -mavx512f -mavx512dq -mavx512bw -mavx512vl
       -mavx2 -mfma -I. -I"$INC")
[ "$EMU" = 1 ] && FLAGS+=(-DTFRNN_AMX_EMULATE)
echo "build_amx_checks.sh: g++ ${FLAGS[*]} -> $OUT"
g++ "${FLAGS[@]}" tests/amx_checks.cc -o "$OUT" -lpthread
echo "build_amx_checks.sh: built $OUT"
