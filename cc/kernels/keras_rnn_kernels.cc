// CPU kernels of the Keras layers' op pair (TfRnn>KerasRNN, KerasRNNBackprop; shapes and
// layouts in cc/ops/keras_rnn_ops.cc): validate and describe (keras_rnn_face.h) -> the stacked
// engine, reading and writing the Keras tensors in place (RnnWeights).
#include <algorithm>
#include <string>
#include <vector>

#include "cc/kernels/engine_loader.h"
#include "cc/kernels/keras_rnn_face.h"
#include "cc/kernels/kernel_util.h"
#include "cc/kernels/rnn_kernel_util.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tfrnn {
namespace {

struct KerasInputs {
  const Tensor *x, *h0, *c0, *kernel, *rkernel, *bias, *lengths, *mask = nullptr;
  RnnSpec spec;
  bool two_biases = false;  // bias is [2, K·units]: input and recurrent
};

absl::Status ValidateKeras(OpKernelContext* ctx, const KerasAttrs& attrs, KerasInputs* in) {
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

// The engine's view of the Keras tensors (through the bridge: converted for half/bf16): W, R
// in place (weights_xw), the input bias, and the recurrent bias (bias's second row, else zeros).
template <typename T>
RnnWeights<typename ComputeType<T>::type> KerasWeights(const KerasInputs& in,
                                                       ComputeBridge<T>* br) {
  using A = typename ComputeType<T>::type;
  const int64_t KN = RnnK(in.spec) * in.spec.H;
  RnnWeights<A> w;
  w.W = br->In(*in.kernel);
  w.R = br->In(*in.rkernel);
  w.bW = br->In(*in.bias);
  if (in.two_biases) {
    w.bR = w.bW != nullptr ? w.bW + KN : nullptr;
  } else {
    A* zeros = br->Scratch(KN);
    if (zeros != nullptr) std::fill_n(zeros, KN, A(0));
    w.bR = zeros;
  }
  return w;
}

// Batch-major [B, T, c] <-> the engine's time-major [T, B, c]: the same memory when T or B is
// 1 (no copy).
inline bool SameMajor(const RnnSpec& s) { return s.T == 1 || s.B == 1; }

// TfRnn>KerasRNN (kBackward false) and KerasRNNBackprop (kBackward): the inputs validated, then
// the engine's forward or backward.
template <typename T, bool kBackward>
class KerasRnnOp : public AttrsOpKernel<KerasAttrs> {
 public:
  using A = typename ComputeType<T>::type;
  using AttrsOpKernel::AttrsOpKernel;

  void Compute(OpKernelContext* ctx) override {
    KerasInputs in;
    OP_REQUIRES_OK(ctx, ValidateKeras(ctx, attrs_, &in));
    OP_REQUIRES_OK(ctx, kBackward ? Backward(ctx, in) : Forward(ctx, in));
  }

 private:
  static const int* Lengths(const KerasInputs& in, std::vector<int>* store) {
    return SeqLengths(in.lengths, in.spec.B, store);
  }

  absl::Status Forward(OpKernelContext* ctx, const KerasInputs& in) const {
    const bool training = attrs_.training;
    const RnnSpec& s = in.spec;
    const bool lstm = s.mode == RnnMode::kLstm;
    const int64_t reserve_a = RnnReserveSize(s);
    Tensor *output, *output_h, *output_c, *reserve;
    TF_RETURN_IF_ERROR(ctx->allocate_output(0, TensorShape({s.B, s.T, s.H}), &output));
    TF_RETURN_IF_ERROR(ctx->allocate_output(1, in.h0->shape(), &output_h));
    TF_RETURN_IF_ERROR(
        ctx->allocate_output(2, lstm ? in.h0->shape() : TensorShape({0}), &output_c));
    TF_RETURN_IF_ERROR(ctx->allocate_output(
        3, TensorShape({training ? ReserveElementsOfT<T, A>(reserve_a) : 0}), &reserve));
    std::vector<int> lengths;
    RnnFwdArgs<A> a;
    a.lengths = Lengths(in, &lengths);
    // The engine leaves the reserve rows past each sequence's length unwritten.
    if (training && AnyShorter(lengths, s.T)) {
      Zero<T>(ctx->eigen_device<CpuDevice>(), reserve->flat<T>().data(), reserve->NumElements());
    }

    ComputeBridge<T> br(ctx);
    const A* x = br.In(*in.x);
    a.h0 = br.In(*in.h0);
    a.c0 = lstm ? br.In(*in.c0) : nullptr;
    a.weights = KerasWeights<T>(in, &br);
    if (in.mask != nullptr) a.mask = br.In(*in.mask);
    A* y = br.Out(output);
    a.hn = br.Out(output_h);
    a.cn = lstm ? br.Out(output_c) : nullptr;
    a.reserve = training ? reinterpret_cast<A*>(reserve->flat<T>().data()) : nullptr;
    return RunRnnForward<T>(ctx, br, s, SameMajor(s), x, y, &a);
  }

  absl::Status Backward(OpKernelContext* ctx, const KerasInputs& in) const {
    const std::string op = type_string();
    const RnnSpec& s = in.spec;
    const bool lstm = s.mode == RnnMode::kLstm;
    const int64_t KN = RnnK(s) * s.H;
    const Tensor *dy, *dhn, *dcn, *reserve;
    TF_RETURN_IF_ERROR(GetInputs(ctx, {{"output_backprop", &dy},
                                       {"output_h_backprop", &dhn},
                                       {"output_c_backprop", &dcn},
                                       {"reserve_space", &reserve}}));
    TF_RETURN_IF_ERROR(CheckKerasBackpropShapes(op, s, dy->shape(), dhn->shape(), dcn->shape(),
                                                reserve->shape(),
                                                ReserveElementsOfT<T, A>(RnnReserveSize(s))));

    Tensor *dx, *dh0, *dc0, *dkernel, *drkernel, *dbias;
    TF_RETURN_IF_ERROR(ctx->allocate_output(0, in.x->shape(), &dx));
    TF_RETURN_IF_ERROR(ctx->allocate_output(1, in.h0->shape(), &dh0));
    TF_RETURN_IF_ERROR(ctx->allocate_output(2, in.c0->shape(), &dc0));
    TF_RETURN_IF_ERROR(ctx->allocate_output(3, in.kernel->shape(), &dkernel));
    TF_RETURN_IF_ERROR(ctx->allocate_output(4, in.rkernel->shape(), &drkernel));
    TF_RETURN_IF_ERROR(ctx->allocate_output(5, in.bias->shape(), &dbias));
    if (!lstm) dc0->flat<T>().setZero();

    ComputeBridge<T> br(ctx);
    RnnBwdArgs<A> a;
    std::vector<int> lengths;
    a.lengths = Lengths(in, &lengths);
    const A* x = br.In(*in.x);
    const A* dyv = br.In(*dy);
    a.h0 = br.In(*in.h0);
    a.c0 = lstm ? br.In(*in.c0) : nullptr;
    a.weights = KerasWeights<T>(in, &br);
    if (in.mask != nullptr) a.mask = br.In(*in.mask);
    a.reserve = reinterpret_cast<const A*>(reserve->flat<T>().data());
    a.dhn = br.In(*dhn);
    a.dcn = lstm ? br.In(*dcn) : nullptr;
    A* dxv = br.Out(dx);
    a.dh0 = br.Out(dh0);
    a.dc0 = lstm ? br.Out(dc0) : nullptr;
    A* db = br.Out(dbias);
    a.dweights.dW = br.Out(dkernel);
    a.dweights.dR = br.Out(drkernel);
    a.dweights.dbW = db;
    a.dweights.dbR = in.two_biases ? db + KN : nullptr;
    return RunRnnBackward<T>(ctx, br, s, SameMajor(s), x, dyv, dxv, &a);
  }
};

#define TFRNN_REGISTER_KERAS(T)                                                                \
  REGISTER_KERNEL_BUILDER(Name("TfRnn>KerasRNN").Device(DEVICE_CPU).TypeConstraint<T>("T"),    \
                          KerasRnnOp<T, false>);                                               \
  REGISTER_KERNEL_BUILDER(                                                                     \
      Name("TfRnn>KerasRNNBackprop").Device(DEVICE_CPU).TypeConstraint<T>("T"),                \
      KerasRnnOp<T, true>);
TFRNN_FOR_EACH_TYPE(TFRNN_REGISTER_KERAS)
#undef TFRNN_REGISTER_KERAS

}  // namespace
}  // namespace tfrnn
