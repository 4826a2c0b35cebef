// What the CPU kernels of the stacked-RNN ops with cuDNN's semantics (the cuDNN family and the
// Keras layers' op pair) share: the rnn_mode attr, sequence lengths, the reserve_space check
// and the engine's forward and backward on time-major or batch-major sequences.
#ifndef TF_RNN_OPS_CC_KERNELS_RNN_KERNEL_UTIL_H_
#define TF_RNN_OPS_CC_KERNELS_RNN_KERNEL_UTIL_H_

#include <algorithm>
#include <string>
#include <vector>

#include "cc/engine/rnn_spec_check.h"
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
  bool shorter;
  const std::string why = SeqLengthsProblem(lengths.flat<int32_t>().data(), B, T, time, &shorter);
  if (why.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", why));
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
inline absl::Status CheckReserveSpace(const std::string& op, const TensorShape& reserve,
                                      int64_t want, const char* forward) {
  if (reserve.dims() == 1 && reserve.num_elements() == want) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      op, ": reserve_space must have shape [", want, "], got ", ShapeStr(reserve),
      ": pass the reserve_space output of the matching ", forward,
      " run with is_training=True and the same attrs, sequence lengths and shapes"));
}
inline absl::Status CheckReserveSpace(const std::string& op, const Tensor& reserve,
                                      int64_t want, const char* forward) {
  return CheckReserveSpace(op, reserve.shape(), want, forward);
}

// A sequence tensor of the op as the engine takes it: X is the compute type A (the bridge's
// pointer to the tensor, or its conversion) or the tensor's own 16-bit type (the Keras mixed
// op's bfloat16 / half sequences beside float weights), converted here.

// A sequence input src [B, T, c] (batch-major) as the engine's time-major [T, B, c] (or src's
// own layout when in_place): src itself when no copy is needed, else a scratch copy (null after
// a failed allocation). 16-bit words are transposed first (half the bytes), then converted.
template <typename T, typename X>
const typename ComputeType<T>::type* TimeMajorIn(OpKernelContext* ctx, ComputeBridge<T>& br,
                                                 const RnnSpec& s, bool in_place, const X* src,
                                                 int64_t c) {
  using A = typename ComputeType<T>::type;
  const CpuDevice& dev = ctx->eigen_device<CpuDevice>();
  const int64_t n = s.T * s.B * c;
  if constexpr (std::is_same<X, A>::value) {
    if (in_place) return src;
    A* tm = br.Scratch(n);
    if (tm != nullptr) SwapMajor(dev, src, tm, s.B, s.T, c);
    return tm;
  } else {
    const X* words = src;
    if (!in_place) {
      X* tmp = br.template ScratchOf<X>(n);
      if (tmp == nullptr) return nullptr;
      SwapMajor(dev, src, tmp, s.B, s.T, c);
      words = tmp;
    }
    A* out = br.Scratch(n);
    if (out != nullptr) BoundaryConvert(ctx, dev, words, out, n);
    return out;
  }
}

// A sequence output dst [T, B, c] or [B, T, c] as the engine's buffer: dst itself when in_place
// and of the compute type, else scratch that FromTimeMajor writes into dst after the engine ran
// (with *words, scratch for the 16-bit words of a transposed X output). A null dst (an output
// nothing consumes): scratch for the engine, nothing written back.
template <typename T, typename X>
typename ComputeType<T>::type* TimeMajorOut(ComputeBridge<T>& br, const RnnSpec& s,
                                            bool in_place, X* dst, int64_t c, X** words) {
  using A = typename ComputeType<T>::type;
  *words = nullptr;
  if constexpr (std::is_same<X, A>::value) {
    if (in_place && dst != nullptr) return dst;
  } else {
    if (!in_place && dst != nullptr) *words = br.template ScratchOf<X>(s.T * s.B * c);
  }
  return br.Scratch(s.T * s.B * c);
}
template <typename A, typename X>
void FromTimeMajor(OpKernelContext* ctx, const RnnSpec& s, bool in_place, const A* tm, X* dst,
                   X* words, int64_t c) {
  if (dst == nullptr) return;
  const CpuDevice& dev = ctx->eigen_device<CpuDevice>();
  if constexpr (std::is_same<X, A>::value) {
    if (!in_place) SwapMajor<A>(dev, tm, dst, s.T, s.B, c);
  } else {
    const int64_t n = s.T * s.B * c;
    BoundaryConvert(ctx, dev, tm, in_place ? dst : words, n);
    if (!in_place) SwapMajor<X>(dev, words, dst, s.T, s.B, c);
  }
}

// The engine's forward of `s` on x [T, B, I] into y [T, B, D·Hs] (time_major), or on x
// [B, T, I] into y [B, T, D·Hs] (in training through time-major scratch); x and y are of the
// compute type, or 16-bit sequences of a float op (X, converted here). A null y: the output is
// not consumed (the engine writes scratch). a's other operands are the caller's, but for a null
// a->reserve (not training), which is scratch here. Ends with the bridge's Finish.
template <typename T, typename X>
absl::Status RunRnnForward(OpKernelContext* ctx, ComputeBridge<T>& br, const RnnSpec& s,
                           bool time_major, const X* x, X* y,
                           RnnFwdArgs<typename ComputeType<T>::type>* a) {
  using A = typename ComputeType<T>::type;
  const int64_t ycols = s.D * RnnHs(s);
  // At inference the engine reads a batch-major x and writes a batch-major y itself; in
  // training they are transposed here (RnnFwdTakesBatchMajor).
  a->batch_major = !time_major && RnnFwdTakesBatchMajor(s);
  const bool in_place = time_major || a->batch_major;
  a->x = TimeMajorIn(ctx, br, s, in_place, x, s.I);
  X* y_words;
  a->y = TimeMajorOut(br, s, in_place, y, ycols, &y_words);
  const int64_t ws_elems = RnnFwdWorkspaceSize(SpecFor<T>(s));
  const int64_t elems = ws_elems + (a->reserve == nullptr ? RnnReserveSize(s) : 0);
  // The workspace is kept between calls (ScratchCache): a fresh allocation of tens of MB
  // faults in new pages on every call, 10-20 % of an LSTM/GRU step at 100x64x256x256.
  ScratchCache::Lease lease = ScratchCache::Global().Take(sizeof(A) * elems);
  TF_RETURN_IF_ERROR(WorkspaceStatus(ctx->op_kernel().type_string(), lease));
  A* ws = lease.As<A>();
  if (a->reserve == nullptr) a->reserve = ws + ws_elems;
  return RunEngine(ctx, br, [&](const EngineApi& engine, TfHostPool& pool) {
    EngineFns<A>::RnnFwd(engine)(pool, SpecFor<T>(s), *a, ws);
    FromTimeMajor<A, X>(ctx, s, in_place, a->y, y, y_words, ycols);
  });
}

// The engine's backward of `s`, with x, dy and dx time-major or batch-major and of the types
// RunRnnForward takes; a's other operands are the caller's. A null dx: no input gradient (the
// op's output not consumed, ComputeBridge::OutIfRequired). Ends with the bridge's Finish.
template <typename T, typename X>
absl::Status RunRnnBackward(OpKernelContext* ctx, ComputeBridge<T>& br, const RnnSpec& s,
                            bool time_major, const X* x, const X* dy, X* dx,
                            RnnBwdArgs<typename ComputeType<T>::type>* a) {
  using A = typename ComputeType<T>::type;
  a->x = TimeMajorIn(ctx, br, s, time_major, x, s.I);
  a->dy = TimeMajorIn(ctx, br, s, time_major, dy, s.D * RnnHs(s));
  X* dx_words = nullptr;
  a->dx = dx != nullptr ? TimeMajorOut(br, s, time_major, dx, s.I, &dx_words) : nullptr;
  const int64_t elems = RnnBwdWorkspaceSize(s);
  ScratchCache::Lease lease = ScratchCache::Global().Take(sizeof(A) * elems);
  TF_RETURN_IF_ERROR(WorkspaceStatus(ctx->op_kernel().type_string(), lease));
  A* ws = lease.As<A>();
  return RunEngine(ctx, br, [&](const EngineApi& engine, TfHostPool& pool) {
    EngineFns<A>::RnnBwd(engine)(pool, SpecFor<T>(s), *a, ws);
    if (dx != nullptr) FromTimeMajor<A, X>(ctx, s, time_major, a->dx, dx, dx_words, s.I);
  });
}

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_KERNELS_RNN_KERNEL_UTIL_H_
