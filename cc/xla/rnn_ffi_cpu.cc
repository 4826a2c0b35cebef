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
#include "cc/xla/rnn_call_buffers.h"
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

// The call's buffers (rnn_call_buffers.h) as the engine's arguments, both directions' common
// part; `zeros` (K·H elements) is the recurrent bias when Keras's bias has one row.
template <typename A, typename Args>
void MapCommon(const XlaRnnCall& call, const XlaRnnBuffers& b, Args* a, A* zeros) {
  auto in = [](const void* p) { return static_cast<const A*>(p); };
  a->lengths = b.lengths;
  a->x = in(b.x);
  a->h0 = in(b.h0);
  a->c0 = in(b.c0);
  // One of the two weight forms is null (the engine takes the weights when R is set).
  a->params = in(b.params);
  auto& w = a->weights;
  w.W = in(b.kernel);
  w.R = in(b.recurrent_kernel);
  w.bW = in(b.bias);
  w.bR = in(b.bias_r);
  if (const Index n = XlaRnnZeroBias(call); n > 0) {
    std::fill_n(zeros, n, A(0));
    w.bR = zeros;
  }
  a->mask = in(b.mask);
  a->mask_per_step = call.mask_per_step;
  a->peephole = in(b.peephole);
}

// What both targets start with: the call's buffers bound and checked, its workspace (from the
// ScratchCache: the engine's own first, then MapCommon's zeros, then a forward's scratch
// reserve) and the common arguments mapped into `a` (Args: the engine's forward or backward
// arguments); ws is null (and `error` says why) when the workspace could not be had.
template <typename A, typename Args>
struct Prepared {
  static constexpr bool kBackward = std::is_same_v<Args, RnnBwdArgs<A>>;

  Prepared(const XlaRnnCall& call, ffi::RemainingArgs args, ffi::RemainingRets rets)
      : buf(XlaFaceName(call.face), call.f64, args, rets),
        b(BindXlaRnnBuffers(call, buf, kBackward)),
        lease(ScratchCache::Global().Take(
            sizeof(A) * (kBackward ? XlaRnnBwdWorkspace(call) : XlaRnnFwdWorkspace(call)))),
        ws(Workspace<A>(XlaFaceName(call.face), lease, &error)) {
    const Index engine_ws =
        kBackward ? RnnBwdWorkspaceSize(call.spec) : RnnFwdWorkspaceSize(call.spec);
    if (ws != nullptr) MapCommon<A>(call, b, &a, ws + engine_ws);
  }
  Buffers buf;
  XlaRnnBuffers b;
  ScratchCache::Lease lease;
  ffi::Error error = ffi::Error::Success();
  A* ws;
  Args a;
};

// The forward target after Prepared: the outputs mapped, the engine's forward.
template <typename A>
ffi::Error Forward(HostPool& pool, const XlaRnnCall& call, const Buffers& buf,
                   const XlaRnnBuffers& b, RnnFwdArgs<A>& a, A* ws) {
  const RnnSpec& s = call.spec;
  a.y = static_cast<A*>(b.y);
  a.hn = static_cast<A*>(b.hn);
  a.cn = static_cast<A*>(b.cn);
  a.batch_major = call.batch_major;
  const Index reserve = RnnReserveSize(s);
  a.reserve = s.training ? static_cast<A*>(b.reserve) : ws + (XlaRnnFwdWorkspace(call) - reserve);
  bool shorter;
  const EngineApi* engine;
  if (ffi::Error e = ReadyToRun(call, buf, a.lengths, &shorter, &engine); e.failure()) return e;
  // The engine leaves the reserve rows past each sequence's length unwritten.
  if (shorter && s.training) std::fill_n(a.reserve, reserve, A(0));
  EngineFns<A>::RnnFwd(*engine)(pool, s, a, ws);
  return ffi::Error::Success();
}

// The backward target after Prepared: the incoming gradients and the outputs mapped, the
// engine's backward.
template <typename A>
ffi::Error Backward(HostPool& pool, const XlaRnnCall& call, const Buffers& buf,
                    const XlaRnnBuffers& b, RnnBwdArgs<A>& a, A* ws) {
  auto in = [](const void* p) { return static_cast<const A*>(p); };
  auto out = [](void* p) { return static_cast<A*>(p); };
  a.dy = in(b.dy);
  a.dhn = in(b.dhn);
  a.dcn = in(b.dcn);
  a.reserve = in(b.reserve_in);
  a.dc_seq = in(b.dc_seq);
  a.dx = out(b.dx);
  a.dh0 = out(b.dh0);
  a.dc0 = out(b.dc0);
  a.dparams = out(b.dparams);  // or the weights' gradients
  a.dweights = {out(b.dkernel), out(b.drecurrent_kernel), out(b.dbias), out(b.dbias_r)};
  a.dpeephole = out(b.dpeephole);
  bool shorter;
  const EngineApi* engine;
  if (ffi::Error e = ReadyToRun(call, buf, a.lengths, &shorter, &engine); e.failure()) return e;
  EngineFns<A>::RnnBwd(*engine)(pool, call.spec, a, ws);
  return ffi::Error::Success();
}

template <typename A, bool kBackward>
ffi::Error Call(HostPool& pool, const XlaRnnCall& call, ffi::RemainingArgs args,
                ffi::RemainingRets rets) {
  Prepared<A, std::conditional_t<kBackward, RnnBwdArgs<A>, RnnFwdArgs<A>>> p(call, args, rets);
  if (p.ws == nullptr) return std::move(p.error);
  if constexpr (kBackward) {
    return Backward<A>(pool, call, p.buf, p.b, p.a, p.ws);
  } else {
    return Forward<A>(pool, call, p.buf, p.b, p.a, p.ws);
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
