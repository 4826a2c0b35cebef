// XLA kernels of the cuDNN RNN family's forward and backprop ops (TfRnn>CudnnRNN, V2, V3 and
// their Backprop ops): the shape checks and spec of the TensorFlow kernels
// (cc/kernels/cudnn_rnn_face.h), then in HLO the sequences turned time-major where the op is
// batch-major, half/bf16 converted to float, and one custom call into the engine with the
// params vector (tfrnn_rnn_forward / tfrnn_rnn_backward, cc/xla/rnn_ffi_cpu.cc).
#include <string>
#include <vector>

#include "cc/kernels/cudnn_rnn_face.h"
#include "cc/xla/rnn_xla_util.h"
#include "tensorflow/compiler/tf2xla/xla_op_registry.h"

namespace tfrnn {
namespace cudnn {
namespace {

using tensorflow::TensorShape;
using tensorflow::XlaOpKernel;
using tensorflow::XlaOpKernelContext;

constexpr XlaFace kForwardFaces[] = {XlaFace::kCudnnRNN, XlaFace::kCudnnRNNV2,
                                     XlaFace::kCudnnRNNV3};
constexpr XlaFace kBackwardFaces[] = {XlaFace::kCudnnRNNBackprop, XlaFace::kCudnnRNNBackpropV2,
                                      XlaFace::kCudnnRNNBackpropV3};

// CudnnRNN[V2|V3] (kBackward false) and CudnnRNNBackprop[V2|V3], V = 1, 2, 3.
template <bool kBackward, int V>
class CudnnRnnXla : public XlaOpKernel {
 public:
  explicit CudnnRnnXla(tensorflow::OpKernelConstruction* c) : XlaOpKernel(c) {
    OP_REQUIRES_OK(c, attrs_.Read(c));
    if (kBackward) attrs_.is_training = true;
  }

  void Compile(XlaOpKernelContext* ctx) override {
    const std::string op = type_string();
    constexpr bool v3 = V >= 3;
    constexpr int bwd = v3 ? 5 : 4;  // the backprop's first input after the forward's
    FwdLayout f;
    OP_REQUIRES_OK(ctx, ForwardLayoutOf(op, attrs_, v3,
                                        {ctx->InputShape(0), ctx->InputShape(1),
                                         ctx->InputShape(2), ctx->InputShape(3),
                                         v3 ? ctx->InputShape(4) : TensorShape()},
                                        &f));
    const tensorflow::DataType dt = ctx->input_type(0);
    const xla::PrimitiveType a_type = XlaComputeType(dt), t_type = XlaOpType(dt);
    XlaRnnCall call = MakeXlaRnnCall(
        f.spec, dt, kBackward ? kBackwardFaces[V - 1] : kForwardFaces[V - 1],
        XlaWeights::kParamsVector);
    call.has_lengths = v3;
    const RnnSpec& s = call.spec;
    const bool lstm = s.mode == RnnMode::kLstm, tm = attrs_.time_major;
    const int64_t reserve = RnnReserveSize(s);
    xla::XlaBuilder* b = ctx->builder();
    auto seq = [&](xla::XlaOp v) { return tm ? v : SwapMajor(v); };  // <-> time-major
    const TensorShape h_shape = ctx->InputShape(1), c_shape = ctx->InputShape(2);

    std::vector<xla::XlaOp> operands = {
        v3 ? ctx->Input(4) : Empty(b, xla::S32),
        seq(Convert(ctx->Input(0), a_type)),
        Convert(ctx->Input(1), a_type),
        lstm ? Convert(ctx->Input(2), a_type) : Empty(b, a_type),
        Convert(ctx->Input(3), a_type),
        Empty(b, a_type),
        Empty(b, a_type),
        Empty(b, a_type),   // no recurrent mask
        Empty(b, a_type)};  // no peephole
    const xla::Shape c_result = lstm ? XlaShape(a_type, c_shape) : XlaShape(a_type, {0});
    if (!kBackward) {
      std::vector<xla::XlaOp> r = EmitRnnCall(
          b, kXlaRnnForward, call, operands,
          {XlaShape(a_type, {s.T, s.B, s.D * RnnHs(s)}), XlaShape(a_type, h_shape), c_result,
           XlaShape(a_type, {XlaRnnReserveResult(call)})});
      ctx->SetOutput(0, Convert(seq(r[0]), t_type));
      ctx->SetOutput(1, Convert(r[1], t_type));
      ctx->SetOutput(2, lstm ? Convert(r[2], t_type) : ZerosOf(b, t_type, TensorShape({})));
      // Not training: a scalar reserve_space, as the TensorFlow kernels allocate.
      ctx->SetOutput(3, s.training ? ReserveToOpType(r[3], reserve, a_type, t_type)
                                   : ZerosOf(b, t_type, TensorShape({})));
      if (V >= 2) {
        const bool pair = V == 2 && s.training;
        ctx->SetOutput(4, ZerosOf(b, xla::S8, pair ? TensorShape({2}) : TensorShape({})));
      }
      return;
    }
    OP_REQUIRES_OK(ctx, CheckBackwardShapes(
                            op, f, h_shape,
                            {ctx->InputShape(bwd), ctx->InputShape(bwd + 1),
                             ctx->InputShape(bwd + 2), ctx->InputShape(bwd + 3),
                             ctx->InputShape(bwd + 4), ctx->InputShape(bwd + 5)}));
    OP_REQUIRES_OK(ctx, CheckReserveSpace(op, ctx->InputShape(bwd + 6),
                                          OpTypeReserve(reserve, a_type, t_type), "forward op"));
    operands.push_back(seq(Convert(ctx->Input(bwd + 3), a_type)));
    operands.push_back(Convert(ctx->Input(bwd + 4), a_type));
    operands.push_back(lstm ? Convert(ctx->Input(bwd + 5), a_type) : Empty(b, a_type));
    operands.push_back(ReserveFromOpType(ctx->Input(bwd + 6), reserve, a_type, t_type));
    operands.push_back(Empty(b, a_type));  // no dc_seq
    std::vector<xla::XlaOp> r = EmitRnnCall(
        b, kXlaRnnBackward, call, operands,
        {XlaShape(a_type, {s.T, s.B, s.I}), XlaShape(a_type, h_shape), c_result,
         XlaShape(a_type, ctx->InputShape(3)), XlaShape(a_type, {0}), XlaShape(a_type, {0}),
         XlaShape(a_type, {0})});
    ctx->SetOutput(0, Convert(seq(r[0]), t_type));
    ctx->SetOutput(1, Convert(r[1], t_type));
    // input_c's gradient has input_c's shape (zeros but for lstm).
    ctx->SetOutput(2, lstm ? Convert(r[2], t_type) : ZerosOf(b, t_type, c_shape));
    ctx->SetOutput(3, Convert(r[3], t_type));
  }

 private:
  CudnnAttrs attrs_;
};

using Forward1 = CudnnRnnXla<false, 1>;
using Forward2 = CudnnRnnXla<false, 2>;
using Forward3 = CudnnRnnXla<false, 3>;
using Backward1 = CudnnRnnXla<true, 1>;
using Backward2 = CudnnRnnXla<true, 2>;
using Backward3 = CudnnRnnXla<true, 3>;
TFRNN_REGISTER_XLA_KERNEL("TfRnn>CudnnRNN", Forward1);
TFRNN_REGISTER_XLA_KERNEL("TfRnn>CudnnRNNV2", Forward2);
TFRNN_REGISTER_XLA_KERNEL("TfRnn>CudnnRNNV3", Forward3);
TFRNN_REGISTER_XLA_KERNEL("TfRnn>CudnnRNNBackprop", Backward1);
TFRNN_REGISTER_XLA_KERNEL("TfRnn>CudnnRNNBackpropV2", Backward2);
TFRNN_REGISTER_XLA_KERNEL("TfRnn>CudnnRNNBackpropV3", Backward3);

}  // namespace
}  // namespace cudnn
}  // namespace tfrnn
