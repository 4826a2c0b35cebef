// CPU kernels of the LSTM block family: validate inputs -> describe the problem -> call the
// LSTM engine. Every face uses the same engine entry points (cc/engine/lstm.h).
#include <string>

#include "cc/kernels/engine_loader.h"
#include "cc/kernels/kernel_util.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/register_types.h"

namespace tfrnn {
namespace {

using ::tensorflow::DEVICE_CPU;
using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;

enum class Face { kCell, kCellGrad, kSeq, kSeqGrad, kSeqGradExact };

struct LstmBlockInputs {
  int64_t T = 1, N = 0, I = 0, H = 0, seq_len_max = 1;
  // batch_size or cell_size 0 (valid for every op of the family but LSTMBlockCell): every
  // output is empty or zero, no step computes anything.
  bool empty() const { return N == 0 || H == 0; }
  const Tensor *x, *cs_prev, *h_prev, *w, *wci, *wcf, *wco, *b;
  const Tensor *i = nullptr, *cs = nullptr, *f = nullptr, *o = nullptr, *ci = nullptr,
               *co = nullptr, *h = nullptr, *cs_grad = nullptr, *h_grad = nullptr;
  const Tensor *i_grad = nullptr, *f_grad = nullptr, *o_grad = nullptr, *ci_grad = nullptr,
               *co_grad = nullptr;
};

// The family's one validation helper, shared by forward and backward kernels: ranks first,
// then sizes, then values; nothing is read or allocated before it succeeds.
absl::Status ValidateLstmBlock(OpKernelContext* ctx, Face face, LstmBlockInputs* in) {
  const std::string op = ctx->op_kernel().type_string();
  const bool seq = face == Face::kSeq || face == Face::kSeqGrad || face == Face::kSeqGradExact;
  const Tensor* slm = nullptr;
  if (seq) TF_RETURN_IF_ERROR(GetInput(ctx, "seq_len_max", &slm));
  TF_RETURN_IF_ERROR(GetInput(ctx, "x", &in->x));
  TF_RETURN_IF_ERROR(GetInput(ctx, "cs_prev", &in->cs_prev));
  TF_RETURN_IF_ERROR(GetInput(ctx, "h_prev", &in->h_prev));
  TF_RETURN_IF_ERROR(GetInput(ctx, "w", &in->w));
  TF_RETURN_IF_ERROR(GetInput(ctx, "wci", &in->wci));
  TF_RETURN_IF_ERROR(GetInput(ctx, "wcf", &in->wcf));
  TF_RETURN_IF_ERROR(GetInput(ctx, "wco", &in->wco));
  TF_RETURN_IF_ERROR(GetInput(ctx, "b", &in->b));

  // Activations and incoming gradients, [T, N, H] (sequence) or [N, H] (cell).
  std::vector<std::pair<const char*, const Tensor**>> acts;
  if (face != Face::kCell && face != Face::kSeq) {
    acts = {{"i", &in->i},   {"cs", &in->cs}, {"f", &in->f},   {"o", &in->o},
            {"ci", &in->ci}, {"co", &in->co}};
    if (seq) acts.push_back({"h", &in->h});
    acts.push_back({"cs_grad", &in->cs_grad});
    acts.push_back({"h_grad", &in->h_grad});
  }
  if (face == Face::kSeqGradExact) {
    acts.insert(acts.end(), {{"i_grad", &in->i_grad},
                             {"f_grad", &in->f_grad},
                             {"o_grad", &in->o_grad},
                             {"ci_grad", &in->ci_grad},
                             {"co_grad", &in->co_grad}});
  }
  for (auto& a : acts) TF_RETURN_IF_ERROR(GetInput(ctx, a.first, a.second));

  // 1. Ranks.
  if (seq && slm->dims() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": seq_len_max must be a scalar, got shape ", ShapeStr(*slm)));
  }
  const char* seq_layout = seq ? "[timelen, batch_size, cell_size]" : "[batch_size, cell_size]";
  TF_RETURN_IF_ERROR(CheckRank(op, "x", *in->x, seq ? 3 : 2,
                               seq ? "[timelen, batch_size, input_size]"
                                   : "[batch_size, input_size]"));
  TF_RETURN_IF_ERROR(CheckRank(op, "cs_prev", *in->cs_prev, 2, "[batch_size, cell_size]"));
  TF_RETURN_IF_ERROR(CheckRank(op, "h_prev", *in->h_prev, 2, "[batch_size, cell_size]"));
  TF_RETURN_IF_ERROR(
      CheckRank(op, "w", *in->w, 2, "[input_size + cell_size, 4 * cell_size]"));
  TF_RETURN_IF_ERROR(CheckRank(op, "wci", *in->wci, 1, "[cell_size]"));
  TF_RETURN_IF_ERROR(CheckRank(op, "wcf", *in->wcf, 1, "[cell_size]"));
  TF_RETURN_IF_ERROR(CheckRank(op, "wco", *in->wco, 1, "[cell_size]"));
  TF_RETURN_IF_ERROR(CheckRank(op, "b", *in->b, 1, "[4 * cell_size]"));
  for (auto& a : acts) TF_RETURN_IF_ERROR(CheckRank(op, a.first, **a.second, seq ? 3 : 2, seq_layout));

  // 2. Sizes, input by input, each against the sizes the inputs before it set (x: timelen,
  //    batch_size, input_size; cs_prev: cell_size, as in stock), so that a message names the
  //    first input that is wrong. Counts are checked before any arithmetic on them.
  const Tensor& x = *in->x;
  const int64_t T = seq ? x.dim_size(0) : 1, N = x.dim_size(seq ? 1 : 0),
                I = x.dim_size(seq ? 2 : 1);
  TF_RETURN_IF_ERROR(
      CheckCounts(op, {T, N, I, Count(T) * N * I}, absl::StrCat("x ", ShapeStr(x))));
  // Stock LSTMBlockCell rejects an empty batch or cell ("cs_prev_tensor is empty"); the other
  // ops of the family compute an empty (or zero) result.
  if (face == Face::kCell && N == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": x has an empty batch dimension (batch_size = 0), shape ", ShapeStr(x)));
  }
  if (in->cs_prev->dim_size(0) != N) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": cs_prev must have shape [batch_size, cell_size] with batch_size = ", N,
        " (from x ", ShapeStr(x), "), got ", ShapeStr(*in->cs_prev)));
  }
  const int64_t H = in->cs_prev->dim_size(1);
  if (face == Face::kCell && H == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": cs_prev is empty (cell_size = 0), shape ", ShapeStr(*in->cs_prev)));
  }
  TF_RETURN_IF_ERROR(CheckCounts(
      op, {H, Count(T) * N * H * Count(4), (Count(I) + H) * H * Count(4)},
      absl::StrCat("cs_prev ", ShapeStr(*in->cs_prev), ", x ", ShapeStr(x))));
  in->T = T;
  in->N = N;
  in->I = I;
  in->H = H;
  TF_RETURN_IF_ERROR(CheckShape(op, "h_prev", *in->h_prev, {N, H}, "[batch_size, cell_size]"));
  TF_RETURN_IF_ERROR(CheckShape(op, "w", *in->w, {I + H, 4 * H},
                                "[input_size + cell_size, 4 * cell_size]"));
  TF_RETURN_IF_ERROR(CheckShape(op, "wci", *in->wci, {H}, "[cell_size]"));
  TF_RETURN_IF_ERROR(CheckShape(op, "wcf", *in->wcf, {H}, "[cell_size]"));
  TF_RETURN_IF_ERROR(CheckShape(op, "wco", *in->wco, {H}, "[cell_size]"));
  TF_RETURN_IF_ERROR(CheckShape(op, "b", *in->b, {4 * H}, "[4 * cell_size]"));
  for (auto& a : acts) {
    if (seq) {
      TF_RETURN_IF_ERROR(CheckShape(op, a.first, **a.second, {T, N, H}, seq_layout));
    } else {
      TF_RETURN_IF_ERROR(CheckShape(op, a.first, **a.second, {N, H}, seq_layout));
    }
  }

  // 3. Values.
  if (seq) {
    const int64_t v = slm->scalar<int64_t>()();
    if (v < 0 || v > T) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": seq_len_max must be in [0, timelen = ", T, "], got ", v));
    }
    in->seq_len_max = v;
  }
  return absl::OkStatus();
}

LstmCellSpec MakeSpec(bool v2, float forget_bias, float cell_clip, bool use_peephole) {
  LstmCellSpec s;
  s.order = v2 ? kIfco : kIcfo;
  s.forget_bias = forget_bias;
  s.cell_clip = cell_clip;
  s.use_peephole = use_peephole;
  return s;
}

// The operands the forward (LstmFwdArgs) and the sequence backward (LstmBwdArgs) both read.
template <typename T, typename Args>
void SetSharedOperands(ComputeBridge<T>& br, const LstmBlockInputs& in, Args* a) {
  a->T = in.T;
  a->N = in.N;
  a->I = in.I;
  a->H = in.H;
  a->seq_len_max = in.seq_len_max;
  a->x = br.In(*in.x);
  a->cs_prev = br.In(*in.cs_prev);
  a->h_prev = br.In(*in.h_prev);
  a->w = br.In(*in.w);
  a->wci = br.In(*in.wci);
  a->wcf = br.In(*in.wcf);
  a->wco = br.In(*in.wco);
}

// The forward's activations and the incoming gradients both backward ops read
// (LstmCellBwdArgs, LstmBwdArgs).
template <typename T, typename Args>
void SetActivationOperands(ComputeBridge<T>& br, const LstmBlockInputs& in, Args* a) {
  a->i = br.In(*in.i);
  a->cs = br.In(*in.cs);
  a->f = br.In(*in.f);
  a->o = br.In(*in.o);
  a->ci = br.In(*in.ci);
  a->co = br.In(*in.co);
  a->cs_grad = br.In(*in.cs_grad);
  a->h_grad = br.In(*in.h_grad);
}

// LSTMBlockCell, BlockLSTM, BlockLSTMV2.
template <typename T, bool kSeq, bool kV2>
class LstmForwardOp : public OpKernel {
 public:
  explicit LstmForwardOp(OpKernelConstruction* c) : OpKernel(c) {
    if (!kV2) OP_REQUIRES_OK(c, c->GetAttr("forget_bias", &forget_bias_));
    OP_REQUIRES_OK(c, c->GetAttr("cell_clip", &cell_clip_));
    OP_REQUIRES_OK(c, c->GetAttr("use_peephole", &use_peephole_));
  }

  void Compute(OpKernelContext* ctx) override {
    LstmBlockInputs in;
    OP_REQUIRES_OK(ctx, ValidateLstmBlock(ctx, kSeq ? Face::kSeq : Face::kCell, &in));
    const TensorShape out_shape =
        kSeq ? TensorShape({in.T, in.N, in.H}) : TensorShape({in.N, in.H});
    Tensor* outs[7];
    for (int k = 0; k < 7; ++k) OP_REQUIRES_OK(ctx, ctx->allocate_output(k, out_shape, &outs[k]));
    if (in.empty()) return;  // the outputs have no elements

    ComputeBridge<T> br(ctx);
    using A = typename ComputeBridge<T>::A;
    LstmFwdArgs<A> a;
    SetSharedOperands(br, in, &a);
    a.b = br.In(*in.b);
    A** dst[7] = {&a.i, &a.cs, &a.f, &a.o, &a.ci, &a.co, &a.h};
    for (int k = 0; k < 7; ++k) *dst[k] = br.Out(outs[k]);
    TfHostPool pool(ctx);
    const LstmCellSpec spec = SpecFor<T>(MakeSpec(kV2, forget_bias_, cell_clip_, use_peephole_));
    A* ws = br.Scratch(LstmFwdWorkspaceSize(in.seq_len_max, in.N, in.I, in.H, spec.bf16));
    OP_REQUIRES_OK(ctx, br.status());
    const EngineApi* engine;
    OP_REQUIRES_OK(ctx, GetEngine(&engine));
    EngineFns<A>::Forward(*engine)(pool, spec, a, ws);
    br.Finish();
  }

 private:
  float forget_bias_ = 0.f;
  float cell_clip_ = 0.f;
  bool use_peephole_ = false;
};

// LSTMBlockCellGrad. Outputs are always freshly allocated: never an input buffer reused
// before it was read (the stock peephole bug, docs/SEMANTICS.md §5 #2).
template <typename T>
class LstmCellGradOp : public OpKernel {
 public:
  explicit LstmCellGradOp(OpKernelConstruction* c) : OpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("use_peephole", &use_peephole_));
  }

  void Compute(OpKernelContext* ctx) override {
    LstmBlockInputs in;
    OP_REQUIRES_OK(ctx, ValidateLstmBlock(ctx, Face::kCellGrad, &in));
    Tensor *cs_prev_grad, *dicfo, *wci_grad, *wcf_grad, *wco_grad;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({in.N, in.H}), &cs_prev_grad));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({in.N, 4 * in.H}), &dicfo));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, TensorShape({in.H}), &wci_grad));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(3, TensorShape({in.H}), &wcf_grad));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(4, TensorShape({in.H}), &wco_grad));
    if (in.empty()) return SetZero<T>({cs_prev_grad, dicfo, wci_grad, wcf_grad, wco_grad});

    ComputeBridge<T> br(ctx);
    using A = typename ComputeBridge<T>::A;
    LstmCellBwdArgs<A> a;
    a.N = in.N;
    a.H = in.H;
    a.cs_prev = br.In(*in.cs_prev);
    a.wci = br.In(*in.wci);
    a.wcf = br.In(*in.wcf);
    a.wco = br.In(*in.wco);
    SetActivationOperands(br, in, &a);
    a.cs_prev_grad = br.Out(cs_prev_grad);
    a.dgates = br.Out(dicfo);
    a.wci_grad = br.Out(wci_grad);
    a.wcf_grad = br.Out(wcf_grad);
    a.wco_grad = br.Out(wco_grad);
    OP_REQUIRES_OK(ctx, br.status());
    const EngineApi* engine;
    OP_REQUIRES_OK(ctx, GetEngine(&engine));
    TfHostPool pool(ctx);
    EngineFns<A>::CellBackward(*engine)(pool, MakeSpec(false, 0.f, 0.f, use_peephole_), a);
    br.Finish();
  }

 private:
  bool use_peephole_ = false;
};

// BlockLSTMGrad (ICFO), BlockLSTMGradV2 (IFCO) and BlockLSTMGradExact (either order).
template <typename T, bool kV2, bool kExact>
class LstmSeqGradOp : public OpKernel {
 public:
  explicit LstmSeqGradOp(OpKernelConstruction* c) : OpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("use_peephole", &use_peephole_));
    v2_ = kV2;
    if (kExact) {
      OP_REQUIRES_OK(c, c->GetAttr("cell_clip", &cell_clip_));
      std::string order;
      OP_REQUIRES_OK(c, c->GetAttr("gate_order", &order));
      v2_ = order == "ifco";
    }
  }

  void Compute(OpKernelContext* ctx) override {
    LstmBlockInputs in;
    OP_REQUIRES_OK(ctx, ValidateLstmBlock(ctx, kExact ? Face::kSeqGradExact : Face::kSeqGrad,
                                          &in));
    Tensor* outs[8];
    const TensorShape shapes[8] = {
        TensorShape({in.T, in.N, in.I}), TensorShape({in.N, in.H}),
        TensorShape({in.N, in.H}),       TensorShape({in.I + in.H, 4 * in.H}),
        TensorShape({in.H}),             TensorShape({in.H}),
        TensorShape({in.H}),             TensorShape({4 * in.H})};
    for (int k = 0; k < 8; ++k) OP_REQUIRES_OK(ctx, ctx->allocate_output(k, shapes[k], &outs[k]));
    if (in.empty()) {
      return SetZero<T>({outs[0], outs[1], outs[2], outs[3], outs[4], outs[5], outs[6], outs[7]});
    }

    ComputeBridge<T> br(ctx);
    using A = typename ComputeBridge<T>::A;
    LstmBwdArgs<A> a;
    SetSharedOperands(br, in, &a);
    SetActivationOperands(br, in, &a);
    a.h = br.In(*in.h);
    if (kExact) {
      a.i_grad = br.In(*in.i_grad);
      a.f_grad = br.In(*in.f_grad);
      a.o_grad = br.In(*in.o_grad);
      a.ci_grad = br.In(*in.ci_grad);
      a.co_grad = br.In(*in.co_grad);
      a.exact_clip_grad = true;
    }
    A** dst[8] = {&a.x_grad,   &a.cs_prev_grad, &a.h_prev_grad, &a.w_grad,
                  &a.wci_grad, &a.wcf_grad,     &a.wco_grad,    &a.b_grad};
    for (int k = 0; k < 8; ++k) *dst[k] = br.Out(outs[k]);
    A* ws = br.Scratch(LstmBwdWorkspaceSize(in.seq_len_max, in.N, in.H));
    OP_REQUIRES_OK(ctx, br.status());
    const EngineApi* engine;
    OP_REQUIRES_OK(ctx, GetEngine(&engine));
    TfHostPool pool(ctx);
    const LstmCellSpec spec = SpecFor<T>(MakeSpec(v2_, 0.f, cell_clip_, use_peephole_));
    EngineFns<A>::Backward(*engine)(pool, spec, a, ws);
    br.Finish();
  }

 private:
  bool use_peephole_ = false;
  bool v2_ = false;
  float cell_clip_ = 0.f;
};

#define TFRNN_REGISTER_LSTM_KERNELS(T)                                                        \
  REGISTER_KERNEL_BUILDER(                                                                    \
      Name("TfRnn>LSTMBlockCell").Device(DEVICE_CPU).TypeConstraint<T>("T"),                  \
      LstmForwardOp<T, false, false>);                                                        \
  REGISTER_KERNEL_BUILDER(                                                                    \
      Name("TfRnn>LSTMBlockCellGrad").Device(DEVICE_CPU).TypeConstraint<T>("T"),              \
      LstmCellGradOp<T>);                                                                     \
  REGISTER_KERNEL_BUILDER(Name("TfRnn>BlockLSTM").Device(DEVICE_CPU).TypeConstraint<T>("T"), \
                          LstmForwardOp<T, true, false>);                                     \
  REGISTER_KERNEL_BUILDER(                                                                    \
      Name("TfRnn>BlockLSTMV2").Device(DEVICE_CPU).TypeConstraint<T>("T"),                    \
      LstmForwardOp<T, true, true>);                                                          \
  REGISTER_KERNEL_BUILDER(                                                                    \
      Name("TfRnn>BlockLSTMGrad").Device(DEVICE_CPU).TypeConstraint<T>("T"),                  \
      LstmSeqGradOp<T, false, false>);                                                        \
  REGISTER_KERNEL_BUILDER(                                                                    \
      Name("TfRnn>BlockLSTMGradV2").Device(DEVICE_CPU).TypeConstraint<T>("T"),                \
      LstmSeqGradOp<T, true, false>);                                                         \
  REGISTER_KERNEL_BUILDER(                                                                    \
      Name("TfRnn>BlockLSTMGradExact").Device(DEVICE_CPU).TypeConstraint<T>("T"),             \
      LstmSeqGradOp<T, false, true>);

TFRNN_REGISTER_LSTM_KERNELS(Eigen::half)
TFRNN_REGISTER_LSTM_KERNELS(Eigen::bfloat16)
TFRNN_REGISTER_LSTM_KERNELS(float)
TFRNN_REGISTER_LSTM_KERNELS(double)
#undef TFRNN_REGISTER_LSTM_KERNELS

#ifdef TFRNN_WITH_CUDA
#include "cc/kernels/lstm_block_gpu_kernels.inc"  // GPU kernels (TfRnn> names)
#endif

}  // namespace
}  // namespace tfrnn
