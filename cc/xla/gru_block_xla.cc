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

// The op's input index of each IN argument of the engine call, in block_arg_fields.h's order:
// forward x, h_prev, w_ru, w_c, b_ru, b_c; backward x, h_prev, w_ru, w_c, r, u, c, d_h, then
// (exact) the gradients of r, u, c (absent otherwise).
constexpr int kFwdInputs[] = {0, 1, 2, 3, 4, 5};
constexpr int kBwdInputs[] = {0, 1, 2, 3, 6, 7, 8, 9, 10, 11, 12};

template <bool kGrad, bool kExact>
class GruCellXla : public XlaOpKernel {
 public:
  using XlaOpKernel::XlaOpKernel;

  void Compile(XlaOpKernelContext* ctx) override {
    GruShapes shapes{ctx->InputShape(0), ctx->InputShape(1), ctx->InputShape(2),
                     ctx->InputShape(3), ctx->InputShape(4), ctx->InputShape(5), {}};
    int k = 6;
    for (const char* name : GruActNames(kGrad, kExact)) {
      shapes.acts.push_back({name, ctx->InputShape(k++)});
    }
    GruInputs in;
    OP_REQUIRES_OK(ctx, GruSizesOf(type_string(), shapes, &in));
    const tensorflow::DataType dt = ctx->input_type(0);
    const xla::PrimitiveType a_type = XlaComputeType(dt), t_type = XlaOpType(dt);
    xla::XlaBuilder* b = ctx->builder();
    const std::vector<TensorShape> out_shapes = {
        TensorShape({in.B, kGrad ? in.I : in.H}), TensorShape({in.B, in.H}),
        TensorShape({in.B, in.H}), TensorShape({in.B, kGrad ? 2 * in.H : in.H})};
    if (in.empty()) {
      for (int o = 0; o < 4; ++o) ctx->SetOutput(o, ZerosOf(b, t_type, out_shapes[o]));
      return;
    }
    XlaBlockCall call;
    call.op = !kGrad    ? XlaBlockOp::kGRUBlockCell
              : kExact ? XlaBlockOp::kGRUBlockCellGradExact
                       : XlaBlockOp::kGRUBlockCellGrad;
    call.f64 = a_type == xla::F64;
    call.B = in.B;
    call.I = in.I;
    call.H = in.H;
    std::vector<xla::XlaOp> operands;
    int arg = 0;
    call.present = 0;
    for (int input : kGrad ? std::vector<int>(std::begin(kBwdInputs), std::end(kBwdInputs))
                           : std::vector<int>(std::begin(kFwdInputs), std::end(kFwdInputs))) {
      const bool present = input < ctx->num_inputs();
      operands.push_back(present ? Convert(ctx->Input(input), a_type) : Empty(b, a_type));
      if (present) call.present |= int64_t{1} << arg;
      ++arg;
    }
    std::vector<xla::Shape> results;
    for (const TensorShape& s : out_shapes) results.push_back(XlaShape(a_type, s));
    const std::vector<xla::XlaOp> r =
        EmitCustomCall(b, kXlaBlockCall, EncodeXlaBlockCall(call), operands, results);
    for (int o = 0; o < 4; ++o) ctx->SetOutput(o, Convert(r[o], t_type));
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
