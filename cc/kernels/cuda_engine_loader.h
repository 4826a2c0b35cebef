// The TF-free CUDA engine (_tfrnn_engine_cuda.so next to the op library, C API in
// cc/gpu/c_api.h), opened on first use by the GPU kernels. No CUDA headers needed: streams and
// device memory travel as void*.
#ifndef TF_RNN_OPS_CC_KERNELS_CUDA_ENGINE_LOADER_H_
#define TF_RNN_OPS_CC_KERNELS_CUDA_ENGINE_LOADER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "cc/gpu/c_api.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tfrnn {

struct CudaEngine {
  const char* (*last_error)();
  int (*rnn_sizes)(const TfRnnCudaSpec*, int64_t*, int64_t*, int64_t*, int64_t*);
  int (*rnn_forward)(const TfRnnCudaSpec*, const TfRnnCudaFwdArgs*, void*, int64_t, void*);
  int (*rnn_backward)(const TfRnnCudaSpec*, const TfRnnCudaBwdArgs*, void*, int64_t, void*);
  int (*swap_major)(int32_t, const void*, void*, int64_t, int64_t, int64_t, void*);
  int (*copy)(void*, const void*, int64_t, void*);
  int (*zero)(void*, int64_t, void*);
  int (*lstm_sizes)(const TfRnnCudaLstmSpec*, int64_t*, int64_t*);
  int (*lstm_forward)(const TfRnnCudaLstmSpec*, const TfRnnCudaLstmFwdArgs*, void*, int64_t,
                      void*);
  int (*lstm_backward)(const TfRnnCudaLstmSpec*, const TfRnnCudaLstmBwdArgs*, void*, int64_t,
                       void*);
  int (*gru_cell_sizes)(const TfRnnCudaGruCellSpec*, int64_t*, int64_t*);
  int (*gru_cell_forward)(const TfRnnCudaGruCellSpec*, const TfRnnCudaGruCellFwdArgs*, void*,
                          int64_t, void*);
  int (*gru_cell_backward)(const TfRnnCudaGruCellSpec*, const TfRnnCudaGruCellBwdArgs*, void*,
                           int64_t, void*);

  // A failed call's status (code -> TF code) with the engine's message, prefixed by `op`.
  absl::Status Check(int code, const std::string& op) const;
};

// Loads the engine once per process; a clear FailedPrecondition when it is missing.
absl::Status GetCudaEngine(const CudaEngine** engine);

// The op's CUDA stream (cudaStream_t as void*); an error when the op runs off a GPU stream.
absl::Status GetCudaStream(tensorflow::OpKernelContext* ctx, void** stream);

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_KERNELS_CUDA_ENGINE_LOADER_H_
