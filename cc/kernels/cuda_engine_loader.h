// The TF-free CUDA engine (_tfrnn_engine_cuda.so next to the op library, C API in
// cc/gpu/c_api.h), opened on first use by the GPU kernels. No CUDA headers needed: streams and
// device memory travel as void*.
#ifndef TF_RNN_OPS_CC_KERNELS_CUDA_ENGINE_LOADER_H_
#define TF_RNN_OPS_CC_KERNELS_CUDA_ENGINE_LOADER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "cc/gpu/c_api_loader.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tfrnn {

// The C API's functions (c_api_loader.h) and the engine's status as a TensorFlow status.
struct CudaEngine : CudaEngineFns {
  // A failed call's status (code -> TF code) with the engine's message, prefixed by `op`.
  absl::Status Check(int code, const std::string& op) const;
};

// Loads the engine once per process; a clear FailedPrecondition when it is missing.
absl::Status GetCudaEngine(const CudaEngine** engine);

// The op's CUDA stream (cudaStream_t as void*); an error when the op runs off a GPU stream.
absl::Status GetCudaStream(tensorflow::OpKernelContext* ctx, void** stream);

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_KERNELS_CUDA_ENGINE_LOADER_H_
