// A thread block's product on tensor cores, for the half and bfloat16 kernels that keep both
// operands in shared memory (the persistent kernels of rnn_gpu_persistent_mma.cu and the
// cluster kernels of rnn_gpu_cluster_mma.cu):
//   C[Bp, cols] = S[Bp, K] · Wᵀ   (S: the batch's vector, W: rows of R or of Rᵀ)
// one (16 batch rows, 8 columns) tile of mma.cuh's m16n8k16 product per warp at a time.
// Shared-memory rows are padded by kMmaPad elements, so that the eight rows a fragment load
// reads fall in different banks; the batch is rounded up to whole 16-row tiles, zeros below
// (MmaBatchRows), or for a batch of at most 8 rows to one 8-row half tile (MmaVecRows), the
// tile's other 8 rows read as zeros without being stored.
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
// The same, except that a batch of at most 8 rows takes 8 (half a tile: a vector of a cluster
// kernel's group, where shared memory is short).
__host__ __device__ inline I64 MmaVecRows(I64 B) { return B <= 8 ? 8 : MmaBatchRows(B); }

// T's zero, converted from 0.f as every store of a T is (St).
template <typename T>
__device__ __forceinline__ T ZeroOf() {
  T z;
  St(&z, 0.f);
  return z;
}

// One warp's (16 rows, 8 columns) tile m, n of S · Wᵀ over K in [k0, k1) (steps of 16), added
// to its fragment d (mma.cuh's C layout); S has Bp rows (a multiple of 8), so the last tile may
// have 8 of its rows stored.
template <typename T>
__device__ __forceinline__ void TileProduct(const T* S, const T* W, I64 ld, I64 Bp, I64 m, I64 n,
                                            I64 k0, I64 k1, int lane, float (&d)[4]) {
  const int rows = Bp - m * 16 < 16 ? static_cast<int>(Bp - m * 16) : 16;
  for (I64 k = k0; k < k1; k += 16) {
    uint32_t ra[4], rb[2];
    mma::LoadA(S + m * 16 * ld + k, static_cast<int>(ld), lane, ra, rows);
    mma::LoadB(W + n * 8 * ld + k, static_cast<int>(ld), lane, rb);
    mma::Mma16816<T>(d, ra, rb);
  }
}

// The row b and column c of element j (0-3) of lane `lane`'s fragment of tile m, n.
__device__ __forceinline__ void FragmentAt(I64 m, I64 n, int lane, int j, I64* b, I64* c) {
  *b = m * 16 + (lane >> 2) + 8 * (j >> 1);
  *c = n * 8 + 2 * (lane & 3) + (j & 1);
}

// emit(b, c, v) for every b < B, c < cols of the block's product C[Bp, cols] = S · Wᵀ over K:
// S [Bp, K] (Bp: MmaBatchRows or MmaVecRows of B) and W [cols rounded up to 8, K] in shared
// memory, rows ld apart, rows past B and cols zeros. A (16 rows, 8 columns) tile per warp at a
// time over all of K (a warp-uniform loop: every lane of a warp takes part in its products).
template <typename T, typename Emit>
__device__ __forceinline__ void BlockProduct(const T* S, const T* W, I64 ld, I64 Bp, I64 B,
                                             I64 cols, I64 K, Emit emit) {
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const I64 mtiles = (Bp + 15) / 16, ntiles = (cols + 7) / 8;
  for (I64 item = warp; item < mtiles * ntiles; item += kWarps) {
    const I64 m = item / ntiles, n = item % ntiles;
    float d[4] = {0.f, 0.f, 0.f, 0.f};
    TileProduct(S, W, ld, Bp, m, n, 0, K, lane, d);
    for (int j = 0; j < 4; ++j) {
      I64 b, c;
      FragmentAt(m, n, lane, j, &b, &c);
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
  const I64 ntiles = (cols + 7) / 8, tiles = (Bp + 15) / 16 * ntiles, ksteps = K / 16;
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
    const I64 k1 = (sl + 1) * per < K ? (sl + 1) * per : K;
    float d[4] = {0.f, 0.f, 0.f, 0.f};
    TileProduct(S, W, ld, Bp, tile / ntiles, tile % ntiles, sl * per, k1, lane, d);
    for (int j = 0; j < 4; ++j) part[item * 128 + lane * 4 + j] = d[j];
  }
  __syncthreads();  // every slice's partial tile is written
  for (I64 i = threadIdx.x; i < tiles * 128; i += blockDim.x) {
    const I64 tile = i / 128, e = i % 128;
    float v = 0.f;
    for (I64 sl = 0; sl < split; ++sl) v += part[(tile * split + sl) * 128 + e];
    I64 b, c;
    FragmentAt(tile / ntiles, tile % ntiles, static_cast<int>(e / 4), static_cast<int>(e % 4), &b,
               &c);
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
