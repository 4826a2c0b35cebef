// The Keras op's side of the engine's PackCache (cc/engine/pack_cache.h): the id of a call's
// weights, the same while kernel and recurrent_kernel are the buffers of the last call. Those
// buffers are held here, so they never change while the id stands: TensorFlow writes a
// resource variable in place only while no other tensor holds its buffer, and copies it
// first otherwise (copy on write). A reference variable is written in place whoever holds
// it, which is why the op keeps packings only when its caller says so (reuse_packed_weights).
#ifndef TF_RNN_OPS_CC_KERNELS_KEPT_WEIGHTS_H_
#define TF_RNN_OPS_CC_KERNELS_KEPT_WEIGHTS_H_

#include <cstdint>

#include "cc/engine/pack_cache.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/platform/mutex.h"

namespace tfrnn {

class KeptWeights {
 public:
  // The id of weights w and r: the last call's while they are its tensors' buffers.
  uint64_t IdOf(const tensorflow::Tensor& w, const tensorflow::Tensor& r) {
    tensorflow::mutex_lock lock(mu_);
    if (id_ != 0 && Same(w, w_) && Same(r, r_)) return id_;
    w_ = w;
    r_ = r;
    id_ = ++last_;
    return id_;
  }
  PackCache* cache() { return &cache_; }

 private:
  static bool Same(const tensorflow::Tensor& a, const tensorflow::Tensor& b) {
    if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
    if (a.NumElements() == 0) return true;
    return a.SharesBufferWith(b) && a.tensor_data().data() == b.tensor_data().data();
  }

  tensorflow::mutex mu_;
  tensorflow::Tensor w_, r_;
  uint64_t id_ = 0, last_ = 0;
  PackCache cache_;
};

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_KERNELS_KEPT_WEIGHTS_H_
