// What the CPU custom-call targets share (cc/xla/*_ffi_cpu.cc): the FFI API, the engine's
// thread pool in a call, the workspace error and the engine (the checked buffers: ffi_buffers.h).
#ifndef TF_RNN_OPS_CC_XLA_FFI_CPU_COMMON_H_
#define TF_RNN_OPS_CC_XLA_FFI_CPU_COMMON_H_

#ifndef EIGEN_USE_THREADS
#define EIGEN_USE_THREADS
#endif
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "cc/engine/engine_api.h"
#include "cc/kernels/engine_loader.h"
#include "cc/kernels/scratch_cache.h"
#include "cc/xla/ffi_buffers.h"
#include "unsupported/Eigen/CXX11/ThreadPool"
#include "xla/ffi/api/ffi.h"

namespace xla::ffi {
const XLA_FFI_Api* GetXlaFfiApi();  // exported by libtensorflow_cc (xla/ffi/ffi_api.h)
}  // namespace xla::ffi

namespace tfrnn {

// The engine's HostPool in a custom call: by default a process-wide pool of our own with one
// thread per CPU this process may run on (TensorFlow's intra-op default). XLA's intra-op pool
// (TF_RNN_OPS_XLA_POOL=xla, where the runtime gives one) runs the call on one of its own
// threads, which then waits inside the engine's GEMMs while holding a share of the pool:
// LSTM 100x64x256x256 inference took a median 89 ms on XLA's 2-thread pool against 69 ms on
// our own 2-thread pool and 65 ms in the TensorFlow kernel (2-core VM, one process).
class XlaHostPool final : public HostPool {
 public:
  explicit XlaHostPool(::xla::ffi::ThreadPool& pool) : xla_(pool) {
    static const bool use_xla = [] {
      const char* v = std::getenv("TF_RNN_OPS_XLA_POOL");
      return v != nullptr && std::string(v) == "xla";
    }();
    const int64_t n = use_xla ? pool.num_threads() : 0;
    if (n > 0) {
      threads_ = static_cast<int>(n);
    } else {
      own_ = &OwnPool();
      threads_ = own_->NumThreads();
    }
  }
  void Schedule(std::function<void()> fn) override {
    if (own_ != nullptr) {
      own_->Schedule(std::move(fn));
    } else {
      xla_.Schedule(std::move(fn));
    }
  }
  int NumThreads() const override { return threads_; }
  int CurrentThreadId() const override { return own_ != nullptr ? own_->CurrentThreadId() : -1; }

 private:
  static int UsableCpus() {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  static Eigen::ThreadPool& OwnPool() {
    static Eigen::ThreadPool* pool = new Eigen::ThreadPool(UsableCpus());
    return *pool;
  }

  ::xla::ffi::ThreadPool& xla_;
  Eigen::ThreadPool* own_ = nullptr;
  int threads_ = 1;
};

// The engine's workspace in `lease` as A*, or null with *error ResourceExhausted.
template <typename A>
A* Workspace(const char* op, const ScratchCache::Lease& lease, ::xla::ffi::Error* error) {
  const std::string why = lease.Failure(absl::StrCat(op, " (XLA custom call)"));
  if (!why.empty()) *error = ::xla::ffi::Error(::xla::ffi::ErrorCode::kResourceExhausted, why);
  return lease.As<A>();
}

// The binding of every target: the thread pool, the operands and results as they come, and the
// call's int64 array attribute "call".
inline auto CallBinding() {
  return ::xla::ffi::Ffi::Bind()
      .Ctx<::xla::ffi::ThreadPool>()
      .RemainingArgs()
      .RemainingRets()
      .Attr<::xla::ffi::Span<const int64_t>>("call");
}

// The engine, or an Internal error naming why it did not load.
inline ::xla::ffi::Error LoadEngine(const EngineApi** engine) {
  const absl::Status st = GetEngine(engine);
  if (!st.ok()) return ::xla::ffi::Error::Internal(std::string(st.message()));
  return ::xla::ffi::Error::Success();
}

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_XLA_FFI_CPU_COMMON_H_
