// CPU kernels of the LSTM block family: the family's kernels (lstm_block_face.h: validation,
// attrs, outputs) over the CPU LSTM engine. Every face uses the same engine entry points
// (cc/engine/lstm.h).
#include <initializer_list>

#include "cc/kernels/engine_loader.h"
#include "cc/kernels/kernel_util.h"
#include "cc/kernels/lstm_block_face.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tfrnn {
namespace lstm_block {
namespace {

// The operands the forward (LstmFwdArgs) and the sequence backward (LstmBwdArgs) both read.
template <typename T, typename Args>
void SetSharedOperands(ComputeBridge<T>& br, const LstmBlockInputs& in, Args* a) {
  a->T = in.T;
  a->B = in.B;
  a->I = in.I;
  a->H = in.H;
  a->seq_len_max = in.seq_len_max;
  br.BindIn(SharedInputs(in, a));
}

// The family's computations on the CPU engine (see lstm_block_face.h).
template <typename T>
struct CpuLstm {
  using A = typename ComputeType<T>::type;

  static absl::Status Forward(OpKernelContext* ctx, const LstmBlockInputs& in,
                              const LstmCellSpec& cell, Tensor* outs[7]) {
    ComputeBridge<T> br(ctx);
    LstmFwdArgs<A> a;
    SetSharedOperands(br, in, &a);
    a.b = br.In(*in.b);
    br.BindOut({&a.i, &a.cs, &a.f, &a.o, &a.ci, &a.co, &a.h}, outs);
    const LstmCellSpec spec = SpecFor<T>(cell);
    const int64_t elems = LstmFwdWorkspaceSize(in.seq_len_max, in.B, in.I, in.H, spec.bf16);
    ScratchCache::Lease lease = ScratchCache::Global().Take(sizeof(A) * elems);
    TF_RETURN_IF_ERROR(WorkspaceStatus(ctx->op_kernel().type_string(), lease));
    A* ws = lease.As<A>();
    return RunEngine(ctx, br, [&](const EngineApi& engine, TfHostPool& pool) {
      EngineFns<A>::Forward(engine)(pool, spec, a, ws);
    });
  }

  static absl::Status CellGrad(OpKernelContext* ctx, const LstmBlockInputs& in,
                               const LstmCellSpec& spec, Tensor* outs[5]) {
    ComputeBridge<T> br(ctx);
    LstmCellBwdArgs<A> a;
    a.B = in.B;
    a.H = in.H;
    br.BindIn({{&a.cs_prev, in.cs_prev}, {&a.wci, in.wci}, {&a.wcf, in.wcf}, {&a.wco, in.wco}});
    br.BindIn(ActivationInputs(in, &a));
    br.BindOut({&a.cs_prev_grad, &a.dgates, &a.wci_grad, &a.wcf_grad, &a.wco_grad}, outs);
    return RunEngine(ctx, br, [&](const EngineApi& engine, TfHostPool& pool) {
      EngineFns<A>::CellBackward(engine)(pool, spec, a);
    });
  }

  static absl::Status SeqGrad(OpKernelContext* ctx, const LstmBlockInputs& in,
                              const LstmCellSpec& cell, bool exact, Tensor* outs[8]) {
    ComputeBridge<T> br(ctx);
    LstmBwdArgs<A> a;
    SetSharedOperands(br, in, &a);
    br.BindIn(ActivationInputs(in, &a));
    a.h = br.In(*in.h);
    if (exact) {
      br.BindIn(ExactGradInputs(in, &a));
      a.exact_clip_grad = true;
    }
    a.x_grad = br.OutIfRequired(0, outs[0]);
    br.BindOut({&a.cs_prev_grad, &a.h_prev_grad}, outs + 1);
    // The weights' gradients (w, wci, wcf, wco, b): none where the graph consumes none of them
    // (a frozen cell, or the gradient of the input alone; the engine skips their products).
    if (br.AnyRequired(3, 8)) {
      br.BindOut({&a.w_grad, &a.wci_grad, &a.wcf_grad, &a.wco_grad, &a.b_grad}, outs + 3);
    }
    const int64_t elems = LstmBwdWorkspaceSize(in.seq_len_max, in.B, in.I, in.H);
    ScratchCache::Lease lease = ScratchCache::Global().Take(sizeof(A) * elems);
    TF_RETURN_IF_ERROR(WorkspaceStatus(ctx->op_kernel().type_string(), lease));
    A* ws = lease.As<A>();
    const LstmCellSpec spec = SpecFor<T>(cell);
    return RunEngine(ctx, br, [&](const EngineApi& engine, TfHostPool& pool) {
      EngineFns<A>::Backward(engine)(pool, spec, a, ws);
    });
  }

  static absl::Status Zero(OpKernelContext*, std::initializer_list<Tensor*> outs) {
    SetZero<T>(outs);
    return absl::OkStatus();
  }
};

#define TFRNN_REGISTER_LSTM_KERNELS(T) TFRNN_LSTM_BLOCK_KERNELS(T, DEVICE_CPU, , CpuLstm)
TFRNN_FOR_EACH_TYPE(TFRNN_REGISTER_LSTM_KERNELS)
#undef TFRNN_REGISTER_LSTM_KERNELS

}  // namespace
}  // namespace lstm_block
}  // namespace tfrnn
