// The CPU custom-call targets of the stacked-RNN XLA kernels (XLA FFI, platform "Host"):
// tfrnn_rnn_forward and tfrnn_rnn_backward run the engine on the call's time-major buffers
// (operands and results in cc/xla/rnn_call.h) on a thread pool (XlaHostPool). Nothing is read
// before the call's encoding, every buffer's size and every sequence length are checked.
#ifndef EIGEN_USE_THREADS
#define EIGEN_USE_THREADS
#endif
#include <algorithm>
#include <string>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "cc/engine/engine_api.h"
#include "cc/kernels/engine_loader.h"
#include "cc/kernels/scratch_cache.h"
#include "cc/xla/ffi_cpu_common.h"
#include "cc/xla/rnn_call.h"
#include "xla/ffi/api/ffi.h"

namespace tfrnn {
namespace {

namespace ffi = ::xla::ffi;

ffi::Error Decode(ffi::Span<const int64_t> enc, XlaRnnCall* call) {
  const std::string why = DecodeXlaRnnCall(enc.begin(), enc.size(), call);
  if (why.empty()) return ffi::Error::Success();
  return ffi::Error::InvalidArgument(
      absl::StrCat(XlaFaceName(call->face), " (XLA custom call): ", why));
}

// Every length in [0, T]; *shorter: some sequence is shorter than T.
ffi::Error CheckLengths(const XlaRnnCall& call, const int* len, bool* shorter) {
  *shorter = false;
  if (len == nullptr) return ffi::Error::Success();
  const std::string why = SeqLengthsProblem(len, call.spec.B, call.spec.T, "time", shorter);
  if (why.empty()) return ffi::Error::Success();
  return ffi::Error::InvalidArgument(absl::StrCat(XlaFaceName(call.face), ": ", why));
}

// After the buffers are bound: their check, the sequence lengths' (*shorter: some sequence is
// shorter than T) and the engine.
ffi::Error ReadyToRun(const XlaRnnCall& call, const Buffers& buf, const int* lengths,
                      bool* shorter, const EngineApi** engine) {
  if (!buf.error().empty()) return ffi::Error::InvalidArgument(buf.error());
  if (ffi::Error e = CheckLengths(call, lengths, shorter); e.failure()) return e;
  return LoadEngine(engine);
}

// Operands 0..8 (lengths, x, h0, c0, w0, w1, w2, mask, peephole) into the engine's forward
// arguments and weights; `zeros` (KN elements) is the recurrent bias when Keras's bias has one
// row.
template <typename A, typename Args>
void BindCommon(const XlaRnnCall& call, Buffers& buf, Args* a, const A** x, A* zeros) {
  const RnnSpec& s = call.spec;
  const bool lstm = s.mode == RnnMode::kLstm;
  const Index states = s.L * s.D * s.B, KN = RnnK(s) * s.H;
  a->lengths = static_cast<const int*>(buf.In(0, call.has_lengths ? s.B : 0, "lengths", true));
  if (!call.has_lengths) a->lengths = nullptr;
  *x = static_cast<const A*>(buf.In(1, s.T * s.B * s.I, "x"));
  a->h0 = static_cast<const A*>(buf.In(2, states * RnnHs(s), "h0"));
  a->c0 = lstm ? static_cast<const A*>(buf.In(3, states * s.H, "c0")) : nullptr;
  if (call.weights == XlaWeights::kParamsVector) {
    a->params = static_cast<const A*>(buf.In(4, RnnParamsSize(s), "params"));
  } else {
    const Index in_rows = s.preprojected ? 0 : s.I;
    auto& w = a->weights;
    w.W = static_cast<const A*>(buf.In(4, in_rows * KN, "kernel"));
    w.R = static_cast<const A*>(buf.In(5, s.H * KN, "recurrent_kernel"));
    w.bW = static_cast<const A*>(buf.In(6, (call.two_biases ? 2 : 1) * KN, "bias"));
    if (call.two_biases) {
      w.bR = w.bW + KN;
    } else {
      std::fill_n(zeros, KN, A(0));
      w.bR = zeros;
    }
  }
  a->mask = static_cast<const A*>(buf.In(7, XlaRnnMaskSize(call), "mask"));
  if (!s.has_mask) a->mask = nullptr;
  a->mask_per_step = call.mask_per_step;
  a->peephole = static_cast<const A*>(buf.In(8, XlaRnnPeepholeSize(call), "peephole"));
  if (!s.peephole) a->peephole = nullptr;
}

// What both targets start with: the call's buffers, its workspace (from the ScratchCache: the
// engine's own first, then BindCommon's zeros, then a forward's scratch reserve) and operands
// 0..8 bound into `a` (Args: the engine's forward or backward arguments); ws is null (and
// `error` says why) when the workspace could not be had.
template <typename A, typename Args>
struct Prepared {
  static constexpr bool kBackward = std::is_same_v<Args, RnnBwdArgs<A>>;

  Prepared(const XlaRnnCall& call, ffi::RemainingArgs args, ffi::RemainingRets rets)
      : buf(XlaFaceName(call.face), call.f64, args, rets),
        lease(ScratchCache::Global().Take(
            sizeof(A) * (kBackward ? XlaRnnBwdWorkspace(call) : XlaRnnFwdWorkspace(call)))),
        ws(Workspace<A>(XlaFaceName(call.face), lease, &error)) {
    const Index engine_ws =
        kBackward ? RnnBwdWorkspaceSize(call.spec) : RnnFwdWorkspaceSize(call.spec);
    if (ws != nullptr) BindCommon<A>(call, buf, &a, &a.x, ws + engine_ws);
  }
  Buffers buf;
  ScratchCache::Lease lease;
  ffi::Error error = ffi::Error::Success();
  A* ws;
  Args a;
};

// The forward target after Prepared: the outputs bound, the engine's forward.
template <typename A>
ffi::Error Forward(HostPool& pool, const XlaRnnCall& call, Buffers& buf, RnnFwdArgs<A>& a,
                   A* ws) {
  const RnnSpec& s = call.spec;
  const bool lstm = s.mode == RnnMode::kLstm;
  const Index states = s.L * s.D * s.B;
  a.y = static_cast<A*>(buf.Out(0, s.T * s.B * s.D * RnnHs(s), "y"));
  a.hn = static_cast<A*>(buf.Out(1, states * RnnHs(s), "hn"));
  a.cn = static_cast<A*>(buf.Out(2, lstm ? states * s.H : 0, "cn"));
  if (!lstm) a.cn = nullptr;
  const Index reserve = RnnReserveSize(s);
  a.reserve = static_cast<A*>(buf.Out(3, XlaRnnReserveResult(call), "reserve"));
  if (!s.training) a.reserve = ws + (XlaRnnFwdWorkspace(call) - reserve);
  bool shorter;
  const EngineApi* engine;
  if (ffi::Error e = ReadyToRun(call, buf, a.lengths, &shorter, &engine); e.failure()) return e;
  // The engine leaves the reserve rows past each sequence's length unwritten.
  if (shorter && s.training) std::fill_n(a.reserve, reserve, A(0));
  EngineFns<A>::RnnFwd(*engine)(pool, s, a, ws);
  return ffi::Error::Success();
}

// The backward target after Prepared: the incoming gradients and the outputs bound, the
// engine's backward.
template <typename A>
ffi::Error Backward(HostPool& pool, const XlaRnnCall& call, Buffers& buf, RnnBwdArgs<A>& a,
                    A* ws) {
  const RnnSpec& s = call.spec;
  const bool lstm = s.mode == RnnMode::kLstm;
  const Index states = s.L * s.D * s.B, KN = RnnK(s) * s.H;
  a.dy = static_cast<const A*>(buf.In(9, s.T * s.B * s.D * RnnHs(s), "dy"));
  a.dhn = static_cast<const A*>(buf.In(10, states * RnnHs(s), "dhn"));
  a.dcn = lstm ? static_cast<const A*>(buf.In(11, states * s.H, "dcn")) : nullptr;
  a.reserve = static_cast<const A*>(buf.In(12, RnnReserveSize(s), "reserve"));
  const bool dc_seq = lstm && call.has_dc_seq;
  a.dc_seq = static_cast<const A*>(buf.In(13, dc_seq ? s.T * s.B * s.D * s.H : 0, "dc_seq"));
  if (!dc_seq) a.dc_seq = nullptr;
  a.dx = static_cast<A*>(buf.Out(0, s.T * s.B * s.I, "dx"));
  a.dh0 = static_cast<A*>(buf.Out(1, states * RnnHs(s), "dh0"));
  a.dc0 = static_cast<A*>(buf.Out(2, lstm ? states * s.H : 0, "dc0"));
  if (!lstm) a.dc0 = nullptr;
  if (call.weights == XlaWeights::kParamsVector) {
    a.dparams = static_cast<A*>(buf.Out(3, RnnParamsSize(s), "dparams"));
  } else {
    auto& dw = a.dweights;
    dw.dW = static_cast<A*>(buf.Out(3, (s.preprojected ? 0 : s.I) * KN, "dkernel"));
    dw.dR = static_cast<A*>(buf.Out(4, s.H * KN, "drecurrent_kernel"));
    dw.dbW = static_cast<A*>(buf.Out(5, (call.two_biases ? 2 : 1) * KN, "dbias"));
    dw.dbR = call.two_biases && dw.dbW != nullptr ? dw.dbW + KN : nullptr;
  }
  if (call.weights == XlaWeights::kParamsVector) {
    buf.Out(4, 0, "dw1");
    buf.Out(5, 0, "dw2");
  }
  a.dpeephole = static_cast<A*>(buf.Out(6, XlaRnnPeepholeSize(call), "dpeephole"));
  if (!s.peephole) a.dpeephole = nullptr;
  bool shorter;
  const EngineApi* engine;
  if (ffi::Error e = ReadyToRun(call, buf, a.lengths, &shorter, &engine); e.failure()) return e;
  EngineFns<A>::RnnBwd(*engine)(pool, s, a, ws);
  return ffi::Error::Success();
}

template <typename A, bool kBackward>
ffi::Error Call(HostPool& pool, const XlaRnnCall& call, ffi::RemainingArgs args,
                ffi::RemainingRets rets) {
  Prepared<A, std::conditional_t<kBackward, RnnBwdArgs<A>, RnnFwdArgs<A>>> p(call, args, rets);
  if (p.ws == nullptr) return std::move(p.error);
  if constexpr (kBackward) {
    return Backward<A>(pool, call, p.buf, p.a, p.ws);
  } else {
    return Forward<A>(pool, call, p.buf, p.a, p.ws);
  }
}

template <bool kBackward>
ffi::Error Run(ffi::ThreadPool xla_pool, ffi::RemainingArgs args, ffi::RemainingRets rets,
               ffi::Span<const int64_t> enc) {
  XlaRnnCall call;
  if (ffi::Error e = Decode(enc, &call); e.failure()) return e;
  XlaHostPool pool(xla_pool);
  return call.f64 ? Call<double, kBackward>(pool, call, args, rets)
                  : Call<float, kBackward>(pool, call, args, rets);
}

XLA_FFI_DEFINE_HANDLER(kRnnForward, Run<false>, CallBinding());
XLA_FFI_DEFINE_HANDLER(kRnnBackward, Run<true>, CallBinding());

XLA_FFI_REGISTER_HANDLER(ffi::GetXlaFfiApi(), "tfrnn_rnn_forward", "Host", kRnnForward);
XLA_FFI_REGISTER_HANDLER(ffi::GetXlaFfiApi(), "tfrnn_rnn_backward", "Host", kRnnBackward);

}  // namespace
}  // namespace tfrnn
