// A host-only stand-in for the parts of the CUDA runtime, cuda_fp16/cuda_bf16 and cuBLAS that
// the CUDA engine (cc/gpu/) uses, so that the same engine sources build with g++ alone and run
// on a CPU: the CUDA engine's logic (indexing, layouts, GEMM operands, step order, validation,
// the C API) is then tested on machines without a GPU (tools/build_cuda_emu.sh,
// tests/test_cuda_emulated.py).
//
// How it runs: "device memory" is host memory; a kernel launch (TFRNN_LAUNCH, cc/gpu/launch.h)
// calls the kernel function once per (block, thread) of the grid, in order, with blockIdx and
// threadIdx set, before returning, so every stream is synchronous. This is exact for the
// engine's grid-stride kernels, whose threads never communicate. Kernels whose threads do
// (shared memory, __syncthreads, warp shuffles, grid barriers: the persistent kernel) run
// through a cooperative launch, every thread a fiber (cuda_emu_coop.h). The emulated device
// has 4 multiprocessors, compute capability 9 and thread-block clusters of up to 4 blocks
// (cudaLaunchKernelEx, cuda_emu_coop.h). cublasGemmEx is a plain loop in the compute type.
//
// What it cannot find: races, memory coalescing, launch limits, anything of real hardware.
// Those stay for tools/gpu_session.sh on a GPU machine.
//
// The headers beside this file (cuda_runtime_api.h, cuda_fp16.h, ...) shadow the toolkit's when
// cc/gpu/emu is first on the include path, and include this one.
#ifndef TF_RNN_OPS_CC_GPU_EMU_CUDA_EMU_H_
#define TF_RNN_OPS_CC_GPU_EMU_CUDA_EMU_H_

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <math.h>

#include "cc/engine/bf16_bits.h"

#define TFRNN_CUDA_EMULATE 1

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)

// ---- grid geometry -------------------------------------------------------------------------
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
inline thread_local uint3 blockIdx, threadIdx;
inline thread_local dim3 blockDim, gridDim;

// ---- runtime API -----------------------------------------------------------------------------
enum cudaError_t : int {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorNotSupported = 801,
};
using cudaError = cudaError_t;
struct CUstream_st;
using cudaStream_t = CUstream_st*;
enum cudaMemcpyKind : int {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};
enum cudaDeviceAttr : int {
  cudaDevAttrMaxSharedMemoryPerBlock = 8,
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrCooperativeLaunch = 95,
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
};
enum cudaFuncAttribute : int {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
  cudaFuncAttributeNonPortableClusterSizeAllowed = 11,
};
// Launch configurations (cudaLaunchKernelEx): only the cluster dimension is emulated.
enum cudaLaunchAttributeID : int {
  cudaLaunchAttributeClusterDimension = 4,
};
union cudaLaunchAttributeValue {
  struct {
    unsigned x, y, z;
  } clusterDim;
  char pad[64];
};
struct cudaLaunchAttribute {
  cudaLaunchAttributeID id;
  cudaLaunchAttributeValue val;
};
struct cudaLaunchConfig_t {
  dim3 gridDim, blockDim;
  size_t dynamicSmemBytes = 0;
  struct CUstream_st* stream = nullptr;
  cudaLaunchAttribute* attrs = nullptr;
  unsigned numAttrs = 0;
};
enum cudaDataType_t : int {
  CUDA_R_32F = 0,
  CUDA_R_64F = 1,
  CUDA_R_16F = 2,
  CUDA_R_16BF = 14,
};
using cudaDataType = cudaDataType_t;

namespace tfrnn {
namespace emu {
// Dynamic shared memory per block, opted in: an H100's or H200's 227 KiB, or
// TFRNN_EMU_SMEM_OPTIN bytes (tests: a device with less, so that a plan takes the road it
// takes on a GPU for a layer too large to emulate).
inline size_t SmemOptin() {
  static const size_t bytes = [] {
    const char* e = std::getenv("TFRNN_EMU_SMEM_OPTIN");
    const long long v = e != nullptr ? std::atoll(e) : 0;
    return v > 0 ? static_cast<size_t>(v) : static_cast<size_t>(227) * 1024;
  }();
  return bytes;
}

// The error a launch left for cudaGetLastError (a bad configuration), cleared when read.
inline thread_local cudaError_t last_error = cudaSuccess;

// Runs kernel f over the grid, thread by thread. Zero-sized grids or blocks are configuration
// errors, as on a GPU.
template <typename F>
struct Launcher {
  dim3 grid, block;
  F f;
  template <typename... Args>
  void operator()(Args&&... args) const {
    if (grid.x * grid.y * grid.z == 0 || block.x * block.y * block.z == 0 ||
        block.x * block.y * block.z > 1024) {
      last_error = cudaErrorInvalidConfiguration;
      return;
    }
    gridDim = grid;
    blockDim = block;
    for (unsigned bz = 0; bz < grid.z; ++bz)
      for (unsigned by = 0; by < grid.y; ++by)
        for (unsigned bx = 0; bx < grid.x; ++bx)
          for (unsigned tz = 0; tz < block.z; ++tz)
            for (unsigned ty = 0; ty < block.y; ++ty)
              for (unsigned tx = 0; tx < block.x; ++tx) {
                blockIdx.x = bx, blockIdx.y = by, blockIdx.z = bz;
                threadIdx.x = tx, threadIdx.y = ty, threadIdx.z = tz;
                f(args...);
              }
  }
};
template <typename F>
Launcher<F> Launch(dim3 grid, dim3 block, cudaStream_t, F f) {
  return Launcher<F>{grid, block, f};
}
}  // namespace emu
}  // namespace tfrnn

inline cudaError_t cudaGetLastError() {
  const cudaError_t e = tfrnn::emu::last_error;
  tfrnn::emu::last_error = cudaSuccess;
  return e;
}
inline cudaError_t cudaPeekAtLastError() { return tfrnn::emu::last_error; }
inline const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorNotSupported: return "cudaErrorNotSupported";
  }
  return "cudaErrorUnknown";
}
inline const char* cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error" : "emulated CUDA error";
}
inline cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return cudaSuccess;
}
inline cudaError_t cudaGetDevice(int* d) {
  *d = 0;
  return cudaSuccess;
}
inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
inline cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr attr, int) {
  switch (attr) {
    // A small device: a cooperative launch runs every thread as a fiber (cuda_emu_coop.h).
    case cudaDevAttrMultiProcessorCount: *v = 4; break;
    case cudaDevAttrCooperativeLaunch: *v = 1; break;
    case cudaDevAttrComputeCapabilityMajor: *v = 9; break;  // thread-block clusters
    case cudaDevAttrMaxSharedMemoryPerBlock: *v = 48 * 1024; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *v = static_cast<int>(tfrnn::emu::SmemOptin());
      break;
    default: return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind,
                                   cudaStream_t = nullptr) {
  if (n > 0 && (dst == nullptr || src == nullptr)) return cudaErrorInvalidValue;
  if (n > 0) std::memmove(dst, src, n);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind k) {
  return cudaMemcpyAsync(dst, src, n, k);
}
inline cudaError_t cudaMemsetAsync(void* dst, int v, size_t n, cudaStream_t = nullptr) {
  if (n > 0 && dst == nullptr) return cudaErrorInvalidValue;
  if (n > 0) std::memset(dst, v, n);
  return cudaSuccess;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
inline cudaError_t cudaMalloc(void** p, size_t n) {
  *p = std::malloc(n > 0 ? n : 1);
  return *p != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaFree(void* p) {
  std::free(p);
  return cudaSuccess;
}
template <typename F>
inline cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int) {
  return cudaSuccess;
}
template <typename F>
inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* n, F, int, size_t) {
  *n = 1;
  return cudaSuccess;
}
template <typename F>
inline cudaError_t cudaLaunchCooperativeKernel(F, dim3, dim3, void**, size_t, cudaStream_t) {
  return cudaErrorNotSupported;
}

// ---- half and bfloat16 (storage only; the engine computes in float) -------------------------
struct __half {
  uint16_t bits;
};
struct __nv_bfloat16 {
  uint16_t bits;
};
namespace tfrnn {
namespace emu {
inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace emu
}  // namespace tfrnn

inline float __bfloat162float(__nv_bfloat16 h) { return tfrnn::bf16::Widen(h.bits); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return {tfrnn::bf16::Round(f)}; }
// IEEE binary16, round to nearest even (subnormals, overflow to infinity, NaN kept).
inline __half __float2half_rn(float f) {
  const uint32_t u = tfrnn::emu::FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return {static_cast<uint16_t>(sign | 0x7e00u)};
  if (a >= 0x477ff000u) return {static_cast<uint16_t>(sign | 0x7c00u)};  // rounds to >= 65536
  if (a < 0x38800000u) {  // below the smallest normal half (2^-14): a subnormal or zero
    const float m = std::fabs(f) * 16777216.0f;  // in units of 2^-24, exact
    return {static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(m)))};
  }
  const uint32_t mant = a & 0x7fffffu;
  const int32_t exp = static_cast<int32_t>(a >> 23) - 127 + 15;
  uint32_t h = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return {static_cast<uint16_t>(sign | h)};
}
inline float __half2float(__half h) {
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  const uint32_t e = (h.bits >> 10) & 0x1fu, m = h.bits & 0x3ffu;
  if (e == 0) {
    const float v = static_cast<float>(m) * (1.0f / 16777216.0f);
    return sign != 0 ? -v : v;
  }
  if (e == 31) return tfrnn::emu::BitsFloat(sign | 0x7f800000u | (m << 13));
  return tfrnn::emu::BitsFloat(sign | ((e - 15 + 127) << 23) | (m << 13));
}

#endif  // TF_RNN_OPS_CC_GPU_EMU_CUDA_EMU_H_
