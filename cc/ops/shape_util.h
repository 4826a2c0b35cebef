// What the op registrations share: the shape-inference names, the T attrs and the helpers of
// the shape functions.
#ifndef TF_RNN_OPS_CC_OPS_SHAPE_UTIL_H_
#define TF_RNN_OPS_CC_OPS_SHAPE_UTIL_H_

#include <initializer_list>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tfrnn {

using ::tensorflow::shape_inference::DimensionHandle;
using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

// The T attr of the ops with cuDNN's dtype list (cuDNN family, Keras, MPSGraph).
constexpr char kRnnTypes[] = "T: {bfloat16, half, float, double}";
// The rnn_mode attr of the ops with cuDNN's modes (cuDNN family, Keras).
constexpr char kRnnMode[] = "rnn_mode: {'rnn_relu', 'rnn_tanh', 'lstm', 'gru'} = 'lstm'";
// The T attr of the block ops (LSTM and GRU block families), in stock's order widened.
constexpr char kBlockTypes[] = "T: {half, bfloat16, float, double}";

// Prefixes a shape-inference error with the input it concerns ("wci: Shape must be rank 1
// ..."), so that graph-mode errors name the offending input first, like the kernels' errors.
inline absl::Status Named(absl::Status s, const char* input) {
  if (s.ok()) return s;
  return absl::InvalidArgumentError(absl::StrCat(input, ": ", s.message()));
}

// One input of WithRanks: its index, its rank, its name (for the message) and where its shape
// goes (null: not kept).
struct RankedInput {
  int index;
  int rank;
  const char* name;
  ShapeHandle* shape = nullptr;
};

// Each input must have its rank; checked in order, so that the message names the first input
// that has not.
inline absl::Status WithRanks(InferenceContext* c, std::initializer_list<RankedInput> inputs) {
  for (const RankedInput& in : inputs) {
    ShapeHandle unused;
    TF_RETURN_IF_ERROR(Named(c->WithRank(c->input(in.index), in.rank,
                                         in.shape != nullptr ? in.shape : &unused),
                             in.name));
  }
  return absl::OkStatus();
}

}  // namespace tfrnn

#define TFRNN_SHAPE_CHECK(expr, input) TF_RETURN_IF_ERROR(::tfrnn::Named((expr), (input)))

#endif  // TF_RNN_OPS_CC_OPS_SHAPE_UTIL_H_
