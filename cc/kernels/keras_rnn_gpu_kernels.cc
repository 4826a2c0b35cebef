// GPU kernels of the Keras layers' op pair (TfRnn>KerasRNN, KerasRNNBackprop; shapes and
// layouts in cc/ops/keras_rnn_ops.cc): the same validation and outputs as the CPU kernels
// (keras_rnn_face.h), then the TF-free CUDA engine (_tfrnn_engine_cuda.so, cc/gpu/c_api.h) on
// the op's stream with the Keras tensors as its separate weights (args w, r, bw, br with
// weights_xw) and their gradients written in place. Built when the library is built with CUDA;
// sequence_lengths lives in host memory.
//
// The GPU reserve_space holds the engine's reserve in elements of T (the CPU kernels' holds
// the compute type), so a forward and its backward run on the same kind of device.
#include <type_traits>
#include <vector>

#include "cc/kernels/gpu_kernel_util.h"
#include "cc/kernels/keras_rnn_face.h"
#include "cc/kernels/kernel_util.h"
#include "cc/kernels/rnn_kernel_util.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tfrnn {
namespace {

using gpu::DevPtr;
using gpu::GpuCall;
using gpu::GpuTemps;

// What the forward and the backward share: the engine and stream, the spec and its sizes,
// scratch, the host lengths, and the operands both read set in the engine's args (Args:
// TfRnnCudaFwdArgs or TfRnnCudaBwdArgs).
template <typename T, typename Args>
struct KerasGpuCall {
  explicit KerasGpuCall(OpKernelContext* ctx) : scratch(ctx) {}

  absl::Status Start(OpKernelContext* ctx, const KerasInputs& in) {
    const RnnSpec& s = in.spec;
    TF_RETURN_IF_ERROR(g.Init(ctx, ctx->op_kernel().type_string()));
    cs = CudaSpecOf(s, gpu::CudaDtypeOf<T>());
    int64_t n_params = 0, fws = 0, bws = 0;
    TF_RETURN_IF_ERROR(g.Check(g.eng->rnn_sizes(&cs, &n_params, &n_reserve, &fws, &bws)));
    ws_bytes = std::is_same<Args, TfRnnCudaBwdArgs>::value ? bws : fws;
    const bool lstm = s.mode == RnnMode::kLstm;
    const int64_t KN = RnnK(s) * s.H;
    a.lengths = SeqLengths(in.lengths, s.B, &lengths);
    gpu::BindIn<T>({{&a.h0, in.h0}, {&a.w, in.kernel}, {&a.r, in.rkernel}, {&a.bw, in.bias}});
    if (lstm) a.c0 = DevPtr<T>(*in.c0);
    if (in.mask != nullptr) a.mask = DevPtr<T>(*in.mask);
    // The recurrent bias: bias's second row, or zeros (Keras's single bias).
    if (in.two_biases) {
      a.br = GpuCall::At(a.bw, KN * static_cast<int64_t>(sizeof(T)));
    } else {
      void* zeros = scratch.Elems<T>(KN);
      TF_RETURN_IF_ERROR(scratch.status());
      TF_RETURN_IF_ERROR(g.Zero(zeros, KN * static_cast<int64_t>(sizeof(T))));
      a.br = zeros;
    }
    workspace = scratch.Bytes(ws_bytes);
    return scratch.status();
  }

  // Batch-major src [B, T, c] as the engine's time-major [T, B, c]: src itself when T or B is
  // 1, else a transposed copy in scratch.
  absl::Status TimeMajor(const RnnSpec& s, const Tensor& src, int64_t c, const void** out) {
    if (SameMajor(s)) {
      *out = DevPtr<T>(src);
      return absl::OkStatus();
    }
    void* t = scratch.Elems<T>(s.T * s.B * c);
    TF_RETURN_IF_ERROR(scratch.status());
    *out = t;
    return g.SwapMajor(sizeof(T), DevPtr<T>(src), t, s.B, s.T, c);
  }
  // Where the engine writes a batch-major output [B, T, c]: the tensor itself when T or B is
  // 1, else time-major scratch that BatchMajor transposes into it.
  absl::Status OutSlot(const RnnSpec& s, Tensor* dst, int64_t c, void** out) {
    *out = SameMajor(s) ? DevPtr<T>(dst) : scratch.Elems<T>(s.T * s.B * c);
    return scratch.status();
  }
  // The forward's reserve: the output when training, else scratch.
  absl::Status ReserveSlot(bool training, Tensor* reserve, void** out) {
    *out = training ? DevPtr<T>(reserve) : scratch.Elems<T>(n_reserve);
    return scratch.status();
  }
  absl::Status BatchMajor(const RnnSpec& s, const void* slot, Tensor* dst, int64_t c) const {
    if (SameMajor(s)) return absl::OkStatus();
    return g.SwapMajor(sizeof(T), slot, DevPtr<T>(dst), s.T, s.B, c);
  }

  GpuCall g;
  TfRnnCudaSpec cs;
  int64_t n_reserve = 0, ws_bytes = 0;
  GpuTemps scratch;
  void* workspace = nullptr;
  std::vector<int> lengths;
  Args a{};
};

// The Keras op pair's computations on the CUDA engine (KerasRnnKernel, keras_rnn_face.h).
template <typename T>
struct GpuKeras {
  static absl::Status Forward(OpKernelContext* ctx, const KerasAttrs& attrs,
                              const KerasInputs& in) {
    const RnnSpec& s = in.spec;
    const bool training = attrs.training, lstm = s.mode == RnnMode::kLstm;
    KerasGpuCall<T, TfRnnCudaFwdArgs> call(ctx);
    TF_RETURN_IF_ERROR(call.Start(ctx, in));
    KerasOutputs out;
    TF_RETURN_IF_ERROR(AllocateKerasOutputs(ctx, in, training, call.n_reserve, &out));
    TfRnnCudaFwdArgs& a = call.a;
    a.hn = DevPtr<T>(out.hn);
    a.cn = lstm ? DevPtr<T>(out.cn) : nullptr;
    TF_RETURN_IF_ERROR(call.ReserveSlot(training, out.reserve, &a.reserve));
    TF_RETURN_IF_ERROR(call.TimeMajor(s, *in.x, s.I, &a.x));
    TF_RETURN_IF_ERROR(call.OutSlot(s, out.y, s.H, &a.y));
    TF_RETURN_IF_ERROR(call.g.Check(
        call.g.eng->rnn_forward(&call.cs, &a, call.workspace, call.ws_bytes, call.g.stream)));
    return call.BatchMajor(s, a.y, out.y, s.H);
  }

  static absl::Status Backward(OpKernelContext* ctx, const KerasAttrs& attrs,
                               const KerasInputs& in) {
    const RnnSpec& s = in.spec;
    const bool lstm = s.mode == RnnMode::kLstm;
    const int64_t KN = RnnK(s) * s.H;
    KerasGpuCall<T, TfRnnCudaBwdArgs> call(ctx);
    TF_RETURN_IF_ERROR(call.Start(ctx, in));
    KerasGrads gr;
    TF_RETURN_IF_ERROR(KerasGradsOf(ctx, in, call.n_reserve, &gr));
    if (!lstm) TF_RETURN_IF_ERROR(gpu::ZeroGpu(call.g, {gr.dc0}));
    TfRnnCudaBwdArgs& a = call.a;
    gpu::BindIn<T>({{&a.reserve, gr.reserve}, {&a.dhn, gr.dhn}});
    Tensor* const outs[] = {gr.dh0, gr.dkernel, gr.drkernel, gr.dbias};
    gpu::BindOut<T>({&a.dh0, &a.dw, &a.dr, &a.dbw}, outs);
    if (lstm) {
      a.dcn = DevPtr<T>(*gr.dcn);
      a.dc0 = DevPtr<T>(gr.dc0);
    }
    a.dbr = in.two_biases ? GpuCall::At(a.dbw, KN * static_cast<int64_t>(sizeof(T))) : nullptr;
    TF_RETURN_IF_ERROR(call.TimeMajor(s, *in.x, s.I, &a.x));
    TF_RETURN_IF_ERROR(call.TimeMajor(s, *gr.dy, s.H, &a.dy));
    TF_RETURN_IF_ERROR(call.OutSlot(s, gr.dx, s.I, &a.dx));
    TF_RETURN_IF_ERROR(call.g.Check(
        call.g.eng->rnn_backward(&call.cs, &a, call.workspace, call.ws_bytes, call.g.stream)));
    // input_grad false: zeros (the CUDA engine computes the input's gradient regardless).
    if (!attrs.input_grad) return gpu::ZeroGpu(call.g, {gr.dx});
    return call.BatchMajor(s, a.dx, gr.dx, s.I);
  }
};

#define TFRNN_REGISTER_KERAS_GPU(T)                                                      \
  REGISTER_KERNEL_BUILDER(Name("TfRnn>KerasRNN")                                         \
                              .Device(DEVICE_GPU)                                        \
                              .TypeConstraint<T>("T")                                    \
                              .HostMemory("sequence_lengths"),                           \
                          KerasRnnKernel<GpuKeras, T, false>);                                      \
  REGISTER_KERNEL_BUILDER(Name("TfRnn>KerasRNNBackprop")                                 \
                              .Device(DEVICE_GPU)                                        \
                              .TypeConstraint<T>("T")                                    \
                              .HostMemory("sequence_lengths"),                           \
                          KerasRnnKernel<GpuKeras, T, true>);
TFRNN_FOR_EACH_TYPE(TFRNN_REGISTER_KERAS_GPU)
#undef TFRNN_REGISTER_KERAS_GPU

}  // namespace
}  // namespace tfrnn
