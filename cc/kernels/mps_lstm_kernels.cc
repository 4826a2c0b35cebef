// CPU kernels of the MPSGraph-style LSTM (TfRnn>LSTM, TfRnn>LSTMGradients): a face of the
// stacked-RNN engine with MPSGraph's gate orders, per-gate activations, peephole on every gate,
// recurrent mask, optional input weight and reverse/bidirectional layouts (docs/SEMANTICS.md §8).
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
using MpsLstmGradOp = MpsGradOp<Tt, Descriptor, ValidateLstm>;

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
