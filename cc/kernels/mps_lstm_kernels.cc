// CPU kernels of the MPSGraph-style LSTM (TfRnn>LSTM, TfRnn>LSTMGradients): a face of the
// stacked-RNN engine with MPSGraph's gate orders, per-gate activations, peephole on every gate,
// recurrent mask, optional input weight and reverse/bidirectional layouts (docs/SEMANTICS.md §8).
// The descriptor and the validation are in mps_rnn_face.h (shared with the GPU kernels), the
// kernels in mps_common.h (shared with the GRU): the weights are packed into the engine's
// params layout per call (O(weights), negligible next to the sequence); LSTMGradients
// recomputes the forward activations from its operands.
#include "cc/kernels/kernel_util.h"
#include "cc/kernels/mps_common.h"
#include "cc/kernels/mps_rnn_face.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tfrnn {
namespace mps {
namespace {

#define TFRNN_REGISTER_MPS_LSTM(T) \
  TFRNN_MPS_KERNELS(T, DEVICE_CPU, "LSTM", CpuMps, MpsLstmDescriptor)
TFRNN_FOR_EACH_TYPE(TFRNN_REGISTER_MPS_LSTM)
#undef TFRNN_REGISTER_MPS_LSTM

}  // namespace
}  // namespace mps
}  // namespace tfrnn
