// What the CPU kernels of the stacked-RNN ops with cuDNN's semantics (the cuDNN family and the
// Keras layers' op pair) share: the rnn_mode attr, sequence lengths, the reserve_space check
// and the engine's forward and backward on time-major or batch-major sequences.
#ifndef TF_RNN_OPS_CC_KERNELS_RNN_KERNEL_UTIL_H_
#define TF_RNN_OPS_CC_KERNELS_RNN_KERNEL_UTIL_H_

#include <algorithm>
#include <string>
#include <vector>

#include "cc/kernels/engine_loader.h"
#include "cc/kernels/kernel_util.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tfrnn {

// The rnn_mode attr's value (its allowed values are 'lstm', 'gru', 'rnn_tanh', 'rnn_relu').
inline RnnMode ParseRnnMode(const std::string& mode) {
  return mode == "lstm"       ? RnnMode::kLstm
         : mode == "gru"      ? RnnMode::kGru
         : mode == "rnn_tanh" ? RnnMode::kTanh
                              : RnnMode::kRelu;
}

// Every sequences_lengths[b] (b < B) must be in [0, T]; `time` names T in the message.
inline absl::Status CheckSeqLengths(const std::string& op, const Tensor& lengths, int64_t B,
                                    int64_t T, const char* time) {
  auto len = lengths.flat<int32_t>();
  for (int64_t b = 0; b < B; ++b) {
    if (len(b) < 0 || len(b) > T) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": sequence_lengths[", b, "] = ",
                                                     len(b), " is outside [0, ", time, " = ", T,
                                                     "]"));
    }
  }
  return absl::OkStatus();
}

// The sequence lengths (null: every sequence has T steps) as the engine's ints, copied into
// *store, or nullptr.
inline const int* SeqLengths(const Tensor* lengths, int64_t B, std::vector<int>* store) {
  if (lengths == nullptr) return nullptr;
  auto len = lengths->flat<int32_t>();
  store->assign(len.data(), len.data() + B);
  return store->data();
}

// Some sequence is shorter than T: the engine leaves the reserve rows past each sequence's
// length unwritten.
inline bool AnyShorter(const std::vector<int>& lengths, int64_t T) {
  return std::any_of(lengths.begin(), lengths.end(), [&](int n) { return n < T; });
}

// A backprop op's reserve_space must be the [want] vector its forward (`forward`: "forward
// op", "GPU forward op") wrote.
inline absl::Status CheckReserveSpace(const std::string& op, const Tensor& reserve,
                                      int64_t want, const char* forward) {
  if (reserve.dims() == 1 && reserve.NumElements() == want) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      op, ": reserve_space must have shape [", want, "], got ", ShapeStr(reserve),
      ": pass the reserve_space output of the matching ", forward,
      " run with is_training=True and the same attrs, sequence lengths and shapes"));
}

// The engine's forward of `s` on x [T, B, I] into y [T, B, D·Hs] (time_major), or on x
// [B, T, I] into y [B, T, D·Hs] through time-major scratch; a's other operands are the
// caller's. Ends with the bridge's Finish.
template <typename T>
absl::Status RunRnnForward(OpKernelContext* ctx, ComputeBridge<T>& br, const RnnSpec& s,
                           bool time_major, const typename ComputeType<T>::type* x,
                           typename ComputeType<T>::type* y,
                           RnnFwdArgs<typename ComputeType<T>::type>* a) {
  using A = typename ComputeType<T>::type;
  const CpuDevice& dev = ctx->eigen_device<CpuDevice>();
  const int64_t ycols = s.D * RnnHs(s);
  if (time_major) {
    a->x = x;
    a->y = y;
  } else {
    A* xt = br.Scratch(s.T * s.B * s.I);
    a->y = br.Scratch(s.T * s.B * ycols);
    if (xt != nullptr) SwapMajor<A>(dev, x, xt, s.B, s.T, s.I);
    a->x = xt;
  }
  A* ws = br.Scratch(RnnFwdWorkspaceSize(SpecFor<T>(s)));
  return RunEngine(ctx, br, [&](const EngineApi& engine, TfHostPool& pool) {
    EngineFns<A>::RnnFwd(engine)(pool, SpecFor<T>(s), *a, ws);
    if (!time_major) SwapMajor<A>(dev, a->y, y, s.T, s.B, ycols);
  });
}

// The engine's backward of `s`, with x, dy and dx time-major or batch-major as in
// RunRnnForward; a's other operands are the caller's. Ends with the bridge's Finish.
template <typename T>
absl::Status RunRnnBackward(OpKernelContext* ctx, ComputeBridge<T>& br, const RnnSpec& s,
                            bool time_major, const typename ComputeType<T>::type* x,
                            const typename ComputeType<T>::type* dy,
                            typename ComputeType<T>::type* dx,
                            RnnBwdArgs<typename ComputeType<T>::type>* a) {
  using A = typename ComputeType<T>::type;
  const CpuDevice& dev = ctx->eigen_device<CpuDevice>();
  const int64_t ycols = s.D * RnnHs(s);
  if (time_major) {
    a->x = x;
    a->dy = dy;
    a->dx = dx;
  } else {
    A* xt = br.Scratch(s.T * s.B * s.I);
    A* dyt = br.Scratch(s.T * s.B * ycols);
    a->dx = br.Scratch(s.T * s.B * s.I);
    if (xt != nullptr && dyt != nullptr) {
      SwapMajor<A>(dev, x, xt, s.B, s.T, s.I);
      SwapMajor<A>(dev, dy, dyt, s.B, s.T, ycols);
    }
    a->x = xt;
    a->dy = dyt;
  }
  A* ws = br.Scratch(RnnBwdWorkspaceSize(s));
  return RunEngine(ctx, br, [&](const EngineApi& engine, TfHostPool& pool) {
    EngineFns<A>::RnnBwd(engine)(pool, SpecFor<T>(s), *a, ws);
    if (!time_major) SwapMajor<A>(dev, a->dx, dx, s.T, s.B, s.I);
  });
}

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_KERNELS_RNN_KERNEL_UTIL_H_
