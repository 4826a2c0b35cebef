// What every GPU op kernel shares (cudnn_rnn_gpu_kernels.cc, lstm_block_gpu_kernels.cc,
// gru_block_gpu_kernels.cc, mps_{lstm,gru}_gpu_kernels.cc): the C API's dtype of an element
// type (and, through c_api_convert.h, the spec converters), device pointers of tensors, the
// CUDA engine and stream of one call with checked copy/zero/transpose on that stream, and
// scratch from allocate_temp. No CUDA headers (device memory is void*).
#ifndef TF_RNN_OPS_CC_KERNELS_GPU_KERNEL_UTIL_H_
#define TF_RNN_OPS_CC_KERNELS_GPU_KERNEL_UTIL_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cc/gpu/c_api_convert.h"
#include "cc/kernels/cuda_engine_loader.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tfrnn {
namespace gpu {

// The C API's dtype (c_api.h) of the element type T.
template <typename T>
constexpr int CudaDtypeOf() {
  return std::is_same<T, Eigen::half>::value       ? TFRNN_CUDA_HALF
         : std::is_same<T, Eigen::bfloat16>::value ? TFRNN_CUDA_BFLOAT16
         : std::is_same<T, float>::value           ? TFRNN_CUDA_FLOAT
                                                   : TFRNN_CUDA_DOUBLE;
}

template <typename T>
const void* DevPtr(const tensorflow::Tensor& t) {
  return t.NumElements() > 0 ? static_cast<const void*>(t.flat<T>().data()) : nullptr;
}
template <typename T>
void* DevPtr(tensorflow::Tensor* t) {
  return t->NumElements() > 0 ? static_cast<void*>(t->flat<T>().data()) : nullptr;
}
// The device pointer of an optional operand (null when absent).
template <typename T>
const void* DevPtrOrNull(const tensorflow::Tensor* t) {
  return t != nullptr ? DevPtr<T>(*t) : nullptr;
}

// The device pointer of each (operand, tensor) pair: *operand = DevPtr<T>(*tensor).
template <typename T>
void BindIn(const std::vector<std::pair<const void**, const tensorflow::Tensor*>>& operands) {
  for (const auto& p : operands) *p.first = DevPtr<T>(*p.second);
}
// The device pointer of each output in order: *dst[k] = DevPtr<T>(outs[k]).
template <typename T>
void BindOut(std::initializer_list<void**> dst, tensorflow::Tensor* const* outs) {
  for (void** d : dst) *d = DevPtr<T>(*outs++);
}

// The engine and stream of one op call; copies and zeroing on that stream, statuses checked.
struct GpuCall {
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
inline absl::Status ZeroGpu(const GpuCall& g, std::initializer_list<tensorflow::Tensor*> outs) {
  for (tensorflow::Tensor* t : outs) {
    TF_RETURN_IF_ERROR(g.Zero(const_cast<char*>(t->tensor_data().data()), t->TotalBytes()));
  }
  return absl::OkStatus();
}

// One call of a CUDA engine family with a sizes / forward / backward entry (the CudaEngine
// members kSizes, kFwd, kBwd; Spec, FwdArgs, BwdArgs their C API structs): the engine and
// stream, the spec, the forward's (fwd) or the backward's workspace; more scratch from tmp.
template <typename Spec, typename FwdArgs, typename BwdArgs,
          int (*CudaEngineFns::*kSizes)(const Spec*, int64_t*, int64_t*),
          int (*CudaEngineFns::*kFwd)(const Spec*, const FwdArgs*, void*, int64_t, void*),
          int (*CudaEngineFns::*kBwd)(const Spec*, const BwdArgs*, void*, int64_t, void*)>
struct EngineCall {
  explicit EngineCall(tensorflow::OpKernelContext* ctx) : tmp(ctx) {}

  absl::Status Start(tensorflow::OpKernelContext* ctx, const Spec& spec, bool fwd) {
    TF_RETURN_IF_ERROR(g.Init(ctx, ctx->op_kernel().type_string()));
    cs = spec;
    int64_t fws = 0, bws = 0;
    TF_RETURN_IF_ERROR(g.Check((g.eng->*kSizes)(&cs, &fws, &bws)));
    ws_bytes = fwd ? fws : bws;
    ws = tmp.Bytes(ws_bytes);
    return tmp.status();
  }
  absl::Status Forward(const FwdArgs& a) {
    return g.Check((g.eng->*kFwd)(&cs, &a, ws, ws_bytes, g.stream));
  }
  absl::Status Backward(const BwdArgs& a) {
    return g.Check((g.eng->*kBwd)(&cs, &a, ws, ws_bytes, g.stream));
  }

  GpuCall g;
  Spec cs{};
  GpuTemps tmp;
  void* ws = nullptr;
  int64_t ws_bytes = 0;
};

// The same on the op's own engine and stream.
inline absl::Status ZeroGpu(tensorflow::OpKernelContext* ctx,
                            std::initializer_list<tensorflow::Tensor*> outs) {
  GpuCall g;
  TF_RETURN_IF_ERROR(g.Init(ctx, ctx->op_kernel().type_string()));
  return ZeroGpu(g, outs);
}

}  // namespace gpu
}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_KERNELS_GPU_KERNEL_UTIL_H_
