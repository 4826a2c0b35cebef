// Why an RnnSpec describes no problem the engines can run, or "" when it does: every field's
// range from TFRNN_RNN_SPEC_FIELDS (rnn_spec_fields.h), then the rules between fields. Shared
// by the CUDA engine's validator (cc/gpu/rnn_gpu_validate.cc, which adds what has no CUDA
// path) and the CPU engine's test shim (tests/gpu/cpu_engine_shim.cc). The TensorFlow kernels
// check their attrs and inputs before they build a spec, with messages that name them.
#ifndef TF_RNN_OPS_CC_ENGINE_RNN_SPEC_CHECK_H_
#define TF_RNN_OPS_CC_ENGINE_RNN_SPEC_CHECK_H_

#include <sstream>
#include <string>

#include "cc/engine/types.h"

namespace tfrnn {

namespace spec_check {
// "name (what) = v is outside [lo, hi]" when v is out of range, else "".
inline std::string Range(const std::string& name, const char* what, double v, double lo, double hi) {
  if (v >= lo && v <= hi) return "";
  std::ostringstream m;
  m << name << " (" << what << ") = " << v << " is outside [" << lo << ", ";
  if (hi >= TFRNN_SPEC_UNBOUNDED) {
    m << "inf)";
  } else {
    m << hi << "]";
  }
  return m.str();
}
}  // namespace spec_check

inline std::string RnnSpecProblem(const RnnSpec& s) {
  std::string m;
#define TFRNN_CHECK_RANGE(type, name, c_type, init, lo, hi, what)                        \
  if (m.empty()) m = spec_check::Range(#name, what, static_cast<double>(s.name), lo, hi);
#define TFRNN_CHECK_ARRAY_RANGE(type, name, c_type, n, init, lo, hi, what)               \
  for (int q = 0; q < n && m.empty(); ++q) {                                             \
    m = spec_check::Range(#name "[" + std::to_string(q) + "]", what,                     \
                          static_cast<double>(s.name[q]), lo, hi);                       \
  }
  TFRNN_RNN_SPEC_FIELDS(TFRNN_CHECK_RANGE, TFRNN_CHECK_ARRAY_RANGE)
#undef TFRNN_CHECK_RANGE
#undef TFRNN_CHECK_ARRAY_RANGE
  if (!m.empty()) return m;
  const bool lstm = s.mode == RnnMode::kLstm, gru = s.mode == RnnMode::kGru;
  if (s.P > 0 && !lstm) return "a projection (P > 0) needs lstm";
  if (s.skip_input && s.I != s.H) return "skip input needs input size == num_units";
  if (s.preprojected && s.I != s.D * RnnK(s) * s.H) {
    return "preprojected input needs input size == D*K*H";
  }
  if (s.peephole && !lstm) return "peephole needs lstm";
  if (s.has_mask && !(lstm || gru)) return "a recurrent mask needs lstm or gru";
  int seen = 0;
  for (int q = 0; q < 4; ++q) seen |= 1 << s.gate_pos[q];
  if (seen != 15) return "gate_pos must be a permutation of 0..3";
  if (gru && s.gate_pos[3] != 3) {
    return "gru gates r, z, n must occupy blocks 0..2 (gate_pos[3] == 3)";
  }
  if ((s.gru_reset_before || s.gru_z_new) && !gru) {
    return "gru_reset_before and gru_z_new need gru";
  }
  return "";
}

// Why the sequence lengths len[0, B) are not all in [0, T] ("sequence_lengths[b] = v is
// outside [0, <time> = T]"), or "" (then *shorter: some length is below T). Shared by the
// TensorFlow kernels (CheckSeqLengths) and the XLA custom calls, which name the op before it.
inline std::string SeqLengthsProblem(const int32_t* len, Index B, Index T, const char* time,
                                     bool* shorter) {
  *shorter = false;
  for (Index b = 0; b < B; ++b) {
    if (len[b] < 0 || len[b] > T) {
      std::ostringstream m;
      m << "sequence_lengths[" << b << "] = " << len[b] << " is outside [0, " << time << " = "
        << T << "]";
      return m.str();
    }
    *shorter |= len[b] < T;
  }
  return "";
}

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_ENGINE_RNN_SPEC_CHECK_H_
