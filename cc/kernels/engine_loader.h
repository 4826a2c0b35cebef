// Chooses and loads the engine variant for this CPU at run time (see engine/engine_api.h).
// TF_RNN_OPS_ISA=avx|avx2|avx512 forces a variant (an error if this CPU lacks it).
#ifndef TF_RNN_OPS_CC_KERNELS_ENGINE_LOADER_H_
#define TF_RNN_OPS_CC_KERNELS_ENGINE_LOADER_H_

#include <string>

#include "absl/status/status.h"
#include "cc/engine/engine_api.h"
#include "cc/engine/library_dir.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tfrnn {

// The engine for this process (loaded once). Fails with a clear status if no variant loads.
absl::Status GetEngine(const EngineApi** api);

// The op's intra-op thread pool as a HostPool.
class TfHostPool final : public HostPool {
 public:
  explicit TfHostPool(tensorflow::OpKernelContext* ctx);
  void Schedule(std::function<void()> fn) override;
  int NumThreads() const override { return num_threads_; }
  int CurrentThreadId() const override;

 private:
  Eigen::ThreadPoolInterface* pool_;
  int num_threads_;
};

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_KERNELS_ENGINE_LOADER_H_
