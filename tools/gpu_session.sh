#!/usr/bin/env bash
# Everything a GPU lease should run, in one command (tools/gpu_tests.sh is the plain test run):
# build the CUDA engine for this GPU, the checks (tests/gpu, ours vs cuDNN and the float64
# reference), the CPU-vs-GPU parity checks, compute-sanitizer (memcheck, racecheck) over one
# small case per family, and bench/gpu_bench.py. The engine's paths are chosen by environment
# (docs/GPU.md): checks_steps reruns the checks on the per-step path (TFRNN_CUDA_PERSISTENT=0),
# checks_pbwd with the persistent backward wherever it fits (TFRNN_CUDA_PERSISTENT_BWD=1), and
# the *_cluster stages with the cluster kernels wherever they fit (TFRNN_CUDA_CLUSTER=1), the
# *_fused stages with the fused step kernels instead of the persistent ones and the per-step
# path (TFRNN_CUDA_PERSISTENT=0 TF_RNN_OPS_CUDA_FUSED_STEP=1; parity in groups of 3). bench
# times every path against cuDNN (float32, half, bfloat16), bench_targets the defaults at the
# GPU issue's target sizes only; bench_clusters compares cluster sizes 2 to 16 at the
# issue's small-batch sizes; xla_ffi runs the XLA custom calls' CUDA targets through JAX
# (tests/gpu/xla_ffi_checks.py); bench_keras times the Keras op's form with per-gate masks
# (recurrent dropout) against a framework loop (bench/gpu_bench_keras.py); ncu / ncu_cluster
# profile one persistent / cluster launch, ncu_steps the per-step path's kernels; mma checks
# the warp tensor-core product of cc/gpu/mma.cuh (mma.sync m16n8k16, half and bfloat16, its
# fragment layout) against numpy (tests/gpu/mma_checks.py); the *_mma stages run the
# tensor-core persistent kernels (TFRNN_CUDA_MMA=1, half and bfloat16) through the checks, the
# sanitizers and the benchmark (bench_mma: against cuDNN and the defaults), the *_cmma stages
# the tensor-core cluster kernels (TFRNN_CUDA_CLUSTER=1 TFRNN_CUDA_MMA=1) the same way (the
# sanitizers also on the half lstm at H = 512, whose backward runs in 8-row groups; bench_cmma:
# half lstm, the sizes where cuDNN's persistent fp16 kernel beats the others).
# Each stage has a time limit and its own log under $OUT (default /tmp/gpu_session); the last
# lines printed are summary.txt. The parity stages need the CPU engines
# (tf_rnn_ops/_tfrnn_engine_*.so, built here by Bazel: carry them); cpu_scaling needs
# bench/engine_bench (bazel-bin/bench/engine_bench, copied to build/engine_bench: carry it);
# amx_cpu needs build/amx_checks (tools/build_amx_checks.sh: carry it).
# GPU_SESSION_BUDGET=<seconds> fits the whole run into a lease: each stage's limit is cut to
# the time left, and a stage with under 15 s left is skipped (and says so in the summary).
#   tools/gpu_session.sh [stage ...]
#     stages: build checks checks_steps checks_pbwd checks_cluster checks_fused parity
#             parity_cluster parity_fused memcheck memcheck_cluster memcheck_parity
#             memcheck_fused racecheck racecheck_cluster racecheck_fused bench bench_targets
#             bench_clusters xla_ffi bench_keras ncu ncu_cluster ncu_steps ncu_half ncu_half64
#             ncu_mma cpu_scaling mma checks_mma memcheck_mma racecheck_mma bench_mma
#             checks_cmma memcheck_cmma racecheck_cmma bench_cmma ncu_cmma amx_cpu
#             cpu_scaling_amx
#     (default: build mma checks checks_mma checks_cmma checks_steps checks_pbwd checks_cluster parity
#      parity_cluster xla_ffi memcheck memcheck_cluster memcheck_parity racecheck
#      racecheck_cluster amx_cpu)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT="${OUT:-/tmp/gpu_session}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1
STAGES=("$@")
[ ${#STAGES[@]} -gt 0 ] || STAGES=(build mma checks checks_mma checks_cmma checks_steps checks_pbwd
                                   checks_cluster parity
                                   parity_cluster xla_ffi memcheck memcheck_cluster
                                   memcheck_parity racecheck racecheck_cluster amx_cpu)
CLUSTER=(env TFRNN_CUDA_CLUSTER=1)
FUSED=(env TFRNN_CUDA_PERSISTENT=0 TF_RNN_OPS_CUDA_FUSED_STEP=1 TFRNN_CUDA_TRACE=1)
# Nsight Compute over cuDNN's kernels and ours (bench/gpu_profile_step.py --cudnn).
NCU_VS_CUDNN=(ncu --clock-control none --kernel-name-base demangled
              --kernel-name "regex:tfrnn|RNN|rnn|LSTM|lstm|Persist|persist|elemWise|gemm|Gemm|xmma"
              --launch-count 40 --section SpeedOfLight --section LaunchStats
              --section ComputeWorkloadAnalysis)
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
# One small case per family, for the sanitizers (run_gpu_checks.py filters).
SMALL=("vs_cudnn[mode=lstm-L=1-D=1-lengths=None-dtype=float32-T=1-B=1]"
       "vs_reference[mode=lstm-L=2-D=2-lengths=zero]" "vs_reference[mode=gru-L=2-D=2-lengths=zero]"
       "vs_reference[mode=rnn_tanh-L=1-D=2-lengths=zero]"
       "vs_reference[mode=lstm-D=2-peephole=True-has_mask=True-mask_per_step=True]"
       "vs_reference[mode=gru-has_mask=True-mask_per_step=True-gru_reset_before=True-D=2]"
       "lstm_block[gate_order=ifco-use_peephole=True-cell_clip=0.6-exact_clip_grad=True]"
       "gru_cell[gate_grads=True]")
T_START=$(date +%s)
BUDGET="${GPU_SESSION_BUDGET:-0}"
stage() {
  local name="$1" limit="$2"; shift 2
  local t0; t0=$(date +%s)
  if [ "$BUDGET" -gt 0 ]; then
    local left=$(( BUDGET - (t0 - T_START) ))
    if [ "$left" -lt 15 ]; then
      echo "$name: skipped (${left}s of the budget left)" | tee -a "$SUMMARY"; return
    fi
    [ "$left" -lt "$limit" ] && limit="$left"
  fi
  echo "== $name (limit ${limit}s)"
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  local line; line="$(grep -E '^summary|ERROR SUMMARY|built in|^amx_checks' "$OUT/$name.log" | tail -3 | tr '\n' ' ')"
  echo "$name: rc=$rc $(( $(date +%s) - t0 ))s $line" | tee -a "$SUMMARY"
  tail -n 4 "$OUT/$name.log"
}
nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.sm,clocks.mem --format=csv,noheader \
  2>&1 | tee -a "$SUMMARY"
# The host CPU in full (cpu_scaling's figures depend on its ISA: AVX512_BF16, AMX).
{ lscpu; grep -m1 '^flags' /proc/cpuinfo; } > "$OUT/cpu.txt" 2>&1
cap="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')"
export TF_RNN_OPS_CUDA_ARCHS="${TF_RNN_OPS_CUDA_ARCHS:-${cap:-90}}"
for s in "${STAGES[@]}"; do
  case "$s" in
    build) stage build 300 tools/build_cuda.sh ;;
    checks) stage checks 300 "$PY" tests/gpu/run_gpu_checks.py ;;
    # The same checks on the per-step forward path (the persistent kernel off).
    checks_steps) TFRNN_CUDA_PERSISTENT=0 stage checks_steps 300 "$PY" tests/gpu/run_gpu_checks.py ;;
    # The same checks with the persistent backward kernel on where the engine can use it.
    checks_pbwd) TFRNN_CUDA_PERSISTENT_BWD=1 stage checks_pbwd 300 "$PY" tests/gpu/run_gpu_checks.py ;;
    # The same checks on the cluster kernels where the engine can use them (it falls back to
    # the other paths elsewhere; TFRNN_CUDA_TRACE=1 in parity_cluster shows which ran).
    checks_cluster) stage checks_cluster 300 "${CLUSTER[@]}" "$PY" tests/gpu/run_gpu_checks.py ;;
    checks_fused) stage checks_fused 300 "${FUSED[@]}" "$PY" tests/gpu/run_gpu_checks.py ;;
    parity) stage parity 200 "$PY" tests/gpu/cpu_parity.py ;;
    parity_fused) stage parity_fused 200 "${FUSED[@]}" TF_RNN_OPS_CUDA_FUSED_GROUP=3 \
                    "$PY" tests/gpu/cpu_parity.py ;;
    memcheck_fused) stage memcheck_fused 240 "${FUSED[@]}" TF_RNN_OPS_CUDA_FUSED_GROUP=3 \
                      compute-sanitizer --tool memcheck --leak-check no \
                      "$PY" tests/gpu/cpu_parity.py --dtypes float32 ;;
    racecheck_fused) stage racecheck_fused 200 "${FUSED[@]}" compute-sanitizer --tool racecheck \
                       "$PY" tests/gpu/cpu_parity.py --dtypes float32 ;;
    parity_cluster) stage parity_cluster 200 "${CLUSTER[@]}" TFRNN_CUDA_TRACE=1 \
                      "$PY" tests/gpu/cpu_parity.py ;;
    memcheck) stage memcheck 240 compute-sanitizer --tool memcheck --leak-check no \
                "$PY" tests/gpu/run_gpu_checks.py "${SMALL[@]}" ;;
    memcheck_cluster) stage memcheck_cluster 240 "${CLUSTER[@]}" compute-sanitizer --tool memcheck \
                        --leak-check no "$PY" tests/gpu/run_gpu_checks.py "${SMALL[@]}" ;;
    # memcheck over the CPU-parity cases (the Keras form, per-gate masks, reset-before gru).
    memcheck_parity) stage memcheck_parity 240 compute-sanitizer --tool memcheck --leak-check no \
                       "$PY" tests/gpu/cpu_parity.py ;;
    racecheck) stage racecheck 200 compute-sanitizer --tool racecheck \
                 "$PY" tests/gpu/run_gpu_checks.py "${SMALL[@]:0:3}" ;;
    racecheck_cluster) stage racecheck_cluster 200 "${CLUSTER[@]}" compute-sanitizer \
                         --tool racecheck "$PY" tests/gpu/run_gpu_checks.py "${SMALL[@]:0:3}" ;;
    # Every path against cuDNN: the default, per-step, persistent backward, cluster kernels.
    bench) stage bench 500 "$PY" bench/gpu_bench.py --iters 10 --dtypes float32,float16,bfloat16 ;;
    # The GPU issue's target grid only (T = 100, B <= 64, H in {256, 512}, every dtype, defaults).
    bench_targets) stage bench_targets 200 "$PY" bench/gpu_bench.py --iters 10 --batches 1,16,64 \
                     --hiddens 256,512 --dtypes float32,float16,bfloat16 --variants auto ;;
    bench_clusters) stage bench_clusters 400 "$PY" bench/gpu_bench.py --iters 10 --batches 1,16,64 \
                      --hiddens 256,512 --variants auto,cluster2,cluster4,cluster8,cluster16 ;;
    # The XLA custom calls' CUDA targets run by JAX's XLA (no TensorFlow here).
    xla_ffi) stage xla_ffi 120 "$PY" tests/gpu/xla_ffi_checks.py ;;
    mma) stage mma 60 "$PY" tests/gpu/mma_checks.py ;;
    # The tensor-core persistent kernels (TFRNN_CUDA_MMA=1): the checks, the sanitizers on their
    # half and bfloat16 cases, and its times against cuDNN and the defaults at the issue's sizes.
    checks_mma) stage checks_mma 300 env TFRNN_CUDA_MMA=1 TFRNN_CUDA_TRACE=1 \
                  "$PY" tests/gpu/run_gpu_checks.py ;;
    memcheck_mma) stage memcheck_mma 240 env TFRNN_CUDA_MMA=1 compute-sanitizer --tool memcheck \
                    --leak-check no "$PY" tests/gpu/run_gpu_checks.py -H=16- -H=32- -H=80- ;;
    racecheck_mma) stage racecheck_mma 200 env TFRNN_CUDA_MMA=1 compute-sanitizer --tool racecheck \
                     "$PY" tests/gpu/run_gpu_checks.py -H=16- -H=32- -H=80- ;;
    bench_mma) stage bench_mma 300 "$PY" bench/gpu_bench.py --iters 10 --batches 1,16,64 \
                 --hiddens 256,512 --dtypes float16,bfloat16 --variants auto,mma ;;
    # The tensor-core cluster kernels (TFRNN_CUDA_CLUSTER=1 TFRNN_CUDA_MMA=1): the same.
    checks_cmma) stage checks_cmma 300 env TFRNN_CUDA_CLUSTER=1 TFRNN_CUDA_MMA=1 \
                   TFRNN_CUDA_TRACE=1 "$PY" tests/gpu/run_gpu_checks.py ;;
    memcheck_cmma) stage memcheck_cmma 240 env TFRNN_CUDA_CLUSTER=1 TFRNN_CUDA_MMA=1 \
                     compute-sanitizer --tool memcheck --leak-check no \
                     "$PY" tests/gpu/run_gpu_checks.py -H=16- -H=32- -H=80- -H=512- ;;
    racecheck_cmma) stage racecheck_cmma 200 env TFRNN_CUDA_CLUSTER=1 TFRNN_CUDA_MMA=1 \
                      compute-sanitizer --tool racecheck \
                      "$PY" tests/gpu/run_gpu_checks.py -H=16- -H=32- -H=80- -H=512- ;;
    bench_cmma) stage bench_cmma 300 "$PY" bench/gpu_bench.py --iters 10 --batches 1,8,16,32,64 \
                  --hiddens 256,512 --modes lstm --dtypes float16 --variants auto,mma,cmma ;;
    # The Keras layers' GPU path: per-gate masks vs a PyTorch loop with the same masks.
    bench_keras) stage bench_keras 200 "$PY" bench/gpu_bench_keras.py ;;
    # What limits the persistent forward kernel: Nsight Compute on one launch (lstm, float32,
    # B = 16, H = 256); ncu_cluster the same for the cluster forward kernel.
    ncu) stage ncu 150 ncu --kernel-name regex:PersistentFwd --launch-count 1 \
           --section SpeedOfLight --section Occupancy --section WarpStateStats \
           --section SchedulerStats --section MemoryWorkloadAnalysis \
           "$PY" bench/gpu_bench.py --modes lstm --dtypes float32 --batches 16 --hiddens 256 \
           --iters 1 --repeats 1 --warmup 1 --variants auto ;;
    ncu_cluster) stage ncu_cluster 150 ncu --kernel-name regex:ClusterFwd --launch-count 1 \
           --section SpeedOfLight --section Occupancy --section WarpStateStats \
           --section SchedulerStats --section MemoryWorkloadAnalysis \
           "$PY" bench/gpu_bench.py --modes lstm --dtypes float32 --batches 16 --hiddens 256 \
           --iters 1 --repeats 1 --warmup 1 --variants cluster ;;
    # What the per-step path spends per step (lstm, float32, B = 16, H = 512; T = 8): cuBLAS's
    # recurrent product and the step kernels, at the card's own clocks (only our engine's and
    # cuBLAS's kernels: bench/gpu_profile_step.py makes its inputs with PyTorch).
    ncu_steps) TFRNN_CUDA_PERSISTENT=0 stage ncu_steps 150 ncu --clock-control none \
                 --kernel-name-base demangled --kernel-name "regex:tfrnn|gemm|Gemm|xmma|cutlass" \
                 --launch-skip 2 --launch-count 12 --section SpeedOfLight --section LaunchStats \
                 --section Occupancy "$PY" bench/gpu_profile_step.py ;;
    # Why lstm half loses to cuDNN at B = 16 and 64 (its persistent fp16 algorithm): cuDNN's
    # kernels and ours in one profile (launch, occupancy, throughput; no pipe counters).
    ncu_half) stage ncu_half 200 "${NCU_VS_CUDNN[@]}" --section Occupancy "$PY" \
                bench/gpu_profile_step.py --dtype float16 --T 100 --B 16 --H 256 --cudnn ;;
    ncu_half64) stage ncu_half64 200 "${NCU_VS_CUDNN[@]}" "$PY" bench/gpu_profile_step.py \
                  --dtype float16 --T 4 --B 64 --H 256 --cudnn ;;
    # What limits the tensor-core persistent kernels (lstm half, B = 64, H = 256): one forward
    # and one backward launch.
    ncu_mma) stage ncu_mma 150 env TFRNN_CUDA_MMA=1 ncu --clock-control none \
               --kernel-name regex:PersistentMma --launch-count 2 --section SpeedOfLight \
               --section Occupancy --section WarpStateStats --section SchedulerStats \
               --section ComputeWorkloadAnalysis "$PY" bench/gpu_bench.py --modes lstm \
               --dtypes float16 --batches 64 --hiddens 256 --iters 1 --repeats 1 --warmup 1 \
               --variants mma ;;
    # The same for the tensor-core cluster kernels (lstm half, B = 16, H = 256).
    ncu_cmma) stage ncu_cmma 150 env TFRNN_CUDA_CLUSTER=1 TFRNN_CUDA_MMA=1 ncu \
                --clock-control none --kernel-name regex:ClusterMma --launch-count 2 \
                --section SpeedOfLight --section Occupancy --section WarpStateStats \
                --section SchedulerStats --section ComputeWorkloadAnalysis "$PY" \
                bench/gpu_bench.py --modes lstm --dtypes float16 --batches 16 --hiddens 256 \
                --iters 1 --repeats 1 --warmup 1 --variants cmma ;;
    # CPU thread scaling on this machine's cores: our engine vs PyTorch's CPU LSTM and GRU.
    cpu_scaling) stage cpu_scaling 300 "$PY" bench/cpu_scaling.py --bench build/engine_bench \
                   --modes lstm,gru --threads "1,2,4,8,$(nproc)" ;;
    # The bf16 products on AMX tiles (cc/engine/amx_gemm.h, on by default): the checks
    # of tests/amx_checks.cc on the tile instructions themselves (built here by
    # tools/build_amx_checks.sh: carry build/amx_checks), then the scaling's bf16 rows on them.
    amx_cpu) stage amx_cpu 120 build/amx_checks ;;
    cpu_scaling_amx) TF_RNN_OPS_BF16_AMX=1 stage cpu_scaling_amx 300 "$PY" bench/cpu_scaling.py \
                       --bench build/engine_bench --modes lstm,gru --dtypes bfloat16 \
                       --threads "1,2,4,8,$(nproc)" ;;
    *) echo "gpu_session.sh: unknown stage $s" >&2; exit 2 ;;
  esac
done
echo "== summary"
cat "$SUMMARY"
