// The GPU side of the MPSGraph-style kernels (TfRnn>LSTM/LSTMGradients, TfRnn>GRU/
// GRUGradients): the family's validation (mps_rnn_face.h, as on CPU), then the TF-free CUDA
// engine (_tfrnn_engine_cuda.so, cc/gpu/c_api.h) on the op's stream. MPSGraph's operands are
// packed into the engine's params layout on the device (copies on the stream; absent operands
// = zeros), scratch comes from allocate_temp. The families' computations on the CUDA engine
// (GpuMps, for the kernels of mps_rnn_face.h).
#ifndef TF_RNN_OPS_CC_KERNELS_MPS_GPU_OPS_H_
#define TF_RNN_OPS_CC_KERNELS_MPS_GPU_OPS_H_

#include <algorithm>
#include <cstdint>
#include <utility>

#include "cc/kernels/cuda_engine_loader.h"
#include "cc/kernels/gpu_kernel_util.h"
#include "cc/kernels/kernel_util.h"
#include "cc/kernels/mps_rnn_face.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tfrnn {
namespace mps {

// Packs MPSGraph's operands (device; absent = null = zeros) into the engine's params layout
// and h0/c0 [D, B, H] (c0 for lstm): per direction d, W rows [d·K·H, (d+1)·K·H), R [D, K·H, H],
// bias [D·K·H] (the input biases; the recurrent ones are zero except the gru candidate's,
// bias2 [D·H]), states [B, D·H].
template <typename Tt>
absl::Status PackMpsGpu(const gpu::GpuCall& g, const RnnSpec& s, const Tensor* W, const Tensor* R,
                        const Tensor* bias, const Tensor* bias2, const Tensor* init_state,
                        const Tensor* init_cell, void* params, void* h0, void* c0) {
  const int64_t D = s.D, B = s.B, H = s.H, KN = RnnK(s) * H, e = sizeof(Tt);
  const int64_t in_w = s.preprojected ? 0 : s.I;
  for (int64_t d = 0; d < D; ++d) {
    const RnnParamOffsets o = RnnParamLayout(s, d);
    if (W != nullptr) {
      TF_RETURN_IF_ERROR(g.Copy(g.At(params, o.w * e), g.At(W, d * KN * in_w * e),
                                KN * in_w * e));
    }
    TF_RETURN_IF_ERROR(g.Copy(g.At(params, o.r * e), g.At(R, d * KN * H * e), KN * H * e));
    if (bias != nullptr) {
      TF_RETURN_IF_ERROR(g.Copy(g.At(params, o.bw * e), g.At(bias, d * KN * e), KN * e));
    } else {
      TF_RETURN_IF_ERROR(g.Zero(g.At(params, o.bw * e), KN * e));
    }
    TF_RETURN_IF_ERROR(g.Zero(g.At(params, o.br * e), KN * e));
    if (bias2 != nullptr) {  // the gru candidate's recurrent bias
      TF_RETURN_IF_ERROR(g.Copy(g.At(params, (o.br + s.gate_pos[2] * H) * e),
                                g.At(bias2, d * H * e), H * e));
    }
  }
  // [B, D·H] -> [D, B, H].
  const std::pair<const Tensor*, void*> states[2] = {{init_state, h0}, {init_cell, c0}};
  for (const auto& st : states) {
    if (st.second == nullptr) continue;
    if (st.first != nullptr) {
      TF_RETURN_IF_ERROR(g.SwapMajor(e, gpu::DevPtr<Tt>(*st.first), st.second, B, D, H));
    } else {
      TF_RETURN_IF_ERROR(g.Zero(st.second, D * B * H * e));
    }
  }
  return absl::OkStatus();
}

// out [T, B, D·width] = each direction's [T·B, width] block at reserve + offset(d) elements,
// interleaved (scratch: D·T·B·width elements, used when D == 2).
template <typename Tt, typename OffsetFn>
absl::Status InterleaveDirs(const gpu::GpuCall& g, const RnnSpec& s, const void* reserve,
                            OffsetFn offset, int64_t width, void* scratch, void* out) {
  const int64_t TB = s.T * s.B, e = sizeof(Tt);
  if (TB * width == 0) return absl::OkStatus();
  for (int64_t d = 0; d < s.D; ++d) {
    void* dst = s.D == 1 ? out : g.At(scratch, d * TB * width * e);
    TF_RETURN_IF_ERROR(g.Copy(dst, g.At(reserve, offset(d) * e), TB * width * e));
  }
  if (s.D == 2) return g.SwapMajor(e, scratch, out, s.D, TB, width);
  return absl::OkStatus();
}

// One call of the CUDA engine on MPSGraph's operands (device memory): the engine and stream,
// the spec and its sizes, scratch from allocate_temp, the operands packed into the engine's
// layout and the forward's arguments; the gradients recompute the forward (as on CPU).
template <typename Tt>
class MpsGpuRun {
 public:
  MpsGpuRun(OpKernelContext* ctx, const MpsOperands& in) : in_(in), s_(in.spec), tmp_(ctx) {}

  // Sizes the call and packs the operands; `grad`: the workspace serves the backward too.
  absl::Status Start(OpKernelContext* ctx, bool grad) {
    TF_RETURN_IF_ERROR(g_.Init(ctx, ctx->op_kernel().type_string()));
    cs_ = CudaSpecOf(s_, gpu::CudaDtypeOf<Tt>());
    TF_RETURN_IF_ERROR(g_.Check(g_.eng->rnn_sizes(&cs_, &n_params_, &n_reserve_, &fws_, &bws_)));
    const bool lstm = s_.mode == RnnMode::kLstm;
    void* params = tmp_.Bytes(n_params_ * kE);
    void* h0 = tmp_.Bytes(DBH());
    void* c0 = lstm ? tmp_.Bytes(DBH()) : nullptr;
    a_ = TfRnnCudaFwdArgs{};
    a_.hn = tmp_.Bytes(DBH());
    a_.cn = lstm ? tmp_.Bytes(DBH()) : nullptr;
    a_.reserve = tmp_.Bytes(n_reserve_ * kE);
    ws_ = tmp_.Bytes(grad ? std::max(fws_, bws_) : fws_);
    TF_RETURN_IF_ERROR(tmp_.status());
    TF_RETURN_IF_ERROR(PackMpsGpu<Tt>(g_, s_, in_.W, in_.R, in_.bias, in_.bias2, in_.init_state,
                                      in_.init_cell, params, h0, c0));
    a_.x = gpu::DevPtr<Tt>(*in_.source);
    a_.h0 = h0;
    a_.c0 = c0;
    a_.params = params;
    a_.peephole = gpu::DevPtrOrNull<Tt>(in_.peephole);
    a_.mask = gpu::DevPtrOrNull<Tt>(in_.mask);
    a_.mask_per_step = in_.mask_per_step;
    return absl::OkStatus();
  }

  // The forward into y [T, B, D·H].
  absl::Status Forward(void* y) {
    a_.y = y;
    return g_.Check(g_.eng->rnn_forward(&cs_, &a_, ws_, fws_, g_.stream));
  }

  // out [T, B, D·width] from the forward's reserve: each direction's [T·B, width] block at
  // offset(d) elements (the gate activations: z_state; the LSTM's cell states).
  template <typename OffsetFn>
  absl::Status FromReserve(OffsetFn offset, int64_t width, void* out) {
    void* scratch = s_.D == 2 ? tmp_.Bytes(s_.D * s_.T * s_.B * width * kE) : nullptr;
    TF_RETURN_IF_ERROR(tmp_.status());
    return InterleaveDirs<Tt>(g_, s_, a_.reserve, offset, width, scratch, out);
  }

  // The gradients (AllocateMpsGrad's outputs) of the incoming ones: the forward recomputed,
  // the backward, the engine's gradients unpacked into MPSGraph's layouts.
  absl::Status Backward(const MpsGradInputs& gi, const MpsGradOutputs& o) {
    using gpu::DevPtr;
    const bool lstm = s_.mode == RnnMode::kLstm;
    const int64_t D = s_.D, B = s_.B, H = s_.H, KN = RnnK(s_) * H, e = kE;
    void* dparams = tmp_.Bytes(n_params_ * e);
    void* dhn = tmp_.Bytes(DBH());
    void* dcn = lstm ? tmp_.Bytes(DBH()) : nullptr;
    void* dh0 = tmp_.Bytes(DBH());
    void* dc0 = lstm ? tmp_.Bytes(DBH()) : nullptr;
    void* dpeep = lstm ? tmp_.Bytes(D * KN * e) : nullptr;
    void* y = tmp_.Bytes(s_.T * B * D * H * e);
    TF_RETURN_IF_ERROR(tmp_.status());
    // Final-state gradients [B, D·H] -> [D, B, H] (absent: zeros).
    const std::pair<const Tensor*, void*> finals[2] = {{gi.dstate, dhn}, {gi.dcell, dcn}};
    for (const auto& f : finals) {
      if (f.second == nullptr) continue;
      if (f.first != nullptr) {
        TF_RETURN_IF_ERROR(g_.SwapMajor(e, DevPtr<Tt>(*f.first), f.second, B, D, H));
      } else {
        TF_RETURN_IF_ERROR(g_.Zero(f.second, DBH()));
      }
    }
    TF_RETURN_IF_ERROR(Forward(y));
    TfRnnCudaBwdArgs b = BwdArgsOf<TfRnnCudaBwdArgs>(a_);
    b.dy = DevPtr<Tt>(*gi.dy);
    b.dhn = dhn;
    b.dcn = dcn;
    b.dx = DevPtr<Tt>(o.d_source);
    b.dh0 = dh0;
    b.dc0 = dc0;
    b.dparams = dparams;
    b.dc_seq = gpu::DevPtrOrNull<Tt>(gi.dcseq);
    b.dpeephole = in_.peephole != nullptr ? dpeep : nullptr;
    TF_RETURN_IF_ERROR(g_.Check(g_.eng->rnn_backward(&cs_, &b, ws_, bws_, g_.stream)));
    // Unpack into MPSGraph's layouts.
    const int64_t in_w = s_.preprojected ? 0 : s_.I;
    const void* dp = dparams;
    for (int64_t d = 0; d < D; ++d) {
      const RnnParamOffsets off = RnnParamLayout(s_, d);
      TF_RETURN_IF_ERROR(g_.Copy(g_.At(DevPtr<Tt>(o.d_R), d * KN * H * e),
                                 g_.At(dp, off.r * e), KN * H * e));
      if (o.d_W != nullptr) {
        TF_RETURN_IF_ERROR(g_.Copy(g_.At(DevPtr<Tt>(o.d_W), d * KN * in_w * e),
                                   g_.At(dp, off.w * e), KN * in_w * e));
      }
      if (o.d_b != nullptr) {
        TF_RETURN_IF_ERROR(
            g_.Copy(g_.At(DevPtr<Tt>(o.d_b), d * KN * e), g_.At(dp, off.bw * e), KN * e));
      }
      if (o.d_b2 != nullptr) {  // the gru candidate's recurrent bias
        TF_RETURN_IF_ERROR(g_.Copy(g_.At(DevPtr<Tt>(o.d_b2), d * H * e),
                                   g_.At(dp, (off.br + s_.gate_pos[2] * H) * e), H * e));
      }
    }
    if (o.d_p != nullptr) TF_RETURN_IF_ERROR(g_.Copy(DevPtr<Tt>(o.d_p), dpeep, D * KN * e));
    if (o.d_s != nullptr) TF_RETURN_IF_ERROR(g_.SwapMajor(e, dh0, DevPtr<Tt>(o.d_s), D, B, H));
    if (o.d_c != nullptr) TF_RETURN_IF_ERROR(g_.SwapMajor(e, dc0, DevPtr<Tt>(o.d_c), D, B, H));
    return absl::OkStatus();
  }

 private:
  static constexpr int64_t kE = sizeof(Tt);
  int64_t DBH() const { return s_.D * s_.B * s_.H * kE; }

  const MpsOperands& in_;
  const RnnSpec& s_;
  gpu::GpuCall g_;
  gpu::GpuTemps tmp_;
  TfRnnCudaSpec cs_{};
  int64_t n_params_ = 0, n_reserve_ = 0, fws_ = 0, bws_ = 0;
  void* ws_ = nullptr;
  TfRnnCudaFwdArgs a_{};
};

// The MPSGraph families' computations on the CUDA engine (see mps_rnn_face.h): MPSGraph's
// layouts z_state [T, B, D·K·H] (activated gates) and cell [T, B, D·H] from the reserve.
template <typename Tt>
struct GpuMps {
  static absl::Status Forward(OpKernelContext* ctx, const MpsOperands& in, Tensor* state,
                              Tensor* cell, Tensor* z) {
    using gpu::DevPtr;
    const RnnSpec& s = in.spec;
    MpsGpuRun<Tt> run(ctx, in);
    TF_RETURN_IF_ERROR(run.Start(ctx, false));
    TF_RETURN_IF_ERROR(run.Forward(DevPtr<Tt>(state)));
    if (z != nullptr) {
      TF_RETURN_IF_ERROR(run.FromReserve([&s](int64_t d) { return RnnReserveLayout(s, d).acts; },
                                         RnnK(s) * s.H, DevPtr<Tt>(z)));
    }
    if (cell == nullptr) return absl::OkStatus();
    return run.FromReserve([&s](int64_t d) { return RnnReserveLayout(s, d).aux; }, s.H,
                           DevPtr<Tt>(cell));
  }

  static absl::Status Grad(OpKernelContext* ctx, const MpsOperands& in, const MpsGradInputs& gi,
                           const MpsGradOutputs& o) {
    MpsGpuRun<Tt> run(ctx, in);
    TF_RETURN_IF_ERROR(run.Start(ctx, true));
    return run.Backward(gi, o);
  }
};

}  // namespace mps
}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_KERNELS_MPS_GPU_OPS_H_
