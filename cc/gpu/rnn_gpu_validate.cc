#include <string>

#include "cc/gpu/rnn_gpu.h"

namespace tfrnn {
namespace gpu {

GpuStatus ValidateRnnSpec(const RnnSpec& s) {
  auto bad = [](const std::string& m) { return InvalidArgument("invalid RNN spec: " + m); };
  const int mode = static_cast<int>(s.mode);
  if (mode < 0 || mode > 3) return bad("mode must be 0..3 (lstm, gru, rnn_tanh, rnn_relu)");
  if (s.T < 0 || s.B < 0 || s.I < 0 || s.N < 1 || s.P < 0) {
    return bad("need T, B, I, P >= 0 and N >= 1");
  }
  if (s.L < 1) return bad("num_layers must be >= 1");
  if (s.D != 1 && s.D != 2) return bad("directions must be 1 or 2");
  const bool lstm = s.mode == RnnMode::kLstm;
  if (s.P > 0 && !lstm) return bad("a projection (P > 0) needs lstm");
  if (s.skip_input && s.I != s.N) return bad("skip input needs input size == num_units");
  if (s.preprojected && s.I != s.D * RnnK(s) * s.N) {
    return bad("preprojected input needs input size == D*K*N");
  }
  if (s.peephole && !lstm) return bad("peephole needs lstm");
  if (s.has_mask && !(lstm || s.mode == RnnMode::kGru)) {
    return bad("a recurrent mask needs lstm or gru");
  }
  if (s.mask_gates) return bad("per-gate recurrent masks (mask_gates) have no CUDA path yet");
  if (s.weights_xw || s.cell_clip > 0.f || s.exact_clip_grad || s.peephole_o_new) {
    return bad("the LSTM block-op options (weights_xw, cell_clip, peephole_o_new) are for "
               "the block ops' face (lstm_gpu.cu), which runs one layer itself");
  }
  if (!(s.dropout >= 0.f && s.dropout <= 1.f)) return bad("dropout must be in [0, 1]");
  int seen = 0;
  for (int q = 0; q < 4; ++q) {
    if (s.gate_pos[q] < 0 || s.gate_pos[q] > 3) return bad("gate_pos entries must be 0..3");
    seen |= 1 << s.gate_pos[q];
    const int act = static_cast<int>(s.gate_act[q]);
    if (act < 0 || act > 5) return bad("gate activations must be 0..5");
  }
  if (seen != 15) return bad("gate_pos must be a permutation of 0..3");
  if (s.mode == RnnMode::kGru && s.gate_pos[3] != 3) {
    return bad("gru gates r, z, n must occupy blocks 0..2 (gate_pos[3] == 3)");
  }
  if ((s.gru_reset_before || s.gru_z_new) && s.mode != RnnMode::kGru) {
    return bad("gru_reset_before and gru_z_new need gru");
  }
  const int ca = static_cast<int>(s.cell_act);
  if (ca < 0 || ca > 5) return bad("cell activation must be 0..5");
  return GpuStatus::Ok();
}

}  // namespace gpu
}  // namespace tfrnn
