// The GRU block family's op kernels on either device: the validation of every op's inputs,
// the outputs and the list of the family's kernels. The device's computations are
// gru_block_kernels.cc's (CPU) and gru_block_gpu_kernels.cc's (CUDA).
#ifndef TF_RNN_OPS_CC_KERNELS_GRU_BLOCK_FACE_H_
#define TF_RNN_OPS_CC_KERNELS_GRU_BLOCK_FACE_H_

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "cc/kernels/kernel_util.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tfrnn {
namespace gru_block {

struct GruInputs {
  int64_t B = 0, I = 0, H = 0;
  // batch_size or cell_size 0: every output is empty or zero.
  bool empty() const { return B == 0 || H == 0; }
  const Tensor *x, *h_prev, *w_ru, *w_c, *b_ru, *b_c;
  const Tensor *r = nullptr, *u = nullptr, *c = nullptr, *d_h = nullptr;
  const Tensor *r_grad = nullptr, *u_grad = nullptr, *c_grad = nullptr;
};

// The shapes of an op's inputs: the six parameters, then (grad) r, u, c, d_h and (exact)
// r_grad, u_grad, c_grad, by name.
struct GruShapes {
  TensorShape x, h_prev, w_ru, w_c, b_ru, b_c;
  std::vector<std::pair<const char*, TensorShape>> acts;
};

// The family's shape checks: ranks first, then sizes; sets B, I, H.
inline absl::Status GruSizesOf(const std::string& op, const GruShapes& in, GruInputs* out) {
  TF_RETURN_IF_ERROR(CheckRank(op, "x", in.x, 2, "[batch_size, input_size]"));
  TF_RETURN_IF_ERROR(CheckRank(op, "h_prev", in.h_prev, 2, "[batch_size, cell_size]"));
  TF_RETURN_IF_ERROR(
      CheckRank(op, "w_ru", in.w_ru, 2, "[input_size + cell_size, 2 * cell_size]"));
  TF_RETURN_IF_ERROR(CheckRank(op, "w_c", in.w_c, 2, "[input_size + cell_size, cell_size]"));
  TF_RETURN_IF_ERROR(CheckRank(op, "b_ru", in.b_ru, 1, "[2 * cell_size]"));
  TF_RETURN_IF_ERROR(CheckRank(op, "b_c", in.b_c, 1, "[cell_size]"));
  for (auto& p : in.acts) {
    TF_RETURN_IF_ERROR(CheckRank(op, p.first, p.second, 2, "[batch_size, cell_size]"));
  }
  // Sizes, input by input, each against the sizes the inputs before it set (x: batch_size,
  // input_size; h_prev: cell_size), so that a message names the first input that is wrong.
  // batch_size or cell_size 0 is valid, as in stock: an empty (or zero) result.
  const int64_t B = in.x.dim_size(0), I = in.x.dim_size(1);
  TF_RETURN_IF_ERROR(CheckCounts(op, {B, I, Count(B) * I}, absl::StrCat("x ", ShapeStr(in.x))));
  if (in.h_prev.dim_size(0) != B) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": h_prev must have shape [batch_size, cell_size] with batch_size = ", B,
        " (from x ", ShapeStr(in.x), "), got ", ShapeStr(in.h_prev)));
  }
  const int64_t H = in.h_prev.dim_size(1);
  TF_RETURN_IF_ERROR(CheckCounts(
      op, {H, Count(B) * (Count(I) + H), (Count(I) + H) * H * Count(3), Count(B) * H * Count(4)},
      absl::StrCat("h_prev ", ShapeStr(in.h_prev), ", x ", ShapeStr(in.x))));
  out->B = B;
  out->I = I;
  out->H = H;
  TF_RETURN_IF_ERROR(CheckShape(op, "w_ru", in.w_ru, {I + H, 2 * H},
                                "[input_size + cell_size, 2 * cell_size]"));
  TF_RETURN_IF_ERROR(
      CheckShape(op, "w_c", in.w_c, {I + H, H}, "[input_size + cell_size, cell_size]"));
  TF_RETURN_IF_ERROR(CheckShape(op, "b_ru", in.b_ru, {2 * H}, "[2 * cell_size]"));
  TF_RETURN_IF_ERROR(CheckShape(op, "b_c", in.b_c, {H}, "[cell_size]"));
  for (auto& p : in.acts) {
    TF_RETURN_IF_ERROR(CheckShape(op, p.first, p.second, {B, H}, "[batch_size, cell_size]"));
  }
  return absl::OkStatus();
}

// The inputs after the parameters, in the op's order: the backward's (r, u, c, d_h), then the
// exact backward's (r_grad, u_grad, c_grad), each with the field of `in` that holds it.
inline std::vector<std::pair<const char*, const Tensor**>> GruActs(bool grad, bool exact,
                                                                 GruInputs* in) {
  std::vector<std::pair<const char*, const Tensor**>> acts;
  if (grad) acts = {{"r", &in->r}, {"u", &in->u}, {"c", &in->c}, {"d_h", &in->d_h}};
  if (exact) {
    acts.insert(acts.end(),
                {{"r_grad", &in->r_grad}, {"u_grad", &in->u_grad}, {"c_grad", &in->c_grad}});
  }
  return acts;
}

// The family's validation helper on the op's tensors: GruSizesOf; nothing read before it
// passes.
inline absl::Status ValidateGru(OpKernelContext* ctx, bool grad, bool exact, GruInputs* in) {
  const std::string op = ctx->op_kernel().type_string();
  TF_RETURN_IF_ERROR(GetInputs(ctx, {{"x", &in->x},
                                     {"h_prev", &in->h_prev},
                                     {"w_ru", &in->w_ru},
                                     {"w_c", &in->w_c},
                                     {"b_ru", &in->b_ru},
                                     {"b_c", &in->b_c}}));
  GruShapes shapes{in->x->shape(),    in->h_prev->shape(), in->w_ru->shape(),
                   in->w_c->shape(),  in->b_ru->shape(),   in->b_c->shape(), {}};
  for (const auto& a : GruActs(grad, exact, in)) {
    TF_RETURN_IF_ERROR(GetInput(ctx, a.first, a.second));
    shapes.acts.push_back({a.first, (*a.second)->shape()});
  }
  return GruSizesOf(op, shapes, in);
}

// The (operand, tensor) pairs of the inputs the forward and the backward read, in the engine's
// arguments Args (the CPU engine's or the CUDA engine's: ComputeBridge::BindIn, gpu::BindIn).
template <typename Args>
auto SharedInputs(const GruInputs& in, Args* a) {
  return std::vector<std::pair<decltype(&a->x), const Tensor*>>{
      {&a->x, in.x}, {&a->h_prev, in.h_prev}, {&a->w_ru, in.w_ru}, {&a->w_c, in.w_c}};
}

// The same for the forward's outputs and the incoming gradient the backward reads, and (exact)
// the gradients of the r, u and c outputs.
template <typename Args>
auto GradInputs(const GruInputs& in, bool exact, Args* a) {
  std::vector<std::pair<decltype(&a->r), const Tensor*>> inputs = {
      {&a->r, in.r}, {&a->u, in.u}, {&a->c, in.c}, {&a->d_h, in.d_h}};
  if (exact) {
    inputs.insert(inputs.end(),
                  {{&a->g_r, in.r_grad}, {&a->g_u, in.u_grad}, {&a->g_c, in.c_grad}});
  }
  return inputs;
}

// The family's kernels over the device's computations Dev<T> (gru_block_kernels.cc: the CPU
// engine, gru_block_gpu_kernels.cc: the CUDA engine), which run after the validation and the
// output allocation, on a problem that is not empty:
//   static absl::Status Forward(OpKernelContext*, const GruInputs&, Tensor* outs[4]);
//   static absl::Status Backward(OpKernelContext*, const GruInputs&, bool exact,
//                                Tensor* outs[4]);
//   static absl::Status Zero(OpKernelContext*, std::initializer_list<Tensor*> outs);
// Zero writes the gradients of an empty problem (batch_size or cell_size 0).

// GRUBlockCell (kGrad false): outputs r, u, c, h [batch, cell]. GRUBlockCellGrad(Exact):
// outputs d_x, d_h_prev, d_c_bar, d_r_bar_u_bar.
template <template <typename> class Dev, typename T, bool kGrad, bool kExact>
class GruCellOp : public OpKernel {
 public:
  explicit GruCellOp(OpKernelConstruction* c) : OpKernel(c) {}

  void Compute(OpKernelContext* ctx) override {
    GruInputs in;
    OP_REQUIRES_OK(ctx, ValidateGru(ctx, kGrad, kExact, &in));
    const int64_t B = in.B, I = in.I, H = in.H;
    Tensor* outs[4];
    OP_REQUIRES_OK(ctx, AllocateOutputs(ctx,
                                        {TensorShape({B, kGrad ? I : H}), TensorShape({B, H}),
                                         TensorShape({B, H}), TensorShape({B, kGrad ? 2 * H : H})},
                                        outs));
    if (in.empty()) {
      // The forward's outputs have no elements; d_x may have some.
      if (kGrad) OP_REQUIRES_OK(ctx, Dev<T>::Zero(ctx, {outs[0], outs[1], outs[2], outs[3]}));
      return;
    }
    OP_REQUIRES_OK(ctx, kGrad ? Dev<T>::Backward(ctx, in, kExact, outs)
                              : Dev<T>::Forward(ctx, in, outs));
  }
};

// The family's kernels for type T on DEVICE over Dev.
#define TFRNN_GRU_BLOCK_KERNEL(NAME, DEVICE, T, ...) \
  REGISTER_KERNEL_BUILDER(Name("TfRnn>" NAME).Device(DEVICE).TypeConstraint<T>("T"), __VA_ARGS__);
#define TFRNN_GRU_BLOCK_KERNELS(T, DEVICE, Dev)                                      \
  TFRNN_GRU_BLOCK_KERNEL("GRUBlockCell", DEVICE, T, GruCellOp<Dev, T, false, false>) \
  TFRNN_GRU_BLOCK_KERNEL("GRUBlockCellGrad", DEVICE, T, GruCellOp<Dev, T, true, false>) \
  TFRNN_GRU_BLOCK_KERNEL("GRUBlockCellGradExact", DEVICE, T, GruCellOp<Dev, T, true, true>)

}  // namespace gru_block
}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_KERNELS_GRU_BLOCK_FACE_H_
