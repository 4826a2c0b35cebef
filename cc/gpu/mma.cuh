// Tensor-core products of one warp for the half and bfloat16 kernels:
//   D[16, 8] += A[16, 16] · B[16, 8]   (PTX mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16})
// with half or bfloat16 inputs and float accumulators, held in registers as fragments. The
// fragment layout (PTX ISA, "Matrix fragments for mma.m16n8k16 with floating point type"), with
// g = lane / 4 and t = lane % 4, each 32-bit register holding two elements, the lower index in
// its low half:
//   A (row-major 16 x 16): a[0] = A[g][2t, 2t+1], a[1] = A[g+8][2t, 2t+1],
//                          a[2] = A[g][2t+8, 2t+9], a[3] = A[g+8][2t+8, 2t+9];
//   B (16 x 8, k-major per column n): b[0] = B[2t, 2t+1][g], b[1] = B[2t+8, 2t+9][g];
//   C, D (16 x 8 float): c[0], c[1] = C[g][2t, 2t+1]; c[2], c[3] = C[g+8][2t, 2t+1].
// On sm_80 and newer Mma16816 is the instruction. Elsewhere, and in the CUDA emulation
// (TFRNN_CUDA_EMULATE), the warp exchanges every fragment register with __shfl_xor_sync and
// each lane sums its four outputs in float in k order; the hardware's order of summation is
// unspecified, so the two agree to float rounding. `tests/gpu/mma_checks.py` checks this
// layout against numpy through the probe kernel (mma_probe.cu): on the emulation in every test
// run, on the GPU in tools/gpu_session.sh (stage mma), where it checks the instruction itself.
#ifndef TF_RNN_OPS_CC_GPU_MMA_CUH_
#define TF_RNN_OPS_CC_GPU_MMA_CUH_

#include <cooperative_groups.h>  // the emulation's warp shuffles
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace tfrnn {
namespace gpu {
namespace mma {

template <typename T>
__device__ __forceinline__ uint16_t Bits(T v) {
  uint16_t u;
  memcpy(&u, &v, sizeof(u));
  return u;
}
template <typename T>
__device__ __forceinline__ float ToFloat(uint16_t u) {
  T v;
  memcpy(&v, &u, sizeof(u));
  if constexpr (std::is_same<T, __half>::value) {
    return __half2float(v);
  } else {
    return __bfloat162float(v);
  }
}
// Two elements in one register: lo in bits 0-15, hi in bits 16-31.
template <typename T>
__device__ __forceinline__ uint32_t Pack2(T lo, T hi) {
  return static_cast<uint32_t>(Bits(lo)) | (static_cast<uint32_t>(Bits(hi)) << 16);
}

// p[0] and p[1] as one register (p 4-byte aligned: the fragments' element offsets are even,
// so tiles at even offsets with even leading dimensions qualify): one 32-bit load on a GPU.
template <typename T>
__device__ __forceinline__ uint32_t Load2(const T* p) {
#ifdef TFRNN_CUDA_EMULATE
  return Pack2(p[0], p[1]);
#else
  return *reinterpret_cast<const uint32_t*>(p);
#endif
}

// A's fragment of the 16 x 16 tile at a (row-major, leading dimension lda, even; a 4-byte
// aligned) whose first `rows` rows are stored (1 to 16): the rows past them read as zeros,
// nothing of them is loaded.
template <typename T>
__device__ __forceinline__ void LoadA(const T* a, int lda, int lane, uint32_t (&r)[4],
                                      int rows = 16) {
  const int g = lane >> 2, t = lane & 3;
  for (int j = 0; j < 4; ++j) {
    const int row = g + 8 * (j & 1);
    r[j] = row < rows ? Load2(a + row * lda + 2 * t + 8 * (j >> 1)) : 0u;
  }
}

// B's fragment of the 16 x 8 tile whose column n holds B[k][n] at b[n · ldb + k] (each column
// contiguous in k: R's rows for the recurrent product; ldb even, b 4-byte aligned).
template <typename T>
__device__ __forceinline__ void LoadB(const T* b, int ldb, int lane, uint32_t (&r)[2]) {
  const int g = lane >> 2, t = lane & 3;
  for (int j = 0; j < 2; ++j) r[j] = Load2(b + g * ldb + 2 * t + 8 * j);
}

// The accumulators' 16 x 8 tile into c (row-major, leading dimension ldc).
__device__ __forceinline__ void StoreC(float* c, int ldc, int lane, const float (&d)[4]) {
  const int g = lane >> 2, t = lane & 3;
  for (int j = 0; j < 4; ++j) c[(g + 8 * (j >> 1)) * ldc + 2 * t + (j & 1)] = d[j];
}

// d += A · B for one warp's fragments, by exchanging them across the warp: every lane
// gathers the whole tiles (a register of lane s reaches lane s ^ o by the xor shuffle with o).
template <typename T>
__device__ __forceinline__ void MmaByShuffle(float (&d)[4], const uint32_t (&a)[4],
                                             const uint32_t (&b)[2]) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  float at[16][16], bt[16][8];
  for (int o = 0; o < 32; ++o) {
    const int s = lane ^ o, g = s >> 2, t = s & 3;
    for (int j = 0; j < 4; ++j) {
      const uint32_t v = o == 0 ? a[j] : __shfl_xor_sync(0xffffffffu, a[j], o);
      const int row = g + 8 * (j & 1), col = 2 * t + 8 * (j >> 1);
      at[row][col] = ToFloat<T>(static_cast<uint16_t>(v & 0xffffu));
      at[row][col + 1] = ToFloat<T>(static_cast<uint16_t>(v >> 16));
    }
    for (int j = 0; j < 2; ++j) {
      const uint32_t v = o == 0 ? b[j] : __shfl_xor_sync(0xffffffffu, b[j], o);
      const int k = 2 * t + 8 * j;
      bt[k][g] = ToFloat<T>(static_cast<uint16_t>(v & 0xffffu));
      bt[k + 1][g] = ToFloat<T>(static_cast<uint16_t>(v >> 16));
    }
  }
  const int g = lane >> 2, t = lane & 3;
  for (int j = 0; j < 4; ++j) {
    const int row = g + 8 * (j >> 1), col = 2 * t + (j & 1);
    float sum = d[j];
    for (int k = 0; k < 16; ++k) sum += at[row][k] * bt[k][col];
    d[j] = sum;
  }
}

// d += A · B (fragments as above), T = __half or __nv_bfloat16.
template <typename T>
__device__ __forceinline__ void Mma16816(float (&d)[4], const uint32_t (&a)[4],
                                         const uint32_t (&b)[2]) {
#if !defined(TFRNN_CUDA_EMULATE) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same<T, __half>::value) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
#else
  MmaByShuffle<T>(d, a, b);
#endif
}

}  // namespace mma
}  // namespace gpu
}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_GPU_MMA_CUH_
