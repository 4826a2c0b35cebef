// One stacked-RNN custom call as XLA carries it: the engine's RnnSpec and how the call's
// buffers map onto the engine's arguments, encoded as the int64 array attribute "call" of the
// call's backend config. The XLA kernels (cc/xla/*_xla.cc) encode it when they compile; the
// custom-call targets (cc/xla/rnn_ffi_cpu.cc) decode and check it before they read a buffer.
//
// The call's operands and results (the engine's time-major arrays, in the compute type A; an
// absent optional one has no elements):
//   forward  operands  lengths (s32 [B] or [0]), x [T, B, I], h0, c0, w0, w1, w2, mask
//                      [XlaRnnMaskSize], peephole [L·D, K·H] (spec.peephole)
//            results   y [T, B, D·Hs], hn, cn, reserve [XlaRnnReserveResult]
//   backward operands  the forward's nine, dy [T, B, D·Hs], dhn, dcn, reserve, dc_seq
//                      [T, B, D·H] (has_dc_seq)
//            results   dx [T, B, I] ([0] without input_grad), dh0, dc0, dw0, dw1, dw2,
//                      dpeephole [L·D, K·H]
// The engine's workspace is the target's own (scratch_cache.h).
// w0, w1, w2 are kernel [in, K·H], recurrent_kernel [H, K·H] and bias ([K·H] or [2, K·H]) for
// kKerasWeights, and the params vector and two empty arrays for kParamsVector.
#ifndef TF_RNN_OPS_CC_XLA_RNN_CALL_H_
#define TF_RNN_OPS_CC_XLA_RNN_CALL_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "cc/engine/rnn_spec_check.h"
#include "cc/engine/types.h"
#include "cc/engine/workspace.h"

namespace tfrnn {

enum class XlaWeights : int64_t { kKerasWeights = 0, kParamsVector = 1 };

// The ops with an XLA kernel, named in the targets' error messages.
#define TFRNN_XLA_FACES(X)                                                                \
  X(KerasRNN, "TfRnn>KerasRNN") X(KerasRNNBackprop, "TfRnn>KerasRNNBackprop")               \
  X(CudnnRNN, "TfRnn>CudnnRNN") X(CudnnRNNV2, "TfRnn>CudnnRNNV2")                           \
  X(CudnnRNNV3, "TfRnn>CudnnRNNV3") X(CudnnRNNBackprop, "TfRnn>CudnnRNNBackprop")           \
  X(CudnnRNNBackpropV2, "TfRnn>CudnnRNNBackpropV2")                                         \
  X(CudnnRNNBackpropV3, "TfRnn>CudnnRNNBackpropV3")                                         \
  X(LSTM, "TfRnn>LSTM") X(LSTMGradients, "TfRnn>LSTMGradients") X(GRU, "TfRnn>GRU")         \
  X(GRUGradients, "TfRnn>GRUGradients") X(KerasRNNMixed, "TfRnn>KerasRNNMixed")           \
  X(KerasRNNMixedBackprop, "TfRnn>KerasRNNMixedBackprop")

enum class XlaFace : int64_t {
#define TFRNN_FACE_ENUM(name, op) k##name,
  TFRNN_XLA_FACES(TFRNN_FACE_ENUM)
#undef TFRNN_FACE_ENUM
      kCount
};

inline const char* XlaFaceName(XlaFace f) {
  static const char* const kNames[] = {
#define TFRNN_FACE_NAME(name, op) op,
      TFRNN_XLA_FACES(TFRNN_FACE_NAME)
#undef TFRNN_FACE_NAME
  };
  const int64_t k = static_cast<int64_t>(f);
  return k >= 0 && k < static_cast<int64_t>(XlaFace::kCount) ? kNames[k] : "TfRnn>?";
}

struct XlaRnnCall {
  RnnSpec spec;
  XlaFace face = XlaFace::kKerasRNN;
  bool f64 = false;  // the compute type A is double (else float)
  XlaWeights weights = XlaWeights::kKerasWeights;
  bool has_lengths = false;  // the lengths operand is [B] (else [0]: every sequence has T steps)
  bool two_biases = false;   // kKerasWeights: bias is [2, K·H], input and recurrent biases
  bool mask_per_step = false;  // spec.has_mask: the mask is [T, B, ·] (else [B, ·])
  bool has_dc_seq = false;     // backward: the dc_seq operand is there
  bool batch_major = false;    // forward on the CPU, not training: x is [B, T, I] and y
                               // [B, T, D·Hs] (RnnFwdArgs::batch_major), not time-major
  bool input_grad = true;      // backward: dx is computed (else its result has no elements
                               // and the engine skips its products)
};

// Bump when the encoding changes: a call compiled by one build is never run by another.
constexpr int64_t kXlaRnnCallVersion = 4;

namespace xla_call {
inline int64_t FloatBits(double v) {
  int64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}
inline double BitsFloat(int64_t b) {
  double v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}
}  // namespace xla_call

// The call as int64 values: the version, the call's fields, then every RnnSpec field in
// TFRNN_RNN_SPEC_FIELDS order (floating-point fields as the bits of a double).
inline std::vector<int64_t> EncodeXlaRnnCall(const XlaRnnCall& c) {
  std::vector<int64_t> v = {kXlaRnnCallVersion,     static_cast<int64_t>(c.face),
                            c.f64,                  static_cast<int64_t>(c.weights),
                            c.has_lengths,          c.two_biases,
                            c.mask_per_step,        c.has_dc_seq,
                            c.batch_major,          c.input_grad};
  auto put = [&v](auto x) {
    if constexpr (std::is_floating_point<decltype(x)>::value) {
      v.push_back(xla_call::FloatBits(x));
    } else {
      v.push_back(static_cast<int64_t>(x));
    }
  };
#define TFRNN_PUT(type, name, c_type, init, lo, hi, what) put(c.spec.name);
#define TFRNN_PUT_ARRAY(type, name, c_type, n, init, lo, hi, what) \
  for (int q = 0; q < n; ++q) put(c.spec.name[q]);
  TFRNN_RNN_SPEC_FIELDS(TFRNN_PUT, TFRNN_PUT_ARRAY)
#undef TFRNN_PUT
#undef TFRNN_PUT_ARRAY
  return v;
}

// Decodes v into *c; "" or why v is no call this build can run (wrong version or length, a
// field out of range, a spec the engine cannot run).
inline std::string DecodeXlaRnnCall(const int64_t* v, size_t n, XlaRnnCall* c) {
  constexpr size_t kHead = 10;
  if (n != EncodeXlaRnnCall(XlaRnnCall()).size() || v[0] != kXlaRnnCallVersion) {
    return "the custom call was compiled by another build of tf_rnn_ops (call encoding "
           "version or length differs); recompile the function";
  }
  if (v[1] < 0 || v[1] >= static_cast<int64_t>(XlaFace::kCount) || (v[3] != 0 && v[3] != 1)) {
    return "the custom call's face or weight layout is out of range";
  }
  c->face = static_cast<XlaFace>(v[1]);
  c->f64 = v[2] != 0;
  c->weights = static_cast<XlaWeights>(v[3]);
  c->has_lengths = v[4] != 0;
  c->two_biases = v[5] != 0;
  c->mask_per_step = v[6] != 0;
  c->has_dc_seq = v[7] != 0;
  c->batch_major = v[8] != 0;
  c->input_grad = v[9] != 0;
  size_t k = kHead;
  auto get = [&](auto* x) {
    using X = std::remove_pointer_t<decltype(x)>;
    if constexpr (std::is_floating_point<X>::value) {
      *x = static_cast<X>(xla_call::BitsFloat(v[k++]));
    } else {
      *x = static_cast<X>(v[k++]);
    }
  };
#define TFRNN_GET(type, name, c_type, init, lo, hi, what) get(&c->spec.name);
#define TFRNN_GET_ARRAY(type, name, c_type, n, init, lo, hi, what) \
  for (int q = 0; q < n; ++q) get(&c->spec.name[q]);
  TFRNN_RNN_SPEC_FIELDS(TFRNN_GET, TFRNN_GET_ARRAY)
#undef TFRNN_GET
#undef TFRNN_GET_ARRAY
  return RnnSpecProblem(c->spec);
}

// Elements of the recurrent mask operand: [T or 1, B, D·Hs], D·K·Hs columns with per-gate masks.
inline Index XlaRnnMaskSize(const XlaRnnCall& c) {
  const RnnSpec& s = c.spec;
  if (!s.has_mask) return 0;
  return (c.mask_per_step ? s.T : 1) * s.B * s.D * (RnnGateMasks(s) ? RnnK(s) : 1) * RnnHs(s);
}
// Elements of the peephole operand and its gradient.
inline Index XlaRnnPeepholeSize(const XlaRnnCall& c) {
  return c.spec.peephole ? c.spec.L * c.spec.D * RnnK(c.spec) * c.spec.H : 0;
}

// The forward's reserve result has XlaRnnReserveResult elements: the reserve when training;
// otherwise none, and the reserve is scratch at the end of the target's workspace.
inline Index XlaRnnReserveResult(const XlaRnnCall& c) {
  return c.spec.training ? RnnReserveSize(c.spec) : 0;
}
inline Index XlaRnnScratchReserve(const XlaRnnCall& c) {
  return c.spec.training ? 0 : RnnReserveSize(c.spec);
}

// Elements of A of the target's workspace: the engine's, then (Keras weights with one bias)
// the zero recurrent bias, then (forward, not training) the reserve.
inline Index XlaRnnZeroBias(const XlaRnnCall& c) {
  return c.weights == XlaWeights::kKerasWeights && !c.two_biases ? RnnK(c.spec) * c.spec.H : 0;
}
inline Index XlaRnnFwdWorkspace(const XlaRnnCall& c) {
  return RnnFwdWorkspaceSize(c.spec) + XlaRnnZeroBias(c) + XlaRnnScratchReserve(c);
}
inline Index XlaRnnBwdWorkspace(const XlaRnnCall& c) {
  return RnnBwdWorkspaceSize(c.spec) + XlaRnnZeroBias(c);
}

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_XLA_RNN_CALL_H_
