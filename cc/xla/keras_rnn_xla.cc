// XLA kernels of the Keras layers' op pairs (TfRnn>KerasRNN, KerasRNNBackprop and the mixed
// pair, KerasRNNMixed, KerasRNNMixedBackprop, whose weights, their gradients and the reserve are
// float): the same shape checks and spec as the CPU kernels (cc/kernels/keras_rnn_face.h), then
// in HLO the batch-major tensors turned time-major, half/bf16 converted to float, and one
// custom call into the engine
// (tfrnn_rnn_forward / tfrnn_rnn_backward, cc/xla/rnn_ffi_cpu.cc); a streaming call (one
// step of a few rows at inference) compiles to HLO instead (keras_step_hlo.h).
#include <string>
#include <vector>

#include "cc/kernels/keras_rnn_face.h"
#include "cc/xla/keras_step_hlo.h"
#include "cc/xla/rnn_xla_util.h"
#include "tensorflow/compiler/tf2xla/xla_op_registry.h"

namespace tfrnn {
namespace {

using tensorflow::XlaOpKernel;
using tensorflow::XlaOpKernelContext;

template <bool kBackward, bool kMixed>
class KerasRnnXla : public XlaOpKernel {
 public:
  explicit KerasRnnXla(tensorflow::OpKernelConstruction* c)
      : XlaOpKernel(c), cpu_(OnXlaCpu(c)) {
    OP_REQUIRES_OK(c, attrs_.Read(c));
  }

  void Compile(XlaOpKernelContext* ctx) override {
    const std::string op = type_string();
    KerasShapes shapes{ctx->InputShape(0), ctx->InputShape(1), ctx->InputShape(2),
                       ctx->InputShape(3), ctx->InputShape(4), ctx->InputShape(5),
                       ctx->InputShape(6), ctx->InputShape(7)};
    KerasLayout layout;
    OP_REQUIRES_OK(ctx, KerasLayoutOf(op, attrs_, shapes, &layout));
    const tensorflow::DataType dt = ctx->input_type(0);
    const xla::PrimitiveType a_type = XlaComputeType(dt), t_type = XlaOpType(dt);
    // The weights' gradients and the reserve: the op's type, or the mixed pair's float.
    const xla::PrimitiveType w_type = kMixed ? a_type : t_type;
    constexpr XlaFace kFace =
        kMixed ? (kBackward ? XlaFace::kKerasRNNMixedBackprop : XlaFace::kKerasRNNMixed)
               : (kBackward ? XlaFace::kKerasRNNBackprop : XlaFace::kKerasRNN);
    XlaRnnCall call = MakeXlaRnnCall(layout.spec, dt, kFace, XlaWeights::kKerasWeights);
    call.has_lengths = layout.has_lengths;
    call.two_biases = layout.two_biases;
    // bf16_products: a float32 op's products as a bfloat16 op's (the CPU engine's).
    if (cpu_ && attrs_.bf16_products && (dt == tensorflow::DT_FLOAT || kMixed)) {
      call.spec.bf16 = true;
    }
    const RnnSpec& s = call.spec;
    const bool lstm = s.mode == RnnMode::kLstm;
    if (!kBackward && KerasStepInHlo(s, layout.has_lengths)) {
      auto in = [&](int k) { return Convert(ctx->Input(k), a_type); };
      const HloStep step =
          EmitKerasStep(s, layout.two_biases, xla::Reshape(in(0), {s.B, s.I}), in(1),
                        lstm ? in(2) : xla::XlaOp(), in(3), in(4), in(5));
      ctx->SetOutput(0, Convert(xla::Reshape(step.h, {s.B, 1, s.H}), t_type));
      ctx->SetOutput(1, Convert(step.h, t_type));
      ctx->SetOutput(2, lstm ? Convert(step.c, t_type) : Empty(ctx->builder(), t_type));
      ctx->SetOutput(3, Empty(ctx->builder(), w_type));
      return;
    }
    const int64_t reserve = RnnReserveSize(s);
    // At inference on the CPU the engine reads x and writes y batch-major itself.
    call.batch_major = !kBackward && cpu_ && !SameMajor(s) && RnnFwdTakesBatchMajor(s);
    auto seq = [&](xla::XlaOp v) { return call.batch_major ? v : SwapMajor(v); };

    std::vector<xla::XlaOp> operands = {ctx->Input(6), seq(Convert(ctx->Input(0), a_type))};
    for (int k : {1, 2, 3, 4, 5, 7}) operands.push_back(Convert(ctx->Input(k), a_type));
    if (!lstm) operands[3] = Empty(ctx->builder(), a_type);
    operands.push_back(Empty(ctx->builder(), a_type));  // no peephole
    auto shape = [&](std::initializer_list<int64_t> dims) {
      return xla::ShapeUtil::MakeShape(a_type, dims);
    };
    const int64_t c_rows = lstm ? s.B : 0;
    if (!kBackward) {
      std::vector<xla::XlaOp> r = EmitRnnCall(
          ctx->builder(), kXlaRnnForward, call, operands,
          {call.batch_major ? shape({s.B, s.T, s.H}) : shape({s.T, s.B, s.H}), shape({s.B, s.H}),
           lstm ? shape({s.B, s.H}) : shape({0}), shape({XlaRnnReserveResult(call)})});
      ctx->SetOutput(0, Convert(seq(r[0]), t_type));
      ctx->SetOutput(1, Convert(r[1], t_type));
      ctx->SetOutput(2, Convert(r[2], t_type));
      ctx->SetOutput(3, s.training ? ReserveToOpType(r[3], reserve, a_type, w_type)
                                   : Empty(ctx->builder(), w_type));
      return;
    }
    const int64_t t_reserve = OpTypeReserve(reserve, a_type, w_type);
    OP_REQUIRES_OK(ctx, CheckKerasBackpropShapes(op, s, ctx->InputShape(8), ctx->InputShape(9),
                                                 ctx->InputShape(10), ctx->InputShape(11),
                                                 t_reserve));
    operands.push_back(SwapMajor(Convert(ctx->Input(8), a_type)));
    operands.push_back(Convert(ctx->Input(9), a_type));
    operands.push_back(lstm ? Convert(ctx->Input(10), a_type) : Empty(ctx->builder(), a_type));
    operands.push_back(ReserveFromOpType(ctx->Input(11), reserve, a_type, w_type));
    operands.push_back(Empty(ctx->builder(), a_type));  // no dc_seq
    // input_grad false: zeros for input_backprop; on the CPU the engine skips its products
    // (the CUDA engine computes it regardless).
    call.input_grad = attrs_.input_grad || !cpu_;
    auto like = [&](int k) { return XlaShape(a_type, ctx->InputShape(k)); };
    std::vector<xla::XlaOp> r = EmitRnnCall(
        ctx->builder(), kXlaRnnBackward, call, operands,
        {call.input_grad ? shape({s.T, s.B, s.I}) : shape({0}), shape({s.B, s.H}),
         shape({c_rows, s.H}), like(3), like(4), like(5), shape({0})});
    ctx->SetOutput(0, attrs_.input_grad ? Convert(SwapMajor(r[0]), t_type)
                                        : ZerosOf(ctx->builder(), t_type, ctx->InputShape(0)));
    ctx->SetOutput(1, Convert(r[1], t_type));
    // input_c's gradient has input_c's shape (zeros but for lstm).
    ctx->SetOutput(2, lstm ? Convert(r[2], t_type)
                           : ZerosOf(ctx->builder(), t_type, ctx->InputShape(2)));
    for (int k = 3; k < 6; ++k) ctx->SetOutput(k, Convert(r[k], w_type));
  }

 private:
  KerasAttrs attrs_;
  bool cpu_;  // compiled for the CPU (XLA_CPU_JIT)
};

using KerasForward = KerasRnnXla<false, false>;
using KerasBackward = KerasRnnXla<true, false>;
using KerasMixedForward = KerasRnnXla<false, true>;
using KerasMixedBackward = KerasRnnXla<true, true>;
TFRNN_REGISTER_XLA_RNN_KERNEL("TfRnn>KerasRNN", KerasForward);
TFRNN_REGISTER_XLA_RNN_KERNEL("TfRnn>KerasRNNBackprop", KerasBackward);
TFRNN_REGISTER_XLA_RNN_KERNEL("TfRnn>KerasRNNMixed", KerasMixedForward);
TFRNN_REGISTER_XLA_RNN_KERNEL("TfRnn>KerasRNNMixedBackprop", KerasMixedBackward);

}  // namespace
}  // namespace tfrnn
