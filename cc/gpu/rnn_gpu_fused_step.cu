// The fused step kernels (rnn_gpu_persistent.cuh says what and when): one launch per step that
// computes the step's recurrent product and its pointwise work together, where the per-step
// path launches a cuBLAS GEMM (at small batch a split-K GEMM and its reduction) and then the
// pointwise kernel. Block (g, u) owns batch rows [g·G, (g+1)·G) and units [u·U, (u+1)·U).
// Forward: it reads the K·U rows of R of its units and h_{t-1} (⊙ the recurrent mask) of its
// batch rows into shared memory (kLoads loads in flight per thread), computes their dot
// products in Acc into hr (WarpDots, as the persistent kernel) and runs FwdPoint for its
// (row, unit) pairs. Backward: it reads R's columns of its units (the rows of Rᵀ, transposed
// once per layer) and dhr_{t+1} of its batch rows, adds dhr_{t+1}·R[:, j] to the carries dL/dh
// of its units and runs BwdPoint. The kernel boundary is the step barrier. No atomics: each
// block writes only its own (row, unit) pairs, and the result is the same every run.
#include <cooperative_groups.h>

#include <algorithm>
#include <cstdlib>

#include "cc/gpu/rnn_gpu_persistent.cuh"
#include "cc/gpu/rnn_gpu_persistent_kernels.cuh"

namespace tfrnn {
namespace gpu {
namespace {

struct FusedStepArgs {
  const void* R;      // forward R [K·H, Hs]; backward Rᵀ [Hs, K·H]
  const void* mask;   // forward: the recurrent mask or null
  bool mask_per_step;
  const void* later;  // backward: dhr_{t+1} [B, K·H] (null at the last step)
  I64 units, group, unit_blocks;
  void* hr;           // forward: Acc [B, K·H]
};

// The block's shared memory: its units' slice of R ([K·U, Hs] forward, [U, K·H] backward) and
// its batch rows ([G, Hs] of h forward, [G, K·H] of dhr backward) in Acc.
template <typename T>
__device__ __forceinline__ void FusedSmem(I64 slice, T** rs, AccOf<T>** vs) {
  unsigned char* smem = DynamicSmem();
  *rs = reinterpret_cast<T*>(smem);
  *vs = reinterpret_cast<AccOf<T>*>(smem + Align16(sizeof(T) * slice));
}

template <typename T, int RB, int CB>
__global__ void __launch_bounds__(kPThreads) FusedFwdStepKernel(FwdStep<T> p, FusedStepArgs fa) {
  using A = AccOf<T>;
  const I64 H = p.H, Hs = p.Hs, B = p.B, KH = p.K * p.H, U = fa.units, G = fa.group;
  const I64 j0 = (blockIdx.x % fa.unit_blocks) * U, b0 = (blockIdx.x / fa.unit_blocks) * G;
  const I64 un = H - j0 < U ? H - j0 : U, bn = B - b0 < G ? B - b0 : G, rows = p.K * un;
  T* rs;
  A* hs;
  FusedSmem(p.K * U * Hs, &rs, &hs);
  const T* mask = static_cast<const T*>(fa.mask);
  const T* hc = p.h_cur + b0 * Hs;
  const T* R = static_cast<const T*>(fa.R);
  // (1) this block's rows of R and h_rec = h_prev (⊙ mask) of its batch rows.
  StageBatched(rs, rows * Hs, [&](I64 i) {
    const I64 r = i / Hs;
    return R[((r / un) * H + j0 + r % un) * Hs + i % Hs];
  });
  StageBatched(hs, bn * Hs, [&](I64 i) {
    return MaskedH(p, mask, fa.mask_per_step, p.step, b0 + i / Hs, i % Hs, A(Ld(hc + i)));
  });
  __syncthreads();
  // (2) hr[b, k·H + j0 + u] = R[k·H + j0 + u, :] · h_rec[b, :] for this block's rows.
  A* hr = static_cast<A*>(fa.hr);
  WarpDots<T, RB, CB>(rs, hs, rows, Hs, bn, [&](I64 b, I64 r, A v) {
    hr[(b0 + b) * KH + (r / un) * H + j0 + r % un] = v;
  });
  __syncthreads();  // hr of this block's (row, unit) pairs is complete
  // (3) the pointwise step of this block's (row, unit) pairs.
  for (I64 i = threadIdx.x; i < bn * un; i += blockDim.x) FwdPoint(p, b0 + i / un, j0 + i % un);
}

template <typename T, int RB, int CB>
__global__ void __launch_bounds__(kPThreads) FusedBwdStepKernel(BwdStep<T> p, FusedStepArgs fa) {
  using A = AccOf<T>;
  const I64 H = p.H, Hs = p.Hs, B = p.B, KH = p.K * p.H, U = fa.units, G = fa.group;
  const I64 j0 = (blockIdx.x % fa.unit_blocks) * U, b0 = (blockIdx.x / fa.unit_blocks) * G;
  const I64 un = H - j0 < U ? H - j0 : U, bn = B - b0 < G ? B - b0 : G;
  const T* later = static_cast<const T*>(fa.later);
  if (later != nullptr) {
    // (1) dh[b, j0 + u] += Σ_k dhr_{t+1}[b, k] · R[k, j0 + u], R's columns as rows of Rᵀ.
    T* rt;
    A* ds;
    FusedSmem(U * KH, &rt, &ds);
    const T* Rt = static_cast<const T*>(fa.R) + j0 * KH;
    StageBatched(rt, un * KH, [&](I64 i) { return Rt[i]; });
    StageBatched(ds, bn * KH, [&](I64 i) { return A(Ld(later + b0 * KH + i)); });
    __syncthreads();
    WarpDots<T, RB, CB>(rt, ds, un, KH, bn,
                        [&](I64 b, I64 r, A v) { p.dh[(b0 + b) * Hs + j0 + r] += v; });
    __syncthreads();  // the carries of this block's (row, unit) pairs are complete
  }
  // (2) the pointwise step of this block's (row, unit) pairs.
  for (I64 i = threadIdx.x; i < bn * un; i += blockDim.x) BwdPoint(p, b0 + i / un, j0 + i % un);
}

// The kernel instantiations of a register tile (ByTile).
template <typename T>
auto FusedKernelOf(int rb, int cb) {
  return ByTile(rb, cb, [](auto r, auto c) { return &FusedFwdStepKernel<T, r.value, c.value>; });
}
template <typename T>
auto FusedBwdKernelOf(int rb, int cb) {
  return ByTile(rb, cb, [](auto r, auto c) { return &FusedBwdStepKernel<T, r.value, c.value>; });
}

// Batch rows per block: up to kFusedGroup (TF_RNN_OPS_CUDA_FUSED_GROUP=G sets it); units per
// block: about `per_sm` blocks per multiprocessor (TF_RNN_OPS_CUDA_FUSED_UNITS=U sets it).
constexpr I64 kFusedGroup = 16;

inline I64 EnvCount(const char* name, I64 dflt) {
  if (const char* e = std::getenv(name)) {
    const long v = std::strtol(e, nullptr, 10);
    if (v >= 1 && v <= 4096) return v;
  }
  return dflt;
}

// The plan of a fused step kernel with rows_per_unit·U rows of R per block (K forward, 1
// backward; slice_bytes_per_unit bytes per unit) and a batch row of row_bytes in shared memory;
// fn_of(rb, cb) is the kernel for a register tile. Fewer batch rows per block where the
// default group would not fit the shared memory.
template <typename FnOf>
SequenceKernelPlan FusedPlan(const RnnSpec& s, I64 rows_per_unit, size_t slice_bytes_per_unit,
                             size_t row_bytes, I64 per_sm, FnOf fn_of) {
  if (!OneProductPerStep(s)) return SequenceKernelPlan();
  int dev = 0;
  const CoopDevice d = CurrentCoopDevice(&dev);
  if (!d.ok || s.B < 1 || s.H < 1) return SequenceKernelPlan();
  I64 G = std::min<I64>(s.B, EnvCount("TF_RNN_OPS_CUDA_FUSED_GROUP", kFusedGroup));
  const I64 want = per_sm * static_cast<I64>(d.sms);
  const I64 U = std::min<I64>(
      s.H, EnvCount("TF_RNN_OPS_CUDA_FUSED_UNITS",
                    std::max<I64>(1, (s.H * ((s.B + G - 1) / G) + want - 1) / want)));
  const size_t slice = Align16(slice_bytes_per_unit * U), optin = static_cast<size_t>(d.optin);
  if (slice + row_bytes > optin) return SequenceKernelPlan();
  G = std::min<I64>(G, static_cast<I64>((optin - slice) / row_bytes));
  const I64 unit_blocks = (s.H + U - 1) / U, groups = (s.B + G - 1) / G;
  const size_t smem = slice + row_bytes * G;
  const int rb = RowsPerWarp(rows_per_unit * U), cb = BatchTile(G);
  const void* fn = reinterpret_cast<const void*>(fn_of(rb, cb));
  if (ResidentBlocks(dev, fn, smem) < 1) return SequenceKernelPlan();
  SequenceKernelPlan pl = MakePlan(unit_blocks * groups, U, rb, cb, smem, 0, G);
  pl.fused_step = true;
  return pl;
}

template <typename T>
SequenceKernelPlan ChooseFusedPlan(const RnnSpec& s) {
  if (!FusedStepWanted(s)) return SequenceKernelPlan();
  const I64 K = RnnK(s), Hs = RnnHs(s);
  return FusedPlan(s, K, sizeof(T) * K * Hs, sizeof(AccOf<T>) * Hs, 2, &FusedKernelOf<T>);
}

template <typename T>
SequenceKernelPlan ChooseFusedBwdPlan(const RnnSpec& s) {
  if (!FusedStepWanted(s) || !StepChainBwdShape(s)) return SequenceKernelPlan();
  const I64 KH = RnnK(s) * s.H;
  return FusedPlan(s, 1, sizeof(T) * KH, sizeof(AccOf<T>) * KH, 1, &FusedBwdKernelOf<T>);
}

// Launches fn(p, fa) as planned (the emulation runs the block's threads as fibers: they meet
// at __syncthreads).
template <typename P>
GpuStatus LaunchFused(const GpuContext& g, const SequenceKernelPlan& plan,
                      void (*fn)(P, FusedStepArgs), P p, FusedStepArgs fa) {
#ifdef TFRNN_CUDA_EMULATE
  (void)g;
  TFRNN_CUDA_CHECK(emu::LaunchFibers(fn, dim3(plan.blocks), dim3(plan.threads), plan.smem, 1,
                                     false, p, fa));
#else
  void* args[] = {&p, &fa};
  TFRNN_CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(fn), dim3(plan.blocks),
                                    dim3(plan.threads), args, plan.smem, g.stream));
#endif
  return GpuStatus::Ok();
}

}  // namespace

template <typename T>
GpuStatus FusedStepFwd(const GpuContext& g, const SequenceKernelPlan& plan, FwdStep<T> p,
                       const T* R, const T* mask, bool mask_per_step, AccOf<T>* hr) {
  const FusedStepArgs fa{R, mask, mask_per_step, nullptr, plan.units, plan.group,
                         (p.H + plan.units - 1) / plan.units, hr};
  return LaunchFused(g, plan, FusedKernelOf<T>(plan.rows_per_warp, plan.batch_tile), p, fa);
}

template <typename T>
GpuStatus FusedStepBwd(const GpuContext& g, const SequenceKernelPlan& plan, BwdStep<T> p,
                       const T* Rt, const T* dhr_later) {
  const FusedStepArgs fa{Rt, nullptr, false, dhr_later, plan.units, plan.group,
                         (p.H + plan.units - 1) / plan.units, nullptr};
  return LaunchFused(g, plan, FusedBwdKernelOf<T>(plan.rows_per_warp, plan.batch_tile), p, fa);
}

// The plans, traced (TFRNN_CUDA_TRACE=1).
template <typename T>
SequenceKernelPlan PlanFusedStepFwd(const RnnSpec& s) {
  return Traced("forward", s, ChooseFusedPlan<T>(s));
}
template <typename T>
SequenceKernelPlan PlanFusedStepBwd(const RnnSpec& s) {
  return Traced("backward", s, ChooseFusedBwdPlan<T>(s));
}

#define TFRNN_INSTANTIATE_FUSED_STEP(T)                                                       \
  template SequenceKernelPlan PlanFusedStepFwd<T>(const RnnSpec&);                             \
  template GpuStatus FusedStepFwd<T>(const GpuContext&, const SequenceKernelPlan&, FwdStep<T>, \
                                     const T*, const T*, bool, AccOf<T>*);                    \
  template SequenceKernelPlan PlanFusedStepBwd<T>(const RnnSpec&);                             \
  template GpuStatus FusedStepBwd<T>(const GpuContext&, const SequenceKernelPlan&, BwdStep<T>, \
                                     const T*, const T*);
TFRNN_INSTANTIATE_FUSED_STEP(__half)
TFRNN_INSTANTIATE_FUSED_STEP(__nv_bfloat16)
TFRNN_INSTANTIATE_FUSED_STEP(float)
TFRNN_INSTANTIATE_FUSED_STEP(double)
#undef TFRNN_INSTANTIATE_FUSED_STEP

}  // namespace gpu
}  // namespace tfrnn
