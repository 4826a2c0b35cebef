// Host buffers kept for the life of the process and handed out to one holder at a time, so
// that a call does not fault in fresh pages: the engine's workspace (the TensorFlow kernels and
// the XLA custom calls), the 16-bit ops' converted operands (ComputeBridge) and the CPU
// kernels' large outputs (host_output_allocator.h).
//
// Why: TensorFlow's CPU allocations and XLA's temporary buffers of a few MB and more come from
// fresh pages on many calls (glibc returns freed mmap chunks, heap tops and emptied thread-arena
// heaps to the kernel), and a fresh page costs a fault and its zeroing: 2.7 us a 4 KB page on a
// 2-core VM, 13 ms for the 19 MB of an LSTM 50x32x128x512 training step's outputs (a step of
// 80-90 ms). A GRU 100x64x256x256 training step took a median 185 ms with the workspace as an
// XLA result buffer and 135 ms with the workspace kept.
//
// Which block: the smallest kept one of at least the size asked for and at most twice it (a
// small request does not pin a large block); kept: the most recently returned blocks, at most
// kKeep of them and at most TF_RNN_OPS_HOST_CACHE_MB megabytes (default 1024; 0 keeps none),
// the oldest freed first beyond that.
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
  // Every block's alignment, and the size of the header before it that holds its capacity.
  static constexpr size_t kAlign = 64;

  // A buffer of at least `bytes` (kAlign-byte aligned) until the lease ends; data() is null
  // when the memory could not be had.
  class Lease {
   public:
    Lease(ScratchCache* cache, void* p, size_t bytes) : cache_(cache), p_(p), bytes_(bytes) {}
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() {
      if (p_ != nullptr) cache_->Give(p_);
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

  Lease Take(size_t bytes) { return Lease(this, TakeRaw(bytes), bytes); }

  // A block of at least `bytes` (kAlign-byte aligned), kept or new; null when malloc fails.
  // Give it back with Give.
  void* TakeRaw(size_t bytes) {
    if (bytes > (size_t(1) << 62)) return nullptr;
    bytes = (bytes + kAlign - 1) / kAlign * kAlign;
    if (bytes == 0) bytes = kAlign;
    {
      std::lock_guard<std::mutex> lock(mu_);
      size_t best = free_.size();
      for (size_t k = 0; k < free_.size(); ++k) {
        const size_t cap = free_[k].bytes;
        if (cap >= bytes && cap / 2 <= bytes &&
            (best == free_.size() || cap <= free_[best].bytes)) {
          best = k;
        }
      }
      if (best != free_.size()) {
        void* p = free_[best].p;
        kept_bytes_ -= free_[best].bytes;
        free_.erase(free_.begin() + best);
        return p;
      }
    }
    char* base = static_cast<char*>(std::aligned_alloc(kAlign, bytes + kAlign));
    if (base == nullptr) return nullptr;
    *reinterpret_cast<size_t*>(base) = bytes;
    return base + kAlign;
  }

  // Returns a block from TakeRaw (or Take's lease) to the kept ones.
  void Give(void* p) {
    const size_t bytes = Capacity(p);
    std::vector<void*> drop;
    {
      std::lock_guard<std::mutex> lock(mu_);
      free_.push_back({p, bytes});
      kept_bytes_ += bytes;
      size_t n = 0;
      while (n < free_.size() && (free_.size() - n > kKeep || kept_bytes_ > limit_bytes_)) {
        kept_bytes_ -= free_[n].bytes;
        drop.push_back(free_[n].p);
        ++n;
      }
      free_.erase(free_.begin(), free_.begin() + n);
    }
    for (void* q : drop) std::free(static_cast<char*>(q) - kAlign);
  }

  // The usable size of a block from TakeRaw.
  static size_t Capacity(const void* p) {
    return *reinterpret_cast<const size_t*>(static_cast<const char*>(p) - kAlign);
  }

 private:
  struct Block {
    void* p;
    size_t bytes;
  };
  // A training step of a few layers returns a workspace, the forward's outputs and the
  // gradients' of each, and a 16-bit op up to about ten converted operands besides.
  static constexpr size_t kKeep = 32;

  ScratchCache() {
    const char* v = std::getenv("TF_RNN_OPS_HOST_CACHE_MB");
    if (v != nullptr && *v != '\0') {
      char* end = nullptr;
      const long long mb = std::strtoll(v, &end, 10);
      if (end != v && *end == '\0' && mb >= 0) limit_bytes_ = size_t(mb) << 20;
    }
  }

  std::mutex mu_;
  std::vector<Block> free_;  // oldest returned first
  size_t kept_bytes_ = 0;
  size_t limit_bytes_ = size_t(1024) << 20;
};

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_KERNELS_SCRATCH_CACHE_H_
