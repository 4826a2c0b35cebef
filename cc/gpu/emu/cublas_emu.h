// Host stand-ins for the cuBLAS entry points of cublas_loader.h's CublasApi, for the emulation
// build (cuda_emu.h): cublasGemmEx (and its strided-batched form) as a plain column-major
// loop, accumulating in the compute type (float, or double for CUBLAS_COMPUTE_64F), with
// cuBLAS's rules: beta == 0 never reads C, and every argument cuBLAS checks (sizes, leading
// dimensions, types) is checked.
#ifndef TF_RNN_OPS_CC_GPU_EMU_CUBLAS_EMU_H_
#define TF_RNN_OPS_CC_GPU_EMU_CUBLAS_EMU_H_

#include <cstdint>

#include "cc/gpu/cublas_loader.h"
#include "cc/gpu/emu/cuda_emu.h"

namespace tfrnn {
namespace emu {

struct FakeCublasContext {
  cudaStream_t stream = nullptr;
};

inline double LoadAs(const void* p, cudaDataType t, int64_t i) {
  switch (t) {
    case CUDA_R_16F: return __half2float(static_cast<const __half*>(p)[i]);
    case CUDA_R_16BF: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case CUDA_R_32F: return static_cast<const float*>(p)[i];
    default: return static_cast<const double*>(p)[i];
  }
}

inline void StoreAs(void* p, cudaDataType t, int64_t i, double v) {
  switch (t) {
    case CUDA_R_16F: static_cast<__half*>(p)[i] = __float2half_rn(static_cast<float>(v)); break;
    case CUDA_R_16BF:
      static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(static_cast<float>(v));
      break;
    case CUDA_R_32F: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    default: static_cast<double*>(p)[i] = v; break;
  }
}

constexpr int kStatusSuccess = 0, kStatusInvalidValue = 7, kStatusNotSupported = 15;

template <typename Acc>
void GemmLoop(int ta, int tb, int m, int n, int k, Acc alpha, const void* A, cudaDataType at,
              int lda, const void* B, cudaDataType bt, int ldb, Acc beta, void* C,
              cudaDataType ct, int ldc) {
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      Acc s = 0;
      for (int p = 0; p < k; ++p) {
        const int64_t ai = ta ? int64_t(i) * lda + p : int64_t(p) * lda + i;
        const int64_t bi = tb ? int64_t(p) * ldb + j : int64_t(j) * ldb + p;
        s += static_cast<Acc>(LoadAs(A, at, ai)) * static_cast<Acc>(LoadAs(B, bt, bi));
      }
      const int64_t ci = int64_t(j) * ldc + i;
      Acc v = alpha * s;
      if (beta != Acc(0)) v += beta * static_cast<Acc>(LoadAs(C, ct, ci));
      StoreAs(C, ct, ci, v);
    }
  }
}

// cublasGemmEx(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C,
// Ctype, ldc, computeType, algo), column-major.
template <typename Handle>
int GemmEx(Handle h, int transa, int transb, int m, int n, int k, const void* alpha,
           const void* A, cudaDataType at, int lda, const void* B, cudaDataType bt, int ldb,
           const void* beta, void* C, cudaDataType ct, int ldc, int compute, int /*algo*/) {
  if (h == nullptr) return 1;  // CUBLAS_STATUS_NOT_INITIALIZED
  if (m < 0 || n < 0 || k < 0 || (transa != 0 && transa != 1) || (transb != 0 && transb != 1))
    return kStatusInvalidValue;
  const int rows_a = transa ? k : m, rows_b = transb ? n : k;
  if (lda < (rows_a > 1 ? rows_a : 1) || ldb < (rows_b > 1 ? rows_b : 1) ||
      ldc < (m > 1 ? m : 1))
    return kStatusInvalidValue;
  if (at != bt) return kStatusNotSupported;
  if (m == 0 || n == 0) return kStatusSuccess;
  if (compute == 70) {  // CUBLAS_COMPUTE_64F: double operands and C only
    if (at != CUDA_R_64F || ct != CUDA_R_64F) return kStatusNotSupported;
    GemmLoop<double>(transa, transb, m, n, k, *static_cast<const double*>(alpha), A, at, lda, B,
                     bt, ldb, *static_cast<const double*>(beta), C, ct, ldc);
    return kStatusSuccess;
  }
  if (compute != 68 || at == CUDA_R_64F || ct == CUDA_R_64F) return kStatusNotSupported;
  if (at == CUDA_R_32F && ct != CUDA_R_32F) return kStatusNotSupported;
  GemmLoop<float>(transa, transb, m, n, k, *static_cast<const float*>(alpha), A, at, lda, B, bt,
                  ldb, *static_cast<const float*>(beta), C, ct, ldc);
  return kStatusSuccess;
}

// cublasGemmStridedBatchedEx: GemmEx on each of `batch` strided operand sets (strides in
// elements).
template <typename Handle>
int GemmStridedBatchedEx(Handle h, int transa, int transb, int m, int n, int k,
                         const void* alpha, const void* A, cudaDataType at, int lda,
                         long long sa, const void* B, cudaDataType bt, int ldb, long long sb,
                         const void* beta, void* C, cudaDataType ct, int ldc, long long sc,
                         int batch, int compute, int algo) {
  if (batch < 0) return kStatusInvalidValue;
  const int64_t ea = gpu::DataTypeBytes(at), eb = gpu::DataTypeBytes(bt);
  const int64_t ec = gpu::DataTypeBytes(ct);
  for (int i = 0; i < batch; ++i) {
    const int st = GemmEx(h, transa, transb, m, n, k, alpha,
                          static_cast<const char*>(A) + i * sa * ea, at, lda,
                          static_cast<const char*>(B) + i * sb * eb, bt, ldb, beta,
                          static_cast<char*>(C) + i * sc * ec, ct, ldc, compute, algo);
    if (st != kStatusSuccess) return st;
  }
  return kStatusSuccess;
}

}  // namespace emu
}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_GPU_EMU_CUBLAS_EMU_H_
