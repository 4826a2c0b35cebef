// The persistent backward step kernel (rnn_gpu_persistent.cuh says what and when): every
// backward step of one (layer, direction) in one cooperative launch, the mirror of the
// persistent forward. Block g owns units [g·U, (g+1)·U): it keeps R's columns of those units
// (as the rows of Rᵀ, [un, K·H]) in shared memory for the whole sequence, and per step
// (1) reads dhr of the later step (dL/d(R·h), [B, K·H]) of the whole batch from L2 and adds
// dhr · R[:, j] to the carry dL/dh of its units, (2) runs the per-step kernel's pointwise code
// (BwdPoint) for its units, writing dhr of this step, (3) waits at one grid barrier (dhr is
// double-buffered). No atomics: each block writes only its own units' carries and columns.
#include <cooperative_groups.h>

#include "cc/gpu/rnn_gpu_persistent.cuh"
#include "cc/gpu/rnn_gpu_persistent_kernels.cuh"

namespace tfrnn {
namespace gpu {
namespace {

struct PersistentBwdArgs {
  const void* R;  // [K·H, Hs]
  I64 steps, units;
  void* d0;       // dhr of the latest step and every other step before it
  void* d1;       // dhr of the others
};

template <typename T, int RB, int CB>
__global__ void __launch_bounds__(kPThreads) PersistentBwdKernel(BwdStep<T> p,
                                                                 PersistentBwdArgs pa) {
  using A = AccOf<T>;
  unsigned char* smem = DynamicSmem();
  const I64 H = p.H, Hs = p.Hs, B = p.B, KH = p.K * p.H, U = pa.units;
  const I64 j0 = blockIdx.x * U;
  const I64 un = H - j0 < U ? H - j0 : U;
  T* rt = reinterpret_cast<T*>(smem);                                  // [un, K·H]
  A* ds = reinterpret_cast<A*>(smem + Align16(sizeof(T) * U * KH));   // [B, K·H]
  const T* R = static_cast<const T*>(pa.R);
  for (I64 i = threadIdx.x; i < un * KH; i += blockDim.x) {
    const I64 u = i / KH, k = i % KH;
    rt[i] = R[k * Hs + j0 + u];
  }
  cg::grid_group grid = cg::this_grid();
  for (I64 it = 0; it < pa.steps; ++it) {
    T* cur = static_cast<T*>((it & 1) ? pa.d1 : pa.d0);
    const T* prev = static_cast<const T*>((it & 1) ? pa.d0 : pa.d1);
    if (it > 0) {
      // (1) dh[b, j0 + u] += Σ_k dhr_later[b, k] · R[k, j0 + u]
      for (I64 i = threadIdx.x; i < B * KH; i += blockDim.x) ds[i] = LdCg(prev + i);
      __syncthreads();
      WarpDots<T, RB, CB>(rt, ds, un, KH, B, [&](I64 b, I64 r, A v) {
        p.dh[b * Hs + j0 + r] += v;
      });
      __syncthreads();  // the carries of this block's units are complete
    }
    // (2) the pointwise step of this block's units.
    BwdPointBlock(p, pa.steps, it, cur, j0, un);
    // (3) every block's dhr of this step is written before any block reads it.
    grid.sync();
  }
}

template <typename T>
using BwdKernelFn = void (*)(BwdStep<T>, PersistentBwdArgs);

template <typename T>
BwdKernelFn<T> BwdKernelOf(int rb, int cb) {
  return ByTile(rb, cb, [](auto r, auto c) { return &PersistentBwdKernel<T, r.value, c.value>; });
}

template <typename T>
SequenceKernelPlan ChooseBwdPlan(const RnnSpec& s) {
  if (EnvIs("TFRNN_CUDA_PERSISTENT", "0") || !StepChainBwdShape(s)) return SequenceKernelPlan();
  if constexpr (sizeof(T) == 2) {
    if (ClusterMmaWanted()) {
      const SequenceKernelPlan c = PlanClusterMmaBwd<T>(s);
      if (c.ok) return c;
    }
    const SequenceKernelPlan m = PlanPersistentMmaBwd<T>(s);
    if (m.ok) return m;
  }
  // TFRNN_CUDA_CLUSTER=1 / TFRNN_CUDA_PERSISTENT_BWD=1 force a kernel where it can run (the
  // cluster first); =0 keeps the default (DefaultBwd) off it.
  const bool force_cluster = EnvIs("TFRNN_CUDA_CLUSTER", "1");
  const bool force_persistent = EnvIs("TFRNN_CUDA_PERSISTENT_BWD", "1");
  const BwdDefault def = DefaultBwd(s);
  const bool cluster = force_cluster || (def == BwdDefault::kCluster && !force_persistent &&
                                         !EnvIs("TFRNN_CUDA_CLUSTER", "0"));
  if (cluster) {
    const SequenceKernelPlan c = PlanClusterBwd<T>(s);
    if (c.ok) return c;
  }
  const bool persistent = force_persistent || (def == BwdDefault::kPersistent &&
                                               !EnvIs("TFRNN_CUDA_PERSISTENT_BWD", "0"));
  if (!persistent || !PersistentSize(s)) return SequenceKernelPlan();
  const I64 KH = RnnK(s) * s.H;
  return PlanOnDevice(s, 1, sizeof(T) * KH, sizeof(AccOf<T>) * s.B * KH, &BwdKernelOf<T>);
}

}  // namespace

template <typename T>
SequenceKernelPlan PlanPersistentBwd(const RnnSpec& s) {
  return Traced("backward", s, ChooseBwdPlan<T>(s));
}

template <typename T>
GpuStatus PersistentBwd(const GpuContext& g, const SequenceKernelPlan& plan, BwdStep<T> p,
                        const T* R, I64 steps, T* d0, T* d1) {
  // Step 0's dhr goes where the grid kernel leaves it: d0 when steps is odd, else d1.
  if (plan.cluster > 0) {
    T* d_last = (steps - 1) % 2 ? d1 : d0;
    if constexpr (sizeof(T) == 2) {
      if (plan.mma) return ClusterMmaBwd<T>(g, plan, p, R, steps, d_last);
    }
    return ClusterBwd<T>(g, plan, p, R, steps, d_last);
  }
  if constexpr (sizeof(T) == 2) {
    if (plan.mma) return PersistentMmaBwd<T>(g, plan, p, R, steps, d0, d1);
  }
  PersistentBwdArgs pa{R, steps, plan.units, d0, d1};
  return LaunchPersistent(g, plan, BwdKernelOf<T>(plan.rows_per_warp, plan.batch_tile), p, pa);
}

#define TFRNN_INSTANTIATE_PERSISTENT_BWD(T)                                                   \
  template SequenceKernelPlan PlanPersistentBwd<T>(const RnnSpec&);                               \
  template GpuStatus PersistentBwd<T>(const GpuContext&, const SequenceKernelPlan&, BwdStep<T>,   \
                                      const T*, I64, T*, T*);
TFRNN_INSTANTIATE_PERSISTENT_BWD(__half)
TFRNN_INSTANTIATE_PERSISTENT_BWD(__nv_bfloat16)
TFRNN_INSTANTIATE_PERSISTENT_BWD(float)
TFRNN_INSTANTIATE_PERSISTENT_BWD(double)
#undef TFRNN_INSTANTIATE_PERSISTENT_BWD

}  // namespace gpu
}  // namespace tfrnn
