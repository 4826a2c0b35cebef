// The persistent forward step kernel (rnn_gpu_persistent.cuh says what and when).
#include "cc/gpu/rnn_gpu_persistent.cuh"

#include <cooperative_groups.h>

#include "cc/gpu/rnn_gpu_persistent_kernels.cuh"

namespace tfrnn {
namespace gpu {
namespace {

struct PersistentArgs {
  const void* R;     // [K·H, Hs]
  const void* mask;  // recurrent mask or null
  bool mask_per_step;
  I64 steps, units;
  void* h0;          // h entering step 0; h of the odd steps
  void* h1;          // h of the even steps
  void* hr;          // Acc [B, K·H]
};

// RB rows of R (gate rows of this block's units) per warp at a time, against CB batch rows:
// RB + CB shared-memory loads per RB·CB multiply-adds.
template <typename T, int RB, int CB>
__global__ void __launch_bounds__(kPThreads) PersistentFwdKernel(FwdStep<T> p,
                                                                 PersistentArgs pa) {
  using A = AccOf<T>;
  unsigned char* smem = DynamicSmem();
  const I64 H = p.H, Hs = p.Hs, B = p.B, KH = p.K * p.H, U = pa.units;
  const I64 j0 = blockIdx.x * U;
  const I64 un = H - j0 < U ? H - j0 : U;
  const I64 rows = p.K * un;
  T* rs = reinterpret_cast<T*>(smem);                                         // [K·un, Hs]
  A* hs = reinterpret_cast<A*>(smem + Align16(sizeof(T) * p.K * U * Hs));    // [B, Hs]
  const T* R = static_cast<const T*>(pa.R);
  for (I64 i = threadIdx.x; i < rows * Hs; i += blockDim.x) {
    const I64 r = i / Hs, c = i % Hs;
    rs[i] = R[((r / un) * H + j0 + r % un) * Hs + c];
  }
  const T* mask = static_cast<const T*>(pa.mask);
  A* hr = static_cast<A*>(pa.hr);
  cg::grid_group grid = cg::this_grid();
  for (I64 st = 0; st < pa.steps; ++st) {
    T* hc = static_cast<T*>((st & 1) ? pa.h1 : pa.h0);
    T* hn = static_cast<T*>((st & 1) ? pa.h0 : pa.h1);
    // (1) h_rec = h_prev (⊙ mask) of the whole batch, from L2 (StageBatched: kLoads loads in
    // flight per thread).
    StageBatched(hs, B * Hs, [&](I64 i) {
      return MaskedH(p, mask, pa.mask_per_step, st, i / Hs, i % Hs, LdCg(hc + i));
    });
    __syncthreads();
    // (2) hr[b, k·H + j0 + u] = R[k·H + j0 + u, :] · h_rec[b, :] for this block's rows.
    WarpDots<T, RB, CB>(rs, hs, rows, Hs, B, [&](I64 b, I64 r, A v) {
      hr[b * KH + (r / un) * H + j0 + r % un] = v;
    });
    __syncthreads();  // hr of this block's units is complete (and visible to the block)
    // (3) the pointwise step of this block's units.
    FwdPointBlock(p, st, hc, hn, j0, un);
    // (4) every block's h of this step is written before any block reads it.
    grid.sync();
  }
}

template <typename T>
using KernelFn = void (*)(FwdStep<T>, PersistentArgs);

template <typename T>
KernelFn<T> KernelOf(int rb, int cb) {
  return ByTile(rb, cb, [](auto r, auto c) { return &PersistentFwdKernel<T, r.value, c.value>; });
}

template <typename T>
SequenceKernelPlan ChooseFwdPlan(const RnnSpec& s) {
  if (EnvIs("TFRNN_CUDA_PERSISTENT", "0")) return SequenceKernelPlan();
  if (!OneProductPerStep(s)) return SequenceKernelPlan();
  if constexpr (sizeof(T) == 2) {
    if (ClusterMmaWanted()) {
      const SequenceKernelPlan m = PlanClusterMmaFwd<T>(s);
      if (m.ok) return m;
    }
  }
  if (EnvIs("TFRNN_CUDA_CLUSTER", "1")) {
    const SequenceKernelPlan c = PlanClusterFwd<T>(s);
    if (c.ok) return c;
  }
  // The tensor-core forward has its own size limits (its product is cheap at any B it takes).
  if constexpr (sizeof(T) == 2) {
    const SequenceKernelPlan m = PlanPersistentMmaFwd<T>(s);
    if (m.ok) return m;
  }
  if (!PersistentSize(s)) return SequenceKernelPlan();
  const I64 K = RnnK(s), Hs = RnnHs(s);
  return PlanOnDevice(s, K, sizeof(T) * K * Hs, sizeof(AccOf<T>) * s.B * Hs, &KernelOf<T>);
}

}  // namespace

template <typename T>
SequenceKernelPlan PlanPersistentFwd(const RnnSpec& s) {
  return Traced("forward", s, ChooseFwdPlan<T>(s));
}

template <typename T>
GpuStatus PersistentFwd(const GpuContext& g, const SequenceKernelPlan& plan, FwdStep<T> p,
                        const T* R, const T* mask, bool mask_per_step, I64 steps, T* h_cur,
                        T* h_next, AccOf<T>* hr) {
  if (plan.cluster > 0) {
    if constexpr (sizeof(T) == 2) {
      if (plan.mma) return ClusterMmaFwd<T>(g, plan, p, R, steps, h_cur, h_next);
    }
    return ClusterFwd<T>(g, plan, p, R, mask, mask_per_step, steps, h_cur, h_next);
  }
  if constexpr (sizeof(T) == 2) {
    if (plan.mma) return PersistentMmaFwd<T>(g, plan, p, R, steps, h_cur, h_next, hr);
  }
  PersistentArgs pa{R, mask, mask_per_step, steps, plan.units, h_cur, h_next, hr};
  return LaunchPersistent(g, plan, KernelOf<T>(plan.rows_per_warp, plan.batch_tile), p, pa);
}

#define TFRNN_INSTANTIATE_PERSISTENT(T)                                                       \
  template SequenceKernelPlan PlanPersistentFwd<T>(const RnnSpec&);                               \
  template GpuStatus PersistentFwd<T>(const GpuContext&, const SequenceKernelPlan&, FwdStep<T>,   \
                                      const T*, const T*, bool, I64, T*, T*, AccOf<T>*);
TFRNN_INSTANTIATE_PERSISTENT(__half)
TFRNN_INSTANTIATE_PERSISTENT(__nv_bfloat16)
TFRNN_INSTANTIATE_PERSISTENT(float)
TFRNN_INSTANTIATE_PERSISTENT(double)
#undef TFRNN_INSTANTIATE_PERSISTENT

}  // namespace gpu
}  // namespace tfrnn
