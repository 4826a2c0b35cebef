// The CPU custom-call target of the block ops' XLA kernels (XLA FFI, platform "Host"):
// tfrnn_block_call binds the call's operands and results to the engine's arguments in the
// order of cc/engine/block_arg_fields.h (block_call.h), each checked against the size its shape
// text there gives, then runs the CPU engine's GRU cell, LSTM block or LSTM cell backward.
#include <string>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "cc/engine/block_arg_fields.h"
#include "cc/engine/engine_api.h"
#include "cc/engine/workspace.h"
#include "cc/kernels/lstm_block_face.h"
#include "cc/kernels/scratch_cache.h"
#include "cc/xla/block_call.h"
#include "cc/xla/ffi_cpu_common.h"
#include "xla/ffi/api/ffi.h"

namespace tfrnn {
namespace {

namespace ffi = ::xla::ffi;

// Binds operand and result k of the call to the fields of Args, in the field list's order: an
// absent optional operand (its bit in call.present clear) must have no elements and is null.
template <typename A, typename Args>
class Binder {
 public:
  Binder(const XlaBlockCall& call, Buffers* buf) : call_(call), buf_(buf) {}

  int inputs() const { return in_; }

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

// Binds Args's fields (the list FIELDS of block_arg_fields.h) to the call's buffers.
#define TFRNN_BIND_IN(name, shape) bind.In(&a->name, #name, shape);
#define TFRNN_BIND_OUT(name, shape) bind.Out(&a->name, #name, shape);
#define TFRNN_DEFINE_BIND(ARGS, FIELDS)                                                 \
  template <typename A>                                                                  \
  int Bind(const XlaBlockCall& call, Buffers* buf, ARGS<A>* a) {                         \
    Binder<A, ARGS<A>> bind(call, buf);                                                  \
    FIELDS(TFRNN_BIND_IN, TFRNN_BIND_OUT)                                                \
    return bind.inputs();                                                                \
  }
TFRNN_DEFINE_BIND(GruCellFwdArgs, TFRNN_GRU_CELL_FWD_ARGS)
TFRNN_DEFINE_BIND(GruCellBwdArgs, TFRNN_GRU_CELL_BWD_ARGS)
TFRNN_DEFINE_BIND(LstmFwdArgs, TFRNN_LSTM_FWD_ARGS)
TFRNN_DEFINE_BIND(LstmBwdArgs, TFRNN_LSTM_BWD_ARGS)
TFRNN_DEFINE_BIND(LstmCellBwdArgs, TFRNN_LSTM_CELL_BWD_ARGS)
#undef TFRNN_DEFINE_BIND
#undef TFRNN_BIND_IN
#undef TFRNN_BIND_OUT

// The engine call of one block op: Args's sizes and buffers bound and checked, the LSTM's
// seq_len_max (the operand after the bound ones) checked against T, the workspace taken, then
// run(engine, a, ws).
template <typename A, typename Args, typename Size, typename Run>
ffi::Error BlockCall(const XlaBlockCall& call, ffi::RemainingArgs args, ffi::RemainingRets rets,
                     Size workspace, Run run) {
  const char* op = XlaBlockOpName(call.op);
  Buffers buf(op, call.f64, args, rets);
  Args a;
  a.B = call.B;
  a.H = call.H;
  if constexpr (!std::is_same_v<Args, LstmCellBwdArgs<A>>) a.I = call.I;
  const int inputs = Bind<A>(call, &buf, &a);
  Index steps = 1;
  if constexpr (std::is_same_v<Args, LstmFwdArgs<A>> || std::is_same_v<Args, LstmBwdArgs<A>>) {
    a.T = call.T;
    steps = buf.InInt64(inputs, "seq_len_max");
    if (buf.error().empty()) {
      const absl::Status st = lstm_block::CheckSeqLenMax(op, steps, call.T);
      if (!st.ok()) return ffi::Error::InvalidArgument(std::string(st.message()));
    }
    a.seq_len_max = steps;
  }
  if (!buf.error().empty()) return ffi::Error::InvalidArgument(buf.error());
  const Index elems = workspace(steps);
  ScratchCache::Lease lease = ScratchCache::Global().Take(sizeof(A) * elems);
  ffi::Error error = ffi::Error::Success();
  A* ws = Workspace<A>(op, lease, &error);
  if (ws == nullptr) return error;
  const EngineApi* engine;
  if (ffi::Error e = LoadEngine(&engine); e.failure()) return e;
  run(*engine, a, ws);
  return ffi::Error::Success();
}

template <typename A>
ffi::Error RunBlock(HostPool& pool, const XlaBlockCall& call, ffi::RemainingArgs args,
                    ffi::RemainingRets rets) {
  const Index B = call.B, I = call.I, H = call.H;
  LstmCellSpec cell = call.cell;
  switch (XlaBlockKindOf(call.op)) {
    case XlaBlockKind::kGruCellForward:
      return BlockCall<A, GruCellFwdArgs<A>>(
          call, args, rets, [&](Index) { return GruCellFwdWorkspaceSize(B, H); },
          [&](const EngineApi& e, const GruCellFwdArgs<A>& a, A* ws) {
            EngineFns<A>::GruForward(e)(pool, a, ws);
          });
    case XlaBlockKind::kGruCellBackward:
      return BlockCall<A, GruCellBwdArgs<A>>(
          call, args, rets, [&](Index) { return GruCellBwdWorkspaceSize(B, H); },
          [&](const EngineApi& e, const GruCellBwdArgs<A>& a, A* ws) {
            EngineFns<A>::GruBackward(e)(pool, a, ws);
          });
    case XlaBlockKind::kLstmForward:
      return BlockCall<A, LstmFwdArgs<A>>(
          call, args, rets,
          [&](Index steps) { return LstmFwdWorkspaceSize(steps, B, I, H, cell.bf16); },
          [&](const EngineApi& e, const LstmFwdArgs<A>& a, A* ws) {
            EngineFns<A>::Forward(e)(pool, cell, a, ws);
          });
    case XlaBlockKind::kLstmBackward:
      return BlockCall<A, LstmBwdArgs<A>>(
          call, args, rets, [&](Index steps) { return LstmBwdWorkspaceSize(steps, B, I, H); },
          [&](const EngineApi& e, LstmBwdArgs<A>& a, A* ws) {
            a.exact_clip_grad = call.exact_clip_grad;
            EngineFns<A>::Backward(e)(pool, cell, a, ws);
          });
    case XlaBlockKind::kLstmCellBackward:
      return BlockCall<A, LstmCellBwdArgs<A>>(
          call, args, rets, [&](Index) { return Index(0); },
          [&](const EngineApi& e, const LstmCellBwdArgs<A>& a, A*) {
            EngineFns<A>::CellBackward(e)(pool, cell, a);
          });
  }
  return ffi::Error::Internal("unknown block call");
}

ffi::Error Run(ffi::ThreadPool xla_pool, ffi::RemainingArgs args, ffi::RemainingRets rets,
               ffi::Span<const int64_t> enc) {
  XlaBlockCall call;
  const std::string why = DecodeXlaBlockCall(enc.begin(), enc.size(), &call);
  if (!why.empty()) {
    return ffi::Error::InvalidArgument(
        absl::StrCat("tf_rnn_ops block op (XLA custom call): ", why));
  }
  XlaHostPool pool(xla_pool);
  return call.f64 ? RunBlock<double>(pool, call, args, rets)
                  : RunBlock<float>(pool, call, args, rets);
}

XLA_FFI_DEFINE_HANDLER(kBlockCall, Run, CallBinding());

XLA_FFI_REGISTER_HANDLER(ffi::GetXlaFfiApi(), "tfrnn_block_call", "Host", kBlockCall);

}  // namespace
}  // namespace tfrnn
