// The tensor-core product of mma.cuh on whole matrices, for tests/gpu/mma_checks.py (C API
// tfrnn_cuda_mma_probe): C[M, N] = A[M, K] · B, A row-major, B given as Bt[N, K] (column n of B
// contiguous in k), M, N, K multiples of 16, 8 and 16. One warp per 16 x 8 tile of C, over K in
// steps of 16. On a GPU it checks the fragment layout and the instruction; on the emulation,
// the shuffle path the kernels will fall back on.
#include <cuda_runtime.h>

#include <cstdint>

#include "cc/gpu/mma.cuh"
#include "cc/gpu/rnn_gpu.h"
#include "cc/gpu/rnn_gpu_common.cuh"

namespace tfrnn {
namespace gpu {
namespace {

constexpr int kProbeWarps = 4;  // warps per block

template <typename T>
__global__ void MmaProbeKernel(const T* a, const T* bt, float* c, int M, int N, int K) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int warp = static_cast<int>(blockIdx.x) * kProbeWarps + static_cast<int>(threadIdx.x) / 32;
  const int tiles_n = N / 8;
  if (warp >= (M / 16) * tiles_n) return;  // a whole warp leaves together
  const int tm = warp / tiles_n, tn = warp % tiles_n;
  float d[4] = {0.f, 0.f, 0.f, 0.f};
  for (int k0 = 0; k0 < K; k0 += 16) {
    uint32_t ra[4], rb[2];
    mma::LoadA(a + static_cast<int64_t>(tm) * 16 * K + k0, K, lane, ra);
    mma::LoadB(bt + static_cast<int64_t>(tn) * 8 * K + k0, K, lane, rb);
    mma::Mma16816<T>(d, ra, rb);
  }
  mma::StoreC(c + static_cast<int64_t>(tm) * 16 * N + tn * 8, N, lane, d);
}

template <typename T>
GpuStatus Probe(cudaStream_t stream, const void* a, const void* bt, float* c, int M, int N,
                int K) {
  const int warps = (M / 16) * (N / 8);
  cudaLaunchConfig_t cfg = cudaLaunchConfig_t{};
  cfg.gridDim = dim3(static_cast<unsigned>((warps + kProbeWarps - 1) / kProbeWarps));
  cfg.blockDim = dim3(32 * kProbeWarps);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cfg.attrs = nullptr;
  cfg.numAttrs = 0;
  TFRNN_CUDA_CHECK(cudaLaunchKernelEx(&cfg, MmaProbeKernel<T>, static_cast<const T*>(a),
                                      static_cast<const T*>(bt), c, M, N, K));
  TFRNN_CUDA_CHECK(cudaGetLastError());
  return GpuStatus::Ok();
}

}  // namespace

GpuStatus MmaProbe(cudaStream_t stream, bool bf16, const void* a, const void* bt, float* c,
                   int64_t M, int64_t N, int64_t K) {
  if (M <= 0 || N <= 0 || K <= 0 || M % 16 != 0 || N % 8 != 0 || K % 16 != 0) {
    return InvalidArgument("mma_probe: M, N and K must be positive multiples of 16, 8 and 16");
  }
  if (M > 4096 || N > 4096 || K > 4096) {
    return InvalidArgument("mma_probe: M, N and K must be at most 4096");
  }
  if (a == nullptr || bt == nullptr || c == nullptr) {
    return InvalidArgument("mma_probe: NULL pointer");
  }
  const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K);
  return bf16 ? Probe<__nv_bfloat16>(stream, a, bt, c, m, n, k)
              : Probe<__half>(stream, a, bt, c, m, n, k);
}

}  // namespace gpu
}  // namespace tfrnn
