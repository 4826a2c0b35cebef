// CPU kernels of the MPSGraph-style LSTM (TfRnn>LSTM, TfRnn>LSTMGradients): a face of the
// stacked-RNN engine with MPSGraph's gate orders, per-gate activations, peephole on every gate,
// recurrent mask, optional input weight and reverse/bidirectional layouts (SEMANTICS.md §8).
// The weights are packed into the engine's params layout per call (O(weights), negligible
// next to the sequence); LSTMGradients recomputes the forward activations from its operands.
#include <string>
#include <vector>

#include "cc/kernels/engine_loader.h"
#include "cc/kernels/kernel_util.h"
#include "cc/kernels/mps_common.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tfrnn {
namespace {

using ::tensorflow::DEVICE_CPU;
using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpOutputList;

struct Descriptor {
  bool reverse = false, bidirectional = false, produce_cell = false, training = false;
  bool forget_gate_last = false;
  RnnAct gate_act[4];  // i, f, c (the "z" cell gate), o
  RnnAct cell_act;

  absl::Status Read(OpKernelConstruction* c) {
    TF_RETURN_IF_ERROR(c->GetAttr("reverse", &reverse));
    TF_RETURN_IF_ERROR(c->GetAttr("bidirectional", &bidirectional));
    TF_RETURN_IF_ERROR(c->GetAttr("produce_cell", &produce_cell));
    TF_RETURN_IF_ERROR(c->GetAttr("training", &training));
    TF_RETURN_IF_ERROR(c->GetAttr("forget_gate_last", &forget_gate_last));
    const char* names[4] = {"input_gate_activation", "forget_gate_activation",
                            "cell_gate_activation", "output_gate_activation"};
    for (int q = 0; q < 4; ++q) TF_RETURN_IF_ERROR(GetMpsAct(c, names[q], &gate_act[q]));
    return GetMpsAct(c, "activation", &cell_act);
  }
};

using LstmOperands = MpsOperands;

absl::Status ValidateLstm(OpKernelContext* ctx, const Descriptor& desc, LstmOperands* in) {
  const std::string op = ctx->op_kernel().type_string();
  TF_RETURN_IF_ERROR(GetInput(ctx, "source", &in->source));
  TF_RETURN_IF_ERROR(GetInput(ctx, "recurrent_weight", &in->R));
  TF_RETURN_IF_ERROR(Optional(ctx, "input_weight", &in->W));
  TF_RETURN_IF_ERROR(Optional(ctx, "bias", &in->bias));
  TF_RETURN_IF_ERROR(Optional(ctx, "init_state", &in->init_state));
  TF_RETURN_IF_ERROR(Optional(ctx, "init_cell", &in->init_cell));
  TF_RETURN_IF_ERROR(Optional(ctx, "mask", &in->mask));
  TF_RETURN_IF_ERROR(Optional(ctx, "peephole", &in->peephole));
  const int64_t D = desc.bidirectional ? 2 : 1;
  TF_RETURN_IF_ERROR(ValidateMpsShared(ctx, 4, D, in));
  const int64_t H = in->H;
  if (in->peephole != nullptr) {
    if (D == 2) {
      TF_RETURN_IF_ERROR(
          CheckRank(op, "peephole", *in->peephole, 2, "[2, 4 * hidden] (bidirectional)"));
      TF_RETURN_IF_ERROR(CheckShape(op, "peephole", *in->peephole, {2, 4 * H},
                                    "[2, 4 * hidden] (bidirectional)"));
    } else {
      TF_RETURN_IF_ERROR(CheckRank(op, "peephole", *in->peephole, 1, "[4 * hidden]"));
      TF_RETURN_IF_ERROR(CheckShape(op, "peephole", *in->peephole, {4 * H}, "[4 * hidden]"));
    }
  }
  RnnSpec& s = in->spec;
  s.mode = RnnMode::kLstm;
  s.reverse = desc.reverse && D == 1;
  if (desc.forget_gate_last) {  // i, z, f, o
    s.gate_pos[0] = 0;
    s.gate_pos[1] = 2;
    s.gate_pos[2] = 1;
    s.gate_pos[3] = 3;
  }
  for (int q = 0; q < 4; ++q) s.gate_act[q] = desc.gate_act[q];
  s.cell_act = desc.cell_act;
  s.peephole = in->peephole != nullptr;
  return CheckRnnSizes(op, s,
                       absl::StrCat("source ", ShapeStr(*in->source), ", recurrent_weight ",
                                    ShapeStr(*in->R), ", hidden ", H));
}

template <typename Tt>
class MpsLstmOp : public OpKernel {
 public:
  using A = typename ComputeType<Tt>::type;
  explicit MpsLstmOp(OpKernelConstruction* c) : OpKernel(c) { OP_REQUIRES_OK(c, desc_.Read(c)); }

  void Compute(OpKernelContext* ctx) override {
    LstmOperands in;
    OP_REQUIRES_OK(ctx, ValidateLstm(ctx, desc_, &in));
    const RnnSpec& s = in.spec;
    const int64_t T = s.T, B = s.B, H = s.N, D = s.D;
    Tensor *state, *cell, *z;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({T, B, D * H}), &state));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(
                            1, desc_.produce_cell ? TensorShape({T, B, D * H}) : TensorShape({0}),
                            &cell));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(
                            2, desc_.training ? TensorShape({T, B, D * 4 * H}) : TensorShape({0}),
                            &z));
    ComputeBridge<Tt> br(ctx);
    MpsPacked<Tt> pk;
    pk.Pack(br, in);
    RnnFwdArgs<A>& a = pk.f;
    a.y = br.Out(state);
    A* cell_out = desc_.produce_cell ? br.Out(cell) : nullptr;
    A* z_out = desc_.training ? br.Out(z) : nullptr;
    A* ws = br.Scratch(RnnFwdWorkspaceSize(SpecFor<Tt>(s)));
    OP_REQUIRES_OK(ctx, br.status());
    const EngineApi* engine;
    OP_REQUIRES_OK(ctx, GetEngine(&engine));
    TfHostPool pool(ctx);
    EngineFns<A>::RnnFwd(*engine)(pool, SpecFor<Tt>(s), a, ws);
    // Interleave the per-direction activations and cell states into MPSGraph's layouts.
    if (z_out != nullptr) ZStateFromReserve<A>(s, a.reserve, z_out);
    for (int64_t d = 0; d < D && cell_out != nullptr; ++d) {
      const A* cs = a.reserve + RnnReserveLayout(s, d).aux;
      for (int64_t r = 0; r < T * B; ++r) std::copy_n(cs + r * H, H, cell_out + (r * D + d) * H);
    }
    br.Finish();
  }

 private:
  Descriptor desc_;
};

template <typename Tt>
class MpsLstmGradOp : public OpKernel {
 public:
  using A = typename ComputeType<Tt>::type;
  explicit MpsLstmGradOp(OpKernelConstruction* c) : OpKernel(c) {
    OP_REQUIRES_OK(c, desc_.Read(c));
  }

  void Compute(OpKernelContext* ctx) override {
    const std::string op = type_string();
    LstmOperands in;
    OP_REQUIRES_OK(ctx, ValidateLstm(ctx, desc_, &in));
    const RnnSpec& s = in.spec;
    const int64_t T = s.T, B = s.B, H = s.N, D = s.D;
    const Tensor *dy, *z_state, *cell_fwd, *dstate = nullptr, *dcell = nullptr, *dcseq = nullptr;
    OP_REQUIRES_OK(ctx, GetInput(ctx, "source_gradient", &dy));
    OP_REQUIRES_OK(ctx, GetInput(ctx, "z_state", &z_state));
    OP_REQUIRES_OK(ctx, GetInput(ctx, "cell_output_fwd", &cell_fwd));
    OP_REQUIRES_OK(ctx, Optional(ctx, "state_gradient", &dstate));
    OP_REQUIRES_OK(ctx, Optional(ctx, "cell_gradient", &dcell));
    OP_REQUIRES_OK(ctx, Optional(ctx, "cell_output_gradient", &dcseq));
    OP_REQUIRES_OK(ctx, CheckShape(op, "source_gradient", *dy, {T, B, D * H},
                                   "[time, batch, dirs * hidden]"));
    // The forward is recomputed from the operands; z_state and cell_output_fwd are checked
    // (an empty tensor stands for "not kept").
    if (z_state->NumElements() != 0) {
      OP_REQUIRES_OK(ctx, CheckShape(op, "z_state", *z_state, {T, B, D * 4 * H},
                                     "[time, batch, dirs * 4 * hidden]"));
    }
    if (cell_fwd->NumElements() != 0) {
      OP_REQUIRES_OK(ctx, CheckShape(op, "cell_output_fwd", *cell_fwd, {T, B, D * H},
                                     "[time, batch, dirs * hidden]"));
    }
    for (auto p : {std::make_pair("state_gradient", dstate),
                   std::make_pair("cell_gradient", dcell)}) {
      if (p.second == nullptr) continue;
      OP_REQUIRES_OK(ctx, CheckShape(op, p.first, *p.second, {B, D * H},
                                     "[batch, dirs * hidden]"));
    }
    if (dcseq != nullptr) {
      OP_REQUIRES_OK(ctx, CheckShape(op, "cell_output_gradient", *dcseq, {T, B, D * H},
                                     "[time, batch, dirs * hidden]"));
    }
    // Outputs (MPSGraph order).
    Tensor *d_source, *d_R;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, in.source->shape(), &d_source));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, in.R->shape(), &d_R));
    OpOutputList o_w, o_b, o_p, o_s, o_c;
    OP_REQUIRES_OK(ctx, ctx->output_list("input_weight_grad", &o_w));
    OP_REQUIRES_OK(ctx, ctx->output_list("bias_grad", &o_b));
    OP_REQUIRES_OK(ctx, ctx->output_list("peephole_grad", &o_p));
    OP_REQUIRES_OK(ctx, ctx->output_list("init_state_grad", &o_s));
    OP_REQUIRES_OK(ctx, ctx->output_list("init_cell_grad", &o_c));
    Tensor *d_W = nullptr, *d_b = nullptr, *d_p = nullptr, *d_s = nullptr, *d_c = nullptr;
    if (in.W) OP_REQUIRES_OK(ctx, o_w.allocate(0, in.W->shape(), &d_W));
    if (in.bias) OP_REQUIRES_OK(ctx, o_b.allocate(0, in.bias->shape(), &d_b));
    if (in.peephole) OP_REQUIRES_OK(ctx, o_p.allocate(0, in.peephole->shape(), &d_p));
    if (in.init_state) OP_REQUIRES_OK(ctx, o_s.allocate(0, in.init_state->shape(), &d_s));
    if (in.init_cell) OP_REQUIRES_OK(ctx, o_c.allocate(0, in.init_cell->shape(), &d_c));

    ComputeBridge<Tt> br(ctx);
    MpsPacked<Tt> pk;
    pk.Pack(br, in);
    RnnFwdArgs<A>& f = pk.f;
    f.y = br.Scratch(T * B * D * H);
    A* fws = br.Scratch(RnnFwdWorkspaceSize(SpecFor<Tt>(s)));
    // Final-state gradients as [D, B, H].
    A* dhn = br.Scratch(D * B * H);
    A* dcn = br.Scratch(D * B * H);
    const A* dst = dstate != nullptr ? br.In(*dstate) : nullptr;
    const A* dce = dcell != nullptr ? br.In(*dcell) : nullptr;
    RnnBwdArgs<A> g = BwdArgsOf(f);
    g.dy = br.In(*dy);
    g.dhn = dhn;
    g.dcn = dcn;
    g.dc_seq = dcseq != nullptr ? br.In(*dcseq) : nullptr;
    g.dx = br.Out(d_source);
    g.dh0 = br.Scratch(D * B * H);
    g.dc0 = br.Scratch(D * B * H);
    g.dparams = br.Scratch(RnnParamsSize(s));
    A* dpeep = br.Scratch(D * 4 * H);
    g.dpeephole = dpeep;
    A* bws = br.Scratch(RnnBwdWorkspaceSize(s));
    OP_REQUIRES_OK(ctx, br.status());
    ToDirMajor<A>(dst, D, B, H, dhn);
    ToDirMajor<A>(dce, D, B, H, dcn);
    const EngineApi* engine;
    OP_REQUIRES_OK(ctx, GetEngine(&engine));
    TfHostPool pool(ctx);
    EngineFns<A>::RnnFwd(*engine)(pool, SpecFor<Tt>(s), f, fws);
    EngineFns<A>::RnnBwd(*engine)(pool, SpecFor<Tt>(s), g, bws);
    // Unpack into MPSGraph's layouts.
    A* dR = br.Out(d_R);
    A* dW = d_W ? br.Out(d_W) : nullptr;
    A* db = d_b ? br.Out(d_b) : nullptr;
    A* dp = d_p ? br.Out(d_p) : nullptr;
    A* ds = d_s ? br.Out(d_s) : nullptr;
    A* dc = d_c ? br.Out(d_c) : nullptr;
    OP_REQUIRES_OK(ctx, br.status());
    UnpackParamGrads<A>(s, g.dparams, dR, dW, db, nullptr);
    if (dp) std::copy_n(dpeep, D * 4 * H, dp);
    if (ds) FromDirMajor<A>(g.dh0, D, B, H, ds);
    if (dc) FromDirMajor<A>(g.dc0, D, B, H, dc);
    br.Finish();
  }

 private:
  Descriptor desc_;
};

#define TFRNN_REGISTER_MPS(T)                                                               \
  REGISTER_KERNEL_BUILDER(Name("TfRnn>LSTM").Device(DEVICE_CPU).TypeConstraint<T>("T"),     \
                          MpsLstmOp<T>);                                                    \
  REGISTER_KERNEL_BUILDER(                                                                  \
      Name("TfRnn>LSTMGradients").Device(DEVICE_CPU).TypeConstraint<T>("T"), MpsLstmGradOp<T>);
TFRNN_REGISTER_MPS(Eigen::half)
TFRNN_REGISTER_MPS(Eigen::bfloat16)
TFRNN_REGISTER_MPS(float)
TFRNN_REGISTER_MPS(double)
#undef TFRNN_REGISTER_MPS

#ifdef TFRNN_WITH_CUDA
#include "cc/kernels/mps_lstm_gpu_kernels.inc"  // GPU kernels (TfRnn> names)
#endif

}  // namespace
}  // namespace tfrnn
