#include <string>

#include "cc/engine/rnn_spec_check.h"
#include "cc/gpu/rnn_gpu.h"

namespace tfrnn {
namespace gpu {

// RnnSpecProblem, then what the stacked CUDA engine has no path for.
GpuStatus ValidateRnnSpec(const RnnSpec& s) {
  std::string m = RnnSpecProblem(s);
  if (m.empty() && (s.cell_clip > 0.f || s.exact_clip_grad || s.peephole_o_new)) {
    m = "the LSTM block-op options (cell_clip, exact_clip_grad, peephole_o_new) are for the "
        "block ops' face (lstm_gpu.cu), which runs one layer itself";
  }
  if (m.empty() && s.weights_xw && (s.L != 1 || s.D != 1 || s.P > 0)) {
    m = "weights_xw (the separate weights W [I, K*H], R [H, K*H]) needs one layer, one "
        "direction and no projection";
  }
  if (m.empty()) m = GateMasksProblem(s);
  if (m.empty()) return GpuStatus::Ok();
  return InvalidArgument("invalid RNN spec: " + m);
}

}  // namespace gpu
}  // namespace tfrnn
