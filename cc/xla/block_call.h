// One block-op custom call (GRU cell forward and backward) as XLA carries it: the int64 array
// attribute "call" holds a version, the engine call, the compute type, which optional operands
// are present, and the sizes T, B, I, H. The call's operands are the engine call's IN
// arguments and its results the OUT arguments, in the order of cc/engine/block_arg_fields.h,
// each a dense array of the shape written there (an absent optional operand: no elements).
#ifndef TF_RNN_OPS_CC_XLA_BLOCK_CALL_H_
#define TF_RNN_OPS_CC_XLA_BLOCK_CALL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "cc/engine/types.h"

namespace tfrnn {

enum class XlaBlockKind : int64_t { kGruCellForward = 0, kGruCellBackward = 1, kCount };

struct XlaBlockCall {
  XlaBlockKind kind = XlaBlockKind::kGruCellForward;
  bool f64 = false;
  int64_t present = ~int64_t{0};  // bit k: IN argument k is present (else null)
  Index T = 0, B = 0, I = 0, H = 0;
};

constexpr int64_t kXlaBlockCallVersion = 1;

inline std::vector<int64_t> EncodeXlaBlockCall(const XlaBlockCall& c) {
  return {kXlaBlockCallVersion, static_cast<int64_t>(c.kind), c.f64, c.present, c.T, c.B, c.I,
          c.H};
}

// "" or why v is no call this build can run.
inline std::string DecodeXlaBlockCall(const int64_t* v, size_t n, XlaBlockCall* c) {
  if (n != 8 || v[0] != kXlaBlockCallVersion) {
    return "the custom call was compiled by another build of tf_rnn_ops (call encoding "
           "version or length differs); recompile the function";
  }
  if (v[1] < 0 || v[1] >= static_cast<int64_t>(XlaBlockKind::kCount)) {
    return "the custom call's kind is out of range";
  }
  for (int k = 4; k < 8; ++k) {
    if (v[k] < 0 || v[k] > (int64_t{1} << 40)) return "a size of the custom call is out of range";
  }
  c->kind = static_cast<XlaBlockKind>(v[1]);
  c->f64 = v[2] != 0;
  c->present = v[3];
  c->T = v[4];
  c->B = v[5];
  c->I = v[6];
  c->H = v[7];
  return "";
}

// Elements of an array of block_arg_fields.h's shape text ("[I+H, 2H]"): the product over the
// comma-separated terms, each a sum of [coefficient]letter factors (T, B, I, H).
inline Index BlockShapeCount(const char* shape, Index T, Index B, Index I, Index H) {
  Index product = 1, sum = 0, coef = 0;
  bool has_coef = false;
  for (const char* p = shape; *p != '\0'; ++p) {
    const char ch = *p;
    if (ch >= '0' && ch <= '9') {
      coef = coef * 10 + (ch - '0');
      has_coef = true;
    } else if (ch == 'T' || ch == 'B' || ch == 'I' || ch == 'H') {
      const Index v = ch == 'T' ? T : ch == 'B' ? B : ch == 'I' ? I : H;
      sum += (has_coef ? coef : 1) * v;
      coef = 0;
      has_coef = false;
    } else if (ch == ',' || ch == ']') {
      product *= sum;
      sum = 0;
    }
  }
  return product;
}

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_XLA_BLOCK_CALL_H_
