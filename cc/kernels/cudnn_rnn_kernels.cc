// CPU kernels of the cuDNN RNN family: the family's kernels (cudnn_rnn_face.h: validate ->
// describe (RnnSpec), shared with the GPU kernels) over the CPU engine.
//
// Built twice: into the main library under "TfRnn>" names, and (with
// -DTFRNN_CUDNN_OP_PREFIX=\"\") into _tf_rnn_ops_cudnn_cpu.so under the stock names, which have
// no CPU kernel in stock TensorFlow (loaded only by tf_rnn_ops.register_cudnn_rnn_cpu_kernels).
#include <algorithm>
#include <string>
#include <vector>

#include "cc/kernels/cudnn_rnn_face.h"
#include "cc/kernels/kernel_util.h"
#include "cc/kernels/rnn_kernel_util.h"
#include "tensorflow/core/framework/op_kernel.h"

#ifndef TFRNN_CUDNN_OP_PREFIX
#define TFRNN_CUDNN_OP_PREFIX "TfRnn>"
#endif

namespace tfrnn {
namespace cudnn {
namespace {

// The family's computations on the CPU engine (see cudnn_rnn_face.h).
template <typename T>
struct CpuCudnn {
  using A = typename ComputeType<T>::type;
  static constexpr bool kCountElements = true;

  static absl::Status Forward(OpKernelContext* ctx, const CudnnRnnOpBase& op,
                              const FwdInputs& in) {
    const RnnSpec& s = in.spec;
    const int64_t reserve_a = RnnReserveSize(s);
    Tensor *output, *output_h, *output_c, *reserve;
    TF_RETURN_IF_ERROR(op.AllocateForward(ctx, in, ReserveElementsOfT<T, A>(reserve_a), &output,
                                          &output_h, &output_c, &reserve));
    RnnFwdArgs<A> a;
    std::vector<int> lengths;
    a.lengths = op.Lengths(in, &lengths);
    // The engine leaves the reserve rows past each sequence's length unwritten: zero the
    // reserve first (on the pool) when some sequence is shorter than T, so that the output
    // never holds uninitialised memory. (Zeroing it on every call, as V3's lengths always
    // came, cost 4-8 ms of a 70 ms LSTM training step at 100x64x256x256.)
    if (!s.training || AnyShorter(lengths, s.T)) {
      Zero<T>(ctx->eigen_device<CpuDevice>(), reserve->flat<T>().data(), reserve->NumElements());
    }
    const bool lstm = s.mode == RnnMode::kLstm;
    if (!lstm) output_c->flat<T>().setZero();

    ComputeBridge<T> br(ctx);
    const A* x = br.In(*in.input);
    a.h0 = br.In(*in.input_h);
    a.c0 = lstm ? br.In(*in.input_c) : nullptr;
    a.params = br.In(*in.params);
    A* y = br.Out(output);
    a.hn = br.Out(output_h);
    a.cn = lstm ? br.Out(output_c) : nullptr;
    a.reserve = s.training ? reinterpret_cast<A*>(reserve->flat<T>().data()) : nullptr;
    return RunRnnForward<T>(ctx, br, s, op.attrs().time_major, x, y, &a);
  }

  static absl::Status Backward(OpKernelContext* ctx, const CudnnRnnOpBase& op,
                               const FwdInputs& in, const BwdInputs& b) {
    const RnnSpec& s = in.spec;
    const bool lstm = s.mode == RnnMode::kLstm;
    TF_RETURN_IF_ERROR(CheckReserveSpace(op.type_string(), *b.reserve,
                                         ReserveElementsOfT<T, A>(RnnReserveSize(s)),
                                         "forward op"));
    Tensor *dx, *dh0, *dc0, *dparams;
    TF_RETURN_IF_ERROR(op.AllocateBackward(ctx, in, &dx, &dh0, &dc0, &dparams));
    if (!lstm) dc0->flat<T>().setZero();

    ComputeBridge<T> br(ctx);
    RnnBwdArgs<A> a;
    std::vector<int> lengths;
    a.lengths = op.Lengths(in, &lengths);
    const A* x = br.In(*in.input);
    const A* dy = br.In(*b.dy);
    a.h0 = br.In(*in.input_h);
    a.c0 = lstm ? br.In(*in.input_c) : nullptr;
    a.params = br.In(*in.params);
    a.reserve = reinterpret_cast<const A*>(b.reserve->flat<T>().data());
    a.dhn = br.In(*b.dhn);
    a.dcn = lstm ? br.In(*b.dcn) : nullptr;
    A* dxv = br.OutIfRequired(0, dx);  // input_backprop
    a.dh0 = br.Out(dh0);
    a.dc0 = lstm ? br.Out(dc0) : nullptr;
    a.dparams = br.OutIfRequired(3, dparams);  // none: the weights' products skipped
    return RunRnnBackward<T>(ctx, br, s, op.attrs().time_major, x, dy, dxv, &a);
  }

  absl::Status Init(OpKernelContext*) { return absl::OkStatus(); }
  absl::Status Copy(T* dst, const T* src, int64_t n) {
    std::copy_n(src, n, dst);
    return absl::OkStatus();
  }
};

#define TFRNN_REGISTER_CUDNN(T) \
  TFRNN_CUDNN_KERNELS(T, TFRNN_CUDNN_OP_PREFIX, DEVICE_CPU, CpuCudnn, , , , )
TFRNN_FOR_EACH_TYPE(TFRNN_REGISTER_CUDNN)
#undef TFRNN_REGISTER_CUDNN

}  // namespace
}  // namespace cudnn
}  // namespace tfrnn
