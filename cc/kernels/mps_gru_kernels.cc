// CPU kernels of the MPSGraph-style GRU (TfRnn>GRU, TfRnn>GRUGradients): a face of the
// stacked-RNN engine with MPSGraph's gate orders ([z, r, o], or [r, z, o] with
// reset_gate_first), per-gate activations, reset before or after the recurrent product (with
// the secondary bias), flip_z, recurrent mask, optional input weight and reverse/bidirectional
// layouts (docs/SEMANTICS.md §8, docs/DIFFERENCES.md for the choices the header leaves open).
// GRUGradients recomputes the forward activations from its operands.
#include <string>

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

struct GruDescriptor {
  bool reverse = false, bidirectional = false, training = false;
  bool reset_gate_first = false, reset_after = false, flip_z = false;
  RnnAct update_act, reset_act, output_act;

  absl::Status Read(OpKernelConstruction* c) {
    TF_RETURN_IF_ERROR(c->GetAttr("reverse", &reverse));
    TF_RETURN_IF_ERROR(c->GetAttr("bidirectional", &bidirectional));
    TF_RETURN_IF_ERROR(c->GetAttr("training", &training));
    TF_RETURN_IF_ERROR(c->GetAttr("reset_gate_first", &reset_gate_first));
    TF_RETURN_IF_ERROR(c->GetAttr("reset_after", &reset_after));
    TF_RETURN_IF_ERROR(c->GetAttr("flip_z", &flip_z));
    TF_RETURN_IF_ERROR(GetMpsAct(c, "update_gate_activation", &update_act));
    TF_RETURN_IF_ERROR(GetMpsAct(c, "reset_gate_activation", &reset_act));
    return GetMpsAct(c, "output_gate_activation", &output_act);
  }
};

absl::Status ValidateGru(OpKernelContext* ctx, const GruDescriptor& desc, MpsOperands* in) {
  const std::string op = ctx->op_kernel().type_string();
  TF_RETURN_IF_ERROR(GetInput(ctx, "source", &in->source));
  TF_RETURN_IF_ERROR(GetInput(ctx, "recurrent_weight", &in->R));
  TF_RETURN_IF_ERROR(Optional(ctx, "input_weight", &in->W));
  TF_RETURN_IF_ERROR(Optional(ctx, "bias", &in->bias));
  TF_RETURN_IF_ERROR(Optional(ctx, "init_state", &in->init_state));
  TF_RETURN_IF_ERROR(Optional(ctx, "mask", &in->mask));
  TF_RETURN_IF_ERROR(Optional(ctx, "secondary_bias", &in->bias2));
  const int64_t D = desc.bidirectional ? 2 : 1;
  TF_RETURN_IF_ERROR(ValidateMpsShared(ctx, 3, D, in));
  const int64_t H = in->H;
  if (in->bias2 != nullptr) {
    if (!desc.reset_after) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": secondary_bias is only used with reset_after=True (it is added to the "
              "recurrent product before the reset gate); remove it or set reset_after"));
    }
    TF_RETURN_IF_ERROR(CheckRank(op, "secondary_bias", *in->bias2, 1, "[dirs * hidden]"));
    TF_RETURN_IF_ERROR(
        CheckShape(op, "secondary_bias", *in->bias2, {D * H}, "[dirs * hidden]"));
  }
  RnnSpec& s = in->spec;
  s.mode = RnnMode::kGru;
  s.reverse = desc.reverse && D == 1;
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
  return CheckRnnSizes(op, s,
                       absl::StrCat("source ", ShapeStr(*in->source), ", recurrent_weight ",
                                    ShapeStr(*in->R), ", hidden ", H));
}

template <typename Tt>
class MpsGruOp : public OpKernel {
 public:
  using A = typename ComputeType<Tt>::type;
  explicit MpsGruOp(OpKernelConstruction* c) : OpKernel(c) { OP_REQUIRES_OK(c, desc_.Read(c)); }

  void Compute(OpKernelContext* ctx) override {
    MpsOperands in;
    OP_REQUIRES_OK(ctx, ValidateGru(ctx, desc_, &in));
    const RnnSpec& s = in.spec;
    const int64_t T = s.T, B = s.B, H = s.N, D = s.D;
    Tensor *state, *z;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({T, B, D * H}), &state));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(
                            1, desc_.training ? TensorShape({T, B, D * 3 * H}) : TensorShape({0}),
                            &z));
    ComputeBridge<Tt> br(ctx);
    MpsPacked<Tt> pk;
    pk.Pack(br, in);
    RnnFwdArgs<A>& a = pk.f;
    a.y = br.Out(state);
    A* z_out = desc_.training ? br.Out(z) : nullptr;
    A* ws = br.Scratch(RnnFwdWorkspaceSize(SpecFor<Tt>(s)));
    OP_REQUIRES_OK(ctx, br.status());
    const EngineApi* engine;
    OP_REQUIRES_OK(ctx, GetEngine(&engine));
    TfHostPool pool(ctx);
    EngineFns<A>::RnnFwd(*engine)(pool, SpecFor<Tt>(s), a, ws);
    if (z_out != nullptr) ZStateFromReserve<A>(s, a.reserve, z_out);
    br.Finish();
  }

 private:
  GruDescriptor desc_;
};

template <typename Tt>
using MpsGruGradOp = MpsGradOp<Tt, GruDescriptor, ValidateGru>;

#define TFRNN_REGISTER_MPS_GRU(T)                                                           \
  REGISTER_KERNEL_BUILDER(Name("TfRnn>GRU").Device(DEVICE_CPU).TypeConstraint<T>("T"),      \
                          MpsGruOp<T>);                                                     \
  REGISTER_KERNEL_BUILDER(                                                                  \
      Name("TfRnn>GRUGradients").Device(DEVICE_CPU).TypeConstraint<T>("T"), MpsGruGradOp<T>);
TFRNN_REGISTER_MPS_GRU(Eigen::half)
TFRNN_REGISTER_MPS_GRU(Eigen::bfloat16)
TFRNN_REGISTER_MPS_GRU(float)
TFRNN_REGISTER_MPS_GRU(double)
#undef TFRNN_REGISTER_MPS_GRU

#ifdef TFRNN_WITH_CUDA
#include "cc/kernels/mps_gru_gpu_kernels.inc"  // GPU kernels (TfRnn> names)
#endif

}  // namespace
}  // namespace tfrnn
