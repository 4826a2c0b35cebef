// The CPU custom-call targets of the block ops' XLA kernels (XLA FFI, platform "Host"):
// tfrnn_gru_cell_forward and tfrnn_gru_cell_backward bind the call's operands and results to
// the engine's arguments in the order of cc/engine/block_arg_fields.h (block_call.h), each
// checked against the size its shape text there gives, then run the CPU engine.
#include <string>

#include "absl/strings/str_cat.h"
#include "cc/engine/block_arg_fields.h"
#include "cc/engine/engine_api.h"
#include "cc/engine/workspace.h"
#include "cc/kernels/scratch_cache.h"
#include "cc/xla/block_call.h"
#include "cc/xla/ffi_cpu_common.h"
#include "xla/ffi/api/ffi.h"

namespace tfrnn {
namespace {

namespace ffi = ::xla::ffi;

const char* BlockOpName(XlaBlockKind k) {
  return k == XlaBlockKind::kGruCellForward ? "TfRnn>GRUBlockCell" : "TfRnn>GRUBlockCellGrad";
}

// Binds operand and result k of the call to the fields of Args, in the field list's order: an
// absent optional operand (its bit in call.present clear) must have no elements and is null.
template <typename A, typename Args>
class Binder {
 public:
  Binder(const XlaBlockCall& call, Buffers* buf) : call_(call), buf_(buf) {}

  void In(const A** field, const char* name, const char* shape) {
    const int k = in_++;
    const bool present = (call_.present >> k) & 1;
    const Index want = present ? Count(shape) : 0;
    const void* p = buf_->In(k, want, name);
    *field = present ? static_cast<const A*>(p) : nullptr;
  }
  void Out(A** field, const char* name, const char* shape) {
    *field = static_cast<A*>(buf_->Out(out_++, Count(shape), name));
  }

 private:
  Index Count(const char* shape) const {
    return BlockShapeCount(shape, call_.T, call_.B, call_.I, call_.H);
  }

  const XlaBlockCall& call_;
  Buffers* buf_;
  int in_ = 0, out_ = 0;
};

template <typename A>
ffi::Error GruCell(HostPool& pool, const XlaBlockCall& call, ffi::RemainingArgs args,
                   ffi::RemainingRets rets) {
  const char* op = BlockOpName(call.kind);
  Buffers buf(op, call.f64, args, rets);
  const bool fwd = call.kind == XlaBlockKind::kGruCellForward;
  GruCellFwdArgs<A> f;
  GruCellBwdArgs<A> b;
  f.B = b.B = call.B;
  f.I = b.I = call.I;
  f.H = b.H = call.H;
#define TFRNN_BIND_IN(name, shape) bind.In(&a.name, #name, shape);
#define TFRNN_BIND_OUT(name, shape) bind.Out(&a.name, #name, shape);
  if (fwd) {
    Binder<A, GruCellFwdArgs<A>> bind(call, &buf);
    auto& a = f;
    TFRNN_GRU_CELL_FWD_ARGS(TFRNN_BIND_IN, TFRNN_BIND_OUT)
  } else {
    Binder<A, GruCellBwdArgs<A>> bind(call, &buf);
    auto& a = b;
    TFRNN_GRU_CELL_BWD_ARGS(TFRNN_BIND_IN, TFRNN_BIND_OUT)
  }
#undef TFRNN_BIND_IN
#undef TFRNN_BIND_OUT
  if (!buf.error().empty()) return ffi::Error::InvalidArgument(buf.error());
  const Index elems =
      fwd ? GruCellFwdWorkspaceSize(call.B, call.H) : GruCellBwdWorkspaceSize(call.B, call.H);
  ScratchCache::Lease lease = ScratchCache::Global().Take(sizeof(A) * elems);
  A* ws = static_cast<A*>(lease.data());
  if (ws == nullptr) return OutOfMemory(op, lease);
  const EngineApi* engine;
  if (ffi::Error e = LoadEngine(&engine); e.failure()) return e;
  if (fwd) {
    EngineFns<A>::GruForward(*engine)(pool, f, ws);
  } else {
    EngineFns<A>::GruBackward(*engine)(pool, b, ws);
  }
  return ffi::Error::Success();
}

ffi::Error Run(ffi::ThreadPool xla_pool, ffi::RemainingArgs args, ffi::RemainingRets rets,
               ffi::Span<const int64_t> enc) {
  XlaBlockCall call;
  const std::string why = DecodeXlaBlockCall(enc.begin(), enc.size(), &call);
  if (!why.empty()) {
    return ffi::Error::InvalidArgument(absl::StrCat("tf_rnn_ops block op (XLA custom call): ", why));
  }
  XlaHostPool pool(xla_pool);
  return call.f64 ? GruCell<double>(pool, call, args, rets)
                  : GruCell<float>(pool, call, args, rets);
}

XLA_FFI_DEFINE_HANDLER(kBlockCall, Run,
                       ffi::Ffi::Bind()
                           .Ctx<ffi::ThreadPool>()
                           .RemainingArgs()
                           .RemainingRets()
                           .Attr<ffi::Span<const int64_t>>("call"));

XLA_FFI_REGISTER_HANDLER(ffi::GetXlaFfiApi(), "tfrnn_gru_cell", "Host", kBlockCall);

}  // namespace
}  // namespace tfrnn
