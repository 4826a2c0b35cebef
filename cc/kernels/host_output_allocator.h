// The CPU kernels' large outputs come from ScratchCache's kept blocks (scratch_cache.h says
// why): a TensorFlow allocator whose blocks go back to the cache when the last tensor holding
// one is freed, wherever that happens.
#ifndef TF_RNN_OPS_CC_KERNELS_HOST_OUTPUT_ALLOCATOR_H_
#define TF_RNN_OPS_CC_KERNELS_HOST_OUTPUT_ALLOCATOR_H_

#include <string>

#include "cc/kernels/scratch_cache.h"
#include "tensorflow/core/framework/allocator.h"

namespace tfrnn {

class HostOutputAllocator final : public tensorflow::Allocator {
 public:
  // One for the process, never destroyed: tensors may outlive any kernel.
  static HostOutputAllocator* Get() {
    static HostOutputAllocator* a = new HostOutputAllocator();
    return a;
  }

  std::string Name() override { return "tf_rnn_ops_host_outputs"; }

  void* AllocateRaw(size_t alignment, size_t num_bytes) override {
    if (alignment > ScratchCache::kAlign) return nullptr;
    return ScratchCache::Global().TakeRaw(num_bytes);
  }

  void DeallocateRaw(void* ptr) override {
    if (ptr != nullptr) ScratchCache::Global().Give(ptr);
  }

  tsl::AllocatorMemoryType GetMemoryType() const override {
    return tsl::AllocatorMemoryType::kHostPageable;
  }
};

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_KERNELS_HOST_OUTPUT_ALLOCATOR_H_
