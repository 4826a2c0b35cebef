// The C API's structs (c_api.h) as the engine's C++ types (cc/engine/types.h) and back, and
// the checks of a call's lengths and pointers: shared by the CUDA engine's C API (c_api.cc),
// the GPU op kernels (cc/kernels) and the CPU engine's test shim (tests/gpu/cpu_engine_shim.cc).
// No CUDA here. The spec itself is checked by RnnSpecProblem (cc/engine/rnn_spec_check.h).
#ifndef TF_RNN_OPS_CC_GPU_C_API_CONVERT_H_
#define TF_RNN_OPS_CC_GPU_C_API_CONVERT_H_

#include <initializer_list>
#include <string>

#include "cc/engine/types.h"
#include "cc/gpu/c_api.h"

namespace tfrnn {

// Field by field, as TFRNN_RNN_SPEC_FIELDS lists them (every field both ways).
#define TFRNN_FROM_C(type, name, c_type, init, lo, hi, what) s.name = static_cast<type>(in.name);
#define TFRNN_FROM_C_ARRAY(type, name, c_type, n, init, lo, hi, what) \
  for (int q = 0; q < n; ++q) s.name[q] = static_cast<type>(in.name[q]);
#define TFRNN_TO_C(type, name, c_type, init, lo, hi, what) c.name = static_cast<c_type>(s.name);
#define TFRNN_TO_C_ARRAY(type, name, c_type, n, init, lo, hi, what) \
  for (int q = 0; q < n; ++q) c.name[q] = static_cast<c_type>(s.name[q]);
inline RnnSpec RnnSpecOf(const TfRnnCudaSpec& in) {
  RnnSpec s;
  TFRNN_RNN_SPEC_FIELDS(TFRNN_FROM_C, TFRNN_FROM_C_ARRAY)
  return s;
}
inline TfRnnCudaSpec CudaSpecOf(const RnnSpec& s, int32_t dtype) {
  TfRnnCudaSpec c{};
  c.dtype = dtype;
  TFRNN_RNN_SPEC_FIELDS(TFRNN_TO_C, TFRNN_TO_C_ARRAY)
  return c;
}
#undef TFRNN_FROM_C
#undef TFRNN_FROM_C_ARRAY
#undef TFRNN_TO_C
#undef TFRNN_TO_C_ARRAY

// The separate weights of a forward or backward call's args (RnnWeights; null when absent).
template <typename T, typename Args>
RnnWeights<T> RnnWeightsOf(const Args& in) {
  RnnWeights<T> w;
  w.W = static_cast<const T*>(in.w);
  w.R = static_cast<const T*>(in.r);
  w.bW = static_cast<const T*>(in.bw);
  w.bR = static_cast<const T*>(in.br);
  return w;
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
  a.weights = RnnWeightsOf<T>(in);
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
  a.weights = RnnWeightsOf<T>(in);
  a.dweights.dW = static_cast<T*>(in.dw);
  a.dweights.dR = static_cast<T*>(in.dr);
  a.dweights.dbW = static_cast<T*>(in.dbw);
  a.dweights.dbR = static_cast<T*>(in.dbr);
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

// Why the separate weights of a call (args.r not NULL) cannot be used, or "": one layer and
// direction, no projection, and every weight the problem reads.
template <typename Args>
inline std::string RnnWeightsProblem(const RnnSpec& s, const Args& a) {
  if (a.r == nullptr) return "";
  if (s.L != 1 || s.D != 1 || s.P > 0) {
    return "separate weights (args.r) need one layer, one direction and no projection";
  }
  const Index KH = RnnK(s) * s.H, in = RnnInWidth(s, 0);
  return RnnNullProblem({{a.w, in * KH, "w"}, {a.bw, KH, "bw"}, {a.br, KH, "br"}});
}
// With separate weights, their gradients a backward call writes.
inline std::string RnnWeightGradsProblem(const RnnSpec& s, const TfRnnCudaBwdArgs& a) {
  const Index KH = RnnK(s) * s.H, in = RnnInWidth(s, 0);
  return RnnNullProblem({{a.dw, in * KH, "dw"}, {a.dr, s.H * KH, "dr"}, {a.dbw, KH, "dbw"}});
}

// Why a forward call's arguments are invalid (bad lengths, a needed pointer NULL), or "".
inline std::string RnnArgsProblem(const RnnSpec& s, const TfRnnCudaFwdArgs& a) {
  const Index LD = s.L * s.D, Hs = RnnHs(s), KH = RnnK(s) * s.H;
  const Index C = s.mode == RnnMode::kLstm ? LD * s.B * s.H : 0;  // cell states
  const bool separate = a.r != nullptr;
  std::string m = RnnLengthsProblem(s, a.lengths);
  if (m.empty()) m = RnnWeightsProblem(s, a);
  if (!m.empty()) return m;
  return RnnNullProblem({{a.x, s.T * s.B * s.I, "x"}, {a.h0, LD * s.B * Hs, "h0"},
                         {a.hn, LD * s.B * Hs, "hn"}, {a.c0, C, "c0"}, {a.cn, C, "cn"},
                         {a.params, separate ? 0 : RnnParamsSize(s), "params"},
                         {a.y, s.T * s.B * s.D * Hs, "y"},
                         {a.reserve, RnnReserveSize(s), "reserve"},
                         {a.peephole, s.peephole ? LD * KH : 0, "peephole"},
                         {a.mask, s.has_mask ? s.B * RnnMaskWidth(s) : 0, "mask"}});
}

// Why a backward call's arguments are invalid, or "".
inline std::string RnnArgsProblem(const RnnSpec& s, const TfRnnCudaBwdArgs& a) {
  const Index LD = s.L * s.D, Hs = RnnHs(s), KH = RnnK(s) * s.H;
  const Index C = s.mode == RnnMode::kLstm ? LD * s.B * s.H : 0;
  const bool separate = a.r != nullptr;
  std::string m = RnnLengthsProblem(s, a.lengths);
  if (m.empty()) m = RnnWeightsProblem(s, a);
  if (m.empty() && separate) m = RnnWeightGradsProblem(s, a);
  if (!m.empty()) return m;
  return RnnNullProblem({{a.x, s.T * s.B * s.I, "x"}, {a.dx, s.T * s.B * s.I, "dx"},
                         {a.h0, LD * s.B * Hs, "h0"}, {a.dhn, LD * s.B * Hs, "dhn"},
                         {a.dh0, LD * s.B * Hs, "dh0"}, {a.c0, C, "c0"}, {a.dcn, C, "dcn"},
                         {a.dc0, C, "dc0"},
                         {a.params, separate ? 0 : RnnParamsSize(s), "params"},
                         {a.dparams, separate ? 0 : RnnParamsSize(s), "dparams"},
                         {a.dy, s.T * s.B * s.D * Hs, "dy"},
                         {a.reserve, RnnReserveSize(s), "reserve"},
                         {a.peephole, s.peephole ? LD * KH : 0, "peephole"},
                         {a.dpeephole, s.peephole ? LD * KH : 0, "dpeephole"},
                         {a.mask, s.has_mask ? s.B * RnnMaskWidth(s) : 0, "mask"}});
}

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_GPU_C_API_CONVERT_H_
