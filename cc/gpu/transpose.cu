// Small device helpers of the C API: [d0, d1, c] -> [d1, d0, c] (batch-major <-> time-major).
#include <cuda_runtime.h>

#include <cstdint>

#include "cc/gpu/rnn_gpu.h"
#include "cc/gpu/rnn_gpu_common.cuh"

namespace tfrnn {
namespace gpu {
namespace {

// Moves elements of `bytes` bytes (1, 2, 4 or 8) as unsigned integers: no conversion.
template <typename U>
__global__ void SwapMajorKernel(const U* src, U* dst, I64 d0, I64 d1, I64 c) {
  TFRNN_GRID_STRIDE(i, d0 * d1 * c) {
    const I64 k = i % c, r = i / c, j = r % d1, a = r / d1;  // src[a, j, k]
    dst[(j * d0 + a) * c + k] = src[i];
  }
}

}  // namespace

GpuStatus SwapMajor(cudaStream_t stream, int elem_bytes, const void* src, void* dst, int64_t d0,
                    int64_t d1, int64_t c) {
  const I64 n = d0 * d1 * c;
  if (n == 0) return GpuStatus::Ok();
  switch (elem_bytes) {
    case 2:
      TFRNN_LAUNCH(Blocks(n), kThreads, stream, SwapMajorKernel<uint16_t>)(
          static_cast<const uint16_t*>(src), static_cast<uint16_t*>(dst), d0, d1, c);
      break;
    case 4:
      TFRNN_LAUNCH(Blocks(n), kThreads, stream, SwapMajorKernel<uint32_t>)(
          static_cast<const uint32_t*>(src), static_cast<uint32_t*>(dst), d0, d1, c);
      break;
    case 8:
      TFRNN_LAUNCH(Blocks(n), kThreads, stream, SwapMajorKernel<uint64_t>)(
          static_cast<const uint64_t*>(src), static_cast<uint64_t*>(dst), d0, d1, c);
      break;
    default:
      return InvalidArgument("SwapMajor: element size must be 2, 4 or 8 bytes");
  }
  TFRNN_CUDA_CHECK_LAUNCH("SwapMajorKernel");
  return GpuStatus::Ok();
}

}  // namespace gpu
}  // namespace tfrnn
