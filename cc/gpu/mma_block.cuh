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

// Floats of the partial sums BlockProductSplit needs in shared memory (at most one 16 x 8 tile
// per warp).
constexpr I64 kMmaSplitFloats = kWarps * 128;

// BlockProduct with K split between warps where the product has fewer tiles than the block has
// warps (a tile's mma.sync chain over all of K would otherwise run on a few warps while the
// others wait): each warp takes (tile, slice of K) items, writes its partial tile to `part`
// (kMmaSplitFloats floats of shared memory), and after a block barrier the block sums each
// tile's slices in slice order (the same bits every run) and emits. Without a split (as many
// tiles as warps, or more) it is BlockProduct. Every thread of the block calls it.
template <typename T, typename Emit>
__device__ __forceinline__ void BlockProductSplit(const T* S, const T* W, I64 ld, I64 Bp, I64 B,
                                                  I64 cols, I64 K, float* part, Emit emit) {
  const I64 ntiles = (cols + 7) / 8, tiles = Bp / 16 * ntiles, ksteps = K / 16;
  const I64 most = tiles == 0 ? 1 : kWarps / tiles;  // slices that keep every warp busy
  const I64 split = most < ksteps ? most : ksteps;
  if (split <= 1) {
    BlockProduct(S, W, ld, Bp, B, cols, K, emit);
    return;
  }
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const I64 per = (ksteps + split - 1) / split * 16;  // K per slice
  for (I64 item = warp; item < tiles * split; item += kWarps) {
    const I64 tile = item / split, sl = item % split;
    const I64 m = tile / ntiles, n = tile % ntiles;
    const I64 k1 = (sl + 1) * per < K ? (sl + 1) * per : K;
    float d[4] = {0.f, 0.f, 0.f, 0.f};
    for (I64 k0 = sl * per; k0 < k1; k0 += 16) {
      uint32_t ra[4], rb[2];
      mma::LoadA(S + m * 16 * ld + k0, static_cast<int>(ld), lane, ra);
      mma::LoadB(W + n * 8 * ld + k0, static_cast<int>(ld), lane, rb);
      mma::Mma16816<T>(d, ra, rb);
    }
    for (int j = 0; j < 4; ++j) part[item * 128 + lane * 4 + j] = d[j];
  }
  __syncthreads();  // every slice's partial tile is written
  for (I64 i = threadIdx.x; i < tiles * 128; i += blockDim.x) {
    const I64 tile = i / 128, e = i % 128, m = tile / ntiles, n = tile % ntiles;
    const int ln = static_cast<int>(e / 4), j = static_cast<int>(e % 4);
    float v = 0.f;
    for (I64 sl = 0; sl < split; ++sl) v += part[(tile * split + sl) * 128 + e];
    const I64 b = m * 16 + (ln >> 2) + 8 * (j >> 1), c = n * 8 + 2 * (ln & 3) + (j & 1);
    if (b < B && c < cols) emit(b, c, v);
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
