#ifndef EIGEN_USE_THREADS
#define EIGEN_USE_THREADS
#endif
#include "cc/kernels/engine_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "cc/kernels/tf_compat.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace tfrnn {

namespace {

bool CpuHas(const std::string& isa) {
  __builtin_cpu_init();
  if (isa == "avx512") {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("fma");
  }
  if (isa == "avx2") return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (isa == "avx") return __builtin_cpu_supports("avx");
  return false;
}

absl::Status LoadVariant(const std::string& isa, const EngineApi** api) {
  const std::string path = absl::StrCat(LibraryDirOf(reinterpret_cast<const void*>(&GetEngine)),
                                        "/_tfrnn_engine_", isa, ".so");
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("tf_rnn_ops (built for TensorFlow ", BuiltTfVersion(),
                     "): cannot load engine ", path, ": ", dlerror()));
  }
  auto fn = reinterpret_cast<TfRnnEngineApiFn>(dlsym(handle, "tfrnn_engine_api"));
  if (fn == nullptr || fn() == nullptr || fn()->version != kEngineApiVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("tf_rnn_ops: engine ", path, " has no matching tfrnn_engine_api (v",
                     kEngineApiVersion, "); rebuild the library"));
  }
  *api = fn();
  return absl::OkStatus();
}

absl::Status LoadEngine(const EngineApi** api) {
  const char* forced = std::getenv("TF_RNN_OPS_ISA");
  if (forced != nullptr && *forced != '\0') {
    const std::string isa = forced;
    if (isa != "avx" && isa != "avx2" && isa != "avx512") {
      return absl::InvalidArgumentError(absl::StrCat(
          "tf_rnn_ops: TF_RNN_OPS_ISA must be avx, avx2 or avx512, got '", isa, "'"));
    }
    if (!CpuHas(isa)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "tf_rnn_ops: TF_RNN_OPS_ISA=", isa, " but this CPU does not support it"));
    }
    return LoadVariant(isa, api);
  }
  for (const char* isa : {"avx512", "avx2", "avx"}) {
    if (CpuHas(isa)) return LoadVariant(isa, api);
  }
  return absl::FailedPreconditionError("tf_rnn_ops: this CPU has no AVX; TensorFlow needs it");
}

}  // namespace

absl::Status GetEngine(const EngineApi** api) {
  static std::once_flag once;
  static absl::Status* status = nullptr;
  static const EngineApi* engine = nullptr;
  std::call_once(once, [] { status = new absl::Status(LoadEngine(&engine)); });
  *api = engine;
  return *status;
}

TfHostPool::TfHostPool(tensorflow::OpKernelContext* ctx) {
  const Eigen::ThreadPoolDevice& d = ctx->eigen_device<Eigen::ThreadPoolDevice>();
  pool_ = d.getPool();
  num_threads_ = d.numThreads();
}

void TfHostPool::Schedule(std::function<void()> fn) { pool_->Schedule(std::move(fn)); }

int TfHostPool::CurrentThreadId() const { return pool_->CurrentThreadId(); }

}  // namespace tfrnn
