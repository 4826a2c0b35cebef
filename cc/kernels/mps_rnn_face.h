// The op kernels of the MPSGraph-style LSTM (TfRnn>LSTM, LSTMGradients) and GRU (TfRnn>GRU,
// GRUGradients) on either device: activation names, optional operands (list inputs of length
// 0 or 1), the descriptors (attrs), the validation of every op's operands into the stacked-RNN
// engine's spec, the outputs and the kernel classes over the device's computations
// (mps_common.h: CPU, mps_gpu_ops.h: CUDA), registered by mps_{lstm,gru}[_gpu]_kernels.cc.
#ifndef TF_RNN_OPS_CC_KERNELS_MPS_RNN_FACE_H_
#define TF_RNN_OPS_CC_KERNELS_MPS_RNN_FACE_H_

#include <string>
#include <utility>
#include <vector>

#include "cc/kernels/kernel_util.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tfrnn {
namespace mps {

inline absl::Status ParseMpsAct(const std::string& name, RnnAct* act) {
  static const std::pair<const char*, RnnAct> kActs[] = {{"none", RnnAct::kNone},
                                                         {"relu", RnnAct::kRelu},
                                                         {"tanh", RnnAct::kTanh},
                                                         {"sigmoid", RnnAct::kSigmoid},
                                                         {"hard_sigmoid", RnnAct::kHardSigmoid}};
  if (LookupName(kActs, name, act)) return absl::OkStatus();
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

// The shapes of MPSGraph's operands of one call (absent = null), for the TensorFlow and the XLA
// kernels. Per direction d, W holds rows [d·K·H, (d+1)·K·H), R is [D, K·H, H], bias [D·K·H],
// states [B, D·H] with direction d in columns [d·H, (d+1)·H), secondary bias (gru, reset
// after) [D·H].
struct MpsShapes {
  const TensorShape *source = nullptr, *R = nullptr, *W = nullptr, *bias = nullptr,
                    *init_state = nullptr, *init_cell = nullptr, *mask = nullptr,
                    *peephole = nullptr, *bias2 = nullptr;
};

// What the validation makes of them: the engine's spec, the hidden size and directions.
struct MpsLayout {
  RnnSpec spec;
  int64_t H = 0, D = 1;
  bool mask_per_step = false;  // the mask is [T, B, D·H] (else [B, D·H] for every step)
};

// The shape of an optional tensor (null: absent).
inline const TensorShape* ShapeOrNull(const Tensor* t) {
  return t != nullptr ? &t->shape() : nullptr;
}

// The operands themselves (TensorFlow kernels) and their layout.
struct MpsOperands : MpsLayout {
  const Tensor *source = nullptr, *R = nullptr, *W = nullptr, *bias = nullptr,
               *init_state = nullptr, *init_cell = nullptr, *mask = nullptr,
               *peephole = nullptr, *bias2 = nullptr;

  MpsShapes Shapes() const {
    return {ShapeOrNull(source),     ShapeOrNull(R),         ShapeOrNull(W),
            ShapeOrNull(bias),       ShapeOrNull(init_state), ShapeOrNull(init_cell),
            ShapeOrNull(mask),       ShapeOrNull(peephole),  ShapeOrNull(bias2)};
  }
};

// What both descriptors start with (the attrs reverse, bidirectional and training).
struct MpsDescriptorBase {
  bool reverse = false, bidirectional = false, training = false;

  absl::Status Read(OpKernelConstruction* c) {
    TF_RETURN_IF_ERROR(c->GetAttr("reverse", &reverse));
    TF_RETURN_IF_ERROR(c->GetAttr("bidirectional", &bidirectional));
    return c->GetAttr("training", &training);
  }
};

// The family's optional operands in input order (K = 4: the LSTM's, with init_cell and
// peephole; K = 3: the GRU's, with secondary_bias), each with its slot in *s (MpsShapes or
// MpsOperands: P is the slot's pointer type).
template <typename P, typename S>
std::vector<std::pair<const char*, P*>> MpsOptionalSlots(int64_t K, S* s) {
  std::vector<std::pair<const char*, P*>> v = {
      {"input_weight", &s->W}, {"bias", &s->bias}, {"init_state", &s->init_state}};
  if (K == 4) v.push_back({"init_cell", &s->init_cell});
  v.push_back({"mask", &s->mask});
  v.push_back(K == 4 ? std::make_pair("peephole", &s->peephole)
                     : std::make_pair("secondary_bias", &s->bias2));
  return v;
}

// The error for an optional operand given as a list of n > 1 tensors.
inline absl::Status OptionalListError(const std::string& op, const char* name, int64_t n) {
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": ", name, " is optional: give 0 or 1 tensors, got ", n));
}

// An optional operand: a list input of length 0 or 1.
inline absl::Status Optional(OpKernelContext* ctx, const char* name, const Tensor** t) {
  tensorflow::OpInputList list;
  TF_RETURN_IF_ERROR(ctx->input_list(name, &list));
  if (list.size() > 1) {
    return OptionalListError(ctx->op_kernel().type_string(), name, list.size());
  }
  *t = list.size() == 1 ? &list[0] : nullptr;
  return absl::OkStatus();
}

// Reads the operands of the MPSGraph LSTM (K = 4) or GRU (K = 3) from the kernel's inputs.
inline absl::Status ReadMpsOperands(OpKernelContext* ctx, int64_t K, MpsOperands* in) {
  TF_RETURN_IF_ERROR(GetInput(ctx, "source", &in->source));
  TF_RETURN_IF_ERROR(GetInput(ctx, "recurrent_weight", &in->R));
  for (const auto& [name, slot] : MpsOptionalSlots<const Tensor*>(K, in)) {
    TF_RETURN_IF_ERROR(Optional(ctx, name, slot));
  }
  return absl::OkStatus();
}

// Validates the shapes of the operands that both the MPSGraph LSTM (K = 4: init_cell,
// peephole) and GRU (K = 3: secondary_bias) have (D and reverse from the descriptor): ranks
// first, then sizes (saturating counts before any K·H arithmetic), then shapes of source,
// recurrent_weight, input_weight, bias, init_state, init_cell and mask. Fills the spec's sizes
// and direction; the caller checks its own operands, adds its mode and options and ends with
// CheckMpsSizes.
inline absl::Status ValidateMpsShared(const std::string& op, int64_t K,
                                      const MpsDescriptorBase& desc, const MpsShapes& in,
                                      MpsLayout* out) {
  const int64_t D = desc.bidirectional ? 2 : 1;
  const std::string kh = absl::StrCat(K, " * hidden");
  out->D = D;
  TF_RETURN_IF_ERROR(CheckRank(
      op, "source", *in.source, 3,
      absl::StrCat("[time, batch, input] (or [time, batch, dirs * ", kh, "])").c_str()));
  const std::string r_layout = D == 2 ? absl::StrCat("[2, ", kh, ", hidden] (bidirectional)")
                                      : absl::StrCat("[", kh, ", hidden] (unidirectional)");
  TF_RETURN_IF_ERROR(CheckRank(op, "recurrent_weight", *in.R, D == 2 ? 3 : 2, r_layout.c_str()));
  const int64_t H = in.R->dim_size(D == 2 ? 2 : 1);
  out->H = H;
  if (H == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": recurrent_weight must have hidden > 0, got shape ", ShapeStr(*in.R)));
  }
  const int64_t T = in.source->dim_size(0), B = in.source->dim_size(1);
  const int64_t X = in.source->dim_size(2);
  // Dimensions first (so that K * H etc. below cannot overflow); the engine's counts last.
  TF_RETURN_IF_ERROR(CheckCounts(op, {T, B, X}, absl::StrCat("source ", ShapeStr(*in.source))));
  TF_RETURN_IF_ERROR(CheckCounts(op, {Count(H) * Count(K * D)},
                                 absl::StrCat("recurrent_weight ", ShapeStr(*in.R))));
  const int64_t KH = K * H;
  if (D == 2) {
    TF_RETURN_IF_ERROR(CheckShape(op, "recurrent_weight", *in.R, {2, KH, H}, r_layout.c_str()));
  } else {
    TF_RETURN_IF_ERROR(CheckShape(op, "recurrent_weight", *in.R, {KH, H}, r_layout.c_str()));
  }
  const std::string w_layout = absl::StrCat("[dirs * ", kh, ", input]");
  if (in.W != nullptr) {
    TF_RETURN_IF_ERROR(CheckRank(op, "input_weight", *in.W, 2, w_layout.c_str()));
    TF_RETURN_IF_ERROR(CheckShape(op, "input_weight", *in.W, {D * KH, X}, w_layout.c_str()));
  } else if (X != D * KH) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": without input_weight, source must be projected already: shape [time, batch, ",
        D * KH, "] (dirs * ", kh, "), got ", ShapeStr(*in.source)));
  }
  if (in.bias != nullptr) {
    const std::string b_layout = absl::StrCat("[dirs * ", kh, "]");
    TF_RETURN_IF_ERROR(CheckRank(op, "bias", *in.bias, 1, b_layout.c_str()));
    TF_RETURN_IF_ERROR(CheckShape(op, "bias", *in.bias, {D * KH}, b_layout.c_str()));
  }
  for (auto p : {std::make_pair("init_state", in.init_state),
                 std::make_pair("init_cell", in.init_cell)}) {
    if (p.second == nullptr) continue;
    TF_RETURN_IF_ERROR(CheckRank(op, p.first, *p.second, 2, "[batch, dirs * hidden]"));
    TF_RETURN_IF_ERROR(CheckShape(op, p.first, *p.second, {B, D * H}, "[batch, dirs * hidden]"));
  }
  if (in.mask != nullptr) {
    const TensorShape& m = *in.mask;
    const bool ok = (m.dims() == 2 && m.dim_size(0) == B && m.dim_size(1) == D * H) ||
                    (m.dims() == 3 && m.dim_size(0) == T && m.dim_size(1) == B &&
                     m.dim_size(2) == D * H);
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": mask must have shape [batch, dirs * hidden] = [", B, ", ", D * H,
                       "] or [time, batch, dirs * hidden] = [", T, ", ", B, ", ", D * H,
                       "], got ", ShapeStr(m)));
    }
    out->mask_per_step = m.dims() == 3;
  }
  RnnSpec& s = out->spec;
  s.T = T;
  s.B = B;
  s.I = X;
  s.H = H;
  s.L = 1;
  s.D = D;
  s.preprojected = in.W == nullptr;
  s.training = true;
  s.has_mask = in.mask != nullptr;
  s.reverse = desc.reverse && D == 1;
  return absl::OkStatus();
}

// The size check that ends the validation of a forward's operands.
inline absl::Status CheckMpsSizes(const std::string& op, const MpsShapes& in,
                                  const MpsLayout& out) {
  return CheckRnnSizes(op, out.spec,
                       absl::StrCat("source ", ShapeStr(*in.source), ", recurrent_weight ",
                                    ShapeStr(*in.R), ", hidden ", out.H));
}

// The shapes of the gradients ops' inputs beyond the forward's operands (LSTMGradients:
// cell_output_fwd, cell_gradient, cell_output_gradient; GRUGradients: output_fwd; absent =
// null). The forward is recomputed from the operands, so z_state and the forward output are
// only checked (an empty tensor stands for "not kept").
struct MpsGradShapes {
  const TensorShape *dy = nullptr, *z_state = nullptr, *fwd_out = nullptr;
  const TensorShape *dstate = nullptr, *dcell = nullptr, *dcseq = nullptr;
};

// The names of those inputs (forward output, optional ones) for the family of spec s.
inline const char* MpsFwdOutName(const RnnSpec& s) {
  return s.mode == RnnMode::kLstm ? "cell_output_fwd" : "output_fwd";
}
template <typename P, typename S>
std::vector<std::pair<const char*, P*>> MpsGradOptionalSlots(const RnnSpec& s, S* g) {
  std::vector<std::pair<const char*, P*>> v = {{"state_gradient", &g->dstate}};
  if (s.mode == RnnMode::kLstm) {
    v.push_back({"cell_gradient", &g->dcell});
    v.push_back({"cell_output_gradient", &g->dcseq});
  }
  return v;
}

inline absl::Status ValidateMpsGradShapes(const std::string& op, const RnnSpec& s,
                                          const MpsGradShapes& g) {
  const int64_t T = s.T, B = s.B, H = s.H, D = s.D, K = RnnK(s);
  const char* fwd_name = MpsFwdOutName(s);
  const char* seq = "[time, batch, dirs * hidden]";
  const char* fin = "[batch, dirs * hidden]";
  TF_RETURN_IF_ERROR(CheckRank(op, "source_gradient", *g.dy, 3, seq));
  TF_RETURN_IF_ERROR(CheckShape(op, "source_gradient", *g.dy, {T, B, D * H}, seq));
  if (g.z_state->num_elements() != 0) {
    const std::string layout = absl::StrCat("[time, batch, dirs * ", K, " * hidden]");
    TF_RETURN_IF_ERROR(CheckShape(op, "z_state", *g.z_state, {T, B, D * K * H}, layout.c_str()));
  }
  if (g.fwd_out->num_elements() != 0) {
    TF_RETURN_IF_ERROR(CheckShape(op, fwd_name, *g.fwd_out, {T, B, D * H}, seq));
  }
  if (g.dstate != nullptr) {
    TF_RETURN_IF_ERROR(CheckShape(op, "state_gradient", *g.dstate, {B, D * H}, fin));
  }
  if (g.dcell != nullptr) {
    TF_RETURN_IF_ERROR(CheckShape(op, "cell_gradient", *g.dcell, {B, D * H}, fin));
  }
  if (g.dcseq != nullptr) {
    TF_RETURN_IF_ERROR(CheckShape(op, "cell_output_gradient", *g.dcseq, {T, B, D * H}, seq));
  }
  return absl::OkStatus();
}

// Those inputs themselves (TensorFlow kernels), read and checked against the spec.
struct MpsGradInputs {
  const Tensor *dy = nullptr, *z_state = nullptr, *fwd_out = nullptr;
  const Tensor *dstate = nullptr, *dcell = nullptr, *dcseq = nullptr;
};

inline absl::Status ValidateMpsGrad(OpKernelContext* ctx, const RnnSpec& s, MpsGradInputs* g) {
  TF_RETURN_IF_ERROR(GetInput(ctx, "source_gradient", &g->dy));
  TF_RETURN_IF_ERROR(GetInput(ctx, "z_state", &g->z_state));
  TF_RETURN_IF_ERROR(GetInput(ctx, MpsFwdOutName(s), &g->fwd_out));
  for (const auto& [name, slot] : MpsGradOptionalSlots<const Tensor*>(s, g)) {
    TF_RETURN_IF_ERROR(Optional(ctx, name, slot));
  }
  return ValidateMpsGradShapes(ctx->op_kernel().type_string(), s,
                               {ShapeOrNull(g->dy), ShapeOrNull(g->z_state),
                                ShapeOrNull(g->fwd_out), ShapeOrNull(g->dstate),
                                ShapeOrNull(g->dcell), ShapeOrNull(g->dcseq)});
}

// The gradients ops' outputs: source and recurrent-weight gradients, and one gradient per
// optional operand that was given (each a list of length 0 or 1, in MPSGraph's order).
struct MpsGradOutputs {
  Tensor *d_source = nullptr, *d_R = nullptr, *d_W = nullptr, *d_b = nullptr;
  Tensor *d_p = nullptr, *d_s = nullptr, *d_c = nullptr, *d_b2 = nullptr;
};

inline absl::Status AllocateMpsGrad(OpKernelContext* ctx, const MpsOperands& in,
                                    MpsGradOutputs* o) {
  TF_RETURN_IF_ERROR(AllocateOutput(ctx, 0, in.source->shape(), &o->d_source));
  TF_RETURN_IF_ERROR(AllocateOutput(ctx, 1, in.R->shape(), &o->d_R));
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


// The MPSGraph LSTM's descriptor (the attrs of TfRnn>LSTM and LSTMGradients).
struct MpsLstmDescriptor : MpsDescriptorBase {
  static constexpr int64_t kGates = 4;
  bool produce_cell = false, forget_gate_last = false;
  RnnAct gate_act[4];  // i, f, c (the "z" cell gate), o
  RnnAct cell_act;

  absl::Status Read(OpKernelConstruction* c) {
    TF_RETURN_IF_ERROR(MpsDescriptorBase::Read(c));
    TF_RETURN_IF_ERROR(c->GetAttr("produce_cell", &produce_cell));
    TF_RETURN_IF_ERROR(c->GetAttr("forget_gate_last", &forget_gate_last));
    const char* names[4] = {"input_gate_activation", "forget_gate_activation",
                            "cell_gate_activation", "output_gate_activation"};
    for (int q = 0; q < 4; ++q) TF_RETURN_IF_ERROR(GetMpsAct(c, names[q], &gate_act[q]));
    return GetMpsAct(c, "activation", &cell_act);
  }
};

// The LSTM's own operand (the peephole) and its spec (gate order and activations), after the
// shared operands.
inline absl::Status ValidateMpsOwn(const std::string& op, const MpsLstmDescriptor& desc,
                                   const MpsShapes& in, MpsLayout* out) {
  const int64_t D = out->D, H = out->H;
  if (in.peephole != nullptr) {
    if (D == 2) {
      TF_RETURN_IF_ERROR(
          CheckRank(op, "peephole", *in.peephole, 2, "[2, 4 * hidden] (bidirectional)"));
      TF_RETURN_IF_ERROR(CheckShape(op, "peephole", *in.peephole, {2, 4 * H},
                                    "[2, 4 * hidden] (bidirectional)"));
    } else {
      TF_RETURN_IF_ERROR(CheckRank(op, "peephole", *in.peephole, 1, "[4 * hidden]"));
      TF_RETURN_IF_ERROR(CheckShape(op, "peephole", *in.peephole, {4 * H}, "[4 * hidden]"));
    }
  }
  RnnSpec& s = out->spec;
  s.mode = RnnMode::kLstm;
  if (desc.forget_gate_last) {  // i, z, f, o
    s.gate_pos[0] = 0;
    s.gate_pos[1] = 2;
    s.gate_pos[2] = 1;
    s.gate_pos[3] = 3;
  }
  for (int q = 0; q < 4; ++q) s.gate_act[q] = desc.gate_act[q];
  s.cell_act = desc.cell_act;
  s.peephole = in.peephole != nullptr;
  return absl::OkStatus();
}

// The MPSGraph GRU's descriptor (the attrs of TfRnn>GRU and GRUGradients).
struct MpsGruDescriptor : MpsDescriptorBase {
  static constexpr int64_t kGates = 3;
  static constexpr bool produce_cell = false;
  bool reset_gate_first = false, reset_after = false, flip_z = false;
  RnnAct update_act, reset_act, output_act;

  absl::Status Read(OpKernelConstruction* c) {
    TF_RETURN_IF_ERROR(MpsDescriptorBase::Read(c));
    TF_RETURN_IF_ERROR(c->GetAttr("reset_gate_first", &reset_gate_first));
    TF_RETURN_IF_ERROR(c->GetAttr("reset_after", &reset_after));
    TF_RETURN_IF_ERROR(c->GetAttr("flip_z", &flip_z));
    TF_RETURN_IF_ERROR(GetMpsAct(c, "update_gate_activation", &update_act));
    TF_RETURN_IF_ERROR(GetMpsAct(c, "reset_gate_activation", &reset_act));
    return GetMpsAct(c, "output_gate_activation", &output_act);
  }
};

// The GRU's own operand (the secondary bias) and its spec (gate order, activations, reset
// before or after the recurrent product, flip_z), after the shared operands.
inline absl::Status ValidateMpsOwn(const std::string& op, const MpsGruDescriptor& desc,
                                   const MpsShapes& in, MpsLayout* out) {
  const int64_t D = out->D, H = out->H;
  if (in.bias2 != nullptr) {
    if (!desc.reset_after) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": secondary_bias is only used with reset_after=True (it is added to the "
              "recurrent product before the reset gate); remove it or set reset_after"));
    }
    TF_RETURN_IF_ERROR(CheckRank(op, "secondary_bias", *in.bias2, 1, "[dirs * hidden]"));
    TF_RETURN_IF_ERROR(
        CheckShape(op, "secondary_bias", *in.bias2, {D * H}, "[dirs * hidden]"));
  }
  RnnSpec& s = out->spec;
  s.mode = RnnMode::kGru;
  // The engine's logical gates r, z, n at MPSGraph's positions: [z, r, o] or [r, z, o].
  s.gate_pos[0] = desc.reset_gate_first ? 0 : 1;
  s.gate_pos[1] = desc.reset_gate_first ? 1 : 0;
  s.gate_pos[2] = 2;
  s.gate_act[0] = desc.reset_act;
  s.gate_act[1] = desc.update_act;
  s.gate_act[2] = desc.output_act;
  s.gru_reset_before = !desc.reset_after;
  // flip_z = false: h = (1-z)·h[t-1] + z·o (MPSGraphGRUDescriptor.flipZ's documentation).
  s.gru_z_new = !desc.flip_z;
  return absl::OkStatus();
}

// The operands' shapes for the family of descriptor Desc (MpsLstmDescriptor, MpsGruDescriptor):
// the shared ones, the family's own (ValidateMpsOwn), then the sizes.
template <typename Desc>
absl::Status ValidateMpsShapes(const std::string& op, const Desc& desc, const MpsShapes& in,
                               MpsLayout* out) {
  TF_RETURN_IF_ERROR(ValidateMpsShared(op, Desc::kGates, desc, in, out));
  TF_RETURN_IF_ERROR(ValidateMpsOwn(op, desc, in, out));
  return CheckMpsSizes(op, in, *out);
}

// The operands of a TensorFlow kernel of the family, read and validated.
template <typename Desc>
absl::Status ValidateMps(OpKernelContext* ctx, const Desc& desc, MpsOperands* in) {
  TF_RETURN_IF_ERROR(ReadMpsOperands(ctx, Desc::kGates, in));
  return ValidateMpsShapes(ctx->op_kernel().type_string(), desc, in->Shapes(), in);
}

// A forward's outputs: state [T, B, D·H], the LSTM's cell [T, B, D·H] (or [0] without
// produce_cell; null for the GRU, which has no such output), z_state [T, B, D·K·H] (or [0]
// when not training).
template <typename Desc>
absl::Status AllocateMpsForward(OpKernelContext* ctx, const Desc& desc, const RnnSpec& s,
                                Tensor** state, Tensor** cell, Tensor** z) {
  const int64_t T = s.T, B = s.B, DH = s.D * s.H;
  int out = 0;
  TF_RETURN_IF_ERROR(AllocateOutput(ctx, out++, TensorShape({T, B, DH}), state));
  *cell = nullptr;
  if (Desc::kGates == 4) {
    TF_RETURN_IF_ERROR(AllocateOutput(
        ctx, out++, desc.produce_cell ? TensorShape({T, B, DH}) : TensorShape({0}), cell));
  }
  return AllocateOutput(
      ctx, out, desc.training ? TensorShape({T, B, Desc::kGates * DH}) : TensorShape({0}), z);
}

// The backward arguments that restate the forward's (operands, params, reserve, mask), for
// the CPU engine's (RnnFwdArgs, RnnBwdArgs) and the CUDA engine's (TfRnnCuda*Args) structs.
template <typename Bwd, typename Fwd>
Bwd BwdArgsOf(const Fwd& f) {
  Bwd g{};
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

// The forward (kGrad false) and gradients (kGrad) kernels of either family over its descriptor
// Desc (Read: the attrs; ValidateMps: the operands -> the spec) and the device's computations
// Dev<Tt> (mps_common.h: the CPU engine, mps_gpu_ops.h: the CUDA engine):
//   static absl::Status Forward(OpKernelContext*, const MpsOperands&, Tensor* state,
//                               Tensor* cell, Tensor* z);  // cell, z: null when not wanted
//   static absl::Status Grad(OpKernelContext*, const MpsOperands&, const MpsGradInputs&,
//                            const MpsGradOutputs&);
template <template <typename> class Dev, typename Tt, typename Desc, bool kGrad>
class MpsOp : public AttrsOpKernel<Desc> {
 public:
  using AttrsOpKernel<Desc>::AttrsOpKernel;

  void Compute(OpKernelContext* ctx) override {
    const Desc& desc = this->attrs();
    MpsOperands in;
    OP_REQUIRES_OK(ctx, ValidateMps(ctx, desc, &in));
    if constexpr (kGrad) {
      MpsGradInputs gi;
      OP_REQUIRES_OK(ctx, ValidateMpsGrad(ctx, in.spec, &gi));
      MpsGradOutputs o;
      OP_REQUIRES_OK(ctx, AllocateMpsGrad(ctx, in, &o));
      OP_REQUIRES_OK(ctx, Dev<Tt>::Grad(ctx, in, gi, o));
    } else {
      Tensor *state, *cell, *z;
      OP_REQUIRES_OK(ctx, AllocateMpsForward(ctx, desc, in.spec, &state, &cell, &z));
      OP_REQUIRES_OK(ctx, Dev<Tt>::Forward(ctx, in, state, desc.produce_cell ? cell : nullptr,
                                           desc.training ? z : nullptr));
    }
  }
};

}  // namespace mps
}  // namespace tfrnn

// An MPSGraph family's kernels for type T on DEVICE over Dev: NAME's forward and NAME
// "Gradients" (Desc: the family's descriptor).
#define TFRNN_MPS_KERNELS(T, DEVICE, NAME, Dev, Desc)                                      \
  REGISTER_KERNEL_BUILDER(Name("TfRnn>" NAME).Device(DEVICE).TypeConstraint<T>("T"),       \
                          ::tfrnn::mps::MpsOp<Dev, T, Desc, false>);                       \
  REGISTER_KERNEL_BUILDER(                                                                 \
      Name("TfRnn>" NAME "Gradients").Device(DEVICE).TypeConstraint<T>("T"),               \
      ::tfrnn::mps::MpsOp<Dev, T, Desc, true>);

#endif  // TF_RNN_OPS_CC_KERNELS_MPS_RNN_FACE_H_
