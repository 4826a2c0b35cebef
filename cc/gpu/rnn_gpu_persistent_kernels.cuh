// Device pieces shared by the persistent forward (rnn_gpu_persistent.cu) and backward
// (rnn_gpu_persistent_bwd.cu) kernels. Included only by those two files, after
// <cooperative_groups.h>.
#ifndef TF_RNN_OPS_CC_GPU_RNN_GPU_PERSISTENT_KERNELS_CUH_
#define TF_RNN_OPS_CC_GPU_RNN_GPU_PERSISTENT_KERNELS_CUH_

#include "cc/gpu/rnn_gpu_fwd_point.cuh"

namespace tfrnn {
namespace gpu {
namespace {

namespace cg = cooperative_groups;

constexpr int kPThreads = 256;
constexpr int kWarps = kPThreads / 32;
constexpr int kLoads = 8;  // h loads in flight per thread

__host__ __device__ inline size_t Align16(size_t n) { return (n + 15) / 16 * 16; }

// L2 loads (ld.global.cg): h was written by other blocks in the previous step, and L1 is not
// coherent between multiprocessors.
__device__ __forceinline__ float LdCg(const float* p) { return __ldcg(p); }
__device__ __forceinline__ double LdCg(const double* p) { return __ldcg(p); }
__device__ __forceinline__ float LdCg(const __half* p) { return __half2float(__ldcg(p)); }
__device__ __forceinline__ float LdCg(const __nv_bfloat16* p) {
  return __bfloat162float(__ldcg(p));
}

// The block's dynamic shared memory (in the CUDA emulation: its per-block buffer).
#ifdef TFRNN_CUDA_EMULATE
__device__ __forceinline__ unsigned char* DynamicSmem() { return emu::DynamicSmem(); }
#else
__device__ __forceinline__ unsigned char* DynamicSmem() {
  extern __shared__ __align__(16) unsigned char smem[];
  return smem;
}
#endif

// emit(b, r, Σ_c rs[r·len + c] · vs[b·len + c]) for every r < rows, b < B (from one lane):
// warps take RB rows at a time, lanes stride over c, CB batch rows per register tile (RB + CB
// shared-memory loads per RB·CB multiply-adds), then a warp reduction.
template <typename T, int RB, int CB, typename Emit>
__device__ __forceinline__ void WarpDots(const T* rs, const AccOf<T>* vs, I64 rows, I64 len,
                                         I64 B, Emit emit) {
  using A = AccOf<T>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (I64 r0 = warp * RB; r0 < rows; r0 += kWarps * RB) {
    for (I64 b0 = 0; b0 < B; b0 += CB) {
      A acc[RB][CB];
#pragma unroll
      for (int a = 0; a < RB; ++a) {
#pragma unroll
        for (int q = 0; q < CB; ++q) acc[a][q] = A(0);
      }
      for (I64 c = lane; c < len; c += 32) {
        A w[RB], h[CB];
#pragma unroll
        for (int a = 0; a < RB; ++a) w[a] = r0 + a < rows ? Ld(rs + (r0 + a) * len + c) : A(0);
#pragma unroll
        for (int q = 0; q < CB; ++q) h[q] = b0 + q < B ? vs[(b0 + q) * len + c] : A(0);
#pragma unroll
        for (int a = 0; a < RB; ++a) {
#pragma unroll
          for (int q = 0; q < CB; ++q) acc[a][q] += w[a] * h[q];
        }
      }
#pragma unroll
      for (int a = 0; a < RB; ++a) {
#pragma unroll
        for (int q = 0; q < CB; ++q) {
          A v = acc[a][q];
#pragma unroll
          for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
          const I64 r = r0 + a;
          if (lane == (a * CB + q) % 32 && r < rows && b0 + q < B) emit(b0 + q, r, v);
        }
      }
    }
  }
}

}  // namespace
}  // namespace gpu
}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_GPU_RNN_GPU_PERSISTENT_KERNELS_CUH_
