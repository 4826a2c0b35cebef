// GPU kernels of the MPSGraph-style GRU (TfRnn>GRU, TfRnn>GRUGradients): the descriptor
// and validation of mps_rnn_face.h (as on CPU), then the CUDA engine through mps_gpu_ops.h
// (shared with the LSTM). Built when the library is built with CUDA.
#include "cc/kernels/kernel_util.h"
#include "cc/kernels/mps_gpu_ops.h"
#include "cc/kernels/mps_rnn_face.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tfrnn {
namespace mps {
namespace {

#define TFRNN_REGISTER_MPS_GRU_GPU(T) \
  TFRNN_MPS_KERNELS(T, DEVICE_GPU, "GRU", GpuMps, MpsGruDescriptor)
TFRNN_FOR_EACH_TYPE(TFRNN_REGISTER_MPS_GRU_GPU)
#undef TFRNN_REGISTER_MPS_GRU_GPU

}  // namespace
}  // namespace mps
}  // namespace tfrnn
