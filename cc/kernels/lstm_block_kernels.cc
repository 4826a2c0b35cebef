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
  a->B = in.N;
  a->I = in.I;
  a->H = in.H;
  a->seq_len_max = in.seq_len_max;
  a->x = br.In(*in.x);
  a->cs_prev = br.In(*in.cs_prev);
  a->h_prev = br.In(*in.h_prev);
  a->w = br.In(*in.w);
  a->wci = br.In(*in.wci);
  a->wcf = br.In(*in.wcf);
  a->wco = br.In(*in.wco);
}

// The forward's activations and the incoming gradients both backward ops read
// (LstmCellBwdArgs, LstmBwdArgs).
template <typename T, typename Args>
void SetActivationOperands(ComputeBridge<T>& br, const LstmBlockInputs& in, Args* a) {
  a->i = br.In(*in.i);
  a->cs = br.In(*in.cs);
  a->f = br.In(*in.f);
  a->o = br.In(*in.o);
  a->ci = br.In(*in.ci);
  a->co = br.In(*in.co);
  a->cs_grad = br.In(*in.cs_grad);
  a->h_grad = br.In(*in.h_grad);
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
    A** dst[7] = {&a.i, &a.cs, &a.f, &a.o, &a.ci, &a.co, &a.h};
    for (int k = 0; k < 7; ++k) *dst[k] = br.Out(outs[k]);
    const LstmCellSpec spec = SpecFor<T>(cell);
    A* ws = br.Scratch(LstmFwdWorkspaceSize(in.seq_len_max, in.N, in.I, in.H, spec.bf16));
    return RunEngine(ctx, br, [&](const EngineApi& engine, TfHostPool& pool) {
      EngineFns<A>::Forward(engine)(pool, spec, a, ws);
    });
  }

  static absl::Status CellGrad(OpKernelContext* ctx, const LstmBlockInputs& in,
                               const LstmCellSpec& spec, Tensor* outs[5]) {
    ComputeBridge<T> br(ctx);
    LstmCellBwdArgs<A> a;
    a.B = in.N;
    a.H = in.H;
    a.cs_prev = br.In(*in.cs_prev);
    a.wci = br.In(*in.wci);
    a.wcf = br.In(*in.wcf);
    a.wco = br.In(*in.wco);
    SetActivationOperands(br, in, &a);
    A** dst[5] = {&a.cs_prev_grad, &a.dgates, &a.wci_grad, &a.wcf_grad, &a.wco_grad};
    for (int k = 0; k < 5; ++k) *dst[k] = br.Out(outs[k]);
    return RunEngine(ctx, br, [&](const EngineApi& engine, TfHostPool& pool) {
      EngineFns<A>::CellBackward(engine)(pool, spec, a);
    });
  }

  static absl::Status SeqGrad(OpKernelContext* ctx, const LstmBlockInputs& in,
                              const LstmCellSpec& cell, bool exact, Tensor* outs[8]) {
    ComputeBridge<T> br(ctx);
    LstmBwdArgs<A> a;
    SetSharedOperands(br, in, &a);
    SetActivationOperands(br, in, &a);
    a.h = br.In(*in.h);
    if (exact) {
      a.i_grad = br.In(*in.i_grad);
      a.f_grad = br.In(*in.f_grad);
      a.o_grad = br.In(*in.o_grad);
      a.ci_grad = br.In(*in.ci_grad);
      a.co_grad = br.In(*in.co_grad);
      a.exact_clip_grad = true;
    }
    A** dst[8] = {&a.x_grad,   &a.cs_prev_grad, &a.h_prev_grad, &a.w_grad,
                  &a.wci_grad, &a.wcf_grad,     &a.wco_grad,    &a.b_grad};
    for (int k = 0; k < 8; ++k) *dst[k] = br.Out(outs[k]);
    A* ws = br.Scratch(LstmBwdWorkspaceSize(in.seq_len_max, in.N, in.H));
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
