// Shared helpers of the shape functions.
#ifndef TF_RNN_OPS_CC_OPS_SHAPE_UTIL_H_
#define TF_RNN_OPS_CC_OPS_SHAPE_UTIL_H_

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tfrnn {

// Prefixes a shape-inference error with the input it concerns ("wci: Shape must be rank 1
// ..."), so that graph-mode errors name the offending input first, like the kernels' errors.
inline absl::Status Named(absl::Status s, const char* input) {
  if (s.ok()) return s;
  return absl::InvalidArgumentError(absl::StrCat(input, ": ", s.message()));
}

}  // namespace tfrnn

#define TFRNN_SHAPE_CHECK(expr, input) TF_RETURN_IF_ERROR(::tfrnn::Named((expr), (input)))

#endif  // TF_RNN_OPS_CC_OPS_SHAPE_UTIL_H_
