// The cluster kernels on tensor cores (half and bfloat16; TFRNN_CUDA_CLUSTER=1 with
// TFRNN_CUDA_MMA=1 takes them where they fit, never by default).
//
// The cluster kernels (rnn_gpu_cluster.cu) with the step's product on mma.sync (mma_block.cuh),
// as the persistent tensor-core kernels (rnn_gpu_persistent_mma.cu) have it, but without their
// grid barrier and their per-step copy of h from L2: cluster q runs batch rows
// [q·G, q·G + G) on its own, block `rank` of the cluster owns units [rank·U, rank·U + U) (U a
// multiple of 8: whole 8-row tiles of the product) and keeps their rows of R (forward) or of Rᵀ
// (backward) in shared memory for the whole sequence, rows padded by kMmaPad elements. The
// step's vector (forward h_{t-1}, backward dhr_{t+1}) of the group's rows lives in every block's
// shared memory, in rows of the same padded width (rows G..Gp-1 stay zero; Gp = G rounded up to
// 16, or 8 for a group of at most 8 rows: MmaVecRows), double-buffered. Per step a block
//   1. multiplies the vector by its rows ((16 batch rows, 8 rows) tiles, a warp each at a time;
//      with fewer tiles than warps, K split between warps: BlockProductSplit), into hr in
//      shared memory (forward) or into its units' carries dL/dh (backward),
//   2. runs FwdPoint / BwdPoint for its units, which write the next vector's entries of its
//      units into its own shared memory (h_ld / dhr_ld: the padded rows),
//   3. stores those entries into every other block of the cluster (HandOff: 16 bytes a store
//      where the rows allow) and waits at the cluster barrier.
// Ordering as in rnn_gpu_cluster.cu (one barrier per step; the first before any remote store;
// none after the last); the last step's vector is copied to global memory by the threads that
// computed it. For the layers the persistent tensor-core kernels take: one product per step, no
// recurrent mask, Hs (forward) or K·H (backward) a multiple of 16. No atomics: every run gives
// the same bits.
#include <cooperative_groups.h>

#include <algorithm>

#include "cc/gpu/mma_block.cuh"
#include "cc/gpu/rnn_gpu_cluster.cuh"
#include "cc/gpu/rnn_gpu_persistent.cuh"
#include "cc/gpu/rnn_gpu_persistent_kernels.cuh"

namespace tfrnn {
namespace gpu {
namespace {

// Shared memory of one block (ClusterSmem): R's rows [K·U, ld], two vectors [Gp, ld],
// (forward) hr [G, K·U] in float, and BlockProductSplit's partial sums; ld = Hs + kMmaPad
// forward, K·H + kMmaPad backward.
constexpr size_t kPartBytes = sizeof(float) * kMmaSplitFloats;
template <typename T>
__host__ __device__ ClusterSmem MmaFwdSmem(I64 K, I64 U, I64 Hs, I64 G) {
  const I64 ld = Hs + kMmaPad;
  return {Align16(sizeof(T) * K * U * ld), Align16(sizeof(T) * MmaVecRows(G) * ld),
          Align16(sizeof(float) * G * K * U), 0, kPartBytes};
}
template <typename T>
__host__ __device__ ClusterSmem MmaBwdSmem(I64 K, I64 U, I64 H, I64 G) {
  const I64 ld = K * H + kMmaPad;
  return {Align16(sizeof(T) * U * ld), Align16(sizeof(T) * MmaVecRows(G) * ld), 0, 0,
          kPartBytes};
}

template <typename T>
__global__ void __launch_bounds__(kPThreads) ClusterMmaFwdKernel(FwdStep<T> p, ClusterArgs ca) {
#if TFRNN_CLUSTER_BODY
  cg::cluster_group cluster = cg::this_cluster();
  const I64 H = p.H, Hs = p.Hs, K = p.K, U = ca.units, G = ca.group, ld = Hs + kMmaPad;
  const ClusterPart w = PartOf(cluster, H, p.B, U, G);
  const I64 j0 = w.j0, un = w.un, b0 = w.b0, bg = w.bg, Gp = MmaVecRows(G);
  const I64 rows = K * un;  // gate rows of this block: gate (r / un), unit j0 + r % un
  const ClusterSmem sz = MmaFwdSmem<T>(K, U, Hs, G);
  unsigned char* smem = DynamicSmem();
  T* rs = reinterpret_cast<T*>(smem);                                       // [K·U, ld]
  T* hb[2] = {reinterpret_cast<T*>(smem + sz.r),                            // [Gp, ld] each
              reinterpret_cast<T*>(smem + sz.r + sz.vec)};
  float* hr = reinterpret_cast<float*>(smem + sz.r + 2 * sz.vec);           // [G, K, U]
  float* part = reinterpret_cast<float*>(smem + sz.r + 2 * sz.vec + sz.hr);
  const T* R = static_cast<const T*>(ca.R);
  const T* h_in = static_cast<const T*>(ca.v_in);
  const T zero = ZeroOf<T>();
  for (I64 i = threadIdx.x; i < K * U * Hs; i += blockDim.x) {
    const I64 r = i / Hs, c = i % Hs;
    rs[r * ld + c] = r < rows ? R[((r / un) * H + j0 + r % un) * Hs + c] : zero;
  }
  for (I64 i = threadIdx.x; i < Gp * Hs; i += blockDim.x) {
    const I64 r = i / Hs, c = i % Hs;
    hb[0][r * ld + c] = r < bg ? h_in[(b0 + r) * Hs + c] : zero;
    hb[1][r * ld + c] = zero;
  }
  cluster.sync();  // every block has started, and its R and h_0 are in place
  // FwdPoint indexes hr, h_cur and h_next by the batch row b and unit j of the whole layer.
  p.hr = hr - b0 * K * U - j0;
  p.hr_ld = K * U;
  p.hr_kst = U;
  p.h_ld = ld;
  T* h_out = static_cast<T*>(ca.v_out);
  for (I64 st = 0; st < ca.steps; ++st) {
    T* hc = hb[st & 1];
    T* hn = hb[(st + 1) & 1];
    const bool last = st + 1 == ca.steps;
    // (1) hr[b, k, u] = R[k·H + j0 + u, :] · h_{t-1}[b, :] for this block's gate rows.
    BlockProductSplit(hc, rs, ld, Gp, bg, rows, Hs, part, [&](I64 b, I64 r, float v) {
      hr[b * K * U + (r / un) * U + r % un] = v;
    });
    __syncthreads();  // hr of this block's units is complete
    // (2) the pointwise step of this block's units, h into hn, (3) h of its units into every
    // other block (the last step: into global memory).
    p.step = st;
    p.h_cur = hc - b0 * ld;
    p.h_rec = p.h_cur;
    p.h_next = hn - b0 * ld;
    for (I64 i = threadIdx.x; i < bg * un; i += blockDim.x) {
      const I64 bl = i / un, j = j0 + i % un;
      FwdPoint(p, b0 + bl, j);
      if (last) h_out[(b0 + bl) * Hs + j] = hn[bl * ld + j];
    }
    if (!last) {
      __syncthreads();  // this block's entries of hn are written
      HandOff(cluster, hn, ld, bg, 1, 0, j0, un);
      cluster.sync();
    }
  }
#else
  (void)p;
  (void)ca;
#endif
}

template <typename T>
__global__ void __launch_bounds__(kPThreads) ClusterMmaBwdKernel(BwdStep<T> p, ClusterArgs ca) {
#if TFRNN_CLUSTER_BODY
  using A = AccOf<T>;
  cg::cluster_group cluster = cg::this_cluster();
  const I64 H = p.H, Hs = p.Hs, KH = p.K * p.H, U = ca.units, G = ca.group, ld = KH + kMmaPad;
  const ClusterPart w = PartOf(cluster, H, p.B, U, G);
  const I64 j0 = w.j0, un = w.un, b0 = w.b0, bg = w.bg, Gp = MmaVecRows(G);
  const ClusterSmem sz = MmaBwdSmem<T>(p.K, U, H, G);
  unsigned char* smem = DynamicSmem();
  T* rt = reinterpret_cast<T*>(smem);                                       // [U, ld]
  T* db[2] = {reinterpret_cast<T*>(smem + sz.r),                            // [Gp, ld] each
              reinterpret_cast<T*>(smem + sz.r + sz.vec)};
  float* part = reinterpret_cast<float*>(smem + sz.r + 2 * sz.vec);
  const T* R = static_cast<const T*>(ca.R);
  const T zero = ZeroOf<T>();
  for (I64 i = threadIdx.x; i < U * KH; i += blockDim.x) {
    const I64 u = i / KH, k = i % KH;
    rt[u * ld + k] = u < un ? R[k * Hs + j0 + u] : zero;
  }
  for (I64 i = threadIdx.x; i < Gp * KH; i += blockDim.x) {
    const I64 r = i / KH, c = i % KH;
    db[0][r * ld + c] = zero;
    db[1][r * ld + c] = zero;
  }
  cluster.sync();  // every block has started, and its slice of Rᵀ is in place
  p.dhr_ld = ld;
  T* d_out = static_cast<T*>(ca.v_out);
  for (I64 it = 0; it < ca.steps; ++it) {
    T* cur = db[it & 1];
    const T* later = db[(it + 1) & 1];
    const bool last = it + 1 == ca.steps;
    if (it > 0) {
      // (1) dh[b, j0 + u] += Σ_k dhr_later[b, k] · R[k, j0 + u]
      BlockProductSplit(later, rt, ld, Gp, bg, un, KH, part, [&](I64 b, I64 u, float v) {
        p.dh[(b0 + b) * Hs + j0 + u] += A(v);
      });
      __syncthreads();  // the carries of this block's units are complete
    }
    // (2) the pointwise step of this block's units, dhr into cur, (3) dhr of its units into
    // every other block (the last step, step 0: into global memory).
    p.step = ca.steps - 1 - it;
    p.dhr_cur = cur - b0 * ld;
    for (I64 i = threadIdx.x; i < bg * un; i += blockDim.x) {
      const I64 bl = i / un, j = j0 + i % un;
      BwdPoint(p, b0 + bl, j);
      if (last) {
        for (I64 k = 0; k < p.K; ++k) d_out[(b0 + bl) * KH + k * H + j] = cur[bl * ld + k * H + j];
      }
    }
    if (!last) {
      __syncthreads();  // this block's entries of cur are written
      HandOff(cluster, cur, ld, bg, p.K, H, j0, un);
      cluster.sync();
    }
  }
#else
  (void)p;
  (void)ca;
#endif
}

// The plan of a tensor-core cluster kernel fn on the current device. For each cluster size C
// (2 to 16, or TFRNN_CUDA_CLUSTER_SIZE): U = ⌈H/C⌉ rounded up to 8 units per block; clusters of
// at most 16 batch rows each (one row tile), or of at most 8 (half a tile: the vectors take
// half the shared memory) where a block with 16 does not fit, as many as the batch needs where
// the device holds them at once, else as many as it holds; if a block's shared memory
// (bytes(U, G)) fits. Of those, the least work per block and step (U · the group's rows rounded
// up to 16: a half tile costs the tensor cores a whole one), the smaller C and the larger
// groups on a tie.
template <typename Bytes, typename Fn>
SequenceKernelPlan PlanClusterMma(const RnnSpec& s, Bytes bytes, Fn* fn) {
  SequenceKernelPlan best;
  const ClusterDevice cd = ClusterDeviceFor(s);
  if (!cd.ok) return best;
  const int dev = cd.dev;
  const CoopDevice& d = cd.d;
  I64 best_work = 0;
  for (int C : {2, 4, 8, 16}) {
    if (!cd.Tries(C, s.H)) continue;
    const I64 U = ((s.H + C - 1) / C + 7) / 8 * 8;
    for (I64 most : {16, 8}) {
      const size_t one_group = bytes(U, most);
      if (one_group > static_cast<size_t>(d.optin)) continue;
      const int active = ActiveClusters(dev, fn, C, one_group);
      if (active < 1) continue;
      I64 clusters = std::min<I64>(active, (s.B + most - 1) / most);
      const I64 G = (s.B + clusters - 1) / clusters;
      clusters = (s.B + G - 1) / G;
      const size_t smem = bytes(U, G);
      if (smem > static_cast<size_t>(d.optin)) continue;
      if (ActiveClusters(dev, fn, C, smem) < clusters) continue;
      const I64 work = U * MmaBatchRows(G);
      if (!best.ok || work < best_work) {
        best = MakePlan(clusters * C, U, 1, 1, smem, C, G);
        best.mma = true;
        best_work = work;
      }
      break;  // groups of 16 rows fit: no need for 8
    }
  }
  return best;
}

}  // namespace

template <typename T>
SequenceKernelPlan PlanClusterMmaFwd(const RnnSpec& s) {
  const I64 K = RnnK(s), Hs = RnnHs(s);
  if (!OneProductPerStep(s) || s.has_mask || Hs % 16 != 0) return SequenceKernelPlan();
  return PlanClusterMma(
      s, [&](I64 U, I64 G) { return MmaFwdSmem<T>(K, U, Hs, G).Bytes(); },
      &ClusterMmaFwdKernel<T>);
}

template <typename T>
SequenceKernelPlan PlanClusterMmaBwd(const RnnSpec& s) {
  const I64 K = RnnK(s);
  if (!StepChainBwdShape(s) || (K * s.H) % 16 != 0) return SequenceKernelPlan();
  return PlanClusterMma(
      s, [&](I64 U, I64 G) { return MmaBwdSmem<T>(K, U, s.H, G).Bytes(); },
      &ClusterMmaBwdKernel<T>);
}

template <typename T>
GpuStatus ClusterMmaFwd(const GpuContext& g, const SequenceKernelPlan& plan, FwdStep<T> p,
                        const T* R, I64 steps, T* h_cur, T* h_next) {
  // The h after the last step goes where the grid kernel leaves it (rnn_gpu_persistent.cuh).
  ClusterArgs ca{R, nullptr, false, steps, plan.units, plan.group, h_cur,
                 steps % 2 == 1 ? h_next : h_cur};
  return LaunchClusters(g, plan, &ClusterMmaFwdKernel<T>, p, ca);
}

template <typename T>
GpuStatus ClusterMmaBwd(const GpuContext& g, const SequenceKernelPlan& plan, BwdStep<T> p,
                        const T* R, I64 steps, T* d_last) {
  ClusterArgs ca{R, nullptr, false, steps, plan.units, plan.group, nullptr, d_last};
  return LaunchClusters(g, plan, &ClusterMmaBwdKernel<T>, p, ca);
}

#define TFRNN_INSTANTIATE_CLUSTER_MMA(T)                                                    \
  template SequenceKernelPlan PlanClusterMmaFwd<T>(const RnnSpec&);                         \
  template SequenceKernelPlan PlanClusterMmaBwd<T>(const RnnSpec&);                         \
  template GpuStatus ClusterMmaFwd<T>(const GpuContext&, const SequenceKernelPlan&,         \
                                      FwdStep<T>, const T*, I64, T*, T*);                   \
  template GpuStatus ClusterMmaBwd<T>(const GpuContext&, const SequenceKernelPlan&,         \
                                      BwdStep<T>, const T*, I64, T*);
TFRNN_INSTANTIATE_CLUSTER_MMA(__half)
TFRNN_INSTANTIATE_CLUSTER_MMA(__nv_bfloat16)
#undef TFRNN_INSTANTIATE_CLUSTER_MMA

}  // namespace gpu
}  // namespace tfrnn
