// Status values of the CUDA engine (no TensorFlow): every CUDA and cuBLAS call is checked and
// turned into a GpuStatus carrying the failing expression and file:line; nothing aborts.
#ifndef TF_RNN_OPS_CC_GPU_GPU_STATUS_H_
#define TF_RNN_OPS_CC_GPU_GPU_STATUS_H_

#include <cuda_runtime_api.h>

#include <string>
#include <utility>

namespace tfrnn {
namespace gpu {

// Codes returned through the C API (c_api.h repeats them as TFRNN_CUDA_*).
enum GpuCode : int {
  kOk = 0,
  kInvalidArgument = 1,
  kCudaError = 2,
  kCublasUnavailable = 3,
  kCublasError = 4,
  kInternal = 5,
};

class GpuStatus {
 public:
  GpuStatus() = default;
  GpuStatus(int code, std::string msg) : code_(code), msg_(std::move(msg)) {}
  static GpuStatus Ok() { return GpuStatus(); }
  bool ok() const { return code_ == kOk; }
  int code() const { return code_; }
  const std::string& message() const { return msg_; }

 private:
  int code_ = kOk;
  std::string msg_;
};

inline GpuStatus InvalidArgument(std::string msg) {
  return GpuStatus(kInvalidArgument, std::move(msg));
}

inline GpuStatus CudaStatus(cudaError_t e, const char* expr, const char* file, int line) {
  return GpuStatus(kCudaError, std::string("CUDA error ") + cudaGetErrorName(e) + " (" +
                                   cudaGetErrorString(e) + ") in " + expr + " at " + file +
                                   ":" + std::to_string(line));
}

}  // namespace gpu
}  // namespace tfrnn

#define TFRNN_GPU_RETURN_IF_ERROR(expr)         \
  do {                                          \
    ::tfrnn::gpu::GpuStatus _st = (expr);       \
    if (!_st.ok()) return _st;                  \
  } while (0)

#define TFRNN_CUDA_CHECK(expr)                                                        \
  do {                                                                                \
    cudaError_t _e = (expr);                                                          \
    if (_e != cudaSuccess) return ::tfrnn::gpu::CudaStatus(_e, #expr, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: launch-configuration errors (not asynchronous execution errors).
#define TFRNN_CUDA_CHECK_LAUNCH(what)                                                  \
  do {                                                                                 \
    cudaError_t _e = cudaGetLastError();                                               \
    if (_e != cudaSuccess) return ::tfrnn::gpu::CudaStatus(_e, what, __FILE__, __LINE__); \
  } while (0)

#endif  // TF_RNN_OPS_CC_GPU_GPU_STATUS_H_
