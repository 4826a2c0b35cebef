// XLA kernels of the MPSGraph-style LSTM and GRU (TfRnn>LSTM, LSTMGradients, GRU,
// GRUGradients): the shape checks and spec of the TensorFlow kernels (ValidateMpsShapes,
// cc/kernels/mps_rnn_face.h), then in HLO MPSGraph's operands packed into the engine's params
// vector and its states [B, D·H] turned direction-major [D, B, H], half/bf16 converted to float,
// and the stacked-RNN custom calls (tfrnn_rnn_forward / tfrnn_rnn_backward,
// cc/xla/rnn_ffi_cpu.cc). The forward's z_state and cell sequence are the reserve's gate
// activations and cell states, each direction's interleaved in HLO; the gradients recompute the
// forward (as the TensorFlow kernels do) and unpack the engine's dparams into MPSGraph's layouts.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "cc/kernels/mps_rnn_face.h"
#include "cc/xla/rnn_xla_util.h"
#include "tensorflow/compiler/tf2xla/xla_op_registry.h"

namespace tfrnn {
namespace mps {
namespace {

using tensorflow::TensorShape;
using tensorflow::XlaOpKernel;
using tensorflow::XlaOpKernelContext;

// The kernel's operands by input name (lists of length 0 or 1: absent or present), each with its
// shape and its value in the compute type.
class XlaOperands {
 public:
  XlaOperands(XlaOpKernelContext* ctx, xla::PrimitiveType a_type)
      : ctx_(ctx), a_type_(a_type) {}

  // The single-tensor input `name`.
  void Required(const char* name) {
    got_[name] = {ctx_->InputShape(name), Convert(ctx_->Input(name), a_type_)};
  }
  // The optional operand `name` (a list input), with *shape pointing at its shape (null: absent).
  absl::Status Optional(const char* name, const TensorShape** shape) {
    std::vector<xla::XlaOp> values;
    std::vector<TensorShape> shapes;
    TF_RETURN_IF_ERROR(ctx_->InputList(name, &values, &shapes));
    *shape = nullptr;
    if (values.size() > 1) {
      return OptionalListError(ctx_->op_kernel().type_string(), name, values.size());
    }
    if (values.empty()) return absl::OkStatus();
    auto& slot = got_[name];
    slot = {shapes[0], Convert(values[0], a_type_)};
    *shape = &slot.first;
    return absl::OkStatus();
  }
  const TensorShape* Shape(const char* name) const {
    auto it = got_.find(name);
    return it == got_.end() ? nullptr : &it->second.first;
  }
  bool Has(const char* name) const { return got_.count(name) != 0; }
  xla::XlaOp Value(const char* name) const { return got_.at(name).second; }
  // The state or final-state gradient `name` [B, D·H] as [D, B, H] (MpsPacked's ToDirMajor in
  // HLO), zeros when absent.
  xla::XlaOp DirMajor(const char* name, int64_t D, int64_t B, int64_t H) const {
    if (!Has(name)) return ZerosOf(ctx_->builder(), a_type_, TensorShape({D, B, H}));
    return xla::Transpose(xla::Reshape(Value(name), {B, D, H}), {1, 0, 2});
  }

 private:
  XlaOpKernelContext* ctx_;
  xla::PrimitiveType a_type_;
  std::map<std::string, std::pair<TensorShape, xla::XlaOp>> got_;  // node-stable addresses
};

xla::XlaOp Flat(xla::XlaOp v, int64_t n) { return xla::Reshape(v, {n}); }

// [D, B, H] -> [B, D·H] (MpsPacked's FromDirMajor in HLO).
xla::XlaOp FromDirMajor(xla::XlaOp v, int64_t D, int64_t B, int64_t H) {
  return xla::Reshape(xla::Transpose(v, {1, 0, 2}), {B, D * H});
}

// The engine's params vector from MPSGraph's W (or none: preprojected), R, bias and secondary
// bias (MpsPacked::Pack in HLO): per direction the pieces at their RnnParamLayout offsets, in
// offset order, concatenated.
xla::XlaOp PackParams(xla::XlaBuilder* b, const RnnSpec& s, xla::PrimitiveType t,
                      const XlaOperands& in) {
  const int64_t D = s.D, H = s.H, KN = RnnK(s) * H, in_w = s.preprojected ? 0 : s.I;
  const int64_t gp = s.gate_pos[2];
  std::vector<std::pair<int64_t, xla::XlaOp>> pieces;
  const xla::XlaOp R = in.Value("recurrent_weight");
  for (int64_t d = 0; d < D; ++d) {
    const RnnParamOffsets o = RnnParamLayout(s, d);
    if (in_w > 0) {
      const xla::XlaOp W_d = Rows(in.Value("input_weight"), d * KN, (d + 1) * KN);
      pieces.push_back({o.w, Flat(W_d, KN * in_w)});
    }
    pieces.push_back({o.r, Flat(D == 2 ? Rows(R, d, d + 1) : R, KN * H)});
    pieces.push_back({o.bw, in.Has("bias") ? Rows(in.Value("bias"), d * KN, (d + 1) * KN)
                                           : ZerosOf(b, t, {KN})});
    xla::XlaOp br = ZerosOf(b, t, {KN});
    if (in.Has("secondary_bias")) {  // the candidate's recurrent bias
      const xla::XlaOp b2_d = Rows(in.Value("secondary_bias"), d * H, (d + 1) * H);
      br = xla::ConcatInDim(b, {ZerosOf(b, t, {gp * H}), b2_d, ZerosOf(b, t, {KN - (gp + 1) * H})},
                            0);
    }
    pieces.push_back({o.br, br});
  }
  return ConcatAtOffsets(b, std::move(pieces));
}

// out [T, B, D·width]: each direction's [T·B, width] block of `reserve` at offset(d),
// interleaved (InterleaveFromReserve in HLO).
template <typename OffsetFn>
xla::XlaOp FromReserve(xla::XlaBuilder* b, const RnnSpec& s, xla::XlaOp reserve, OffsetFn offset,
                       int64_t width) {
  const int64_t TB = s.T * s.B;
  std::vector<xla::XlaOp> dirs;
  for (int64_t d = 0; d < s.D; ++d) {
    const int64_t at = offset(d);
    dirs.push_back(xla::Reshape(Rows(reserve, at, at + TB * width), {s.T, s.B, width}));
  }
  return xla::ConcatInDim(b, dirs, 2);
}

// The forward's nine operands (rnn_call.h) from MPSGraph's: params packed, states direction-major
// (zeros when absent), the mask and peephole as given.
std::vector<xla::XlaOp> ForwardOperands(xla::XlaBuilder* b, const RnnSpec& s, xla::PrimitiveType t,
                                        const XlaOperands& in) {
  const bool lstm = s.mode == RnnMode::kLstm;
  const int64_t D = s.D, B = s.B, H = s.H;
  auto optional = [&](const char* name) { return in.Has(name) ? in.Value(name) : Empty(b, t); };
  return {Empty(b, xla::S32),
          in.Value("source"),
          in.DirMajor("init_state", D, B, H),
          lstm ? in.DirMajor("init_cell", D, B, H) : Empty(b, t),
          PackParams(b, s, t, in),
          Empty(b, t),
          Empty(b, t),
          optional("mask"),
          lstm ? optional("peephole") : Empty(b, t)};
}

constexpr XlaFace kFaces[2][2] = {{XlaFace::kGRU, XlaFace::kGRUGradients},
                                  {XlaFace::kLSTM, XlaFace::kLSTMGradients}};

// The forward (kGrad false) and gradients kernels of the family of descriptor Desc.
template <typename Desc, bool kGrad>
class MpsXla : public XlaOpKernel {
 public:
  explicit MpsXla(tensorflow::OpKernelConstruction* c) : XlaOpKernel(c) {
    OP_REQUIRES_OK(c, desc_.Read(c));
  }

  void Compile(XlaOpKernelContext* ctx) override {
    constexpr bool lstm = Desc::kGates == 4;
    const std::string op = type_string();
    const tensorflow::DataType dt = ctx->input_type(0);
    const xla::PrimitiveType a_type = XlaComputeType(dt), t_type = XlaOpType(dt);
    XlaOperands in(ctx, a_type);
    MpsShapes shapes;
    in.Required("source");
    in.Required("recurrent_weight");
    shapes.source = in.Shape("source");
    shapes.R = in.Shape("recurrent_weight");
    for (const auto& [name, slot] : MpsOptionalSlots<const TensorShape*>(Desc::kGates, &shapes)) {
      OP_REQUIRES_OK(ctx, in.Optional(name, slot));
    }
    MpsLayout lay;
    OP_REQUIRES_OK(ctx, ValidateMpsShapes(op, desc_, shapes, &lay));
    XlaRnnCall call = MakeXlaRnnCall(lay.spec, dt, kFaces[lstm][kGrad], XlaWeights::kParamsVector);
    call.mask_per_step = lay.mask_per_step;
    RnnSpec& s = call.spec;
    // The reserve is wanted for z_state, the cell sequence or the backward.
    s.training = kGrad || desc_.training || desc_.produce_cell;
    xla::XlaBuilder* b = ctx->builder();
    const int64_t T = s.T, B = s.B, D = s.D, H = s.H, K = RnnK(s);
    const std::vector<xla::XlaOp> fwd_operands = ForwardOperands(b, s, a_type, in);
    const std::vector<xla::XlaOp> f = EmitRnnCall(
        b, kXlaRnnForward, call, fwd_operands,
        {XlaShape(a_type, {T, B, D * H}), XlaShape(a_type, {D, B, H}),
         XlaShape(a_type, lstm ? TensorShape({D, B, H}) : TensorShape({0})),
         XlaShape(a_type, {XlaRnnReserveResult(call)})});
    const xla::XlaOp reserve = f[3];
    if constexpr (!kGrad) {
      // The cell states (aux) and gate activations (acts) of the reserve.
      auto cells = [&](int64_t d) { return RnnReserveLayout(s, d).aux; };
      auto acts = [&](int64_t d) { return RnnReserveLayout(s, d).acts; };
      int out = 0;
      ctx->SetOutput(out++, Convert(f[0], t_type));
      if (lstm) {
        ctx->SetOutput(out++, desc_.produce_cell
                                  ? Convert(FromReserve(b, s, reserve, cells, H), t_type)
                                  : Empty(b, t_type));
      }
      ctx->SetOutput(out, desc_.training ? Convert(FromReserve(b, s, reserve, acts, K * H), t_type)
                                         : Empty(b, t_type));
      return;
    }
    Backward(ctx, call, in, shapes, fwd_operands, reserve);
  }

 private:
  // The gradients op after the forward: its inputs read and checked, the backward call, its
  // results in MPSGraph's layouts.
  void Backward(XlaOpKernelContext* ctx, XlaRnnCall call, XlaOperands& in, const MpsShapes& shapes,
                std::vector<xla::XlaOp> operands, xla::XlaOp reserve) {
    const std::string op = type_string();
    const RnnSpec& s = call.spec;
    const bool lstm = s.mode == RnnMode::kLstm;
    const xla::PrimitiveType a_type = XlaComputeType(ctx->input_type(0));
    const xla::PrimitiveType t_type = XlaOpType(ctx->input_type(0));
    xla::XlaBuilder* b = ctx->builder();
    const int64_t T = s.T, B = s.B, D = s.D, H = s.H, KN = RnnK(s) * H;
    const int64_t in_w = s.preprojected ? 0 : s.I;
    MpsGradShapes g;
    in.Required("source_gradient");
    in.Required("z_state");
    in.Required(MpsFwdOutName(s));
    g.dy = in.Shape("source_gradient");
    g.z_state = in.Shape("z_state");
    g.fwd_out = in.Shape(MpsFwdOutName(s));
    for (const auto& [name, slot] : MpsGradOptionalSlots<const TensorShape*>(s, &g)) {
      OP_REQUIRES_OK(ctx, in.Optional(name, slot));
    }
    OP_REQUIRES_OK(ctx, ValidateMpsGradShapes(op, s, g));
    call.has_dc_seq = in.Has("cell_output_gradient");
    operands.push_back(in.Value("source_gradient"));
    operands.push_back(in.DirMajor("state_gradient", D, B, H));
    operands.push_back(lstm ? in.DirMajor("cell_gradient", D, B, H) : Empty(b, a_type));
    operands.push_back(reserve);
    operands.push_back(call.has_dc_seq ? in.Value("cell_output_gradient") : Empty(b, a_type));
    const std::vector<xla::XlaOp> r = EmitRnnCall(
        b, kXlaRnnBackward, call, operands,
        {XlaShape(a_type, {T, B, s.I}), XlaShape(a_type, {D, B, H}),
         XlaShape(a_type, lstm ? TensorShape({D, B, H}) : TensorShape({0})),
         XlaShape(a_type, {RnnParamsSize(s)}), XlaShape(a_type, {0}), XlaShape(a_type, {0}),
         XlaShape(a_type, {XlaRnnPeepholeSize(call)})});
    const xla::XlaOp dparams = r[3];
    // Each direction's piece of dparams at RnnParamLayout's `member` (+ skip), `n` elements.
    auto per_dir = [&](Index RnnParamOffsets::*member, int64_t skip, int64_t n,
                       std::vector<int64_t> dims) {
      std::vector<xla::XlaOp> dirs;
      for (int64_t d = 0; d < D; ++d) {
        const Index at = RnnParamLayout(s, d).*member + skip;
        dirs.push_back(xla::Reshape(Rows(dparams, at, at + n), dims));
      }
      return xla::ConcatInDim(b, dirs, 0);
    };
    int out = 0;
    auto set = [&](xla::XlaOp v) { ctx->SetOutput(out++, Convert(v, t_type)); };
    set(r[0]);
    set(D == 2 ? per_dir(&RnnParamOffsets::r, 0, KN * H, {1, KN, H})
               : per_dir(&RnnParamOffsets::r, 0, KN * H, {KN, H}));
    if (shapes.W != nullptr) set(per_dir(&RnnParamOffsets::w, 0, KN * in_w, {KN, in_w}));
    if (shapes.bias != nullptr) set(per_dir(&RnnParamOffsets::bw, 0, KN, {KN}));
    if (lstm && shapes.peephole != nullptr) set(xla::Reshape(r[6], shapes.peephole->dim_sizes()));
    if (shapes.init_state != nullptr) set(FromDirMajor(r[1], D, B, H));
    if (lstm && shapes.init_cell != nullptr) set(FromDirMajor(r[2], D, B, H));
    if (!lstm && shapes.bias2 != nullptr) {
      set(per_dir(&RnnParamOffsets::br, s.gate_pos[2] * H, H, {H}));
    }
  }

  Desc desc_;
};

template <bool kGrad>
using Lstm = MpsXla<MpsLstmDescriptor, kGrad>;
template <bool kGrad>
using Gru = MpsXla<MpsGruDescriptor, kGrad>;
TFRNN_REGISTER_XLA_RNN_KERNEL("TfRnn>LSTM", Lstm<false>);
TFRNN_REGISTER_XLA_RNN_KERNEL("TfRnn>LSTMGradients", Lstm<true>);
TFRNN_REGISTER_XLA_RNN_KERNEL("TfRnn>GRU", Gru<false>);
TFRNN_REGISTER_XLA_RNN_KERNEL("TfRnn>GRUGradients", Gru<true>);

}  // namespace
}  // namespace mps
}  // namespace tfrnn
