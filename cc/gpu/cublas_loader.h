// cuBLAS, loaded at run time. No cuBLAS header is needed to build: the few types and entry points
// used here are declared below (their values are cuBLAS's stable C ABI). The library that is
// present is opened with dlopen (libcublas.so.13, .12, .11, then libcublas.so); inside
// TensorFlow's GPU process that is the copy TensorFlow itself already loaded.
//
// Handles: one pool per (device, stream). A call leases a handle for its duration (never two
// threads on one handle at once) and the handle only ever runs on that pool's stream, so
// cuBLAS's per-handle workspace is never shared between streams. Handles are kept for the life
// of the process (destroying them at exit races with CUDA's own teardown).
#ifndef TF_RNN_OPS_CC_GPU_CUBLAS_LOADER_H_
#define TF_RNN_OPS_CC_GPU_CUBLAS_LOADER_H_

#include <cuda_runtime_api.h>
#include <library_types.h>

#include <cstdint>

#include "cc/gpu/gpu_status.h"

namespace tfrnn {
namespace gpu {

struct CublasContext;  // cuBLAS's opaque cublasContext
using CublasHandle = CublasContext*;

// cublasOperation_t, cublasComputeType_t, cublasGemmAlgo_t values.
constexpr int kCublasOpN = 0;
constexpr int kCublasOpT = 1;
constexpr int kCublasCompute32F = 68;
constexpr int kCublasCompute64F = 70;
constexpr int kCublasGemmDefault = -1;

struct CublasApi {
  const char* soname = nullptr;  // the library that was opened
  int (*create)(CublasHandle*) = nullptr;                    // cublasCreate_v2
  int (*destroy)(CublasHandle) = nullptr;                    // cublasDestroy_v2
  int (*set_stream)(CublasHandle, cudaStream_t) = nullptr;   // cublasSetStream_v2
  int (*gemm_ex)(CublasHandle, int transa, int transb, int m, int n, int k, const void* alpha,
                 const void* A, cudaDataType Atype, int lda, const void* B, cudaDataType Btype,
                 int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc,
                 int compute_type, int algo) = nullptr;       // cublasGemmEx
  int (*gemm_strided_batched_ex)(CublasHandle, int transa, int transb, int m, int n, int k,
                                 const void* alpha, const void* A, cudaDataType Atype, int lda,
                                 long long stride_a, const void* B, cudaDataType Btype, int ldb,
                                 long long stride_b, const void* beta, void* C,
                                 cudaDataType Ctype, int ldc, long long stride_c, int batch,
                                 int compute_type, int algo) = nullptr;
                                                             // cublasGemmStridedBatchedEx
  const char* (*status_string)(int) = nullptr;               // cublasGetStatusString (optional)
};

// Opens cuBLAS once per process (thread-safe). Fails with kCublasUnavailable naming every
// soname tried.
GpuStatus LoadCublas(const CublasApi** api);

// "CUBLAS_STATUS_..." text of a cuBLAS status.
const char* CublasStatusName(const CublasApi* api, int status);

// A handle leased from the pool of (current device, stream); returned on destruction.
class CublasLease {
 public:
  CublasLease() = default;
  ~CublasLease();
  CublasLease(const CublasLease&) = delete;
  CublasLease& operator=(const CublasLease&) = delete;
  // Leases a handle bound to `stream` on the current device (cudaGetDevice).
  GpuStatus Acquire(cudaStream_t stream);
  CublasHandle handle() const { return handle_; }
  const CublasApi* api() const { return api_; }

 private:
  const CublasApi* api_ = nullptr;
  CublasHandle handle_ = nullptr;
  void* pool_ = nullptr;
};

// What a kernel launch and a GEMM need.
struct GpuContext {
  cudaStream_t stream = nullptr;
  const CublasApi* api = nullptr;
  CublasHandle blas = nullptr;
};

// Bytes of one element of the types the GEMMs take (half, bfloat16, float, double).
inline int64_t DataTypeBytes(cudaDataType t) {
  return t == CUDA_R_64F ? 8 : t == CUDA_R_32F ? 4 : 2;
}

// Row-major GEMM on g.stream: C[m, n] = op(A)[m, k] · op(B)[k, n] (+ C when accumulate), with
// op(A) = A (stored [m, k]) or Aᵀ (A stored [k, m]), likewise B. A and B have type `ab`, C type
// `c`; compute in double when `ab` is double, else in float (CUBLAS_COMPUTE_32F: no TF32, half
// and bfloat16 accumulate in float). Every matrix is dense (leading dimension = its columns).
// k == 0 writes zeros (or leaves C when accumulating).
GpuStatus Gemm(const GpuContext& g, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
               const void* A, const void* B, void* C, cudaDataType ab, cudaDataType c,
               bool accumulate);
// The same with leading dimensions (row-major: the distance between rows of A, B, C as
// stored), for blocks of columns of larger matrices.
GpuStatus GemmLd(const GpuContext& g, bool trans_a, bool trans_b, int64_t m, int64_t n,
                 int64_t k, const void* A, int64_t lda, const void* B, int64_t ldb, void* C,
                 int64_t ldc, cudaDataType ab, cudaDataType c, bool accumulate);
// `batch` such products in one call: product i reads A + i·stride_a, B + i·stride_b and writes
// C + i·stride_c (strides in elements), each as GemmLd.
GpuStatus GemmLdBatched(const GpuContext& g, bool trans_a, bool trans_b, int64_t m, int64_t n,
                        int64_t k, const void* A, int64_t lda, int64_t stride_a, const void* B,
                        int64_t ldb, int64_t stride_b, void* C, int64_t ldc, int64_t stride_c,
                        int64_t batch, cudaDataType ab, cudaDataType c, bool accumulate);

}  // namespace gpu
}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_GPU_CUBLAS_LOADER_H_
