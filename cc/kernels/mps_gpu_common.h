// Device-side helpers of the GPU op kernels (written for the MPSGraph-style ones, now used by
// every *_gpu_kernels.inc): the full RnnSpec -> C API spec, the engine and stream of one call
// with checked copy/zero/transpose on that stream, and scratch from allocate_temp. No CUDA
// headers (device memory is void*).
#ifndef TF_RNN_OPS_CC_KERNELS_MPS_GPU_COMMON_H_
#define TF_RNN_OPS_CC_KERNELS_MPS_GPU_COMMON_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>

#include "cc/engine/types.h"
#include "cc/gpu/c_api_convert.h"
#include "cc/kernels/cuda_engine_loader.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tfrnn {
namespace mps_gpu {

template <typename T>
constexpr int CudaDtypeOf() {
  return std::is_same<T, Eigen::half>::value       ? TFRNN_CUDA_HALF
         : std::is_same<T, Eigen::bfloat16>::value ? TFRNN_CUDA_BFLOAT16
         : std::is_same<T, float>::value           ? TFRNN_CUDA_FLOAT
                                                   : TFRNN_CUDA_DOUBLE;
}

// Every RnnSpec field (the MPSGraph options included), as the C API takes it.
inline TfRnnCudaSpec ToCudaSpecAll(const RnnSpec& s, int dtype) { return CudaSpecOf(s, dtype); }

template <typename T>
const void* DevPtr(const tensorflow::Tensor& t) {
  return t.NumElements() > 0 ? static_cast<const void*>(t.flat<T>().data()) : nullptr;
}
template <typename T>
void* DevPtr(tensorflow::Tensor* t) {
  return t->NumElements() > 0 ? static_cast<void*>(t->flat<T>().data()) : nullptr;
}

// The engine and stream of one op call; copies and zeroing on that stream, statuses checked.
struct MpsGpu {
  const CudaEngine* eng = nullptr;
  void* stream = nullptr;
  std::string op;

  absl::Status Init(tensorflow::OpKernelContext* ctx, const std::string& name) {
    op = name;
    TF_RETURN_IF_ERROR(GetCudaEngine(&eng));
    return GetCudaStream(ctx, &stream);
  }
  absl::Status Check(int code) const { return eng->Check(code, op); }
  static void* At(void* p, int64_t bytes) { return static_cast<char*>(p) + bytes; }
  static const void* At(const void* p, int64_t bytes) {
    return static_cast<const char*>(p) + bytes;
  }
  static const void* At(const tensorflow::Tensor* t, int64_t bytes) {
    return t->tensor_data().data() + bytes;
  }
  absl::Status Copy(void* dst, const void* src, int64_t bytes) const {
    if (bytes <= 0) return absl::OkStatus();
    return Check(eng->copy(dst, src, bytes, stream));
  }
  absl::Status Zero(void* dst, int64_t bytes) const {
    if (bytes <= 0) return absl::OkStatus();
    return Check(eng->zero(dst, bytes, stream));
  }
  // dst [d1, d0, c] = src [d0, d1, c] (elements of elem_bytes).
  absl::Status SwapMajor(int64_t elem_bytes, const void* src, void* dst, int64_t d0, int64_t d1,
                         int64_t c) const {
    if (d0 * d1 * c <= 0) return absl::OkStatus();
    return Check(eng->swap_major(static_cast<int32_t>(elem_bytes), src, dst, d0, d1, c, stream));
  }
};

// Device scratch of TF's allocator (bytes, at least 1 so that every pointer is valid).
class GpuTemps {
 public:
  explicit GpuTemps(tensorflow::OpKernelContext* ctx) : ctx_(ctx) {}
  void* Bytes(int64_t n) {
    if (!status_.ok()) return nullptr;
    temps_.emplace_back();
    status_ = ctx_->allocate_temp(tensorflow::DT_UINT8,
                                  tensorflow::TensorShape({std::max<int64_t>(n, 1)}),
                                  &temps_.back());
    return status_.ok() ? temps_.back().flat<uint8_t>().data() : nullptr;
  }
  template <typename T>
  T* Elems(int64_t n) {
    return static_cast<T*>(Bytes(n * static_cast<int64_t>(sizeof(T))));
  }
  const absl::Status& status() const { return status_; }

 private:
  tensorflow::OpKernelContext* ctx_;
  absl::Status status_;
  std::deque<tensorflow::Tensor> temps_;
};

// Zeros every byte of the outputs (device memory): the GPU form of kernel_util.h's SetZero.
inline absl::Status ZeroGpu(const MpsGpu& g, std::initializer_list<tensorflow::Tensor*> outs) {
  for (tensorflow::Tensor* t : outs) {
    TF_RETURN_IF_ERROR(g.Zero(const_cast<char*>(t->tensor_data().data()), t->TotalBytes()));
  }
  return absl::OkStatus();
}

// Packs MPSGraph's operands (device; absent = null = zeros) into the engine's params layout
// and h0/c0 [D, B, H] (c0 for lstm): per direction d, W rows [d·K·H, (d+1)·K·H), R [D, K·H, H],
// bias [D·K·H] (the input biases; the recurrent ones are zero except the gru candidate's,
// bias2 [D·H]), states [B, D·H].
template <typename Tt>
absl::Status PackMpsGpu(const MpsGpu& g, const RnnSpec& s, const tensorflow::Tensor* W,
                        const tensorflow::Tensor* R, const tensorflow::Tensor* bias,
                        const tensorflow::Tensor* bias2, const tensorflow::Tensor* init_state,
                        const tensorflow::Tensor* init_cell, void* params, void* h0, void* c0) {
  const int64_t D = s.D, B = s.B, H = s.N, KN = RnnK(s) * H, e = sizeof(Tt);
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
  const std::pair<const tensorflow::Tensor*, void*> states[2] = {{init_state, h0},
                                                                 {init_cell, c0}};
  for (const auto& st : states) {
    if (st.second == nullptr) continue;
    if (st.first != nullptr) {
      TF_RETURN_IF_ERROR(g.SwapMajor(e, DevPtr<Tt>(*st.first), st.second, B, D, H));
    } else {
      TF_RETURN_IF_ERROR(g.Zero(st.second, D * B * H * e));
    }
  }
  return absl::OkStatus();
}

// out [T, B, D·width] = each direction's [T·B, width] block at reserve + offset(d) elements,
// interleaved (scratch: D·T·B·width elements, used when D == 2).
template <typename Tt, typename OffsetFn>
absl::Status InterleaveDirs(const MpsGpu& g, const RnnSpec& s, const void* reserve,
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

}  // namespace mps_gpu
}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_KERNELS_MPS_GPU_COMMON_H_
