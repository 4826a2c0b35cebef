// One block-op custom call (GRU cell, LSTM block forward and backward) as XLA carries it: the
// int64 array attribute "call" holds a version, the op, the compute type, which optional
// operands are present, the sizes T, B, I, H and (LSTM) the cell spec. The call's operands are
// the engine call's IN arguments and its results the OUT arguments, in the order of
// cc/engine/block_arg_fields.h, each a dense array of the shape written there (an absent
// optional operand: no elements); the LSTM calls add seq_len_max as the last operand.
#ifndef TF_RNN_OPS_CC_XLA_BLOCK_CALL_H_
#define TF_RNN_OPS_CC_XLA_BLOCK_CALL_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cc/engine/types.h"

namespace tfrnn {

// The block ops with XLA kernels, by the engine call they make.
#define TFRNN_XLA_BLOCK_OPS(X)                                                               \
  X(GRUBlockCell, "TfRnn>GRUBlockCell", kGruCellForward)                                     \
  X(GRUBlockCellGrad, "TfRnn>GRUBlockCellGrad", kGruCellBackward)                            \
  X(GRUBlockCellGradExact, "TfRnn>GRUBlockCellGradExact", kGruCellBackward)                  \
  X(LSTMBlockCell, "TfRnn>LSTMBlockCell", kLstmForward)                                      \
  X(LSTMBlockCellGrad, "TfRnn>LSTMBlockCellGrad", kLstmCellBackward)                          \
  X(BlockLSTM, "TfRnn>BlockLSTM", kLstmForward)                                              \
  X(BlockLSTMV2, "TfRnn>BlockLSTMV2", kLstmForward)                                          \
  X(BlockLSTMGrad, "TfRnn>BlockLSTMGrad", kLstmBackward)                                     \
  X(BlockLSTMGradV2, "TfRnn>BlockLSTMGradV2", kLstmBackward)                                 \
  X(BlockLSTMGradExact, "TfRnn>BlockLSTMGradExact", kLstmBackward)

enum class XlaBlockKind {
  kGruCellForward,
  kGruCellBackward,
  kLstmForward,
  kLstmBackward,
  kLstmCellBackward
};

enum class XlaBlockOp : int64_t {
#define TFRNN_BLOCK_OP_ENUM(name, op, kind) k##name,
  TFRNN_XLA_BLOCK_OPS(TFRNN_BLOCK_OP_ENUM)
#undef TFRNN_BLOCK_OP_ENUM
      kCount
};

inline const char* XlaBlockOpName(XlaBlockOp op) {
  static const char* const kNames[] = {
#define TFRNN_BLOCK_OP_NAME(name, op, kind) op,
      TFRNN_XLA_BLOCK_OPS(TFRNN_BLOCK_OP_NAME)
#undef TFRNN_BLOCK_OP_NAME
  };
  return kNames[static_cast<int64_t>(op)];
}
inline XlaBlockKind XlaBlockKindOf(XlaBlockOp op) {
  static const XlaBlockKind kKinds[] = {
#define TFRNN_BLOCK_OP_KIND(name, op, kind) XlaBlockKind::kind,
      TFRNN_XLA_BLOCK_OPS(TFRNN_BLOCK_OP_KIND)
#undef TFRNN_BLOCK_OP_KIND
  };
  return kKinds[static_cast<int64_t>(op)];
}

// The LSTM calls also carry the cell spec and the clip gradient; their operands end with
// seq_len_max, an int64 scalar (checked against T by the target).
struct XlaBlockCall {
  XlaBlockOp op = XlaBlockOp::kGRUBlockCell;
  bool f64 = false;
  int64_t present = ~int64_t{0};  // bit k: IN argument k is present (else null)
  Index T = 0, B = 0, I = 0, H = 0;
  LstmCellSpec cell;
  bool exact_clip_grad = false;
};

constexpr int64_t kXlaBlockCallVersion = 1;
constexpr size_t kXlaBlockCallLength = 14;

inline std::vector<int64_t> EncodeXlaBlockCall(const XlaBlockCall& c) {
  auto bits = [](float v) {
    const double d = v;
    int64_t b;
    std::memcpy(&b, &d, sizeof b);
    return b;
  };
  return {kXlaBlockCallVersion, static_cast<int64_t>(c.op), c.f64, c.present, c.T, c.B, c.I,
          c.H, int64_t{c.cell.order.c == kIfco.c}, bits(c.cell.forget_bias),
          bits(c.cell.cell_clip), c.cell.use_peephole, c.cell.bf16, c.exact_clip_grad};
}

// "" or why v is no call this build can run.
inline std::string DecodeXlaBlockCall(const int64_t* v, size_t n, XlaBlockCall* c) {
  if (n != kXlaBlockCallLength || v[0] != kXlaBlockCallVersion) {
    return "the custom call was compiled by another build of tf_rnn_ops (call encoding "
           "version or length differs); recompile the function";
  }
  if (v[1] < 0 || v[1] >= static_cast<int64_t>(XlaBlockOp::kCount) || (v[8] != 0 && v[8] != 1)) {
    return "the custom call's op or gate order (0: icfo, 1: ifco) is out of range";
  }
  for (int k = 4; k < 8; ++k) {
    if (v[k] < 0 || v[k] > (int64_t{1} << 40)) return "a size of the custom call is out of range";
  }
  auto value = [](int64_t b) {
    double d;
    std::memcpy(&d, &b, sizeof d);
    return static_cast<float>(d);
  };
  c->op = static_cast<XlaBlockOp>(v[1]);
  c->f64 = v[2] != 0;
  c->present = v[3];
  c->T = v[4];
  c->B = v[5];
  c->I = v[6];
  c->H = v[7];
  c->cell.order = v[8] != 0 ? kIfco : kIcfo;
  c->cell.forget_bias = value(v[9]);
  c->cell.cell_clip = value(v[10]);
  c->cell.use_peephole = v[11] != 0;
  c->cell.bf16 = v[12] != 0;
  c->exact_clip_grad = v[13] != 0;
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
