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

// The Keras op pair's computations on the CPU engine (KerasRnnKernel, keras_rnn_face.h).
template <typename T>
struct CpuKeras {
  using A = typename ComputeType<T>::type;

  static const int* Lengths(const KerasInputs& in, std::vector<int>* store) {
    return SeqLengths(in.lengths, in.spec.B, store);
  }

  static absl::Status Forward(OpKernelContext* ctx, const KerasAttrs& attrs,
                              const KerasInputs& in) {
    const bool training = attrs.training;
    const RnnSpec& s = in.spec;
    const bool lstm = s.mode == RnnMode::kLstm;
    KerasOutputs out;
    TF_RETURN_IF_ERROR(AllocateKerasOutputs(
        ctx, in, training, ReserveElementsOfT<T, A>(RnnReserveSize(s)), &out));
    std::vector<int> lengths;
    RnnFwdArgs<A> a;
    a.lengths = Lengths(in, &lengths);
    // The engine leaves the reserve rows past each sequence's length unwritten.
    if (training && AnyShorter(lengths, s.T)) {
      Zero<T>(ctx->eigen_device<CpuDevice>(), out.reserve->flat<T>().data(),
              out.reserve->NumElements());
    }

    ComputeBridge<T> br(ctx);
    const A* x = br.In(*in.x);
    a.h0 = br.In(*in.h0);
    a.c0 = lstm ? br.In(*in.c0) : nullptr;
    a.weights = KerasWeights<T>(in, &br);
    if (in.mask != nullptr) a.mask = br.In(*in.mask);
    A* y = br.Out(out.y);
    a.hn = br.Out(out.hn);
    a.cn = lstm ? br.Out(out.cn) : nullptr;
    a.reserve = training ? reinterpret_cast<A*>(out.reserve->flat<T>().data()) : nullptr;
    return RunRnnForward<T>(ctx, br, s, SameMajor(s), x, y, &a);
  }

  static absl::Status Backward(OpKernelContext* ctx, const KerasInputs& in) {
    const RnnSpec& s = in.spec;
    const bool lstm = s.mode == RnnMode::kLstm;
    const int64_t KN = RnnK(s) * s.H;
    KerasGrads gr;
    TF_RETURN_IF_ERROR(KerasGradsOf(ctx, in, ReserveElementsOfT<T, A>(RnnReserveSize(s)), &gr));
    if (!lstm) gr.dc0->flat<T>().setZero();

    ComputeBridge<T> br(ctx);
    RnnBwdArgs<A> a;
    std::vector<int> lengths;
    a.lengths = Lengths(in, &lengths);
    const A* x = br.In(*in.x);
    const A* dyv = br.In(*gr.dy);
    a.h0 = br.In(*in.h0);
    a.c0 = lstm ? br.In(*in.c0) : nullptr;
    a.weights = KerasWeights<T>(in, &br);
    if (in.mask != nullptr) a.mask = br.In(*in.mask);
    a.reserve = reinterpret_cast<const A*>(gr.reserve->flat<T>().data());
    a.dhn = br.In(*gr.dhn);
    a.dcn = lstm ? br.In(*gr.dcn) : nullptr;
    A* dxv = br.Out(gr.dx);
    a.dh0 = br.Out(gr.dh0);
    a.dc0 = lstm ? br.Out(gr.dc0) : nullptr;
    A* db = br.Out(gr.dbias);
    a.dweights.dW = br.Out(gr.dkernel);
    a.dweights.dR = br.Out(gr.drkernel);
    a.dweights.dbW = db;
    a.dweights.dbR = in.two_biases ? db + KN : nullptr;
    return RunRnnBackward<T>(ctx, br, s, SameMajor(s), x, dyv, dxv, &a);
  }
};

#define TFRNN_REGISTER_KERAS(T)                                                             \
  REGISTER_KERNEL_BUILDER(Name("TfRnn>KerasRNN").Device(DEVICE_CPU).TypeConstraint<T>("T"), \
                          KerasRnnKernel<CpuKeras, T, false>);                              \
  REGISTER_KERNEL_BUILDER(                                                                  \
      Name("TfRnn>KerasRNNBackprop").Device(DEVICE_CPU).TypeConstraint<T>("T"),             \
      KerasRnnKernel<CpuKeras, T, true>);
TFRNN_FOR_EACH_TYPE(TFRNN_REGISTER_KERAS)
#undef TFRNN_REGISTER_KERAS

}  // namespace
}  // namespace tfrnn
