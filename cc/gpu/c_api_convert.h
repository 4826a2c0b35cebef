// The C API's structs (c_api.h) as the engine's C++ types (cc/engine/types.h), and the checks
// of a call's lengths and pointers: shared by the CUDA engine's C API (c_api.cc) and the CPU
// engine's test shim (tests/gpu/cpu_engine_shim.cc). No CUDA here. The spec itself is checked
// by each caller (the CUDA engine's ValidateRnnSpec, the shim's own checks).
#ifndef TF_RNN_OPS_CC_GPU_C_API_CONVERT_H_
#define TF_RNN_OPS_CC_GPU_C_API_CONVERT_H_

#include <initializer_list>
#include <string>

#include "cc/engine/types.h"
#include "cc/gpu/c_api.h"

namespace tfrnn {

inline RnnSpec RnnSpecOf(const TfRnnCudaSpec& in) {
  RnnSpec s;
  s.mode = static_cast<RnnMode>(in.mode);
  s.T = in.T;
  s.B = in.B;
  s.I = in.I;
  s.N = in.N;
  s.P = in.P;
  s.L = in.L;
  s.D = in.D;
  s.skip_input = in.skip_input != 0;
  s.training = in.training != 0;
  s.dropout = static_cast<float>(in.dropout);
  s.seed = in.seed;
  for (int q = 0; q < 4; ++q) {
    s.gate_pos[q] = in.gate_pos[q];
    s.gate_act[q] = static_cast<RnnAct>(in.gate_act[q]);
  }
  s.cell_act = static_cast<RnnAct>(in.cell_act);
  s.peephole = in.peephole != 0;
  s.has_mask = in.has_mask != 0;
  s.preprojected = in.preprojected != 0;
  s.reverse = in.reverse != 0;
  s.gru_reset_before = in.gru_reset_before != 0;
  s.gru_z_new = in.gru_z_new != 0;
  return s;
}

template <typename T>
RnnFwdArgs<T> RnnFwdArgsOf(const TfRnnCudaFwdArgs& in) {
  RnnFwdArgs<T> a;
  a.lengths = in.lengths;
  a.x = static_cast<const T*>(in.x);
  a.h0 = static_cast<const T*>(in.h0);
  a.c0 = static_cast<const T*>(in.c0);
  a.params = static_cast<const T*>(in.params);
  a.y = static_cast<T*>(in.y);
  a.hn = static_cast<T*>(in.hn);
  a.cn = static_cast<T*>(in.cn);
  a.reserve = static_cast<T*>(in.reserve);
  a.peephole = static_cast<const T*>(in.peephole);
  a.mask = static_cast<const T*>(in.mask);
  a.mask_per_step = in.mask_per_step != 0;
  return a;
}

template <typename T>
RnnBwdArgs<T> RnnBwdArgsOf(const TfRnnCudaBwdArgs& in) {
  RnnBwdArgs<T> a;
  a.lengths = in.lengths;
  a.x = static_cast<const T*>(in.x);
  a.h0 = static_cast<const T*>(in.h0);
  a.c0 = static_cast<const T*>(in.c0);
  a.params = static_cast<const T*>(in.params);
  a.reserve = static_cast<const T*>(in.reserve);
  a.dy = static_cast<const T*>(in.dy);
  a.dhn = static_cast<const T*>(in.dhn);
  a.dcn = static_cast<const T*>(in.dcn);
  a.dx = static_cast<T*>(in.dx);
  a.dh0 = static_cast<T*>(in.dh0);
  a.dc0 = static_cast<T*>(in.dc0);
  a.dparams = static_cast<T*>(in.dparams);
  a.peephole = static_cast<const T*>(in.peephole);
  a.mask = static_cast<const T*>(in.mask);
  a.mask_per_step = in.mask_per_step != 0;
  a.dc_seq = static_cast<const T*>(in.dc_seq);
  a.dpeephole = static_cast<T*>(in.dpeephole);
  return a;
}

// Why the per-sequence lengths (host [B], or null) are invalid, or "" when they are valid.
inline std::string RnnLengthsProblem(const RnnSpec& s, const int32_t* lengths) {
  for (Index b = 0; lengths != nullptr && b < s.B; ++b) {
    if (lengths[b] < 0 || lengths[b] > s.T) {
      return "lengths[" + std::to_string(b) + "] = " + std::to_string(lengths[b]) +
             " is outside [0, " + std::to_string(s.T) + "]";
    }
  }
  return "";
}

// A pointer a call needs when it must hold n > 0 elements.
struct RnnNeed {
  const void* p;
  Index n;
  const char* name;
};
inline std::string RnnNullProblem(std::initializer_list<RnnNeed> needs) {
  for (const RnnNeed& n : needs) {
    if (n.n > 0 && n.p == nullptr) return std::string(n.name) + " is NULL";
  }
  return "";
}

// Why a forward call's arguments are invalid (bad lengths, a needed pointer NULL), or "".
inline std::string RnnArgsProblem(const RnnSpec& s, const TfRnnCudaFwdArgs& a) {
  const Index LD = s.L * s.D, Hs = RnnHs(s), KN = RnnK(s) * s.N;
  const Index C = s.mode == RnnMode::kLstm ? LD * s.B * s.N : 0;  // cell states
  std::string m = RnnLengthsProblem(s, a.lengths);
  if (!m.empty()) return m;
  return RnnNullProblem({{a.x, s.T * s.B * s.I, "x"}, {a.h0, LD * s.B * Hs, "h0"},
                         {a.hn, LD * s.B * Hs, "hn"}, {a.c0, C, "c0"}, {a.cn, C, "cn"},
                         {a.params, RnnParamsSize(s), "params"},
                         {a.y, s.T * s.B * s.D * Hs, "y"},
                         {a.reserve, RnnReserveSize(s), "reserve"},
                         {a.peephole, s.peephole ? LD * KN : 0, "peephole"},
                         {a.mask, s.has_mask ? s.B * s.D * Hs : 0, "mask"}});
}

// Why a backward call's arguments are invalid, or "".
inline std::string RnnArgsProblem(const RnnSpec& s, const TfRnnCudaBwdArgs& a) {
  const Index LD = s.L * s.D, Hs = RnnHs(s), KN = RnnK(s) * s.N;
  const Index C = s.mode == RnnMode::kLstm ? LD * s.B * s.N : 0;
  std::string m = RnnLengthsProblem(s, a.lengths);
  if (!m.empty()) return m;
  return RnnNullProblem({{a.x, s.T * s.B * s.I, "x"}, {a.dx, s.T * s.B * s.I, "dx"},
                         {a.h0, LD * s.B * Hs, "h0"}, {a.dhn, LD * s.B * Hs, "dhn"},
                         {a.dh0, LD * s.B * Hs, "dh0"}, {a.c0, C, "c0"}, {a.dcn, C, "dcn"},
                         {a.dc0, C, "dc0"}, {a.params, RnnParamsSize(s), "params"},
                         {a.dparams, RnnParamsSize(s), "dparams"},
                         {a.dy, s.T * s.B * s.D * Hs, "dy"},
                         {a.reserve, RnnReserveSize(s), "reserve"},
                         {a.peephole, s.peephole ? LD * KN : 0, "peephole"},
                         {a.dpeephole, s.peephole ? LD * KN : 0, "dpeephole"},
                         {a.mask, s.has_mask ? s.B * s.D * Hs : 0, "mask"}});
}

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_GPU_C_API_CONVERT_H_
