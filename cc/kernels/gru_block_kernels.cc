// CPU kernels of the GRU block family: validate -> describe -> call the engine.
#include <string>
#include <vector>

#include "cc/kernels/engine_loader.h"
#include "cc/kernels/kernel_util.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tfrnn {
namespace {

using ::tensorflow::DEVICE_CPU;
using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;

struct GruInputs {
  int64_t N = 0, I = 0, H = 0;
  // batch_size or cell_size 0: every output is empty or zero.
  bool empty() const { return N == 0 || H == 0; }
  const Tensor *x, *h_prev, *w_ru, *w_c, *b_ru, *b_c;
  const Tensor *r = nullptr, *u = nullptr, *c = nullptr, *d_h = nullptr;
  const Tensor *r_grad = nullptr, *u_grad = nullptr, *c_grad = nullptr;
};

// The family's validation helper: ranks first, then sizes; nothing read before it passes.
absl::Status ValidateGru(OpKernelContext* ctx, bool grad, bool exact, GruInputs* in) {
  const std::string op = ctx->op_kernel().type_string();
  std::vector<std::pair<const char*, const Tensor**>> params = {
      {"x", &in->x},       {"h_prev", &in->h_prev}, {"w_ru", &in->w_ru},
      {"w_c", &in->w_c},   {"b_ru", &in->b_ru},     {"b_c", &in->b_c}};
  std::vector<std::pair<const char*, const Tensor**>> acts;
  if (grad) acts = {{"r", &in->r}, {"u", &in->u}, {"c", &in->c}, {"d_h", &in->d_h}};
  if (exact) {
    acts.insert(acts.end(),
                {{"r_grad", &in->r_grad}, {"u_grad", &in->u_grad}, {"c_grad", &in->c_grad}});
  }
  for (auto& p : params) TF_RETURN_IF_ERROR(GetInput(ctx, p.first, p.second));
  for (auto& p : acts) TF_RETURN_IF_ERROR(GetInput(ctx, p.first, p.second));

  TF_RETURN_IF_ERROR(CheckRank(op, "x", *in->x, 2, "[batch_size, input_size]"));
  TF_RETURN_IF_ERROR(CheckRank(op, "h_prev", *in->h_prev, 2, "[batch_size, cell_size]"));
  TF_RETURN_IF_ERROR(
      CheckRank(op, "w_ru", *in->w_ru, 2, "[input_size + cell_size, 2 * cell_size]"));
  TF_RETURN_IF_ERROR(CheckRank(op, "w_c", *in->w_c, 2, "[input_size + cell_size, cell_size]"));
  TF_RETURN_IF_ERROR(CheckRank(op, "b_ru", *in->b_ru, 1, "[2 * cell_size]"));
  TF_RETURN_IF_ERROR(CheckRank(op, "b_c", *in->b_c, 1, "[cell_size]"));
  for (auto& p : acts) {
    TF_RETURN_IF_ERROR(CheckRank(op, p.first, **p.second, 2, "[batch_size, cell_size]"));
  }
  // Sizes, input by input, each against the sizes the inputs before it set (x: batch_size,
  // input_size; h_prev: cell_size), so that a message names the first input that is wrong.
  // batch_size or cell_size 0 is valid, as in stock: an empty (or zero) result.
  const int64_t N = in->x->dim_size(0), I = in->x->dim_size(1);
  TF_RETURN_IF_ERROR(
      CheckCounts(op, {N, I, Count(N) * I}, absl::StrCat("x ", ShapeStr(*in->x))));
  if (in->h_prev->dim_size(0) != N) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": h_prev must have shape [batch_size, cell_size] with batch_size = ", N,
        " (from x ", ShapeStr(*in->x), "), got ", ShapeStr(*in->h_prev)));
  }
  const int64_t H = in->h_prev->dim_size(1);
  TF_RETURN_IF_ERROR(CheckCounts(
      op, {H, Count(N) * (Count(I) + H), (Count(I) + H) * H * Count(3), Count(N) * H * Count(4)},
      absl::StrCat("h_prev ", ShapeStr(*in->h_prev), ", x ", ShapeStr(*in->x))));
  in->N = N;
  in->I = I;
  in->H = H;
  TF_RETURN_IF_ERROR(CheckShape(op, "w_ru", *in->w_ru, {I + H, 2 * H},
                                "[input_size + cell_size, 2 * cell_size]"));
  TF_RETURN_IF_ERROR(
      CheckShape(op, "w_c", *in->w_c, {I + H, H}, "[input_size + cell_size, cell_size]"));
  TF_RETURN_IF_ERROR(CheckShape(op, "b_ru", *in->b_ru, {2 * H}, "[2 * cell_size]"));
  TF_RETURN_IF_ERROR(CheckShape(op, "b_c", *in->b_c, {H}, "[cell_size]"));
  for (auto& p : acts) {
    TF_RETURN_IF_ERROR(CheckShape(op, p.first, **p.second, {N, H}, "[batch_size, cell_size]"));
  }
  return absl::OkStatus();
}

// The operands the forward (GruCellFwdArgs) and the backward (GruCellBwdArgs) both read.
template <typename T, typename Args>
void SetSharedOperands(ComputeBridge<T>& br, const GruInputs& in, Args* a) {
  a->N = in.N;
  a->I = in.I;
  a->H = in.H;
  a->x = br.In(*in.x);
  a->h_prev = br.In(*in.h_prev);
  a->w_ru = br.In(*in.w_ru);
  a->w_c = br.In(*in.w_c);
}

template <typename T>
class GruCellOp : public OpKernel {
 public:
  explicit GruCellOp(OpKernelConstruction* c) : OpKernel(c) {}

  void Compute(OpKernelContext* ctx) override {
    GruInputs in;
    OP_REQUIRES_OK(ctx, ValidateGru(ctx, false, false, &in));
    Tensor* outs[4];
    for (int k = 0; k < 4; ++k) {
      OP_REQUIRES_OK(ctx, ctx->allocate_output(k, TensorShape({in.N, in.H}), &outs[k]));
    }
    if (in.empty()) return;  // the outputs have no elements
    ComputeBridge<T> br(ctx);
    using A = typename ComputeBridge<T>::A;
    GruCellFwdArgs<A> a;
    SetSharedOperands(br, in, &a);
    a.b_ru = br.In(*in.b_ru);
    a.b_c = br.In(*in.b_c);
    a.r = br.Out(outs[0]);
    a.u = br.Out(outs[1]);
    a.c = br.Out(outs[2]);
    a.h = br.Out(outs[3]);
    A* ws = br.Scratch(GruCellFwdWorkspaceSize(in.N, in.H));
    OP_REQUIRES_OK(ctx, br.status());
    const EngineApi* engine;
    OP_REQUIRES_OK(ctx, GetEngine(&engine));
    TfHostPool pool(ctx);
    EngineFns<A>::GruForward(*engine)(pool, a, ws);
    br.Finish();
  }
};

template <typename T, bool kExact>
class GruCellGradOp : public OpKernel {
 public:
  explicit GruCellGradOp(OpKernelConstruction* c) : OpKernel(c) {}

  void Compute(OpKernelContext* ctx) override {
    GruInputs in;
    OP_REQUIRES_OK(ctx, ValidateGru(ctx, true, kExact, &in));
    Tensor *d_x, *d_h_prev, *d_c_bar, *d_rbub;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({in.N, in.I}), &d_x));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({in.N, in.H}), &d_h_prev));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, TensorShape({in.N, in.H}), &d_c_bar));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(3, TensorShape({in.N, 2 * in.H}), &d_rbub));
    if (in.empty()) return SetZero<T>({d_x, d_h_prev, d_c_bar, d_rbub});
    ComputeBridge<T> br(ctx);
    using A = typename ComputeBridge<T>::A;
    GruCellBwdArgs<A> a;
    SetSharedOperands(br, in, &a);
    a.r = br.In(*in.r);
    a.u = br.In(*in.u);
    a.c = br.In(*in.c);
    a.d_h = br.In(*in.d_h);
    if (kExact) {
      a.g_r = br.In(*in.r_grad);
      a.g_u = br.In(*in.u_grad);
      a.g_c = br.In(*in.c_grad);
    }
    a.d_x = br.Out(d_x);
    a.d_h_prev = br.Out(d_h_prev);
    a.d_c_bar = br.Out(d_c_bar);
    a.d_r_bar_u_bar = br.Out(d_rbub);
    A* ws = br.Scratch(GruCellBwdWorkspaceSize(in.N, in.H));
    OP_REQUIRES_OK(ctx, br.status());
    const EngineApi* engine;
    OP_REQUIRES_OK(ctx, GetEngine(&engine));
    TfHostPool pool(ctx);
    EngineFns<A>::GruBackward(*engine)(pool, a, ws);
    br.Finish();
  }
};

#define TFRNN_REGISTER_GRU_KERNELS(T)                                                        \
  REGISTER_KERNEL_BUILDER(Name("TfRnn>GRUBlockCell").Device(DEVICE_CPU).TypeConstraint<T>("T"), \
                          GruCellOp<T>);                                                     \
  REGISTER_KERNEL_BUILDER(                                                                   \
      Name("TfRnn>GRUBlockCellGrad").Device(DEVICE_CPU).TypeConstraint<T>("T"),              \
      GruCellGradOp<T, false>);                                                              \
  REGISTER_KERNEL_BUILDER(                                                                   \
      Name("TfRnn>GRUBlockCellGradExact").Device(DEVICE_CPU).TypeConstraint<T>("T"),         \
      GruCellGradOp<T, true>);

TFRNN_REGISTER_GRU_KERNELS(Eigen::half)
TFRNN_REGISTER_GRU_KERNELS(Eigen::bfloat16)
TFRNN_REGISTER_GRU_KERNELS(float)
TFRNN_REGISTER_GRU_KERNELS(double)
#undef TFRNN_REGISTER_GRU_KERNELS

#ifdef TFRNN_WITH_CUDA
#include "cc/kernels/gru_block_gpu_kernels.inc"  // GPU kernels (TfRnn> names)
#endif

}  // namespace
}  // namespace tfrnn
