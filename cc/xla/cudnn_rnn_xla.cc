// XLA kernels of the cuDNN RNN family. The forward and backprop ops (TfRnn>CudnnRNN, V2, V3 and
// their Backprop ops): the shape checks and spec of the TensorFlow kernels
// (cc/kernels/cudnn_rnn_face.h), then in HLO the sequences turned time-major where the op is
// batch-major, half/bf16 converted to float, and one custom call into the engine with the
// params vector (tfrnn_rnn_forward / tfrnn_rnn_backward, cc/xla/rnn_ffi_cpu.cc). The params
// converters (CudnnRNNParamsSize, ParamsToCanonical(V2), CanonicalToParams(V2)): plain HLO.
#include <limits>
#include <string>
#include <utility>
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
  explicit CudnnRnnXla(tensorflow::OpKernelConstruction* c)
      : XlaOpKernel(c), cpu_(OnXlaCpu(c)) {
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
    // At inference on the CPU the engine reads x and writes y batch-major itself.
    call.batch_major = !kBackward && cpu_ && !tm && RnnFwdTakesBatchMajor(s);
    auto seq = [&](xla::XlaOp v) {  // <-> the call's layout
      return tm || call.batch_major ? v : SwapMajor(v);
    };
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
          {XlaShape(a_type, call.batch_major ? TensorShape({s.B, s.T, s.D * RnnHs(s)})
                                             : TensorShape({s.T, s.B, s.D * RnnHs(s)})),
           XlaShape(a_type, h_shape), c_result,
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
  bool cpu_;  // compiled for the CPU (XLA_CPU_JIT)
};

using Forward1 = CudnnRnnXla<false, 1>;
using Forward2 = CudnnRnnXla<false, 2>;
using Forward3 = CudnnRnnXla<false, 3>;
using Backward1 = CudnnRnnXla<true, 1>;
using Backward2 = CudnnRnnXla<true, 2>;
using Backward3 = CudnnRnnXla<true, 3>;
TFRNN_REGISTER_XLA_RNN_KERNEL("TfRnn>CudnnRNN", Forward1);
TFRNN_REGISTER_XLA_RNN_KERNEL("TfRnn>CudnnRNNV2", Forward2);
TFRNN_REGISTER_XLA_RNN_KERNEL("TfRnn>CudnnRNNV3", Forward3);
TFRNN_REGISTER_XLA_RNN_KERNEL("TfRnn>CudnnRNNBackprop", Backward1);
TFRNN_REGISTER_XLA_RNN_KERNEL("TfRnn>CudnnRNNBackpropV2", Backward2);
TFRNN_REGISTER_XLA_RNN_KERNEL("TfRnn>CudnnRNNBackpropV3", Backward3);

// --- the params converters: plain HLO (no custom call), the size inputs (num_layers,
// num_units, input_size) compile-time constants; checks and canonical regions as in the
// TensorFlow kernels (SizesSpec, ParamsToCanonicalRegions, CanonicalToParamsRegions).

// A converter's kernel: its attrs (CudnnAttrs, or CanonicalAttrs with the list lengths) and
// the spec of its constant size inputs.
template <typename Attrs>
class SizesXlaKernel : public XlaOpKernel {
 public:
  explicit SizesXlaKernel(tensorflow::OpKernelConstruction* c) : XlaOpKernel(c) {
    OP_REQUIRES_OK(c, attrs_.Read(c));
  }

 protected:
  absl::Status Spec(XlaOpKernelContext* ctx, RnnSpec* s) const {
    const std::string op = type_string();
    int64_t v[3];
    for (int k = 0; k < 3; ++k) {
      TF_RETURN_IF_ERROR(CheckSizeScalar(op, k, ctx->InputShape(k)));
      TF_RETURN_IF_ERROR(ctx->ConstantInputAsIntScalar(k, &v[k]));
    }
    return SizesSpec(op, attrs_, v, s);
  }

  Attrs attrs_;
};

class ParamsSizeXla : public SizesXlaKernel<CudnnAttrs> {
 public:
  explicit ParamsSizeXla(tensorflow::OpKernelConstruction* c) : SizesXlaKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("S", &s_type_));
  }

  void Compile(XlaOpKernelContext* ctx) override {
    RnnSpec s;
    OP_REQUIRES_OK(ctx, Spec(ctx, &s));
    const int64_t size = RnnParamsCount(s).value();
    xla::XlaBuilder* b = ctx->builder();
    if (s_type_ == tensorflow::DT_INT64) {
      ctx->SetOutput(0, xla::ConstantR1<int64_t>(b, {size}));
      return;
    }
    OP_REQUIRES(ctx, size <= std::numeric_limits<int32_t>::max(),
                absl::InvalidArgumentError(absl::StrCat(type_string(), ": params size ", size,
                                                        " does not fit in S; use S=int64")));
    ctx->SetOutput(0, xla::ConstantR1<int32_t>(b, {static_cast<int32_t>(size)}));
  }

 private:
  tensorflow::DataType s_type_ = tensorflow::DT_INT32;
};

// Slices of params (input 3): the weights, then the biases.
class ParamsToCanonicalXla : public SizesXlaKernel<CanonicalAttrs> {
 public:
  using SizesXlaKernel::SizesXlaKernel;

  void Compile(XlaOpKernelContext* ctx) override {
    std::vector<Region> regions[2];  // the weights', the biases'
    OP_REQUIRES_OK(ctx, Regions(ctx, &regions[0], &regions[1]));
    const xla::XlaOp params = ctx->Input(3);
    int out = 0;
    for (int list = 0; list < 2; ++list) {
      for (const Region& r : regions[list]) {
        const xla::XlaOp piece = Rows(params, r.offset, r.offset + r.rows * r.cols);
        ctx->SetOutput(out++, list == 0 ? xla::Reshape(piece, {r.rows, r.cols}) : piece);
      }
    }
  }

 private:
  absl::Status Regions(XlaOpKernelContext* ctx, std::vector<Region>* w,
                       std::vector<Region>* b) const {
    RnnSpec s;
    TF_RETURN_IF_ERROR(Spec(ctx, &s));
    return ParamsToCanonicalRegions(type_string(), attrs_, s, ctx->InputShape(3), w, b);
  }
};

// The weights and biases flattened and concatenated in their regions' order in params (the
// regions tile params).
class CanonicalToParamsXla : public SizesXlaKernel<CanonicalAttrs> {
 public:
  using SizesXlaKernel::SizesXlaKernel;

  void Compile(XlaOpKernelContext* ctx) override {
    RnnSpec s;
    OP_REQUIRES_OK(ctx, Spec(ctx, &s));
    std::vector<xla::XlaOp> weights, biases;
    std::vector<TensorShape> w_shapes, b_shapes;
    OP_REQUIRES_OK(ctx, ctx->InputList("weights", &weights, &w_shapes));
    OP_REQUIRES_OK(ctx, ctx->InputList("biases", &biases, &b_shapes));
    std::vector<Region> w, b;
    OP_REQUIRES_OK(ctx, CanonicalToParamsRegions(type_string(), attrs_, s,
                                                 /*count_elements=*/true, w_shapes, b_shapes,
                                                 &w, &b));
    std::vector<std::pair<int64_t, xla::XlaOp>> pieces;
    for (size_t k = 0; k < w.size(); ++k) {
      pieces.push_back({w[k].offset, xla::Reshape(weights[k], {w[k].rows * w[k].cols})});
    }
    for (size_t k = 0; k < b.size(); ++k) {
      pieces.push_back({b[k].offset, xla::Reshape(biases[k], {b[k].rows})});
    }
    ctx->SetOutput(0, ConcatAtOffsets(ctx->builder(), std::move(pieces)));
  }
};

TFRNN_REGISTER_XLA_SIZES_KERNEL("TfRnn>CudnnRNNParamsSize", ParamsSizeXla);
TFRNN_REGISTER_XLA_SIZES_KERNEL("TfRnn>CudnnRNNParamsToCanonical", ParamsToCanonicalXla);
TFRNN_REGISTER_XLA_SIZES_KERNEL("TfRnn>CudnnRNNParamsToCanonicalV2", ParamsToCanonicalXla);
TFRNN_REGISTER_XLA_SIZES_KERNEL("TfRnn>CudnnRNNCanonicalToParams", CanonicalToParamsXla);
TFRNN_REGISTER_XLA_SIZES_KERNEL("TfRnn>CudnnRNNCanonicalToParamsV2", CanonicalToParamsXla);


}  // namespace
}  // namespace cudnn
}  // namespace tfrnn
