// What the CPU custom-call targets share (cc/xla/*_ffi_cpu.cc): the FFI API, the engine's
// thread pool in a call, the checked buffers, the workspace error and the engine.
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

// A call's buffers, each checked (type: the compute type, or int32; element count) before its
// pointer is handed out; the first mismatch is kept as the error.
class Buffers {
 public:
  Buffers(const char* op, bool f64, ::xla::ffi::RemainingArgs args,
          ::xla::ffi::RemainingRets rets)
      : op_(op), f64_(f64), args_(args), rets_(rets) {}

  const std::string& error() const { return error_; }

  // Operand k, which must hold `want` elements of the compute type (or int32 when is_int).
  const void* In(size_t k, Index want, const char* what, bool is_int = false) {
    return InOf(k, want, what, is_int ? ::xla::ffi::DataType::S32 : Compute());
  }
  // Operand k as an int64 scalar (0 when it is not one; the error is kept).
  int64_t InInt64(size_t k, const char* what) {
    const void* p = InOf(k, 1, what, ::xla::ffi::DataType::S64);
    return p == nullptr ? 0 : *static_cast<const int64_t*>(p);
  }
  void* Out(size_t k, Index want, const char* what) {
    auto b = rets_.get<::xla::ffi::AnyBuffer>(k);
    if (!b.has_value()) return const_cast<void*>(Fail(what, "missing"));
    return const_cast<void*>(Check(**b, want, what, Compute()));
  }

 private:
  ::xla::ffi::DataType Compute() const {
    return f64_ ? ::xla::ffi::DataType::F64 : ::xla::ffi::DataType::F32;
  }
  const void* InOf(size_t k, Index want, const char* what, ::xla::ffi::DataType dt) {
    auto b = args_.get<::xla::ffi::AnyBuffer>(k);
    if (!b.has_value()) return Fail(what, "missing");
    return Check(*b, want, what, dt);
  }
  const void* Check(const ::xla::ffi::AnyBuffer& b, Index want, const char* what,
                    ::xla::ffi::DataType dt) {
    if (b.element_type() != dt || static_cast<Index>(b.element_count()) != want) {
      return Fail(what, absl::StrCat("has ", b.element_count(), " elements of type ",
                                     static_cast<int>(b.element_type()), ", want ", want,
                                     " of type ", static_cast<int>(dt)));
    }
    return b.untyped_data();
  }
  const void* Fail(const char* what, const std::string& why) {
    if (error_.empty()) {
      error_ = absl::StrCat(op_, " (XLA custom call): buffer ", what, " ", why,
                            "; the call does not match its spec");
    }
    return nullptr;
  }

  const char* op_;
  bool f64_;
  ::xla::ffi::RemainingArgs args_;
  ::xla::ffi::RemainingRets rets_;
  std::string error_;
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
