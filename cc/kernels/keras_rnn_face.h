// What both faces of the Keras layers' op pair (TfRnn>KerasRNN, KerasRNNBackprop; shapes in
// cc/ops/keras_rnn_ops.cc) share: the attrs, and the shape checks that turn the inputs'
// shapes into the engine's RnnSpec (one layer and direction, weights_xw in Keras gate order).
// The CPU and GPU kernels (keras_rnn_kernels.cc, keras_rnn_gpu_kernels.cc) call them on the
// tensors, and share the outputs' allocation; the XLA kernels (cc/xla/keras_rnn_xla.cc) call
// them on the shapes XLA compiles for.
#ifndef TF_RNN_OPS_CC_KERNELS_KERAS_RNN_FACE_H_
#define TF_RNN_OPS_CC_KERNELS_KERAS_RNN_FACE_H_

#include <memory>
#include <string>

#include "cc/kernels/keras_rnn_extras.h"
#include "cc/kernels/kept_weights.h"
#include "cc/kernels/kernel_util.h"
#include "cc/kernels/rnn_kernel_util.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tfrnn {

// The attrs of both ops (is_training, reuse_packed_weights: the forward's only).
struct KerasAttrs {
  RnnMode mode = RnnMode::kLstm;
  KerasExtras kx;
  bool training = true;
  // reuse_packed_weights at inference: the kernel's weights id and kept packing (the CPU's).
  std::shared_ptr<KeptWeights> kept;
  // bf16_products: a float32 op's products as a bfloat16 op's (the CPU's, and XLA's on the
  // CPU), in the forward and the backprop alike.
  bool bf16_products = false;
  // input_grad (backprop): false, input_backprop is zeros and not computed.
  bool input_grad = true;

  absl::Status Read(tensorflow::OpKernelConstruction* c) {
    std::string mode_name;
    TF_RETURN_IF_ERROR(c->GetAttr("rnn_mode", &mode_name));
    mode = ParseRnnMode(mode_name);
    TF_RETURN_IF_ERROR(kx.Read(c));
    if (c->HasAttr("is_training")) TF_RETURN_IF_ERROR(c->GetAttr("is_training", &training));
    bool reuse = false;
    if (c->HasAttr("reuse_packed_weights")) {
      TF_RETURN_IF_ERROR(c->GetAttr("reuse_packed_weights", &reuse));
    }
    if (reuse && !training) kept = std::make_shared<KeptWeights>();
    if (c->HasAttr("bf16_products")) {
      TF_RETURN_IF_ERROR(c->GetAttr("bf16_products", &bf16_products));
    }
    if (c->HasAttr("input_grad")) TF_RETURN_IF_ERROR(c->GetAttr("input_grad", &input_grad));
    return absl::OkStatus();
  }
};

// The shapes of the first eight inputs, in the op's order.
struct KerasShapes {
  TensorShape x, h0, c0, kernel, rkernel, bias, lengths, mask;
};

// The engine's view of one call: the spec (has_mask set when recurrent_mask is not [0]) and
// how the optional inputs are present.
struct KerasLayout {
  RnnSpec spec;
  bool two_biases = false;   // bias is [2, K·units]: input and recurrent
  bool has_lengths = false;  // sequence_lengths is [batch], not [0]
};

// Block index of each logical gate (lstm i, f, c', o; gru r, z, n) in Keras's gate order.
inline void KerasGateOrder(RnnSpec* s) {
  if (s->mode == RnnMode::kGru) {  // Keras z, r, h
    s->gate_pos[0] = 1;
    s->gate_pos[1] = 0;
    s->gate_pos[2] = 2;
  }
}

// Checks every input shape (ranks, sizes, agreement) and describes the call; the messages
// name the op and the input. Values (sequence_lengths in [0, time]) are checked by the caller.
inline absl::Status KerasLayoutOf(const std::string& op, const KerasAttrs& attrs,
                                  const KerasShapes& in, KerasLayout* out) {
  const bool lstm = attrs.mode == RnnMode::kLstm;
  TF_RETURN_IF_ERROR(CheckRank(op, "input", in.x, 3, "[batch, time, input_size]"));
  TF_RETURN_IF_ERROR(CheckRank(op, "input_h", in.h0, 2, "[batch, units]"));
  if (lstm) TF_RETURN_IF_ERROR(CheckRank(op, "input_c", in.c0, 2, "[batch, units]"));
  TF_RETURN_IF_ERROR(CheckRank(op, "kernel", in.kernel, 2, "[input_size, gates * units]"));
  TF_RETURN_IF_ERROR(
      CheckRank(op, "recurrent_kernel", in.rkernel, 2, "[units, gates * units]"));
  if (in.bias.dims() != 1 && in.bias.dims() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": bias must be rank 1 [gates * units] or rank 2 [2, gates * units], "
                         "got shape ", ShapeStr(in.bias)));
  }
  TF_RETURN_IF_ERROR(CheckRank(op, "sequence_lengths", in.lengths, 1, "[batch] or [0]"));

  RnnSpec& s = out->spec;
  s.mode = attrs.mode;
  s.B = in.x.dim_size(0);
  s.T = in.x.dim_size(1);
  s.I = in.x.dim_size(2);
  s.H = in.h0.dim_size(1);
  s.weights_xw = true;
  s.training = attrs.training;
  KerasGateOrder(&s);
  if (s.H == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": input_h must have units > 0, got shape ", ShapeStr(in.h0)));
  }
  TF_RETURN_IF_ERROR(CheckRnnSizes(
      op, s, absl::StrCat("input_h ", ShapeStr(in.h0), ", input ", ShapeStr(in.x))));
  if (in.h0.dim_size(0) != s.B) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": input_h has batch size ", in.h0.dim_size(0), " but input has ", s.B,
        " (input_h shape ", ShapeStr(in.h0), ", input shape ", ShapeStr(in.x), ")"));
  }
  if (lstm && in.c0 != in.h0) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": input_c must have the shape of input_h ", ShapeStr(in.h0), ", got ",
        ShapeStr(in.c0)));
  }
  TF_RETURN_IF_ERROR(attrs.kx.Apply(op, ShapeStr(in.x), &s));
  const int64_t KN = RnnK(s) * s.H, in_rows = s.preprojected ? 0 : s.I;
  TF_RETURN_IF_ERROR(CheckShape(op, "kernel", in.kernel, {in_rows, KN},
                                s.preprojected ? "[0, gates * units] (preprojected input)"
                                               : "[input_size, gates * units]"));
  TF_RETURN_IF_ERROR(
      CheckShape(op, "recurrent_kernel", in.rkernel, {s.H, KN}, "[units, gates * units]"));
  out->two_biases = in.bias.dims() == 2;
  TF_RETURN_IF_ERROR(out->two_biases
                         ? CheckShape(op, "bias", in.bias, {2, KN}, "[2, gates * units]")
                         : CheckShape(op, "bias", in.bias, {KN}, "[gates * units]"));
  const int64_t nlen = in.lengths.dim_size(0);
  if (nlen != 0 && nlen != s.B) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": sequence_lengths must have shape [", s.B, "] (batch) or [0], got ",
                     ShapeStr(in.lengths)));
  }
  out->has_lengths = nlen != 0;
  return attrs.kx.MaskShape(op, in.mask, &s);
}

// One call's inputs (mask null when recurrent_mask is [0], lengths null when
// sequence_lengths is [0]) and its spec.
struct KerasInputs {
  const tensorflow::Tensor *x, *h0, *c0, *kernel, *rkernel, *bias, *lengths, *mask = nullptr;
  RnnSpec spec;
  bool two_biases = false;  // bias is [2, K·units]: input and recurrent
};

inline absl::Status ValidateKeras(OpKernelContext* ctx, const KerasAttrs& attrs, KerasInputs* in) {
  const std::string op = ctx->op_kernel().type_string();
  const Tensor* mask;
  TF_RETURN_IF_ERROR(GetInputs(ctx, {{"input", &in->x},
                                     {"input_h", &in->h0},
                                     {"input_c", &in->c0},
                                     {"kernel", &in->kernel},
                                     {"recurrent_kernel", &in->rkernel},
                                     {"bias", &in->bias},
                                     {"sequence_lengths", &in->lengths},
                                     {"recurrent_mask", &mask}}));
  KerasLayout layout;
  TF_RETURN_IF_ERROR(KerasLayoutOf(op, attrs,
                                   {in->x->shape(), in->h0->shape(), in->c0->shape(),
                                    in->kernel->shape(), in->rkernel->shape(),
                                    in->bias->shape(), in->lengths->shape(), mask->shape()},
                                   &layout));
  in->spec = layout.spec;
  in->two_biases = layout.two_biases;
  in->mask = layout.spec.has_mask ? mask : nullptr;
  if (!layout.has_lengths) {
    in->lengths = nullptr;
    return absl::OkStatus();
  }
  return CheckSeqLengths(op, *in->lengths, in->spec.B, in->spec.T, "time");
}

// Batch-major [B, T, c] <-> the engines' time-major [T, B, c]: the same memory when T or B is
// 1 (no transpose).
inline bool SameMajor(const RnnSpec& s) { return s.T == 1 || s.B == 1; }

// The kernel class of both devices (TfRnn>KerasRNN with kBackward false, KerasRNNBackprop with
// kBackward): the inputs validated, then the device's computation Dev<T>::Forward or ::Backward
// (the CPU's CpuKeras in keras_rnn_kernels.cc, the GPU's GpuKeras in keras_rnn_gpu_kernels.cc).
template <template <typename> class Dev, typename T, bool kBackward>
class KerasRnnKernel : public AttrsOpKernel<KerasAttrs> {
 public:
  using AttrsOpKernel::AttrsOpKernel;

  void Compute(tensorflow::OpKernelContext* ctx) override {
    KerasInputs in;
    OP_REQUIRES_OK(ctx, ValidateKeras(ctx, attrs_, &in));
    OP_REQUIRES_OK(ctx, kBackward ? Dev<T>::Backward(ctx, attrs_, in)
                                  : Dev<T>::Forward(ctx, attrs_, in));
  }
};

// The backprop op's gradient inputs must match the forward's outputs; reserve_space must hold
// `reserve_elems` elements of the op's type.
inline absl::Status CheckKerasBackpropShapes(const std::string& op, const RnnSpec& s,
                                             const TensorShape& dy, const TensorShape& dhn,
                                             const TensorShape& dcn, const TensorShape& reserve,
                                             int64_t reserve_elems) {
  TF_RETURN_IF_ERROR(
      CheckShape(op, "output_backprop", dy, {s.B, s.T, s.H}, "[batch, time, units]"));
  TF_RETURN_IF_ERROR(CheckShape(op, "output_h_backprop", dhn, {s.B, s.H}, "[batch, units]"));
  if (s.mode == RnnMode::kLstm) {
    TF_RETURN_IF_ERROR(CheckShape(op, "output_c_backprop", dcn, {s.B, s.H}, "[batch, units]"));
  }
  return CheckReserveSpace(op, reserve, reserve_elems, "forward op");
}

// The forward's outputs: output [B, T, units], output_h, output_c (lstm; else [0]) and the
// reserve (reserve_elems elements when training, else [0]).
struct KerasOutputs {
  tensorflow::Tensor *y, *hn, *cn, *reserve;
};
inline absl::Status AllocateKerasOutputs(tensorflow::OpKernelContext* ctx, const KerasInputs& in,
                                         bool training, int64_t reserve_elems,
                                         KerasOutputs* out) {
  const RnnSpec& s = in.spec;
  TF_RETURN_IF_ERROR(AllocateOutput(ctx, 0, TensorShape({s.B, s.T, s.H}), &out->y));
  TF_RETURN_IF_ERROR(AllocateOutput(ctx, 1, in.h0->shape(), &out->hn));
  TF_RETURN_IF_ERROR(AllocateOutput(
      ctx, 2, s.mode == RnnMode::kLstm ? in.h0->shape() : TensorShape({0}), &out->cn));
  return AllocateOutput(ctx, 3, TensorShape({training ? reserve_elems : 0}), &out->reserve);
}

// The backprop op's gradient inputs (checked against the forward's outputs and a reserve of
// reserve_elems elements), and its outputs: the gradients of input, input_h, input_c
// (zeros unless lstm), kernel, recurrent_kernel and bias, shaped as they are.
struct KerasGrads {
  const tensorflow::Tensor *dy, *dhn, *dcn, *reserve;
  tensorflow::Tensor *dx, *dh0, *dc0, *dkernel, *drkernel, *dbias;
};
inline absl::Status KerasGradsOf(tensorflow::OpKernelContext* ctx, const KerasInputs& in,
                                 int64_t reserve_elems, KerasGrads* g) {
  const std::string op = ctx->op_kernel().type_string();
  TF_RETURN_IF_ERROR(GetInputs(ctx, {{"output_backprop", &g->dy},
                                     {"output_h_backprop", &g->dhn},
                                     {"output_c_backprop", &g->dcn},
                                     {"reserve_space", &g->reserve}}));
  TF_RETURN_IF_ERROR(CheckKerasBackpropShapes(op, in.spec, g->dy->shape(), g->dhn->shape(),
                                              g->dcn->shape(), g->reserve->shape(),
                                              reserve_elems));
  const tensorflow::Tensor* like[6] = {in.x, in.h0, in.c0, in.kernel, in.rkernel, in.bias};
  tensorflow::Tensor** outs[6] = {&g->dx, &g->dh0, &g->dc0, &g->dkernel, &g->drkernel,
                                  &g->dbias};
  for (int k = 0; k < 6; ++k) {
    TF_RETURN_IF_ERROR(AllocateOutput(ctx, k, like[k]->shape(), outs[k]));
  }
  return absl::OkStatus();
}

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_KERNELS_KERAS_RNN_FACE_H_
