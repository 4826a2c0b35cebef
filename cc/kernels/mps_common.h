// Shared pieces of the MPSGraph-style kernels (TfRnn>LSTM/LSTMGradients, TfRnn>GRU/
// GRUGradients): activation names, optional operands (list inputs of length 0 or 1), and the
// packing of MPSGraph's per-direction operands into the stacked-RNN engine's arguments and of
// the engine's results back into MPSGraph's layouts.
#ifndef TF_RNN_OPS_CC_KERNELS_MPS_COMMON_H_
#define TF_RNN_OPS_CC_KERNELS_MPS_COMMON_H_

#include <string>
#include <utility>
#include <vector>

#include "cc/kernels/engine_loader.h"
#include "cc/kernels/kernel_util.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tfrnn {

inline absl::Status ParseMpsAct(const std::string& name, RnnAct* act) {
  static const std::pair<const char*, RnnAct> kActs[] = {
      {"none", RnnAct::kNone},
      {"relu", RnnAct::kRelu},
      {"tanh", RnnAct::kTanh},
      {"sigmoid", RnnAct::kSigmoid},
      {"hard_sigmoid", RnnAct::kHardSigmoid}};
  for (const auto& a : kActs) {
    if (name == a.first) {
      *act = a.second;
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown activation '", name, "'"));
}

inline absl::Status GetMpsAct(tensorflow::OpKernelConstruction* c, const char* attr,
                              RnnAct* act) {
  std::string a;
  TF_RETURN_IF_ERROR(c->GetAttr(attr, &a));
  absl::Status st = ParseMpsAct(a, act);
  if (!st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "attr ", attr, ": ", st.message(), " (none, relu, tanh, sigmoid or hard_sigmoid)"));
  }
  return st;
}

// An optional operand: a list input of length 0 or 1.
inline absl::Status Optional(OpKernelContext* ctx, const char* name, const Tensor** t) {
  tensorflow::OpInputList list;
  TF_RETURN_IF_ERROR(ctx->input_list(name, &list));
  if (list.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(ctx->op_kernel().type_string(), ": ", name,
                                                   " is optional: give 0 or 1 tensors, got ",
                                                   list.size()));
  }
  *t = list.size() == 1 ? &list[0] : nullptr;
  return absl::OkStatus();
}

// MPSGraph's operands of one call (absent = null). Per direction d, W holds rows
// [d·K·H, (d+1)·K·H), R is [D, K·H, H], bias [D·K·H], states [B, D·H] with direction d in
// columns [d·H, (d+1)·H), secondary bias (gru, reset after) [D·H].
struct MpsOperands {
  const Tensor *source = nullptr, *R = nullptr, *W = nullptr, *bias = nullptr,
               *init_state = nullptr, *init_cell = nullptr, *mask = nullptr,
               *peephole = nullptr, *bias2 = nullptr;
  RnnSpec spec;
  int64_t H = 0, D = 1;
};

// Validates the operands the MPSGraph LSTM (K = 4) and GRU (K = 3) share (read into `in`
// beforehand; D from the descriptor): ranks first, then sizes (saturating counts before any
// K·H arithmetic), then shapes of source, recurrent_weight, input_weight, bias, init_state,
// init_cell and mask. Fills the spec's sizes; the caller adds its mode and options and ends
// with CheckRnnSizes.
inline absl::Status ValidateMpsShared(OpKernelContext* ctx, int64_t K, int64_t D,
                                      MpsOperands* in) {
  const std::string op = ctx->op_kernel().type_string();
  const std::string kh = absl::StrCat(K, " * hidden");
  in->D = D;
  TF_RETURN_IF_ERROR(CheckRank(
      op, "source", *in->source, 3,
      absl::StrCat("[time, batch, input] (or [time, batch, dirs * ", kh, "])").c_str()));
  const std::string r_layout = D == 2 ? absl::StrCat("[2, ", kh, ", hidden] (bidirectional)")
                                      : absl::StrCat("[", kh, ", hidden] (unidirectional)");
  TF_RETURN_IF_ERROR(CheckRank(op, "recurrent_weight", *in->R, D == 2 ? 3 : 2, r_layout.c_str()));
  const int64_t H = in->R->dim_size(D == 2 ? 2 : 1);
  in->H = H;
  if (H == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": recurrent_weight must have hidden > 0, got shape ", ShapeStr(*in->R)));
  }
  const int64_t T = in->source->dim_size(0), B = in->source->dim_size(1);
  const int64_t X = in->source->dim_size(2);
  // Dimensions first (so that K * H etc. below cannot overflow); the engine's counts last.
  TF_RETURN_IF_ERROR(CheckCounts(op, {T, B, X}, absl::StrCat("source ", ShapeStr(*in->source))));
  TF_RETURN_IF_ERROR(CheckCounts(op, {Count(H) * Count(K * D)},
                                 absl::StrCat("recurrent_weight ", ShapeStr(*in->R))));
  const int64_t KH = K * H;
  if (D == 2) {
    TF_RETURN_IF_ERROR(CheckShape(op, "recurrent_weight", *in->R, {2, KH, H}, r_layout.c_str()));
  } else {
    TF_RETURN_IF_ERROR(CheckShape(op, "recurrent_weight", *in->R, {KH, H}, r_layout.c_str()));
  }
  const std::string w_layout = absl::StrCat("[dirs * ", kh, ", input]");
  if (in->W != nullptr) {
    TF_RETURN_IF_ERROR(CheckRank(op, "input_weight", *in->W, 2, w_layout.c_str()));
    TF_RETURN_IF_ERROR(CheckShape(op, "input_weight", *in->W, {D * KH, X}, w_layout.c_str()));
  } else if (X != D * KH) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": without input_weight, source must be projected already: shape [time, batch, ",
        D * KH, "] (dirs * ", kh, "), got ", ShapeStr(*in->source)));
  }
  if (in->bias != nullptr) {
    const std::string b_layout = absl::StrCat("[dirs * ", kh, "]");
    TF_RETURN_IF_ERROR(CheckRank(op, "bias", *in->bias, 1, b_layout.c_str()));
    TF_RETURN_IF_ERROR(CheckShape(op, "bias", *in->bias, {D * KH}, b_layout.c_str()));
  }
  for (auto p : {std::make_pair("init_state", in->init_state),
                 std::make_pair("init_cell", in->init_cell)}) {
    if (p.second == nullptr) continue;
    TF_RETURN_IF_ERROR(CheckRank(op, p.first, *p.second, 2, "[batch, dirs * hidden]"));
    TF_RETURN_IF_ERROR(CheckShape(op, p.first, *p.second, {B, D * H}, "[batch, dirs * hidden]"));
  }
  if (in->mask != nullptr) {
    const Tensor& m = *in->mask;
    const bool ok = (m.dims() == 2 && m.dim_size(0) == B && m.dim_size(1) == D * H) ||
                    (m.dims() == 3 && m.dim_size(0) == T && m.dim_size(1) == B &&
                     m.dim_size(2) == D * H);
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": mask must have shape [batch, dirs * hidden] = [", B, ", ", D * H,
                       "] or [time, batch, dirs * hidden] = [", T, ", ", B, ", ", D * H,
                       "], got ", ShapeStr(m)));
    }
  }
  RnnSpec& s = in->spec;
  s.T = T;
  s.B = B;
  s.I = X;
  s.N = H;
  s.L = 1;
  s.D = D;
  s.preprojected = in->W == nullptr;
  s.training = true;
  s.has_mask = in->mask != nullptr;
  return absl::OkStatus();
}

// The gradients ops' inputs beyond the forward's operands (LSTMGradients: cell_output_fwd,
// cell_gradient, cell_output_gradient; GRUGradients: output_fwd), checked against the spec.
// The forward is recomputed from the operands, so z_state and the forward output are only
// checked (an empty tensor stands for "not kept").
struct MpsGradInputs {
  const Tensor *dy = nullptr, *z_state = nullptr, *fwd_out = nullptr;
  const Tensor *dstate = nullptr, *dcell = nullptr, *dcseq = nullptr;
};

inline absl::Status ValidateMpsGrad(OpKernelContext* ctx, const RnnSpec& s, MpsGradInputs* g) {
  const std::string op = ctx->op_kernel().type_string();
  const bool lstm = s.mode == RnnMode::kLstm;
  const int64_t T = s.T, B = s.B, H = s.N, D = s.D, K = RnnK(s);
  const char* fwd_name = lstm ? "cell_output_fwd" : "output_fwd";
  const char* seq = "[time, batch, dirs * hidden]";
  const char* fin = "[batch, dirs * hidden]";
  TF_RETURN_IF_ERROR(GetInput(ctx, "source_gradient", &g->dy));
  TF_RETURN_IF_ERROR(GetInput(ctx, "z_state", &g->z_state));
  TF_RETURN_IF_ERROR(GetInput(ctx, fwd_name, &g->fwd_out));
  TF_RETURN_IF_ERROR(Optional(ctx, "state_gradient", &g->dstate));
  if (lstm) {
    TF_RETURN_IF_ERROR(Optional(ctx, "cell_gradient", &g->dcell));
    TF_RETURN_IF_ERROR(Optional(ctx, "cell_output_gradient", &g->dcseq));
  }
  TF_RETURN_IF_ERROR(CheckRank(op, "source_gradient", *g->dy, 3, seq));
  TF_RETURN_IF_ERROR(CheckShape(op, "source_gradient", *g->dy, {T, B, D * H}, seq));
  if (g->z_state->NumElements() != 0) {
    const std::string layout = absl::StrCat("[time, batch, dirs * ", K, " * hidden]");
    TF_RETURN_IF_ERROR(CheckShape(op, "z_state", *g->z_state, {T, B, D * K * H}, layout.c_str()));
  }
  if (g->fwd_out->NumElements() != 0) {
    TF_RETURN_IF_ERROR(CheckShape(op, fwd_name, *g->fwd_out, {T, B, D * H}, seq));
  }
  if (g->dstate != nullptr) {
    TF_RETURN_IF_ERROR(CheckShape(op, "state_gradient", *g->dstate, {B, D * H}, fin));
  }
  if (g->dcell != nullptr) {
    TF_RETURN_IF_ERROR(CheckShape(op, "cell_gradient", *g->dcell, {B, D * H}, fin));
  }
  if (g->dcseq != nullptr) {
    TF_RETURN_IF_ERROR(CheckShape(op, "cell_output_gradient", *g->dcseq, {T, B, D * H}, seq));
  }
  return absl::OkStatus();
}

// The gradients ops' outputs: source and recurrent-weight gradients, and one gradient per
// optional operand that was given (each a list of length 0 or 1, in MPSGraph's order).
struct MpsGradOutputs {
  Tensor *d_source = nullptr, *d_R = nullptr, *d_W = nullptr, *d_b = nullptr;
  Tensor *d_p = nullptr, *d_s = nullptr, *d_c = nullptr, *d_b2 = nullptr;
};

inline absl::Status AllocateMpsGrad(OpKernelContext* ctx, const MpsOperands& in,
                                    MpsGradOutputs* o) {
  TF_RETURN_IF_ERROR(ctx->allocate_output(0, in.source->shape(), &o->d_source));
  TF_RETURN_IF_ERROR(ctx->allocate_output(1, in.R->shape(), &o->d_R));
  const bool lstm = in.spec.mode == RnnMode::kLstm;
  struct Grad {
    const char* list;
    const Tensor* operand;
    Tensor** out;
  };
  std::vector<Grad> grads = {{"input_weight_grad", in.W, &o->d_W},
                             {"bias_grad", in.bias, &o->d_b}};
  if (lstm) grads.push_back({"peephole_grad", in.peephole, &o->d_p});
  grads.push_back({"init_state_grad", in.init_state, &o->d_s});
  if (lstm) {
    grads.push_back({"init_cell_grad", in.init_cell, &o->d_c});
  } else {
    grads.push_back({"secondary_bias_grad", in.bias2, &o->d_b2});
  }
  for (const Grad& g : grads) {
    tensorflow::OpOutputList list;
    TF_RETURN_IF_ERROR(ctx->output_list(g.list, &list));
    if (g.operand != nullptr) TF_RETURN_IF_ERROR(list.allocate(0, g.operand->shape(), g.out));
  }
  return absl::OkStatus();
}

// Copies direction-major rows [D, B, H] to/from MPSGraph's [B, D·H] (zeros for null `from`).
template <typename A>
void ToDirMajor(const A* from, int64_t D, int64_t B, int64_t H, A* to) {
  for (int64_t d = 0; d < D; ++d) {
    for (int64_t b = 0; b < B; ++b) {
      A* dst = to + (d * B + b) * H;
      if (from != nullptr) {
        std::copy_n(from + b * D * H + d * H, H, dst);
      } else {
        std::fill_n(dst, H, A(0));
      }
    }
  }
}
template <typename A>
void FromDirMajor(const A* from, int64_t D, int64_t B, int64_t H, A* to) {
  for (int64_t d = 0; d < D; ++d) {
    for (int64_t b = 0; b < B; ++b) {
      std::copy_n(from + (d * B + b) * H, H, to + b * D * H + d * H);
    }
  }
}

// The engine's forward arguments for the operands (compute type A): params in the engine
// layout, h0/c0 as [D, B, H], zeros for absent operands, scratch for the final states and the
// reserve. Only the output sequence `y` is left for the caller.
template <typename Tt>
struct MpsPacked {
  using A = typename ComputeType<Tt>::type;
  RnnFwdArgs<A> f;

  void Pack(ComputeBridge<Tt>& br, const MpsOperands& in) {
    const RnnSpec& s = in.spec;
    const int64_t D = s.D, B = s.B, H = s.N, KN = RnnK(s) * H;
    const int64_t in_w = s.preprojected ? 0 : s.I;
    const bool lstm = s.mode == RnnMode::kLstm;
    f.x = br.In(*in.source);
    A* params = br.Scratch(RnnParamsSize(s));
    A* h0 = br.Scratch(D * B * H);
    A* c0 = lstm ? br.Scratch(D * B * H) : nullptr;
    f.params = params;
    f.h0 = h0;
    f.c0 = c0;
    const A* W = in.W != nullptr ? br.In(*in.W) : nullptr;
    const A* R = br.In(*in.R);
    const A* bias = in.bias != nullptr ? br.In(*in.bias) : nullptr;
    const A* bias2 = in.bias2 != nullptr ? br.In(*in.bias2) : nullptr;
    const A* st = in.init_state != nullptr ? br.In(*in.init_state) : nullptr;
    const A* ce = in.init_cell != nullptr ? br.In(*in.init_cell) : nullptr;
    f.peephole = in.peephole != nullptr ? br.In(*in.peephole) : nullptr;
    f.mask = in.mask != nullptr ? br.In(*in.mask) : nullptr;
    f.mask_per_step = in.mask != nullptr && in.mask->dims() == 3;
    f.hn = br.Scratch(D * B * H);
    f.cn = lstm ? br.Scratch(D * B * H) : nullptr;
    f.reserve = br.Scratch(RnnReserveSize(s));
    if (!br.status().ok()) return;
    for (int64_t d = 0; d < D; ++d) {
      const RnnParamOffsets o = RnnParamLayout(s, d);
      if (W != nullptr) std::copy_n(W + d * KN * in_w, KN * in_w, params + o.w);
      std::copy_n(R + d * KN * H, KN * H, params + o.r);
      if (bias != nullptr) {
        std::copy_n(bias + d * KN, KN, params + o.bw);
      } else {
        std::fill_n(params + o.bw, KN, A(0));
      }
      std::fill_n(params + o.br, KN, A(0));
      if (bias2 != nullptr) {  // the candidate's recurrent bias
        std::copy_n(bias2 + d * H, H, params + o.br + s.gate_pos[2] * H);
      }
    }
    ToDirMajor<A>(st, D, B, H, h0);
    if (lstm) ToDirMajor<A>(ce, D, B, H, c0);
  }
};

// The backward arguments that restate the forward's (operands, params, reserve, mask).
template <typename A>
RnnBwdArgs<A> BwdArgsOf(const RnnFwdArgs<A>& f) {
  RnnBwdArgs<A> g;
  g.lengths = f.lengths;
  g.x = f.x;
  g.h0 = f.h0;
  g.c0 = f.c0;
  g.params = f.params;
  g.reserve = f.reserve;
  g.peephole = f.peephole;
  g.mask = f.mask;
  g.mask_per_step = f.mask_per_step;
  return g;
}

// The inverse of MpsPacked::Pack for gradients: the engine's dparams into MPSGraph's R [D,
// K·H, H], W [D·K·H, I], bias [D·K·H] and secondary bias [D·H] layouts (null = not wanted).
template <typename A>
void UnpackParamGrads(const RnnSpec& s, const A* dparams, A* dR, A* dW, A* db, A* db2) {
  const int64_t H = s.N, KN = RnnK(s) * H, in_w = s.preprojected ? 0 : s.I;
  for (int64_t d = 0; d < s.D; ++d) {
    const RnnParamOffsets o = RnnParamLayout(s, d);
    std::copy_n(dparams + o.r, KN * H, dR + d * KN * H);
    if (dW != nullptr) std::copy_n(dparams + o.w, KN * in_w, dW + d * KN * in_w);
    if (db != nullptr) std::copy_n(dparams + o.bw, KN, db + d * KN);
    if (db2 != nullptr) std::copy_n(dparams + o.br + s.gate_pos[2] * H, H, db2 + d * H);
  }
}

// Interleaves the per-direction gate activations [T·B, K·H] of the reserve into MPSGraph's
// z_state [T, B, D·K·H].
template <typename A>
void ZStateFromReserve(const RnnSpec& s, const A* reserve, A* z) {
  const int64_t KN = RnnK(s) * s.N, TB = s.T * s.B;
  for (int64_t d = 0; d < s.D; ++d) {
    const A* acts = reserve + RnnReserveLayout(s, d).acts;
    for (int64_t r = 0; r < TB; ++r) {
      std::copy_n(acts + r * KN, KN, z + (r * s.D + d) * KN);
    }
  }
}

// A CPU gradients op on the engine: the forward recomputed from the packed operands, then the
// backward, into *g (whose dparams, dh0, dc0 and dpeephole UnpackMpsGrad copies out).
template <typename Tt>
absl::Status RunMpsGrad(OpKernelContext* ctx, ComputeBridge<Tt>& br, MpsPacked<Tt>& pk,
                        const RnnSpec& s, const MpsGradInputs& gi, Tensor* d_source,
                        RnnBwdArgs<typename ComputeType<Tt>::type>* g) {
  using A = typename ComputeType<Tt>::type;
  const bool lstm = s.mode == RnnMode::kLstm;
  const int64_t D = s.D, B = s.B, H = s.N;
  RnnFwdArgs<A>& f = pk.f;
  f.y = br.Scratch(s.T * B * D * H);
  A* fws = br.Scratch(RnnFwdWorkspaceSize(SpecFor<Tt>(s)));
  *g = BwdArgsOf(f);
  // Final-state gradients as [D, B, H].
  A* dhn = br.Scratch(D * B * H);
  A* dcn = lstm ? br.Scratch(D * B * H) : nullptr;
  const A* dst = gi.dstate != nullptr ? br.In(*gi.dstate) : nullptr;
  const A* dce = gi.dcell != nullptr ? br.In(*gi.dcell) : nullptr;
  g->dy = br.In(*gi.dy);
  g->dhn = dhn;
  g->dx = br.Out(d_source);
  g->dh0 = br.Scratch(D * B * H);
  g->dparams = br.Scratch(RnnParamsSize(s));
  if (lstm) {
    g->dcn = dcn;
    g->dc_seq = gi.dcseq != nullptr ? br.In(*gi.dcseq) : nullptr;
    g->dc0 = br.Scratch(D * B * H);
    g->dpeephole = br.Scratch(D * 4 * H);
  }
  A* bws = br.Scratch(RnnBwdWorkspaceSize(s));
  TF_RETURN_IF_ERROR(br.status());
  ToDirMajor<A>(dst, D, B, H, dhn);
  if (lstm) ToDirMajor<A>(dce, D, B, H, dcn);
  const EngineApi* engine;
  TF_RETURN_IF_ERROR(GetEngine(&engine));
  TfHostPool pool(ctx);
  EngineFns<A>::RnnFwd(*engine)(pool, SpecFor<Tt>(s), f, fws);
  EngineFns<A>::RnnBwd(*engine)(pool, SpecFor<Tt>(s), *g, bws);
  return absl::OkStatus();
}

// The engine's gradients into MPSGraph's layouts (the outputs AllocateMpsGrad made).
template <typename Tt>
absl::Status UnpackMpsGrad(ComputeBridge<Tt>& br, const RnnSpec& s,
                           const RnnBwdArgs<typename ComputeType<Tt>::type>& g,
                           const MpsGradOutputs& o) {
  using A = typename ComputeType<Tt>::type;
  const int64_t D = s.D, B = s.B, H = s.N;
  auto out = [&](Tensor* t) { return t != nullptr ? br.Out(t) : nullptr; };
  A* dR = br.Out(o.d_R);
  A *dW = out(o.d_W), *db = out(o.d_b), *dp = out(o.d_p), *ds = out(o.d_s), *dc = out(o.d_c),
    *db2 = out(o.d_b2);
  TF_RETURN_IF_ERROR(br.status());
  UnpackParamGrads<A>(s, g.dparams, dR, dW, db, db2);
  if (dp != nullptr) std::copy_n(g.dpeephole, D * 4 * H, dp);
  if (ds != nullptr) FromDirMajor<A>(g.dh0, D, B, H, ds);
  if (dc != nullptr) FromDirMajor<A>(g.dc0, D, B, H, dc);
  return absl::OkStatus();
}

// A CPU gradients op after its operands were validated: the extra inputs checked, the outputs
// allocated, the engine run, the gradients unpacked.
template <typename Tt>
absl::Status ComputeMpsGrad(OpKernelContext* ctx, const MpsOperands& in) {
  using A = typename ComputeType<Tt>::type;
  const RnnSpec& s = in.spec;
  MpsGradInputs gi;
  TF_RETURN_IF_ERROR(ValidateMpsGrad(ctx, s, &gi));
  MpsGradOutputs o;
  TF_RETURN_IF_ERROR(AllocateMpsGrad(ctx, in, &o));
  ComputeBridge<Tt> br(ctx);
  MpsPacked<Tt> pk;
  pk.Pack(br, in);
  RnnBwdArgs<A> g;
  TF_RETURN_IF_ERROR(RunMpsGrad(ctx, br, pk, s, gi, o.d_source, &g));
  TF_RETURN_IF_ERROR(UnpackMpsGrad(br, s, g, o));
  br.Finish();
  return absl::OkStatus();
}

// The CPU gradients op of an MPSGraph family: Desc reads its attrs, Validate checks the
// operands and describes the layer.
template <typename Tt, typename Desc,
          absl::Status (*Validate)(OpKernelContext*, const Desc&, MpsOperands*)>
class MpsGradOp : public tensorflow::OpKernel {
 public:
  explicit MpsGradOp(tensorflow::OpKernelConstruction* c) : OpKernel(c) {
    OP_REQUIRES_OK(c, desc_.Read(c));
  }

  void Compute(OpKernelContext* ctx) override {
    MpsOperands in;
    OP_REQUIRES_OK(ctx, Validate(ctx, desc_, &in));
    OP_REQUIRES_OK(ctx, ComputeMpsGrad<Tt>(ctx, in));
  }

 private:
  Desc desc_;
};

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_KERNELS_MPS_COMMON_H_
