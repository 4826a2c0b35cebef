// CPU kernels of the Keras layers' op pairs (TfRnn>KerasRNN, KerasRNNBackprop, and the mixed
// pair KerasRNNMixed, KerasRNNMixedBackprop; shapes and layouts in cc/ops/keras_rnn_ops.cc):
// validate and describe (keras_rnn_face.h) -> the stacked engine, reading and writing the Keras
// tensors in place (RnnWeights).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>
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
// words16: W and R are also handed over as bf16 words (RnnFwdArgs::words16), their float
// buffers left for the engine to fill where it needs them. kFloatWeights: the mixed op's float
// weights, read as they are beside its 16-bit sequences (the bridge's type).
template <typename T, bool kFloatWeights = false>
RnnWeights<typename ComputeType<T>::type> KerasWeights(const KerasInputs& in,
                                                       ComputeBridge<T>* br,
                                                       bool words16 = false) {
  using A = typename ComputeType<T>::type;
  auto weight = [&](const Tensor& t) -> const A* {
    if constexpr (kFloatWeights) {
      return t.flat<A>().data();
    } else {
      return br->In(t);
    }
  };
  const int64_t KN = RnnK(in.spec) * in.spec.H;
  RnnWeights<A> w;
  w.W = words16 ? br->Scratch(in.kernel->NumElements()) : weight(*in.kernel);
  w.R = words16 ? br->Scratch(in.rkernel->NumElements()) : weight(*in.rkernel);
  w.bW = weight(*in.bias);
  if (in.two_biases) {
    w.bR = w.bW != nullptr ? w.bW + KN : nullptr;
  } else {
    A* zeros = br->Scratch(KN);
    if (zeros != nullptr) std::fill_n(zeros, KN, A(0));
    w.bR = zeros;
  }
  return w;
}

// Whether a bfloat16 inference hands the engine its operands' words (RnnFwdArgs::words16);
// TF_RNN_OPS_BF16_WORDS=0 (docs/ENVIRONMENT.md): converted here as every other call's are.
// Read once per process.
inline bool Bf16WordsOn() {
  static const bool on = [] {
    const char* v = std::getenv("TF_RNN_OPS_BF16_WORDS");
    return v == nullptr || std::string(v) != "0";
  }();
  return on;
}

// A 16-bit tensor's elements as their words.
inline const uint16_t* Words16(const Tensor& t) {
  return reinterpret_cast<const uint16_t*>(t.tensor_data().data());
}

// The Keras op pairs' computations on the CPU engine (KerasRnnKernel, keras_rnn_face.h): T is
// the op's type. kMixed: the mixed pair (TfRnn>KerasRNNMixed, KerasRNNMixedBackprop), T
// (bfloat16 or half) sequences and states beside float weights, weight gradients and reserve;
// its sequences are converted (and transposed) on their way into and out of the float engine
// (RunRnnForward / RunRnnBackward), its weights read and their gradients written in place.
template <typename T, bool kMixed>
struct CpuKerasOf {
  using A = typename ComputeType<T>::type;
  using W = typename std::conditional<kMixed, float, T>::type;  // the weights' and reserve's

  // The call's engine spec: bf16_products gives a float32 op (and the mixed half op) a
  // bfloat16 op's products (a bfloat16 op's own come from SpecFor).
  static RnnSpec SpecOf(const KerasAttrs& attrs, const KerasInputs& in) {
    RnnSpec s = in.spec;
    s.bf16 = attrs.bf16_products && (kMixed || std::is_same<T, float>::value);
    return s;
  }

  // A sequence input as RunRnnForward / RunRnnBackward take it: the mixed op's own tensor,
  // else the bridge's.
  static auto SeqIn(ComputeBridge<T>& br, const Tensor& t) {
    if constexpr (kMixed) {
      return t.flat<T>().data();
    } else {
      return br.In(t);
    }
  }
  // A sequence output (null where the graph does not consume output `index`).
  static auto SeqOut(OpKernelContext* ctx, ComputeBridge<T>& br, int index, Tensor* t) {
    if constexpr (kMixed) {
      return ctx->output_required(index) ? t->flat<T>().data() : nullptr;
    } else {
      return br.OutIfRequired(index, t);
    }
  }
  // A weight gradient: the mixed op's float output in place, else the bridge's.
  static A* WeightOut(ComputeBridge<T>& br, Tensor* t) {
    if constexpr (kMixed) {
      return t->flat<A>().data();
    } else {
      return br.Out(t);
    }
  }

  static absl::Status Forward(OpKernelContext* ctx, const KerasAttrs& attrs,
                              const KerasInputs& in) {
    const bool training = attrs.training;
    const RnnSpec s = SpecOf(attrs, in);
    const bool lstm = s.mode == RnnMode::kLstm;
    KerasOutputs out;
    TF_RETURN_IF_ERROR(AllocateKerasOutputs(
        ctx, in, training, ReserveElementsOfT<W, A>(RnnReserveSize(s)), &out));
    std::vector<int> lengths;
    RnnFwdArgs<A> a;
    a.lengths = SeqLengths(in.lengths, s.B, &lengths);
    // The engine leaves the reserve rows past each sequence's length unwritten.
    if (training && AnyShorter(lengths, s.T)) {
      Zero<W>(ctx->eigen_device<CpuDevice>(), out.reserve->flat<W>().data(),
              out.reserve->NumElements());
    }

    ComputeBridge<T> br(ctx);
    // A bfloat16 inference hands the engine x and y (and a bfloat16 op W and R) as their bf16
    // words: it reads and writes them as they are on the road that can, else converts them
    // itself (not for a preprojected input, whose kernel has no rows).
    const bool words16 = std::is_same<T, Eigen::bfloat16>::value && !training &&
                         !s.preprojected && Bf16WordsOn();
    a.h0 = br.In(*in.h0);
    a.c0 = lstm ? br.In(*in.c0) : nullptr;
    a.weights = KerasWeights<T, kMixed>(in, &br, words16 && !kMixed);
    if (in.mask != nullptr) a.mask = br.In(*in.mask);
    if (words16) {
      a.words16.x = Words16(*in.x);
      a.words16.y = const_cast<uint16_t*>(Words16(*out.y));
      if (!kMixed) {
        a.words16.W = Words16(*in.kernel);
        a.words16.R = Words16(*in.rkernel);
      }
    }
    a.hn = br.Out(out.hn);
    a.cn = lstm ? br.Out(out.cn) : nullptr;
    if (attrs.kept != nullptr) {  // reuse_packed_weights (at inference)
      a.pack_cache = attrs.kept->cache();
      a.weights_id = attrs.kept->IdOf(*in.kernel, *in.rkernel);
    }
    a.reserve = training ? reinterpret_cast<A*>(out.reserve->flat<W>().data()) : nullptr;
    // y where the graph consumes it (return_sequences=False leaves it unread): else the
    // engine's rows go to scratch, with no conversion or transpose into the output.
    if (words16) {
      return RunRnnForward<T>(ctx, br, s, SameMajor(s), br.Scratch(in.x->NumElements()),
                              br.Scratch(out.y->NumElements()), &a);
    }
    return RunRnnForward<T>(ctx, br, s, SameMajor(s), SeqIn(br, *in.x),
                            SeqOut(ctx, br, 0, out.y), &a);
  }

  static absl::Status Backward(OpKernelContext* ctx, const KerasAttrs& attrs,
                               const KerasInputs& in) {
    const RnnSpec s = SpecOf(attrs, in);
    const bool lstm = s.mode == RnnMode::kLstm;
    const int64_t KN = RnnK(s) * s.H;
    KerasGrads gr;
    TF_RETURN_IF_ERROR(KerasGradsOf(ctx, in, ReserveElementsOfT<W, A>(RnnReserveSize(s)), &gr));
    if (!lstm) gr.dc0->flat<T>().setZero();

    ComputeBridge<T> br(ctx);
    RnnBwdArgs<A> a;
    std::vector<int> lengths;
    a.lengths = SeqLengths(in.lengths, s.B, &lengths);
    const auto* x = SeqIn(br, *in.x);
    const auto* dyv = SeqIn(br, *gr.dy);
    a.h0 = br.In(*in.h0);
    a.c0 = lstm ? br.In(*in.c0) : nullptr;
    a.weights = KerasWeights<T, kMixed>(in, &br);
    if (in.mask != nullptr) a.mask = br.In(*in.mask);
    a.reserve = reinterpret_cast<const A*>(gr.reserve->flat<W>().data());
    a.dhn = br.In(*gr.dhn);
    a.dcn = lstm ? br.In(*gr.dcn) : nullptr;
    // input_backprop: null (not computed) where the graph does not consume it or input_grad
    // is false (then zeros).
    auto* dxv = attrs.input_grad ? SeqOut(ctx, br, 0, gr.dx) : nullptr;
    if (!attrs.input_grad && ctx->output_required(0)) {
      Zero<T>(ctx->eigen_device<CpuDevice>(), gr.dx->flat<T>().data(), gr.dx->NumElements());
    }
    a.dh0 = br.Out(gr.dh0);
    a.dc0 = lstm ? br.Out(gr.dc0) : nullptr;
    // The weights' gradients: none where the graph consumes none of them (a frozen layer's
    // step; the engine skips their products and sums).
    if (br.AnyRequired(3, 6)) {
      A* db = WeightOut(br, gr.dbias);
      a.dweights.dW = WeightOut(br, gr.dkernel);
      a.dweights.dR = WeightOut(br, gr.drkernel);
      a.dweights.dbW = db;
      a.dweights.dbR = in.two_biases ? db + KN : nullptr;
    }
    return RunRnnBackward<T>(ctx, br, s, SameMajor(s), x, dyv, dxv, &a);
  }
};

template <typename T>
using CpuKeras = CpuKerasOf<T, false>;
template <typename T>
using CpuKerasMixed = CpuKerasOf<T, true>;

#define TFRNN_REGISTER_KERAS_MIXED(S)                                                   \
  REGISTER_KERNEL_BUILDER(                                                              \
      Name("TfRnn>KerasRNNMixed").Device(DEVICE_CPU).TypeConstraint<S>("T"),            \
      KerasRnnKernel<CpuKerasMixed, S, false>);                                         \
  REGISTER_KERNEL_BUILDER(                                                              \
      Name("TfRnn>KerasRNNMixedBackprop").Device(DEVICE_CPU).TypeConstraint<S>("T"),    \
      KerasRnnKernel<CpuKerasMixed, S, true>);
TFRNN_REGISTER_KERAS_MIXED(Eigen::bfloat16)
TFRNN_REGISTER_KERAS_MIXED(Eigen::half)
#undef TFRNN_REGISTER_KERAS_MIXED

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
