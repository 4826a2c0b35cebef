// Shared helpers of the op kernels: named input validation and the dtype bridge that lets
// half and bfloat16 ops run the float engine (half/bfloat16 compute and accumulate in float).
#ifndef TF_RNN_OPS_CC_KERNELS_KERNEL_UTIL_H_
#define TF_RNN_OPS_CC_KERNELS_KERNEL_UTIL_H_

#define EIGEN_USE_THREADS

#include <deque>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cc/engine/cpu_device.h"
#include "cc/engine/types.h"
#include "cc/kernels/tf_compat.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/types.h"

namespace tfrnn {

using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;

inline std::string ShapeStr(const Tensor& t) {
  std::vector<int64_t> dims;
  for (int k = 0; k < t.dims(); ++k) dims.push_back(t.dim_size(k));
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

// Looks up an input by its OpDef name.
inline absl::Status GetInput(OpKernelContext* ctx, const char* name, const Tensor** t) {
  return ctx->input(name, t);
}

// `name` must have rank `rank`; `layout` describes the expected dims, e.g.
// "[timelen, batch_size, input_size]".
inline absl::Status CheckRank(const std::string& op, const char* name, const Tensor& t, int rank,
                              const char* layout) {
  if (t.dims() == rank) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", name, " must be rank ", rank, " ",
                                                 layout, ", got shape ", ShapeStr(t)));
}

// `name` must have exactly the given dims (ranks are checked before this is called).
inline absl::Status CheckShape(const std::string& op, const char* name, const Tensor& t,
                               std::initializer_list<int64_t> dims, const char* layout) {
  bool ok = t.dims() == static_cast<int>(dims.size());
  int k = 0;
  for (int64_t d : dims) {
    if (!ok) break;
    ok = t.dim_size(k++) == d;
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", name, " must have shape ", layout,
                                                 " = [", absl::StrJoin(dims, ", "), "], got ",
                                                 ShapeStr(t)));
}

// The engine's compute type: half and bfloat16 run in float.
template <typename T>
struct ComputeType {
  using type = T;
};
template <>
struct ComputeType<Eigen::half> {
  using type = float;
};
template <>
struct ComputeType<Eigen::bfloat16> {
  using type = float;
};

// Hands out engine pointers of the compute type A for the op's tensors of type T. When T is
// A they are the tensors' own buffers; otherwise inputs are converted into temporaries and
// outputs are computed into temporaries that Finish() converts back. Scratch comes from TF.
template <typename T>
class ComputeBridge {
 public:
  using A = typename ComputeType<T>::type;
  static constexpr bool kConverts = !std::is_same<T, A>::value;

  explicit ComputeBridge(OpKernelContext* ctx)
      : ctx_(ctx), dev_(ctx->eigen_device<Eigen::ThreadPoolDevice>()) {}

  const absl::Status& status() const { return status_; }

  const A* In(const Tensor& t) {
    if constexpr (!kConverts) {
      return t.flat<T>().data();
    } else {
      A* tmp = Scratch(t.NumElements());
      if (tmp != nullptr) Convert<T, A>(dev_, t.flat<T>().data(), tmp, t.NumElements());
      return tmp;
    }
  }

  A* Out(Tensor* t) {
    if constexpr (!kConverts) {
      return t->flat<T>().data();
    } else {
      A* tmp = Scratch(t->NumElements());
      if (tmp != nullptr) pending_.push_back({tmp, t});
      return tmp;
    }
  }

  // Uninitialised scratch of n elements of A (n may be 0). Returns null after a failure.
  A* Scratch(int64_t n) {
    if (!status_.ok()) return nullptr;
    temps_.emplace_back();
    status_ = ctx_->allocate_temp(tensorflow::DataTypeToEnum<A>::value,
                                  TensorShape({std::max<int64_t>(n, 1)}), &temps_.back());
    if (!status_.ok()) return nullptr;
    return temps_.back().template flat<A>().data();
  }

  // Converts computed outputs back into the op's tensors.
  void Finish() {
    for (auto& p : pending_) Convert<A, T>(dev_, p.first, p.second->template flat<T>().data(),
                                           p.second->NumElements());
    pending_.clear();
  }

 private:
  OpKernelContext* ctx_;
  const CpuDevice& dev_;
  absl::Status status_;
  std::deque<Tensor> temps_;
  std::vector<std::pair<A*, Tensor*>> pending_;
};

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_KERNELS_KERNEL_UTIL_H_
