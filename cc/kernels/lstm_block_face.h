// The LSTM block family's op kernels on either device: the validation of every op's inputs,
// the attrs, the cell spec, the outputs and the list of the family's kernels. The device's
// computations are lstm_block_kernels.cc's (CPU) and lstm_block_gpu_kernels.cc's (CUDA).
#ifndef TF_RNN_OPS_CC_KERNELS_LSTM_BLOCK_FACE_H_
#define TF_RNN_OPS_CC_KERNELS_LSTM_BLOCK_FACE_H_

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "cc/kernels/kernel_util.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tfrnn {
namespace lstm_block {

enum class Face { kCell, kCellGrad, kSeq, kSeqGrad, kSeqGradExact };

struct LstmBlockInputs {
  int64_t T = 1, B = 0, I = 0, H = 0, seq_len_max = 1;
  // batch_size or cell_size 0 (valid for every op of the family but LSTMBlockCell): every
  // output is empty or zero, no step computes anything.
  bool empty() const { return B == 0 || H == 0; }
  const Tensor *x, *cs_prev, *h_prev, *w, *wci, *wcf, *wco, *b;
  const Tensor *i = nullptr, *cs = nullptr, *f = nullptr, *o = nullptr, *ci = nullptr,
               *co = nullptr, *h = nullptr, *cs_grad = nullptr, *h_grad = nullptr;
  const Tensor *i_grad = nullptr, *f_grad = nullptr, *o_grad = nullptr, *ci_grad = nullptr,
               *co_grad = nullptr;
};

inline bool IsSeq(Face face) {
  return face == Face::kSeq || face == Face::kSeqGrad || face == Face::kSeqGradExact;
}

// The inputs after the parameters (activations and incoming gradients, [T, B, H] or [B, H]),
// in the op's order, each with the field of `in` that holds it.
inline std::vector<std::pair<const char*, const Tensor**>> LstmActs(Face face,
                                                                  LstmBlockInputs* in) {
  std::vector<std::pair<const char*, const Tensor**>> acts;
  if (face != Face::kCell && face != Face::kSeq) {
    acts = {{"i", &in->i},   {"cs", &in->cs}, {"f", &in->f},
            {"o", &in->o},   {"ci", &in->ci}, {"co", &in->co}};
    if (IsSeq(face)) acts.push_back({"h", &in->h});
    acts.insert(acts.end(), {{"cs_grad", &in->cs_grad}, {"h_grad", &in->h_grad}});
  }
  if (face == Face::kSeqGradExact) {
    acts.insert(acts.end(), {{"i_grad", &in->i_grad},
                             {"f_grad", &in->f_grad},
                             {"o_grad", &in->o_grad},
                             {"ci_grad", &in->ci_grad},
                             {"co_grad", &in->co_grad}});
  }
  return acts;
}

// The shapes of an op's inputs (slm: seq_len_max, sequence ops only; acts in LstmActs'
// order).
struct LstmBlockShapes {
  TensorShape slm, x, cs_prev, h_prev, w, wci, wcf, wco, b;
  std::vector<std::pair<const char*, TensorShape>> acts;
};

// The family's shape checks, shared by the TensorFlow and XLA kernels: ranks first, then sizes;
// sets T, B, I, H. seq_len_max's value is the caller's to check.
inline absl::Status LstmBlockSizesOf(const std::string& op, Face face, const LstmBlockShapes& in,
                                     LstmBlockInputs* out) {
  const bool seq = IsSeq(face);
  // 1. Ranks.
  if (seq && in.slm.dims() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": seq_len_max must be a scalar, got shape ", ShapeStr(in.slm)));
  }
  const char* seq_layout = seq ? "[timelen, batch_size, cell_size]" : "[batch_size, cell_size]";
  TF_RETURN_IF_ERROR(CheckRank(op, "x", in.x, seq ? 3 : 2,
                               seq ? "[timelen, batch_size, input_size]"
                                   : "[batch_size, input_size]"));
  TF_RETURN_IF_ERROR(CheckRank(op, "cs_prev", in.cs_prev, 2, "[batch_size, cell_size]"));
  TF_RETURN_IF_ERROR(CheckRank(op, "h_prev", in.h_prev, 2, "[batch_size, cell_size]"));
  TF_RETURN_IF_ERROR(
      CheckRank(op, "w", in.w, 2, "[input_size + cell_size, 4 * cell_size]"));
  TF_RETURN_IF_ERROR(CheckRank(op, "wci", in.wci, 1, "[cell_size]"));
  TF_RETURN_IF_ERROR(CheckRank(op, "wcf", in.wcf, 1, "[cell_size]"));
  TF_RETURN_IF_ERROR(CheckRank(op, "wco", in.wco, 1, "[cell_size]"));
  TF_RETURN_IF_ERROR(CheckRank(op, "b", in.b, 1, "[4 * cell_size]"));
  for (auto& a : in.acts) TF_RETURN_IF_ERROR(CheckRank(op, a.first, a.second, seq ? 3 : 2, seq_layout));

  // 2. Sizes, input by input, each against the sizes the inputs before it set (x: timelen,
  //    batch_size, input_size; cs_prev: cell_size, as in stock), so that a message names the
  //    first input that is wrong. Counts are checked before any arithmetic on them.
  const TensorShape& x = in.x;
  const int64_t T = seq ? x.dim_size(0) : 1, B = x.dim_size(seq ? 1 : 0),
                I = x.dim_size(seq ? 2 : 1);
  TF_RETURN_IF_ERROR(
      CheckCounts(op, {T, B, I, Count(T) * B * I}, absl::StrCat("x ", ShapeStr(x))));
  // Stock LSTMBlockCell rejects an empty batch or cell ("cs_prev_tensor is empty"); the other
  // ops of the family compute an empty (or zero) result.
  if (face == Face::kCell && B == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": x has an empty batch dimension (batch_size = 0), shape ", ShapeStr(x)));
  }
  if (in.cs_prev.dim_size(0) != B) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": cs_prev must have shape [batch_size, cell_size] with batch_size = ", B,
        " (from x ", ShapeStr(x), "), got ", ShapeStr(in.cs_prev)));
  }
  const int64_t H = in.cs_prev.dim_size(1);
  if (face == Face::kCell && H == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": cs_prev is empty (cell_size = 0), shape ", ShapeStr(in.cs_prev)));
  }
  TF_RETURN_IF_ERROR(CheckCounts(
      op, {H, Count(T) * B * H * Count(4), (Count(I) + H) * H * Count(4)},
      absl::StrCat("cs_prev ", ShapeStr(in.cs_prev), ", x ", ShapeStr(x))));
  out->T = T;
  out->B = B;
  out->I = I;
  out->H = H;
  TF_RETURN_IF_ERROR(CheckShape(op, "h_prev", in.h_prev, {B, H}, "[batch_size, cell_size]"));
  TF_RETURN_IF_ERROR(CheckShape(op, "w", in.w, {I + H, 4 * H},
                                "[input_size + cell_size, 4 * cell_size]"));
  TF_RETURN_IF_ERROR(CheckShape(op, "wci", in.wci, {H}, "[cell_size]"));
  TF_RETURN_IF_ERROR(CheckShape(op, "wcf", in.wcf, {H}, "[cell_size]"));
  TF_RETURN_IF_ERROR(CheckShape(op, "wco", in.wco, {H}, "[cell_size]"));
  TF_RETURN_IF_ERROR(CheckShape(op, "b", in.b, {4 * H}, "[4 * cell_size]"));
  for (auto& a : in.acts) {
    if (seq) {
      TF_RETURN_IF_ERROR(CheckShape(op, a.first, a.second, {T, B, H}, seq_layout));
    } else {
      TF_RETURN_IF_ERROR(CheckShape(op, a.first, a.second, {B, H}, seq_layout));
    }
  }
  return absl::OkStatus();
}

// seq_len_max's value must be in [0, timelen].
inline absl::Status CheckSeqLenMax(const std::string& op, int64_t v, int64_t T) {
  if (v >= 0 && v <= T) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": seq_len_max must be in [0, timelen = ", T, "], got ", v));
}

// The family's one validation helper on the op's tensors, shared by forward and backward
// kernels: LstmBlockSizesOf, then values; nothing is read or allocated before it succeeds.
inline absl::Status ValidateLstmBlock(OpKernelContext* ctx, Face face, LstmBlockInputs* in) {
  const std::string op = ctx->op_kernel().type_string();
  const bool seq = IsSeq(face);
  const Tensor* slm = nullptr;
  if (seq) TF_RETURN_IF_ERROR(GetInput(ctx, "seq_len_max", &slm));
  TF_RETURN_IF_ERROR(GetInputs(ctx, {{"x", &in->x},
                                     {"cs_prev", &in->cs_prev},
                                     {"h_prev", &in->h_prev},
                                     {"w", &in->w},
                                     {"wci", &in->wci},
                                     {"wcf", &in->wcf},
                                     {"wco", &in->wco},
                                     {"b", &in->b}}));
  LstmBlockShapes shapes{seq ? slm->shape() : TensorShape(), in->x->shape(),
                         in->cs_prev->shape(), in->h_prev->shape(), in->w->shape(),
                         in->wci->shape(), in->wcf->shape(), in->wco->shape(), in->b->shape(),
                         {}};
  for (const auto& a : LstmActs(face, in)) {
    TF_RETURN_IF_ERROR(GetInput(ctx, a.first, a.second));
    shapes.acts.push_back({a.first, (*a.second)->shape()});
  }
  TF_RETURN_IF_ERROR(LstmBlockSizesOf(op, face, shapes, in));
  // 3. Values.
  if (seq) {
    const int64_t v = slm->scalar<int64_t>()();
    TF_RETURN_IF_ERROR(CheckSeqLenMax(op, v, in->T));
    in->seq_len_max = v;
  }
  return absl::OkStatus();
}

// The (operand, tensor) pairs of the inputs every computation reads, in the engine's arguments
// Args (the CPU engine's or the CUDA engine's: ComputeBridge::BindIn, gpu::BindIn).
template <typename Args>
auto SharedInputs(const LstmBlockInputs& in, Args* a) {
  return std::vector<std::pair<decltype(&a->x), const Tensor*>>{
      {&a->x, in.x},     {&a->cs_prev, in.cs_prev}, {&a->h_prev, in.h_prev}, {&a->w, in.w},
      {&a->wci, in.wci}, {&a->wcf, in.wcf},         {&a->wco, in.wco}};
}

// The same for the forward's activations and the incoming gradients both backward ops read.
template <typename Args>
auto ActivationInputs(const LstmBlockInputs& in, Args* a) {
  return std::vector<std::pair<decltype(&a->i), const Tensor*>>{
      {&a->i, in.i},   {&a->cs, in.cs}, {&a->f, in.f},             {&a->o, in.o},
      {&a->ci, in.ci}, {&a->co, in.co}, {&a->cs_grad, in.cs_grad}, {&a->h_grad, in.h_grad}};
}

// The same for the gradients of the gate outputs BlockLSTMGradExact reads.
template <typename Args>
auto ExactGradInputs(const LstmBlockInputs& in, Args* a) {
  return std::vector<std::pair<decltype(&a->i_grad), const Tensor*>>{
      {&a->i_grad, in.i_grad},
      {&a->f_grad, in.f_grad},
      {&a->o_grad, in.o_grad},
      {&a->ci_grad, in.ci_grad},
      {&a->co_grad, in.co_grad}};
}

inline LstmCellSpec MakeSpec(bool v2, float forget_bias, float cell_clip, bool use_peephole) {
  LstmCellSpec s;
  s.order = v2 ? kIfco : kIcfo;
  s.forget_bias = forget_bias;
  s.cell_clip = cell_clip;
  s.use_peephole = use_peephole;
  return s;
}


// The family's kernels, one class template per op over the device's computations Dev<T>
// (lstm_block_kernels.cc: the CPU engine, lstm_block_gpu_kernels.cc: the CUDA engine), which
// run after the validation and the output allocation, on a problem that is not empty:
//   static absl::Status Forward(OpKernelContext*, const LstmBlockInputs&, const LstmCellSpec&,
//                               Tensor* outs[7]);
//   static absl::Status CellGrad(..., Tensor* outs[5]);
//   static absl::Status SeqGrad(..., bool exact, Tensor* outs[8]);
//   static absl::Status Zero(OpKernelContext*, std::initializer_list<Tensor*> outs);
// Zero writes the gradients of an empty problem (batch_size or cell_size 0).

// LSTMBlockCell, BlockLSTM, BlockLSTMV2: outputs i, cs, f, o, ci, co, h.
template <template <typename> class Dev, typename T, bool kSeq, bool kV2>
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
    const TensorShape shape = kSeq ? TensorShape({in.T, in.B, in.H}) : TensorShape({in.B, in.H});
    Tensor* outs[7];
    for (int k = 0; k < 7; ++k) OP_REQUIRES_OK(ctx, AllocateOutput(ctx, k, shape, &outs[k]));
    if (in.empty()) return;  // the outputs have no elements
    const LstmCellSpec spec = MakeSpec(kV2, forget_bias_, cell_clip_, use_peephole_);
    OP_REQUIRES_OK(ctx, Dev<T>::Forward(ctx, in, spec, outs));
  }

 private:
  float forget_bias_ = 0.f;
  float cell_clip_ = 0.f;
  bool use_peephole_ = false;
};

// LSTMBlockCellGrad: outputs cs_prev_grad, dicfo, wci_grad, wcf_grad, wco_grad, always freshly
// allocated (never an input buffer reused before it was read: the stock peephole bug,
// docs/SEMANTICS.md §5 #2).
template <template <typename> class Dev, typename T>
class LstmCellGradOp : public OpKernel {
 public:
  explicit LstmCellGradOp(OpKernelConstruction* c) : OpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("use_peephole", &use_peephole_));
  }

  void Compute(OpKernelContext* ctx) override {
    LstmBlockInputs in;
    OP_REQUIRES_OK(ctx, ValidateLstmBlock(ctx, Face::kCellGrad, &in));
    const int64_t B = in.B, H = in.H;
    Tensor* outs[5];
    OP_REQUIRES_OK(ctx, AllocateOutputs(ctx,
                                        {TensorShape({B, H}), TensorShape({B, 4 * H}),
                                         TensorShape({H}), TensorShape({H}), TensorShape({H})},
                                        outs));
    if (in.empty()) {
      OP_REQUIRES_OK(ctx, Dev<T>::Zero(ctx, {outs[0], outs[1], outs[2], outs[3], outs[4]}));
      return;
    }
    OP_REQUIRES_OK(ctx, Dev<T>::CellGrad(ctx, in, MakeSpec(false, 0.f, 0.f, use_peephole_), outs));
  }

 private:
  bool use_peephole_ = false;
};

// BlockLSTMGrad (ICFO), BlockLSTMGradV2 (IFCO) and BlockLSTMGradExact (either order): outputs
// x_grad, cs_prev_grad, h_prev_grad, w_grad, wci_grad, wcf_grad, wco_grad, b_grad.
template <template <typename> class Dev, typename T, bool kV2, bool kExact>
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
    OP_REQUIRES_OK(ctx,
                   ValidateLstmBlock(ctx, kExact ? Face::kSeqGradExact : Face::kSeqGrad, &in));
    const int64_t TL = in.T, B = in.B, I = in.I, H = in.H;
    Tensor* outs[8];
    OP_REQUIRES_OK(ctx, AllocateOutputs(ctx,
                                        {TensorShape({TL, B, I}), TensorShape({B, H}),
                                         TensorShape({B, H}), TensorShape({I + H, 4 * H}),
                                         TensorShape({H}), TensorShape({H}), TensorShape({H}),
                                         TensorShape({4 * H})},
                                        outs));
    if (in.empty()) {
      OP_REQUIRES_OK(ctx, Dev<T>::Zero(ctx, {outs[0], outs[1], outs[2], outs[3], outs[4],
                                             outs[5], outs[6], outs[7]}));
      return;
    }
    const LstmCellSpec spec = MakeSpec(v2_, 0.f, cell_clip_, use_peephole_);
    OP_REQUIRES_OK(ctx, Dev<T>::SeqGrad(ctx, in, spec, kExact, outs));
  }

 private:
  bool use_peephole_ = false;
  bool v2_ = false;
  float cell_clip_ = 0.f;
};

// The family's kernels for type T on DEVICE over Dev; SEQ_HOST places seq_len_max (e.g. in
// host memory) for the sequence ops (PLACE).
#define TFRNN_LSTM_BLOCK_KERNEL(NAME, DEVICE, PLACE, T, ...) \
  REGISTER_KERNEL_BUILDER(Name("TfRnn>" NAME).Device(DEVICE) PLACE.TypeConstraint<T>("T"), \
                          __VA_ARGS__);
#define TFRNN_LSTM_BLOCK_KERNELS(T, DEVICE, SEQ_HOST, Dev)                                      \
  TFRNN_LSTM_BLOCK_KERNEL("LSTMBlockCell", DEVICE, , T, LstmForwardOp<Dev, T, false, false>)    \
  TFRNN_LSTM_BLOCK_KERNEL("LSTMBlockCellGrad", DEVICE, , T, LstmCellGradOp<Dev, T>)             \
  TFRNN_LSTM_BLOCK_KERNEL("BlockLSTM", DEVICE, SEQ_HOST, T, LstmForwardOp<Dev, T, true, false>) \
  TFRNN_LSTM_BLOCK_KERNEL("BlockLSTMV2", DEVICE, SEQ_HOST, T, LstmForwardOp<Dev, T, true, true>) \
  TFRNN_LSTM_BLOCK_KERNEL("BlockLSTMGrad", DEVICE, SEQ_HOST, T,                                 \
                          LstmSeqGradOp<Dev, T, false, false>)                                  \
  TFRNN_LSTM_BLOCK_KERNEL("BlockLSTMGradV2", DEVICE, SEQ_HOST, T,                               \
                          LstmSeqGradOp<Dev, T, true, false>)                                   \
  TFRNN_LSTM_BLOCK_KERNEL("BlockLSTMGradExact", DEVICE, SEQ_HOST, T,                            \
                          LstmSeqGradOp<Dev, T, false, true>)

}  // namespace lstm_block
}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_KERNELS_LSTM_BLOCK_FACE_H_
