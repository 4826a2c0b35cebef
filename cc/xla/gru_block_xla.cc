// XLA kernels of the GRU block family (TfRnn>GRUBlockCell, GRUBlockCellGrad,
// GRUBlockCellGradExact): the shape checks of the TensorFlow kernels (GruSizesOf,
// cc/kernels/gru_block_face.h), then half/bf16 converted to float in HLO and one custom call
// (tfrnn_block_call, cc/xla/block_ffi_cpu.cc) whose operands and results follow the engine's
// argument lists (cc/engine/block_arg_fields.h). An empty problem (batch or cell size 0) is
// zeros in HLO, as the TensorFlow kernels write.
#include <string>
#include <vector>

#include "cc/kernels/gru_block_face.h"
#include "cc/xla/block_call.h"
#include "cc/xla/rnn_xla_util.h"
#include "tensorflow/compiler/tf2xla/xla_op_registry.h"

namespace tfrnn {
namespace gru_block {
namespace {

using tensorflow::TensorShape;
using tensorflow::XlaOpKernel;
using tensorflow::XlaOpKernelContext;

// The op's input index of each IN argument of the engine call, in block_arg_fields.h's order
// (-1: absent): forward x, h_prev, w_ru, w_c, b_ru, b_c; backward x, h_prev, w_ru, w_c, r, u,
// c, d_h, then (exact) the gradients of r, u, c.
std::vector<int> EngineInputs(bool grad, bool exact) {
  if (!grad) return {0, 1, 2, 3, 4, 5};
  if (exact) return {0, 1, 2, 3, 6, 7, 8, 9, 10, 11, 12};
  return {0, 1, 2, 3, 6, 7, 8, 9, -1, -1, -1};
}

template <bool kGrad, bool kExact>
class GruCellXla : public XlaOpKernel {
 public:
  using XlaOpKernel::XlaOpKernel;

  void Compile(XlaOpKernelContext* ctx) override {
    GruShapes shapes{ctx->InputShape(0), ctx->InputShape(1), ctx->InputShape(2),
                     ctx->InputShape(3), ctx->InputShape(4), ctx->InputShape(5), {}};
    int k = 6;
    GruInputs in;
    for (const auto& a : GruActs(kGrad, kExact, &in)) {
      shapes.acts.push_back({a.first, ctx->InputShape(k++)});
    }
    OP_REQUIRES_OK(ctx, GruSizesOf(type_string(), shapes, &in));
    XlaBlockCall call;
    call.op = !kGrad    ? XlaBlockOp::kGRUBlockCell
              : kExact ? XlaBlockOp::kGRUBlockCellGradExact
                       : XlaBlockOp::kGRUBlockCellGrad;
    call.B = in.B;
    call.I = in.I;
    call.H = in.H;
    EmitBlockOp(ctx, call, in.empty(), EngineInputs(kGrad, kExact), {},
                {TensorShape({in.B, kGrad ? in.I : in.H}), TensorShape({in.B, in.H}),
                 TensorShape({in.B, in.H}), TensorShape({in.B, kGrad ? 2 * in.H : in.H})},
                ctx->input_type(0));
  }
};

using Forward = GruCellXla<false, false>;
using Backward = GruCellXla<true, false>;
using BackwardExact = GruCellXla<true, true>;
TFRNN_REGISTER_XLA_KERNEL("TfRnn>GRUBlockCell", Forward);
TFRNN_REGISTER_XLA_KERNEL("TfRnn>GRUBlockCellGrad", Backward);
TFRNN_REGISTER_XLA_KERNEL("TfRnn>GRUBlockCellGradExact", BackwardExact);

}  // namespace
}  // namespace gru_block
}  // namespace tfrnn
