// Op registrations for the cuDNN RNN family under TfRnn>: stock inputs, outputs, attrs and
// defaults (docs/SEMANTICS.md §1.2). Shape functions check ranks (backprop ops too, where stock
// checks nothing) and name the input they reject. Unlike stock, the ops are not stateful:
// their dropout masks are a pure function of (seed, seed2), so the result depends only on
// the inputs and attrs.
#include "cc/ops/shape_util.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tfrnn {
namespace {

constexpr char kInputMode[] =
    "input_mode: {'linear_input', 'skip_input', 'auto_select'} = 'linear_input'";
constexpr char kDirection[] = "direction: {'unidirectional', 'bidirectional'} = 'unidirectional'";

absl::Status DirCount(InferenceContext* c, int* dir) {
  std::string direction;
  TF_RETURN_IF_ERROR(c->GetAttr("direction", &direction));
  *dir = direction == "bidirectional" ? 2 : 1;
  return absl::OkStatus();
}

// Forward shape function. `v3`: input_c is checked (lstm) and gives output_c's shape.
absl::Status ForwardShape(InferenceContext* c, bool v3) {
  ShapeHandle input, input_h, input_c, params, unused;
  TF_RETURN_IF_ERROR(WithRanks(
      c, {{0, 3, "input", &input}, {1, 3, "input_h", &input_h}, {3, 1, "params", &params}}));
  std::string mode;
  TF_RETURN_IF_ERROR(c->GetAttr("rnn_mode", &mode));
  const bool lstm = mode == "lstm";
  if (v3) {
    TFRNN_SHAPE_CHECK(c->WithRank(c->input(4), 1, &unused), "sequence_lengths");
    if (lstm) TFRNN_SHAPE_CHECK(c->WithRank(c->input(2), 3, &input_c), "input_c");
  }
  int dir;
  TF_RETURN_IF_ERROR(DirCount(c, &dir));
  DimensionHandle out_depth;
  TF_RETURN_IF_ERROR(c->Multiply(c->Dim(input_h, 2), dir, &out_depth));
  c->set_output(0, c->MakeShape({c->Dim(input, 0), c->Dim(input, 1), out_depth}));
  c->set_output(1, input_h);
  c->set_output(2, lstm ? (v3 ? input_c : input_h) : c->Scalar());
  c->set_output(3, c->UnknownShape());
  if (c->num_outputs() > 4) c->set_output(4, c->UnknownShape());
  return absl::OkStatus();
}

absl::Status BackpropShape(InferenceContext* c, bool v3) {
  ShapeHandle input, input_h, params;
  TF_RETURN_IF_ERROR(WithRanks(
      c, {{0, 3, "input", &input}, {1, 3, "input_h", &input_h}, {3, 1, "params", &params}}));
  if (v3) {
    ShapeHandle unused;
    TFRNN_SHAPE_CHECK(c->WithRank(c->input(4), 1, &unused), "sequence_lengths");
  }
  c->set_output(0, input);
  c->set_output(1, input_h);
  c->set_output(2, c->input(2));
  c->set_output(3, params);
  return absl::OkStatus();
}

absl::Status ScalarSizes(InferenceContext* c) {
  return WithRanks(c, {{0, 0, "num_layers"}, {1, 0, "num_units"}, {2, 0, "input_size"}});
}

absl::Status ToCanonicalShape(InferenceContext* c) {
  TF_RETURN_IF_ERROR(ScalarSizes(c));
  ShapeHandle unused;
  TFRNN_SHAPE_CHECK(c->WithRank(c->input(3), 1, &unused), "params");
  int num_weights = 0, num_biases = 0;
  if (c->GetAttr("num_params", &num_weights).ok()) {
    num_biases = num_weights;
  } else {
    TF_RETURN_IF_ERROR(c->GetAttr("num_params_weights", &num_weights));
    TF_RETURN_IF_ERROR(c->GetAttr("num_params_biases", &num_biases));
  }
  for (int k = 0; k < num_weights; ++k) {
    c->set_output(k, c->Matrix(c->UnknownDim(), c->UnknownDim()));
  }
  for (int k = 0; k < num_biases; ++k) c->set_output(num_weights + k, c->Vector(c->UnknownDim()));
  return absl::OkStatus();
}

absl::Status ToParamsShape(InferenceContext* c) {
  TF_RETURN_IF_ERROR(ScalarSizes(c));
  c->set_output(0, c->Vector(c->UnknownDim()));
  return absl::OkStatus();
}

}  // namespace

// Pieces shared by the registrations below (each op lists its inputs, outputs and attrs in
// stock's order).
#define TFRNN_CUDNN_MODE_ATTRS           \
  .Attr(kRnnMode)                           \
      .Attr(kInputMode)                  \
      .Attr(kDirection)                  \
      .Attr("dropout: float = 0.0")      \
      .Attr("seed: int = 0")             \
      .Attr("seed2: int = 0")
#define TFRNN_CUDNN_COMMON_ATTRS .Attr(kRnnTypes) TFRNN_CUDNN_MODE_ATTRS
#define TFRNN_CUDNN_SIZE_INPUTS   \
  .Input("num_layers: int32")     \
      .Input("num_units: int32")  \
      .Input("input_size: int32")
#define TFRNN_CUDNN_STATE_INPUTS \
  .Input("input: T")             \
      .Input("input_h: T")       \
      .Input("input_c: T")       \
      .Input("params: T")
#define TFRNN_CUDNN_FWD_OUTPUTS      \
  .Output("output: T")               \
      .Output("output_h: T")         \
      .Output("output_c: T")         \
      .Output("reserve_space: T")
// A backprop op's inputs after its forward's inputs (and V3's sequence_lengths).
#define TFRNN_CUDNN_BWD_INPUTS             \
  .Input("output: T")                      \
      .Input("output_h: T")                \
      .Input("output_c: T")                \
      .Input("output_backprop: T")         \
      .Input("output_h_backprop: T")       \
      .Input("output_c_backprop: T")       \
      .Input("reserve_space: T")
#define TFRNN_CUDNN_BWD_OUTPUTS          \
  .Output("input_backprop: T")           \
      .Output("input_h_backprop: T")     \
      .Output("input_c_backprop: T")     \
      .Output("params_backprop: T")

REGISTER_OP("TfRnn>CudnnRNNParamsSize")
    TFRNN_CUDNN_SIZE_INPUTS
    .Output("params_size: S")
    .Attr(kRnnTypes)
    .Attr("S: {int32, int64}")
    TFRNN_CUDNN_MODE_ATTRS
    .Attr("num_proj: int = 0")
    .SetShapeFn([](InferenceContext* c) {
      TF_RETURN_IF_ERROR(ScalarSizes(c));
      c->set_output(0, c->Vector(1));
      return absl::OkStatus();
    })
    .Doc("Size of the opaque params buffer (TfRnn> CudnnRNNParamsSize).");

REGISTER_OP("TfRnn>CudnnRNN")
    TFRNN_CUDNN_STATE_INPUTS
    TFRNN_CUDNN_FWD_OUTPUTS
    TFRNN_CUDNN_COMMON_ATTRS
    .Attr("is_training: bool = true")
    .SetShapeFn([](InferenceContext* c) { return ForwardShape(c, false); });

REGISTER_OP("TfRnn>CudnnRNNV2")
    TFRNN_CUDNN_STATE_INPUTS
    TFRNN_CUDNN_FWD_OUTPUTS
    .Output("host_reserved: int8")
    TFRNN_CUDNN_COMMON_ATTRS
    .Attr("is_training: bool = true")
    .SetShapeFn([](InferenceContext* c) { return ForwardShape(c, false); });

REGISTER_OP("TfRnn>CudnnRNNV3")
    TFRNN_CUDNN_STATE_INPUTS
    .Input("sequence_lengths: int32")
    TFRNN_CUDNN_FWD_OUTPUTS
    .Output("host_reserved: int8")
    TFRNN_CUDNN_COMMON_ATTRS
    .Attr("num_proj: int = 0")
    .Attr("is_training: bool = true")
    .Attr("time_major: bool = true")
    .SetShapeFn([](InferenceContext* c) { return ForwardShape(c, true); });

REGISTER_OP("TfRnn>CudnnRNNBackprop")
    TFRNN_CUDNN_STATE_INPUTS
    TFRNN_CUDNN_BWD_INPUTS
    TFRNN_CUDNN_BWD_OUTPUTS
    TFRNN_CUDNN_COMMON_ATTRS
    .SetShapeFn([](InferenceContext* c) { return BackpropShape(c, false); });

REGISTER_OP("TfRnn>CudnnRNNBackpropV2")
    TFRNN_CUDNN_STATE_INPUTS
    TFRNN_CUDNN_BWD_INPUTS
    .Input("host_reserved: int8")
    TFRNN_CUDNN_BWD_OUTPUTS
    TFRNN_CUDNN_COMMON_ATTRS
    .SetShapeFn([](InferenceContext* c) { return BackpropShape(c, false); });

REGISTER_OP("TfRnn>CudnnRNNBackpropV3")
    TFRNN_CUDNN_STATE_INPUTS
    .Input("sequence_lengths: int32")
    TFRNN_CUDNN_BWD_INPUTS
    .Input("host_reserved: int8")
    TFRNN_CUDNN_BWD_OUTPUTS
    TFRNN_CUDNN_COMMON_ATTRS
    .Attr("num_proj: int = 0")
    .Attr("time_major: bool = true")
    .SetShapeFn([](InferenceContext* c) { return BackpropShape(c, true); });

REGISTER_OP("TfRnn>CudnnRNNParamsToCanonical")
    TFRNN_CUDNN_SIZE_INPUTS
    .Input("params: T")
    .Output("weights: num_params * T")
    .Output("biases: num_params * T")
    .Attr(kRnnTypes)
    .Attr("num_params: int >= 1")
    TFRNN_CUDNN_MODE_ATTRS
    .SetShapeFn(ToCanonicalShape);

REGISTER_OP("TfRnn>CudnnRNNParamsToCanonicalV2")
    TFRNN_CUDNN_SIZE_INPUTS
    .Input("params: T")
    .Output("weights: num_params_weights * T")
    .Output("biases: num_params_biases * T")
    .Attr(kRnnTypes)
    .Attr("num_params_weights: int >= 1")
    .Attr("num_params_biases: int >= 1")
    TFRNN_CUDNN_MODE_ATTRS
    .Attr("num_proj: int = 0")
    .SetShapeFn(ToCanonicalShape);

REGISTER_OP("TfRnn>CudnnRNNCanonicalToParams")
    TFRNN_CUDNN_SIZE_INPUTS
    .Input("weights: num_params * T")
    .Input("biases: num_params * T")
    .Output("params: T")
    .Attr(kRnnTypes)
    .Attr("num_params: int >= 1")
    TFRNN_CUDNN_MODE_ATTRS
    .SetShapeFn(ToParamsShape);

REGISTER_OP("TfRnn>CudnnRNNCanonicalToParamsV2")
    TFRNN_CUDNN_SIZE_INPUTS
    .Input("weights: num_params_weights * T")
    .Input("biases: num_params_biases * T")
    .Output("params: T")
    .Attr(kRnnTypes)
    .Attr("num_params_weights: int >= 1")
    .Attr("num_params_biases: int >= 1")
    TFRNN_CUDNN_MODE_ATTRS
    .Attr("num_proj: int = 0")
    .SetShapeFn(ToParamsShape);

}  // namespace tfrnn
