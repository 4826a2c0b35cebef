// What the cluster kernels (rnn_gpu_cluster.cu on CUDA cores, rnn_gpu_cluster_mma.cu on tensor
// cores) share: their arguments, a block's part of the work, and the hand-off of a block's
// entries to the other blocks of its cluster through distributed shared memory.
#ifndef TF_RNN_OPS_CC_GPU_RNN_GPU_CLUSTER_CUH_
#define TF_RNN_OPS_CC_GPU_RNN_GPU_CLUSTER_CUH_

#include <cooperative_groups.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "cc/gpu/rnn_gpu_persistent_kernels.cuh"

// Cluster barriers and distributed shared memory need sm_90; the sm_80 build gets empty kernel
// bodies, which the plans never launch (they require compute capability 9).
#if defined(TFRNN_CUDA_EMULATE) || !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define TFRNN_CLUSTER_BODY 1
#else
#define TFRNN_CLUSTER_BODY 0
#endif

namespace tfrnn {
namespace gpu {
namespace {

struct ClusterArgs {
  const void* R;     // [K·H, Hs]
  const void* mask;  // recurrent mask (forward) or null
  bool mask_per_step;
  I64 steps, units, group;
  const void* v_in;  // forward: h entering step 0 [B, Hs]
  void* v_out;       // the last step's vector: forward h [B, Hs], backward dhr [B, K·H]
};

// Shared memory of one block, in this order: the slice of R, the two step vectors, then (the
// forward) hr and the masked h, then (the tensor-core kernels) the split product's partial sums.
struct ClusterSmem {
  size_t r, vec, hr, hm, part = 0;
  __host__ __device__ size_t Bytes() const { return r + 2 * vec + hr + hm + part; }
};

// What a cluster plan needs of the current device, and the cluster sizes it may try: 2, 4, 8
// and 16 blocks, or only TFRNN_CUDA_CLUSTER_SIZE; none below compute capability 9, or for an
// empty layer (ok false).
struct ClusterDevice {
  bool ok = false;
  int dev = 0, only = 0;
  CoopDevice d;
  bool Tries(int C, I64 H) const { return (only <= 0 || C == only) && C <= H; }
};
inline ClusterDevice ClusterDeviceFor(const RnnSpec& s) {
  ClusterDevice c;
  c.d = CurrentCoopDevice(&c.dev);
  c.ok = c.d.ok && c.d.major >= 9 && s.B >= 1 && s.H >= 1;
  const char* forced = std::getenv("TFRNN_CUDA_CLUSTER_SIZE");
  c.only = forced != nullptr ? std::atoi(forced) : 0;
  return c;
}

#if TFRNN_CLUSTER_BODY
// Stores this block's value `v` at `local` (an address in its shared memory) into every other
// block of the cluster.
template <typename T>
__device__ __forceinline__ void Broadcast(const cg::cluster_group& cluster, T* local, T v) {
  const unsigned C = cluster.num_blocks(), rank = cluster.block_rank();
  for (unsigned q = 0; q < C; ++q) {
    if (q != rank) *cluster.map_shared_rank(local, q) = v;
  }
}

// Copies this block's entries of a vector in its shared memory into every other block of the
// cluster, at the same addresses: the segments v[r·ld + k·kst + c0 .. + n) for r < rows,
// k < K. 16 bytes a store where every segment and row start allows it (one remote store per 8
// half or bfloat16 entries), else one entry a store. The caller has finished writing them
// (__syncthreads) and waits at the cluster barrier after.
template <typename T>
__device__ __forceinline__ void HandOff(const cg::cluster_group& cluster, T* v, I64 ld, I64 rows,
                                        I64 K, I64 kst, I64 c0, I64 n) {
  const I64 C = cluster.num_blocks(), rank = cluster.block_rank();
  constexpr I64 kVec = 16 / static_cast<I64>(sizeof(T));
  const bool vec = sizeof(T) < 16 && n % kVec == 0 && c0 % kVec == 0 && ld % kVec == 0 &&
                   kst % kVec == 0 && reinterpret_cast<uintptr_t>(v) % 16 == 0;
  const I64 width = vec ? kVec : 1, per_seg = n / width, per_peer = rows * K * per_seg;
  for (I64 i = threadIdx.x; i < per_peer * (C - 1); i += blockDim.x) {
    const I64 q0 = i / per_peer, e = i % per_peer, seg = e / per_seg;
    const I64 q = q0 >= rank ? q0 + 1 : q0;
    T* src = v + (seg / K) * ld + (seg % K) * kst + c0 + (e % per_seg) * width;
    T* dst = cluster.map_shared_rank(src, static_cast<unsigned>(q));
    if (vec) {
#ifdef TFRNN_CUDA_EMULATE
      memcpy(dst, src, 16);
#else
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
#endif
    } else {
      *dst = *src;
    }
  }
}

// This block's part of the work: units [j0, j0 + un) (un may be 0) of batch rows
// [b0, b0 + bg) of the cluster's group.
struct ClusterPart {
  I64 C, rank, j0, un, b0, bg;
};
__device__ __forceinline__ ClusterPart PartOf(const cg::cluster_group& cluster, I64 H, I64 B,
                                              I64 U, I64 G) {
  ClusterPart w;
  w.C = cluster.num_blocks();
  w.rank = cluster.block_rank();
  w.j0 = w.rank * U;
  w.un = w.j0 >= H ? 0 : (H - w.j0 < U ? H - w.j0 : U);
  w.b0 = static_cast<I64>(blockIdx.x) / w.C * G;
  w.bg = B - w.b0 < G ? B - w.b0 : G;
  return w;
}
#endif

}  // namespace
}  // namespace gpu
}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_GPU_RNN_GPU_CLUSTER_CUH_
