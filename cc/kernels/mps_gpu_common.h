// The stacked-RNN engine's spec for the GPU op kernels (cudnn_rnn_gpu_kernels.cc,
// mps_gpu_ops.h): the full RnnSpec -> C API spec and the C API's dtype of T. The device helpers
// every GPU kernel uses are in gpu_kernel_util.h.
#ifndef TF_RNN_OPS_CC_KERNELS_MPS_GPU_COMMON_H_
#define TF_RNN_OPS_CC_KERNELS_MPS_GPU_COMMON_H_

#include <cstdint>
#include <type_traits>

#include "cc/engine/types.h"
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

// Every RnnSpec field (the MPSGraph options included).
inline TfRnnCudaSpec ToCudaSpecAll(const RnnSpec& s, int dtype) {
  TfRnnCudaSpec c{};
  c.mode = static_cast<int32_t>(s.mode);
  c.dtype = dtype;
  c.T = s.T;
  c.B = s.B;
  c.I = s.I;
  c.N = s.N;
  c.P = s.P;
  c.L = s.L;
  c.D = s.D;
  c.skip_input = s.skip_input;
  c.training = s.training;
  c.dropout = s.dropout;
  c.seed = s.seed;
  for (int q = 0; q < 4; ++q) {
    c.gate_pos[q] = s.gate_pos[q];
    c.gate_act[q] = static_cast<int32_t>(s.gate_act[q]);
  }
  c.cell_act = static_cast<int32_t>(s.cell_act);
  c.peephole = s.peephole;
  c.has_mask = s.has_mask;
  c.preprojected = s.preprojected;
  c.reverse = s.reverse;
  c.gru_reset_before = s.gru_reset_before;
  c.gru_z_new = s.gru_z_new;
  return c;
}

}  // namespace mps_gpu
}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_KERNELS_MPS_GPU_COMMON_H_
