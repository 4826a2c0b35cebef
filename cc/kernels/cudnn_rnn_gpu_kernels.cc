// GPU kernels of the cuDNN RNN family under our "TfRnn>" names (never the stock names, whose
// GPU kernels stock TensorFlow has): the family's kernels (cudnn_rnn_face.h: validate ->
// describe, as on CPU) over the TF-free CUDA engine (_tfrnn_engine_cuda.so, cc/gpu/c_api.h) on the
// op's stream, with scratch from allocate_temp. Built when the library is built with CUDA
// (configure.sh's TFRNN_CUDA define when nvcc exists). sequence_lengths, host_reserved and the
// size scalars live in host memory.
//
// Our GPU reserve_space holds RnnReserveSize(s) elements of T (the CPU kernels' holds the
// compute type), so a forward and its backward must run on the same kind of device.
#include <string>
#include <type_traits>
#include <vector>

#include "cc/kernels/cuda_engine_loader.h"
#include "cc/kernels/cudnn_rnn_face.h"
#include "cc/kernels/gpu_kernel_util.h"
#include "cc/kernels/kernel_util.h"
#include "cc/kernels/rnn_kernel_util.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tfrnn {
namespace cudnn {
namespace {

using gpu::DevPtr;
using gpu::GpuCall;
using gpu::GpuTemps;
using gpu::CudaDtypeOf;

// One forward or backward call: the engine and stream, the spec of the inputs and its sizes
// (ws_bytes: the forward's workspace, or the backward's), scratch, and the operands both
// directions read (sequence lengths, h0, c0, params) set in the engine's arguments (Args:
// TfRnnCudaFwdArgs or TfRnnCudaBwdArgs); zeroing, transposes and the engine's run on the stream.
template <typename T, typename Args>
struct RnnCall {
  static constexpr bool kBwd = std::is_same<Args, TfRnnCudaBwdArgs>::value;

  explicit RnnCall(OpKernelContext* ctx) : scratch(ctx) {}

  absl::Status Start(OpKernelContext* ctx, const CudnnRnnOpBase& op, const FwdInputs& in) {
    const RnnSpec& s = in.spec;
    TF_RETURN_IF_ERROR(g.Init(ctx, ctx->op_kernel().type_string()));
    cs = CudaSpecOf(s, CudaDtypeOf<T>());
    int64_t n_params;
    TF_RETURN_IF_ERROR(g.Check(g.eng->rnn_sizes(&cs, &n_params, &n_reserve,
                                                kBwd ? nullptr : &ws_bytes,
                                                kBwd ? &ws_bytes : nullptr)));
    const bool lstm = s.mode == RnnMode::kLstm;
    a.lengths = op.Lengths(in, &lengths);
    a.h0 = DevPtr<T>(*in.input_h);
    a.c0 = lstm ? DevPtr<T>(*in.input_c) : nullptr;
    a.params = DevPtr<T>(*in.params);
    return absl::OkStatus();
  }

  absl::Status Zero(void* dst, int64_t bytes) const {
    return g.Check(g.eng->zero(dst, bytes, g.stream));
  }
  // dst [d1, d0, c] = src [d0, d1, c] (elements of T).
  absl::Status SwapMajor(const void* src, void* dst, int64_t d0, int64_t d1, int64_t c) const {
    return g.Check(g.eng->swap_major(sizeof(T), src, dst, d0, d1, c, g.stream));
  }
  // The engine's forward or backward on `a` with workspace ws.
  absl::Status Run(void* ws) const {
    if constexpr (kBwd) {
      return g.Check(g.eng->rnn_backward(&cs, &a, ws, ws_bytes, g.stream));
    } else {
      return g.Check(g.eng->rnn_forward(&cs, &a, ws, ws_bytes, g.stream));
    }
  }

  GpuCall g;
  TfRnnCudaSpec cs;
  int64_t n_reserve = 0, ws_bytes = 0;
  GpuTemps scratch;
  std::vector<int> lengths;
  Args a{};
};

// The family's computations on the CUDA engine (see cudnn_rnn_face.h).
template <typename T>
struct GpuCudnn {
  static constexpr bool kCountElements = false;

  static absl::Status Forward(OpKernelContext* ctx, const CudnnRnnOpBase& op,
                              const FwdInputs& in) {
    const RnnSpec& s = in.spec;
    const bool lstm = s.mode == RnnMode::kLstm, tm = op.attrs().time_major;
    RnnCall<T, TfRnnCudaFwdArgs> call(ctx);
    TF_RETURN_IF_ERROR(call.Start(ctx, op, in));
    Tensor *output, *output_h, *output_c, *reserve;
    TF_RETURN_IF_ERROR(
        op.AllocateForward(ctx, in, call.n_reserve, &output, &output_h, &output_c, &reserve));
    if (!s.training) TF_RETURN_IF_ERROR(call.Zero(DevPtr<T>(reserve), sizeof(T)));
    if (!lstm) TF_RETURN_IF_ERROR(call.Zero(DevPtr<T>(output_c), sizeof(T)));
    GpuTemps& scratch = call.scratch;
    TfRnnCudaFwdArgs& a = call.a;
    const int64_t ycols = s.D * RnnHs(s);
    a.hn = DevPtr<T>(output_h);
    a.cn = lstm ? DevPtr<T>(output_c) : nullptr;
    a.reserve = s.training ? DevPtr<T>(reserve) : scratch.Elems<T>(call.n_reserve);
    void* ws = scratch.Bytes(call.ws_bytes);
    // Batch-major input and output through time-major scratch.
    a.x = tm ? DevPtr<T>(*in.input) : scratch.Elems<T>(s.T * s.B * s.I);
    a.y = tm ? DevPtr<T>(output) : scratch.Elems<T>(s.T * s.B * ycols);
    TF_RETURN_IF_ERROR(scratch.status());
    if (!tm) {
      TF_RETURN_IF_ERROR(
          call.SwapMajor(DevPtr<T>(*in.input), const_cast<void*>(a.x), s.B, s.T, s.I));
    }
    TF_RETURN_IF_ERROR(call.Run(ws));
    if (tm) return absl::OkStatus();
    return call.SwapMajor(a.y, DevPtr<T>(output), s.T, s.B, ycols);
  }

  static absl::Status Backward(OpKernelContext* ctx, const CudnnRnnOpBase& op,
                               const FwdInputs& in, const BwdInputs& b) {
    const RnnSpec& s = in.spec;
    const bool lstm = s.mode == RnnMode::kLstm, tm = op.attrs().time_major;
    RnnCall<T, TfRnnCudaBwdArgs> call(ctx);
    TF_RETURN_IF_ERROR(call.Start(ctx, op, in));
    TF_RETURN_IF_ERROR(
        CheckReserveSpace(op.type_string(), *b.reserve, call.n_reserve, "GPU forward op"));
    Tensor *dx, *dh0, *dc0, *dparams;
    TF_RETURN_IF_ERROR(op.AllocateBackward(ctx, in, &dx, &dh0, &dc0, &dparams));
    if (!lstm) TF_RETURN_IF_ERROR(call.Zero(DevPtr<T>(dc0), dc0->NumElements() * sizeof(T)));
    GpuTemps& scratch = call.scratch;
    TfRnnCudaBwdArgs& a = call.a;
    const int64_t ycols = s.D * RnnHs(s);
    a.reserve = DevPtr<T>(*b.reserve);
    a.dhn = DevPtr<T>(*b.dhn);
    a.dcn = lstm ? DevPtr<T>(*b.dcn) : nullptr;
    a.dh0 = DevPtr<T>(dh0);
    a.dc0 = lstm ? DevPtr<T>(dc0) : nullptr;
    a.dparams = DevPtr<T>(dparams);
    void* ws = scratch.Bytes(call.ws_bytes);
    // Batch-major input, output gradient and input gradient through time-major scratch.
    void* xt = tm ? nullptr : scratch.Elems<T>(s.T * s.B * s.I);
    void* dyt = tm ? nullptr : scratch.Elems<T>(s.T * s.B * ycols);
    a.x = tm ? DevPtr<T>(*in.input) : xt;
    a.dy = tm ? DevPtr<T>(*b.dy) : dyt;
    a.dx = tm ? DevPtr<T>(dx) : scratch.Elems<T>(s.T * s.B * s.I);
    TF_RETURN_IF_ERROR(scratch.status());
    if (!tm) {
      TF_RETURN_IF_ERROR(call.SwapMajor(DevPtr<T>(*in.input), xt, s.B, s.T, s.I));
      TF_RETURN_IF_ERROR(call.SwapMajor(DevPtr<T>(*b.dy), dyt, s.B, s.T, ycols));
    }
    TF_RETURN_IF_ERROR(call.Run(ws));
    if (tm) return absl::OkStatus();
    return call.SwapMajor(a.dx, DevPtr<T>(dx), s.T, s.B, s.I);
  }

  // ParamsToCanonical / CanonicalToParams: sizes in host memory, tensors on the device, region
  // copies on the op's stream.
  absl::Status Init(OpKernelContext* ctx) { return g_.Init(ctx, ctx->op_kernel().type_string()); }
  absl::Status Copy(T* dst, const T* src, int64_t n) {
    return g_.Copy(dst, src, n * static_cast<int64_t>(sizeof(T)));
  }

 private:
  GpuCall g_;
};

#define TFRNN_REGISTER_CUDNN_GPU(T)                                                          \
  TFRNN_CUDNN_KERNELS(T, "TfRnn>", DEVICE_GPU, GpuCudnn, .HostMemory("host_reserved"),       \
                      .HostMemory("sequence_lengths"),                                       \
                      .HostMemory("num_layers").HostMemory("num_units").HostMemory("input_size"), \
                      .HostMemory("params_size"))
TFRNN_FOR_EACH_TYPE(TFRNN_REGISTER_CUDNN_GPU)
#undef TFRNN_REGISTER_CUDNN_GPU

}  // namespace
}  // namespace cudnn
}  // namespace tfrnn
