// XLA kernels of the LSTM block family (TfRnn>LSTMBlockCell, LSTMBlockCellGrad, BlockLSTM,
// BlockLSTMV2, BlockLSTMGrad, BlockLSTMGradV2, BlockLSTMGradExact): the shape checks
// of the TensorFlow kernels (LstmBlockSizesOf, cc/kernels/lstm_block_face.h), then half/bf16
// converted to float in HLO and one custom call (tfrnn_block_call, cc/xla/block_ffi_cpu.cc)
// whose operands and results follow the engine's argument lists (block_arg_fields.h), with
// seq_len_max (checked by the target: a run-time value) last (not for LSTMBlockCellGrad, whose
// engine call is one step's pointwise backward). An empty problem (batch or cell
// size 0) is zeros in HLO, as the TensorFlow kernels write.
#include <string>
#include <vector>

#include "cc/kernels/lstm_block_face.h"
#include "cc/xla/block_call.h"
#include "cc/xla/rnn_xla_util.h"
#include "tensorflow/compiler/tf2xla/xla_op_registry.h"

namespace tfrnn {
namespace lstm_block {
namespace {

using tensorflow::TensorShape;
using tensorflow::XlaOpKernel;
using tensorflow::XlaOpKernelContext;

// The op's input index of each IN argument of the engine call, in block_arg_fields.h's order
// (-1: absent), counted as if seq_len_max were the op's first input (the cell ops, which have
// none, subtract one).
//   forward  x, cs_prev, h_prev, w, wci, wcf, wco, b
//   backward x, cs_prev, h_prev, w, wci, wcf, wco, i, cs, f, o, ci, co, h, cs_grad, h_grad,
//            i_grad, f_grad, o_grad, ci_grad, co_grad (the last five: BlockLSTMGradExact)
//   cell backward cs_prev, wci, wcf, wco, i, cs, f, o, ci, co, cs_grad, h_grad
std::vector<int> EngineInputs(bool cell_grad, bool grad, bool exact) {
  if (cell_grad) return {2, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16};
  if (!grad) return {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<int> in = {1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16, 17};
  for (int k = 0; k < 5; ++k) in.push_back(exact ? 18 + k : -1);
  return in;
}

// kOp: the op (XlaBlockOp). The cell (LSTMBlockCell) has no seq_len_max input: its inputs are
// shifted by one and its one step is T = 1.
template <XlaBlockOp kOp>
class LstmBlockXla : public XlaOpKernel {
 public:
  static constexpr bool kCellGrad = kOp == XlaBlockOp::kLSTMBlockCellGrad;
  static constexpr bool kCell = kOp == XlaBlockOp::kLSTMBlockCell || kCellGrad;
  static constexpr bool kGrad = kOp == XlaBlockOp::kBlockLSTMGrad ||
                                kOp == XlaBlockOp::kBlockLSTMGradV2 ||
                                kOp == XlaBlockOp::kBlockLSTMGradExact;
  static constexpr bool kExact = kOp == XlaBlockOp::kBlockLSTMGradExact;
  static constexpr Face kFace = kCellGrad ? Face::kCellGrad
                                : kCell  ? Face::kCell
                                : kExact ? Face::kSeqGradExact
                                : kGrad  ? Face::kSeqGrad
                                         : Face::kSeq;

  explicit LstmBlockXla(tensorflow::OpKernelConstruction* c) : XlaOpKernel(c) {
    bool v2 = kOp == XlaBlockOp::kBlockLSTMV2 || kOp == XlaBlockOp::kBlockLSTMGradV2;
    float forget_bias = 0.f, cell_clip = 0.f;
    bool peephole = false;
    if (!kGrad && !kCellGrad && kOp != XlaBlockOp::kBlockLSTMV2) {
      OP_REQUIRES_OK(c, c->GetAttr("forget_bias", &forget_bias));
    }
    if ((!kGrad && !kCellGrad) || kExact) OP_REQUIRES_OK(c, c->GetAttr("cell_clip", &cell_clip));
    OP_REQUIRES_OK(c, c->GetAttr("use_peephole", &peephole));
    if (kExact) {
      std::string order;
      OP_REQUIRES_OK(c, c->GetAttr("gate_order", &order));
      v2 = order == "ifco";
    }
    cell_ = MakeSpec(v2, forget_bias, cell_clip, peephole);
  }

  void Compile(XlaOpKernelContext* ctx) override {
    const int shift = kCell ? -1 : 0;  // the cell has no seq_len_max
    LstmBlockShapes shapes{kCell ? TensorShape() : ctx->InputShape(0)};
    TensorShape* params[] = {&shapes.x,   &shapes.cs_prev, &shapes.h_prev, &shapes.w,
                             &shapes.wci, &shapes.wcf,     &shapes.wco,    &shapes.b};
    for (int k = 0; k < 8; ++k) *params[k] = ctx->InputShape(1 + k + shift);
    int next = 9 + shift;
    LstmBlockInputs in;
    for (const auto& a : LstmActs(kFace, &in)) {
      shapes.acts.push_back({a.first, ctx->InputShape(next++)});
    }
    OP_REQUIRES_OK(ctx, LstmBlockSizesOf(type_string(), kFace, shapes, &in));
    const tensorflow::DataType dt = ctx->input_type(kCell ? 0 : 1);
    const TensorShape act = kCell ? TensorShape({in.B, in.H}) : TensorShape({in.T, in.B, in.H});
    std::vector<TensorShape> out_shapes(7, act);
    if (kCellGrad) {
      out_shapes = {TensorShape({in.B, in.H}), TensorShape({in.B, 4 * in.H}),
                    TensorShape({in.H}), TensorShape({in.H}), TensorShape({in.H})};
    } else if (kGrad) {
      out_shapes = {TensorShape({in.T, in.B, in.I}), TensorShape({in.B, in.H}),
                    TensorShape({in.B, in.H}),        TensorShape({in.I + in.H, 4 * in.H}),
                    TensorShape({in.H}),              TensorShape({in.H}),
                    TensorShape({in.H}),              TensorShape({4 * in.H})};
    }
    XlaBlockCall call;
    call.op = kOp;
    call.T = in.T;
    call.B = in.B;
    call.I = in.I;
    call.H = in.H;
    call.cell = cell_;
    call.cell.bf16 = dt == tensorflow::DT_BFLOAT16;
    call.exact_clip_grad = kExact;
    std::vector<int> inputs = EngineInputs(kCellGrad, kGrad, kExact);
    for (int& k : inputs) k = k < 0 ? k : k + shift;
    std::vector<xla::XlaOp> extra;  // seq_len_max (the cell: 1) for the forward and backward
    if (!kCellGrad) {
      extra.push_back(kCell ? xla::ConstantR0<int64_t>(ctx->builder(), 1) : ctx->Input(0));
    }
    EmitBlockOp(ctx, call, in.empty(), inputs, extra, out_shapes, dt);
  }

 private:
  LstmCellSpec cell_;
};

using Cell = LstmBlockXla<XlaBlockOp::kLSTMBlockCell>;
using CellGrad = LstmBlockXla<XlaBlockOp::kLSTMBlockCellGrad>;
using Seq = LstmBlockXla<XlaBlockOp::kBlockLSTM>;
using SeqV2 = LstmBlockXla<XlaBlockOp::kBlockLSTMV2>;
using Grad = LstmBlockXla<XlaBlockOp::kBlockLSTMGrad>;
using GradV2 = LstmBlockXla<XlaBlockOp::kBlockLSTMGradV2>;
using GradExact = LstmBlockXla<XlaBlockOp::kBlockLSTMGradExact>;
TFRNN_REGISTER_XLA_KERNEL("TfRnn>LSTMBlockCell", Cell);
TFRNN_REGISTER_XLA_KERNEL("TfRnn>LSTMBlockCellGrad", CellGrad);
TFRNN_REGISTER_XLA_KERNEL("TfRnn>BlockLSTM", Seq);
TFRNN_REGISTER_XLA_KERNEL("TfRnn>BlockLSTMV2", SeqV2);
TFRNN_REGISTER_XLA_KERNEL("TfRnn>BlockLSTMGrad", Grad);
TFRNN_REGISTER_XLA_KERNEL("TfRnn>BlockLSTMGradV2", GradV2);
TFRNN_REGISTER_XLA_KERNEL("TfRnn>BlockLSTMGradExact", GradExact);

}  // namespace
}  // namespace lstm_block
}  // namespace tfrnn
