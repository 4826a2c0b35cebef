// GPU kernels of the MPSGraph-style LSTM (TfRnn>LSTM, TfRnn>LSTMGradients): the descriptor
// and validation of mps_rnn_face.h (as on CPU), then the CUDA engine through mps_gpu_ops.h
// (shared with the GRU). Built when the library is built with CUDA.
#include "cc/kernels/kernel_util.h"
#include "cc/kernels/mps_gpu_ops.h"
#include "cc/kernels/mps_rnn_face.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tfrnn {
namespace mps {
namespace {

#define TFRNN_REGISTER_MPS_LSTM_GPU(T) \
  TFRNN_MPS_KERNELS(T, DEVICE_GPU, "LSTM", GpuMps, MpsLstmDescriptor)
TFRNN_FOR_EACH_TYPE(TFRNN_REGISTER_MPS_LSTM_GPU)
#undef TFRNN_REGISTER_MPS_LSTM_GPU

}  // namespace
}  // namespace mps
}  // namespace tfrnn
