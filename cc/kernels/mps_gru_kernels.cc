// CPU kernels of the MPSGraph-style GRU (TfRnn>GRU, TfRnn>GRUGradients): a face of the
// stacked-RNN engine with MPSGraph's gate orders ([z, r, o], or [r, z, o] with
// reset_gate_first), per-gate activations, reset before or after the recurrent product (with
// the secondary bias), flip_z, recurrent mask, optional input weight and reverse/bidirectional
// layouts (docs/SEMANTICS.md §8, docs/DIFFERENCES.md for the choices the header leaves open). The
// descriptor and the validation are in mps_rnn_face.h (shared with the GPU kernels), the
// kernels in mps_common.h (shared with the LSTM); GRUGradients recomputes the forward
// activations from its operands.
#include "cc/kernels/kernel_util.h"
#include "cc/kernels/mps_common.h"
#include "cc/kernels/mps_rnn_face.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tfrnn {
namespace mps {
namespace {

#define TFRNN_REGISTER_MPS_GRU(T) \
  TFRNN_MPS_KERNELS(T, DEVICE_CPU, "GRU", CpuMps, MpsGruDescriptor)
TFRNN_FOR_EACH_TYPE(TFRNN_REGISTER_MPS_GRU)
#undef TFRNN_REGISTER_MPS_GRU

}  // namespace
}  // namespace mps
}  // namespace tfrnn
