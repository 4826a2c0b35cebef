// The C API's dtype of T for the GPU op kernels, and the spec converters (CudaSpecOf,
// cc/gpu/c_api_convert.h). The device helpers every GPU kernel uses are in gpu_kernel_util.h.
#ifndef TF_RNN_OPS_CC_KERNELS_MPS_GPU_COMMON_H_
#define TF_RNN_OPS_CC_KERNELS_MPS_GPU_COMMON_H_

#include <cstdint>
#include <type_traits>

#include "cc/engine/types.h"
#include "cc/gpu/c_api_convert.h"
#include "cc/kernels/cuda_engine_loader.h"

namespace tfrnn {
namespace mps_gpu {

template <typename T>
constexpr int CudaDtypeOf() {
  return std::is_same<T, Eigen::half>::value       ? TFRNN_CUDA_HALF
         : std::is_same<T, Eigen::bfloat16>::value ? TFRNN_CUDA_BFLOAT16
         : std::is_same<T, float>::value           ? TFRNN_CUDA_FLOAT
                                                   : TFRNN_CUDA_DOUBLE;
}

}  // namespace mps_gpu
}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_KERNELS_MPS_GPU_COMMON_H_
