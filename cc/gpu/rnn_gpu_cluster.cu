// The cluster kernels (rnn_gpu_persistent.cuh says what and when): every forward or backward
// step of one (layer, direction) in one launch of thread-block clusters (compute capability
// 9.0, Hopper), for the recurrences that are latency-bound at small batch.
//
// Batch rows never interact in a recurrence, so the batch is split between clusters: cluster q
// runs rows [q·G, q·G + G) on its own, and no barrier spans more than one cluster. Within a
// cluster of C blocks, block `rank` owns units [rank·U, rank·U + U) and keeps its slice of R in
// shared memory for the whole sequence (the forward: its K·U rows of R; the backward: its U
// columns, as rows of Rᵀ). Per step the block
//   1. computes its rows of the recurrent product from the step's vector in its own shared
//      memory (forward h_{t-1} ⊙ mask, backward dhr_{t+1}; WarpDots, as the grid kernels),
//   2. runs the per-step kernels' pointwise code (FwdPoint / BwdPoint) for its units, which
//      writes the next vector's entries of its units into its own shared memory,
//   3. stores those entries into every other block of the cluster (distributed shared memory)
//      and waits at the cluster barrier (release/acquire: the stores are visible after it).
// The vectors are double-buffered, so one barrier per step suffices: a block writing step t+1's
// entries into a peer has passed the barrier that the peer reached after its last read of
// that buffer (step t-1). The first cluster barrier comes before any remote store (every block
// of the cluster has started); no remote store follows the last one. The last step writes its
// vector to global memory (h after the last step; step 0's dhr for dL/dh0), as the grid kernels.
// No atomics; the result is the same every run.
#include <cooperative_groups.h>

#include "cc/gpu/rnn_gpu_cluster.cuh"
#include "cc/gpu/rnn_gpu_persistent.cuh"
#include "cc/gpu/rnn_gpu_persistent_kernels.cuh"

namespace tfrnn {
namespace gpu {
namespace {

// Shared memory of one block (ClusterSmem): the forward's masked h only with a recurrent mask.
template <typename T>
__host__ __device__ ClusterSmem FwdSmem(I64 K, I64 U, I64 Hs, I64 G, bool mask) {
  return {Align16(sizeof(T) * K * U * Hs), Align16(sizeof(T) * G * Hs),
          Align16(sizeof(AccOf<T>) * G * K * U), mask ? Align16(sizeof(T) * G * Hs) : 0};
}
template <typename T>
__host__ __device__ ClusterSmem BwdSmem(I64 K, I64 U, I64 H, I64 G) {
  return {Align16(sizeof(T) * U * K * H), Align16(sizeof(T) * G * K * H), 0, 0};
}

template <typename T, int RB, int CB>
__global__ void __launch_bounds__(kPThreads) ClusterFwdKernel(FwdStep<T> p, ClusterArgs ca) {
#if TFRNN_CLUSTER_BODY
  using A = AccOf<T>;
  cg::cluster_group cluster = cg::this_cluster();
  const I64 H = p.H, Hs = p.Hs, K = p.K, U = ca.units, G = ca.group;
  const ClusterPart w = PartOf(cluster, H, p.B, U, G);
  const I64 j0 = w.j0, un = w.un, b0 = w.b0, bg = w.bg;
  const I64 rows = K * un;
  const T* mask = static_cast<const T*>(ca.mask);
  const ClusterSmem sz = FwdSmem<T>(K, U, Hs, G, mask != nullptr);
  unsigned char* smem = DynamicSmem();
  T* rs = reinterpret_cast<T*>(smem);                                       // [K·un, Hs]
  T* hb[2] = {reinterpret_cast<T*>(smem + sz.r),                            // [G, Hs] each
              reinterpret_cast<T*>(smem + sz.r + sz.vec)};
  A* hr = reinterpret_cast<A*>(smem + sz.r + 2 * sz.vec);                   // [G, K, U]
  T* hm = reinterpret_cast<T*>(smem + sz.r + 2 * sz.vec + sz.hr);           // [G, Hs]
  const T* R = static_cast<const T*>(ca.R);
  for (I64 i = threadIdx.x; i < rows * Hs; i += blockDim.x) {
    const I64 r = i / Hs, c = i % Hs;
    rs[i] = R[((r / un) * H + j0 + r % un) * Hs + c];
  }
  const T* h_in = static_cast<const T*>(ca.v_in);
  for (I64 i = threadIdx.x; i < bg * Hs; i += blockDim.x) hb[0][i] = h_in[b0 * Hs + i];
  cluster.sync();  // every block has started, and its R and h_0 are in place
  // FwdPoint indexes hr, h_cur and h_next by the batch row b and unit j of the whole layer.
  p.hr = hr - b0 * K * U - j0;
  p.hr_ld = K * U;
  p.hr_kst = U;
  for (I64 st = 0; st < ca.steps; ++st) {
    T* hc = hb[st & 1];
    T* hn = hb[(st + 1) & 1];
    const bool last = st + 1 == ca.steps;
    // (1) hr = R (this block's rows) · h_rec, h_rec = h_{t-1} (⊙ mask) of the group's rows.
    const T* hv = hc;
    if (mask != nullptr) {
      for (I64 i = threadIdx.x; i < bg * Hs; i += blockDim.x) {
        St(hm + i, MaskedH(p, mask, ca.mask_per_step, st, b0 + i / Hs, i % Hs, A(Ld(hc + i))));
      }
      __syncthreads();
      hv = hm;
    }
    WarpDots<T, RB, CB>(rs, hv, rows, Hs, bg, [&](I64 bl, I64 r, A v) {
      hr[bl * K * U + (r / un) * U + r % un] = v;
    });
    __syncthreads();  // hr of this block's units is complete
    // (2) the pointwise step of this block's units, h into hn (the last step: global memory),
    // (3) h of its units into every other block.
    p.step = st;
    p.h_cur = hc - b0 * Hs;
    p.h_rec = p.h_cur;
    p.h_next = last ? static_cast<T*>(ca.v_out) : hn - b0 * Hs;
    for (I64 i = threadIdx.x; i < bg * un; i += blockDim.x) {
      const I64 bl = i / un, j = j0 + i % un;
      FwdPoint(p, b0 + bl, j);
      if (!last) Broadcast(cluster, hn + bl * Hs + j, hn[bl * Hs + j]);
    }
    if (!last) cluster.sync();
  }
#else
  (void)p;
  (void)ca;
#endif
}

template <typename T, int RB, int CB>
__global__ void __launch_bounds__(kPThreads) ClusterBwdKernel(BwdStep<T> p, ClusterArgs ca) {
#if TFRNN_CLUSTER_BODY
  using A = AccOf<T>;
  cg::cluster_group cluster = cg::this_cluster();
  const I64 H = p.H, Hs = p.Hs, KH = p.K * p.H, U = ca.units, G = ca.group;
  const ClusterPart w = PartOf(cluster, H, p.B, U, G);
  const I64 j0 = w.j0, un = w.un, b0 = w.b0, bg = w.bg;
  const ClusterSmem sz = BwdSmem<T>(p.K, U, H, G);
  unsigned char* smem = DynamicSmem();
  T* rt = reinterpret_cast<T*>(smem);                                       // [un, K·H]
  T* db[2] = {reinterpret_cast<T*>(smem + sz.r),                            // [G, K·H] each
              reinterpret_cast<T*>(smem + sz.r + sz.vec)};
  const T* R = static_cast<const T*>(ca.R);
  for (I64 i = threadIdx.x; i < un * KH; i += blockDim.x) {
    const I64 u = i / KH, k = i % KH;
    rt[i] = R[k * Hs + j0 + u];
  }
  cluster.sync();  // every block has started, and its slice of R is in place
  for (I64 it = 0; it < ca.steps; ++it) {
    T* cur = db[it & 1];
    const T* later = db[(it + 1) & 1];
    const bool last = it + 1 == ca.steps;
    if (it > 0) {
      // (1) dh[b, j0 + u] += Σ_k dhr_later[b, k] · R[k, j0 + u]
      WarpDots<T, RB, CB>(rt, later, un, KH, bg, [&](I64 bl, I64 u, A v) {
        p.dh[(b0 + bl) * Hs + j0 + u] += v;
      });
      __syncthreads();  // the carries of this block's units are complete
    }
    // (2) the pointwise step of this block's units, dhr into cur (the last step, step 0:
    // global memory), (3) dhr of its units into every other block.
    p.step = ca.steps - 1 - it;
    p.dhr_cur = last ? static_cast<T*>(ca.v_out) : cur - b0 * KH;
    for (I64 i = threadIdx.x; i < bg * un; i += blockDim.x) {
      const I64 bl = i / un, j = j0 + i % un;
      BwdPoint(p, b0 + bl, j);
      if (!last) {
        for (I64 k = 0; k < p.K; ++k) {
          T* e = cur + bl * KH + k * H + j;
          Broadcast(cluster, e, *e);
        }
      }
    }
    if (!last) cluster.sync();
  }
#else
  (void)p;
  (void)ca;
#endif
}

template <typename T>
using ClusterFwdFn = void (*)(FwdStep<T>, ClusterArgs);
template <typename T>
using ClusterBwdFn = void (*)(BwdStep<T>, ClusterArgs);

template <typename T>
ClusterFwdFn<T> ClusterFwdOf(int rb, int cb) {
  return ByTile(rb, cb, [](auto r, auto c) { return &ClusterFwdKernel<T, r.value, c.value>; });
}
template <typename T>
ClusterBwdFn<T> ClusterBwdOf(int rb, int cb) {
  return ByTile(rb, cb, [](auto r, auto c) { return &ClusterBwdKernel<T, r.value, c.value>; });
}

// The plan of a cluster kernel on the current device. For each cluster size C (2 to 16, or
// TFRNN_CUDA_CLUSTER_SIZE): U = ⌈H/C⌉ units per block, as many clusters as can be resident at
// once (G = ⌈B/clusters⌉ rows each), if a block's shared memory (bytes(U, G)) fits; of those,
// the least work per block and step (U·G), the smaller C on a tie. rows_per_unit: rows of the
// block's dot products per unit (forward K, backward 1).
template <typename Bytes, typename FnOf>
SequenceKernelPlan PlanClusters(const RnnSpec& s, I64 rows_per_unit, Bytes bytes, FnOf fn_of) {
  SequenceKernelPlan best;
  const ClusterDevice cd = ClusterDeviceFor(s);
  if (!cd.ok) return best;
  const int dev = cd.dev;
  const CoopDevice& d = cd.d;
  for (int C : {2, 4, 8, 16}) {
    if (!cd.Tries(C, s.H)) continue;
    const I64 U = (s.H + C - 1) / C;
    const int rb = RowsPerWarp(rows_per_unit * U);
    if (bytes(U, 1) > static_cast<size_t>(d.optin)) continue;
    const int first = ActiveClusters(dev, fn_of(rb, 1), C, bytes(U, 1));
    if (first < 1) continue;
    const I64 G = (s.B + first - 1) / first;
    const size_t smem = bytes(U, G);
    if (smem > static_cast<size_t>(d.optin)) continue;
    const int cb = BatchTile(G);
    const I64 clusters = (s.B + G - 1) / G;
    if (ActiveClusters(dev, fn_of(rb, cb), C, smem) < clusters) continue;
    if (best.ok && U * G >= best.units * best.group) continue;
    best = MakePlan(clusters * C, U, rb, cb, smem, C, G);
  }
  return best;
}

}  // namespace

template <typename T>
SequenceKernelPlan PlanClusterFwd(const RnnSpec& s) {
  const I64 K = RnnK(s), Hs = RnnHs(s);
  const bool mask = s.has_mask;
  return PlanClusters(
      s, K, [&](I64 U, I64 G) { return FwdSmem<T>(K, U, Hs, G, mask).Bytes(); },
      &ClusterFwdOf<T>);
}

template <typename T>
SequenceKernelPlan PlanClusterBwd(const RnnSpec& s) {
  const I64 K = RnnK(s), H = s.H;
  return PlanClusters(
      s, 1, [&](I64 U, I64 G) { return BwdSmem<T>(K, U, H, G).Bytes(); }, &ClusterBwdOf<T>);
}

template <typename T>
GpuStatus ClusterFwd(const GpuContext& g, const SequenceKernelPlan& plan, FwdStep<T> p, const T* R,
                     const T* mask, bool mask_per_step, I64 steps, T* h_cur, T* h_next) {
  // The h after the last step goes where the grid kernel leaves it (rnn_gpu_persistent.cuh).
  ClusterArgs ca{R, mask, mask_per_step, steps, plan.units, plan.group, h_cur,
                 steps % 2 == 1 ? h_next : h_cur};
  return LaunchClusters(g, plan, ClusterFwdOf<T>(plan.rows_per_warp, plan.batch_tile), p, ca);
}

template <typename T>
GpuStatus ClusterBwd(const GpuContext& g, const SequenceKernelPlan& plan, BwdStep<T> p, const T* R,
                     I64 steps, T* d_last) {
  ClusterArgs ca{R, nullptr, false, steps, plan.units, plan.group, nullptr, d_last};
  return LaunchClusters(g, plan, ClusterBwdOf<T>(plan.rows_per_warp, plan.batch_tile), p, ca);
}

#define TFRNN_INSTANTIATE_CLUSTER(T)                                                          \
  template SequenceKernelPlan PlanClusterFwd<T>(const RnnSpec&);                                  \
  template SequenceKernelPlan PlanClusterBwd<T>(const RnnSpec&);                                  \
  template GpuStatus ClusterFwd<T>(const GpuContext&, const SequenceKernelPlan&, FwdStep<T>,      \
                                   const T*, const T*, bool, I64, T*, T*);                    \
  template GpuStatus ClusterBwd<T>(const GpuContext&, const SequenceKernelPlan&, BwdStep<T>,      \
                                   const T*, I64, T*);
TFRNN_INSTANTIATE_CLUSTER(__half)
TFRNN_INSTANTIATE_CLUSTER(__nv_bfloat16)
TFRNN_INSTANTIATE_CLUSTER(float)
TFRNN_INSTANTIATE_CLUSTER(double)
#undef TFRNN_INSTANTIATE_CLUSTER

}  // namespace gpu
}  // namespace tfrnn
