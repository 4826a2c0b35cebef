// The engine's workspace (the TensorFlow kernels and the XLA custom calls) and the 16-bit
// ops' converted operands (ComputeBridge): buffers kept for the life of the process and
// handed out to one running call at a time, so that a call does not fault in fresh pages.
//
// Why: XLA's temporary buffers (and TensorFlow's CPU allocations) of more than glibc's
// 32 MB mmap ceiling come from fresh mmap pages on every call. A GRU 100x64x256x256 training
// step took a median 185 ms with the workspace as an XLA result buffer and 135 ms with malloc
// serving it from the heap (MALLOC_MMAP_THRESHOLD_), inference 68 ms against 48 ms (2-core VM).
#ifndef TF_RNN_OPS_CC_KERNELS_SCRATCH_CACHE_H_
#define TF_RNN_OPS_CC_KERNELS_SCRATCH_CACHE_H_

#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tfrnn {

class ScratchCache {
 public:
  // A buffer of at least `bytes` (64-byte aligned) until the lease ends; data() is null when
  // the memory could not be had.
  class Lease {
   public:
    Lease(ScratchCache* cache, void* p, size_t bytes) : cache_(cache), p_(p), bytes_(bytes) {}
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() {
      if (p_ != nullptr) cache_->Give(p_, bytes_);
    }
    void* data() const { return p_; }
    template <typename A>
    A* As() const {
      return static_cast<A*>(p_);
    }
    // "" when the buffer was had, else the error message naming `op`.
    std::string Failure(const std::string& op) const {
      if (p_ != nullptr) return "";
      return op + ": could not allocate " + std::to_string(bytes_) + " bytes of engine scratch";
    }

   private:
    ScratchCache* cache_;
    void* p_;
    size_t bytes_;
  };

  static ScratchCache& Global() {
    static ScratchCache* cache = new ScratchCache();
    return *cache;
  }

  Lease Take(size_t bytes) {
    bytes = (bytes + 63) / 64 * 64;
    if (bytes == 0) bytes = 64;
    {
      std::lock_guard<std::mutex> lock(mu_);
      size_t best = free_.size();
      for (size_t k = 0; k < free_.size(); ++k) {
        if (free_[k].bytes >= bytes && (best == free_.size() || free_[k].bytes < free_[best].bytes)) {
          best = k;
        }
      }
      if (best != free_.size()) {
        Block b = free_[best];
        free_.erase(free_.begin() + best);
        return Lease(this, b.p, b.bytes);
      }
    }
    return Lease(this, std::aligned_alloc(64, bytes), bytes);
  }

 private:
  struct Block {
    void* p;
    size_t bytes;
  };
  // Kept: the kKeep largest free buffers (a call takes its workspace and, for a 16-bit op,
  // up to about ten converted operands; kKeep covers that for calls that ran at once).
  static constexpr size_t kKeep = 12;

  void Give(void* p, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back({p, bytes});
    if (free_.size() > kKeep) {
      size_t smallest = 0;
      for (size_t k = 1; k < free_.size(); ++k) {
        if (free_[k].bytes < free_[smallest].bytes) smallest = k;
      }
      std::free(free_[smallest].p);
      free_.erase(free_.begin() + smallest);
    }
  }

  std::mutex mu_;
  std::vector<Block> free_;
};

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_KERNELS_SCRATCH_CACHE_H_
