// GPU kernels of the LSTM block family (LSTMBlockCell, LSTMBlockCellGrad, BlockLSTM,
// BlockLSTMV2, BlockLSTMGrad, BlockLSTMGradV2, BlockLSTMGradExact under our "TfRnn>" names):
// the family's validation, attrs and outputs (lstm_block_face.h, as on CPU), then the TF-free
// CUDA LSTM block engine (tfrnn_cuda_lstm_*, cc/gpu/lstm_gpu.cu) on the op's stream with
// workspace from allocate_temp. seq_len_max lives in host memory. The cell ops are the
// sequence maths with T = 1 (LSTMBlockCellGrad: the gate gradients are the engine's dgates
// output). Built when the library is built with CUDA.
#include <initializer_list>

#include "cc/kernels/cuda_engine_loader.h"
#include "cc/kernels/gpu_kernel_util.h"
#include "cc/kernels/kernel_util.h"
#include "cc/kernels/lstm_block_face.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tfrnn {
namespace lstm_block {
namespace {

using gpu::DevPtr;
using gpu::CudaDtypeOf;

TfRnnCudaLstmSpec ToCudaLstmSpec(const LstmBlockInputs& in, const LstmCellSpec& s, int dtype,
                                 bool exact_clip_grad) {
  TfRnnCudaLstmSpec c{};
  c.dtype = dtype;
  c.T = in.T;
  c.B = in.B;
  c.I = in.I;
  c.H = in.H;
  c.seq_len_max = in.seq_len_max;
  c.gate_order = s.order.c == kIfco.c ? 1 : 0;
  c.forget_bias = s.forget_bias;
  c.cell_clip = s.cell_clip;
  c.use_peephole = s.use_peephole;
  c.exact_clip_grad = exact_clip_grad;
  return c;
}

// Fills the backward arguments common to the cell and sequence gradients.
template <typename T>
TfRnnCudaLstmBwdArgs LstmBwdInputs(const LstmBlockInputs& in) {
  TfRnnCudaLstmBwdArgs a{};
  gpu::BindIn<T>(SharedInputs(in, &a));
  gpu::BindIn<T>(ActivationInputs(in, &a));
  return a;
}

using LstmCall = gpu::EngineCall<TfRnnCudaLstmSpec, TfRnnCudaLstmFwdArgs, TfRnnCudaLstmBwdArgs,
                                 &CudaEngine::lstm_sizes, &CudaEngine::lstm_forward,
                                 &CudaEngine::lstm_backward>;

// The family's computations on the CUDA engine (see lstm_block_face.h). The cell ops are the
// sequence maths with T = 1 (LSTMBlockCellGrad: the gate gradients are the engine's dgates
// output, the one-step backward has no carries).
template <typename T>
struct GpuLstm {
  static absl::Status Forward(OpKernelContext* ctx, const LstmBlockInputs& in,
                              const LstmCellSpec& spec, Tensor* outs[7]) {
    LstmCall call(ctx);
    TF_RETURN_IF_ERROR(call.Start(ctx, ToCudaLstmSpec(in, spec, CudaDtypeOf<T>(), false), true));
    TfRnnCudaLstmFwdArgs a{};
    gpu::BindIn<T>(SharedInputs(in, &a));
    a.b = DevPtr<T>(*in.b);
    gpu::BindOut<T>({&a.i, &a.cs, &a.f, &a.o, &a.ci, &a.co, &a.h}, outs);
    return call.Forward(a);
  }

  static absl::Status CellGrad(OpKernelContext* ctx, const LstmBlockInputs& in,
                               const LstmCellSpec& spec, Tensor* outs[5]) {
    LstmCall call(ctx);
    TF_RETURN_IF_ERROR(call.Start(ctx, ToCudaLstmSpec(in, spec, CudaDtypeOf<T>(), false), false));
    // The sequence gradient's other outputs, unused here: x, h_prev, w and b gradients.
    const int64_t e = sizeof(T);
    TfRnnCudaLstmBwdArgs a = LstmBwdInputs<T>(in);
    a.h = a.co;  // read only for steps > 0 (none here)
    a.x_grad = call.tmp.Bytes(in.B * in.I * e);
    a.h_prev_grad = call.tmp.Bytes(in.B * in.H * e);
    a.w_grad = call.tmp.Bytes((in.I + in.H) * 4 * in.H * e);
    a.b_grad = call.tmp.Bytes(4 * in.H * e);
    TF_RETURN_IF_ERROR(call.tmp.status());
    gpu::BindOut<T>({&a.cs_prev_grad, &a.dgates, &a.wci_grad, &a.wcf_grad, &a.wco_grad}, outs);
    return call.Backward(a);
  }

  static absl::Status SeqGrad(OpKernelContext* ctx, const LstmBlockInputs& in,
                              const LstmCellSpec& spec, bool exact, Tensor* outs[8]) {
    LstmCall call(ctx);
    TF_RETURN_IF_ERROR(call.Start(ctx, ToCudaLstmSpec(in, spec, CudaDtypeOf<T>(), exact), false));
    TfRnnCudaLstmBwdArgs a = LstmBwdInputs<T>(in);
    a.h = DevPtr<T>(*in.h);
    if (exact) gpu::BindIn<T>(ExactGradInputs(in, &a));
    gpu::BindOut<T>({&a.x_grad, &a.cs_prev_grad, &a.h_prev_grad, &a.w_grad, &a.wci_grad,
                     &a.wcf_grad, &a.wco_grad, &a.b_grad},
                    outs);
    return call.Backward(a);
  }

  static absl::Status Zero(OpKernelContext* ctx, std::initializer_list<Tensor*> outs) {
    return gpu::ZeroGpu(ctx, outs);
  }
};

#define TFRNN_REGISTER_LSTM_GPU_KERNELS(T) \
  TFRNN_LSTM_BLOCK_KERNELS(T, DEVICE_GPU, .HostMemory("seq_len_max"), GpuLstm)
TFRNN_FOR_EACH_TYPE(TFRNN_REGISTER_LSTM_GPU_KERNELS)
#undef TFRNN_REGISTER_LSTM_GPU_KERNELS

}  // namespace
}  // namespace lstm_block
}  // namespace tfrnn
