// A thread block's product on tensor cores, for the half and bfloat16 kernels that keep both
// operands in shared memory (the persistent kernels of rnn_gpu_persistent_mma.cu and the
// cluster kernels of rnn_gpu_cluster_mma.cu):
//   C[Bp, cols] = S[Bp, K] · Wᵀ   (S: the batch's vector, W: rows of R or of Rᵀ)
// one (16 batch rows, 8 columns) tile of mma.cuh's m16n8k16 product per warp at a time.
// Shared-memory rows are padded by kMmaPad elements, so that the eight rows a fragment load
// reads fall in different banks; the batch is rounded up to whole 16-row tiles, zeros below.
#ifndef TF_RNN_OPS_CC_GPU_MMA_BLOCK_CUH_
#define TF_RNN_OPS_CC_GPU_MMA_BLOCK_CUH_

#include "cc/gpu/mma.cuh"
#include "cc/gpu/rnn_gpu_persistent_kernels.cuh"

namespace tfrnn {
namespace gpu {
namespace {

constexpr I64 kMmaPad = 8;  // elements of padding per shared-memory row

// Rows of the batch operand in shared memory: B rounded up to whole 16-row tiles.
__host__ __device__ inline I64 MmaBatchRows(I64 B) { return (B + 15) / 16 * 16; }

// T's zero, converted from 0.f as every store of a T is (St).
template <typename T>
__device__ __forceinline__ T ZeroOf() {
  T z;
  St(&z, 0.f);
  return z;
}

// emit(b, c, v) for every b < B, c < cols of the block's product C[Bp, cols] = S · Wᵀ over K:
// S [Bp, K] and W [cols rounded up to 8, K] in shared memory, rows ld apart, rows past B and
// cols zeros. A (16 rows, 8 columns) tile per warp at a time over all of K (a warp-uniform
// loop: every lane of a warp takes part in its products).
template <typename T, typename Emit>
__device__ __forceinline__ void BlockProduct(const T* S, const T* W, I64 ld, I64 Bp, I64 B,
                                             I64 cols, I64 K, Emit emit) {
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int g = lane >> 2, t = lane & 3;
  const I64 mtiles = Bp / 16, ntiles = (cols + 7) / 8;
  for (I64 item = warp; item < mtiles * ntiles; item += kWarps) {
    const I64 m = item / ntiles, n = item % ntiles;
    float d[4] = {0.f, 0.f, 0.f, 0.f};
    for (I64 k0 = 0; k0 < K; k0 += 16) {
      uint32_t ra[4], rb[2];
      mma::LoadA(S + m * 16 * ld + k0, static_cast<int>(ld), lane, ra);
      mma::LoadB(W + n * 8 * ld + k0, static_cast<int>(ld), lane, rb);
      mma::Mma16816<T>(d, ra, rb);
    }
    for (int j = 0; j < 4; ++j) {
      const I64 b = m * 16 + g + 8 * (j >> 1), c = n * 8 + 2 * t + (j & 1);
      if (b < B && c < cols) emit(b, c, d[j]);
    }
  }
}

// Whether a tensor-core kernel is wanted: TFRNN_CUDA_MMA=1 wherever it fits, =0 nowhere;
// otherwise where it measured faster than the CUDA-core kernels (docs/GPU.md), `by_default`.
inline bool MmaWanted(bool by_default) {
  if (EnvIs("TFRNN_CUDA_MMA", "1")) return true;
  if (EnvIs("TFRNN_CUDA_MMA", "0")) return false;
  return by_default;
}

}  // namespace
}  // namespace gpu
}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_GPU_MMA_BLOCK_CUH_
