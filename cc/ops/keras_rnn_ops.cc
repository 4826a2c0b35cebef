// The Keras layers' op pair (tf_rnn_ops.keras; not stock ops): one layer, one direction,
// batch-major, the weights as the Keras cells hold them, so that a layer's call runs no
// conversion ops and its gradients arrive in the variables' own layout.
//
//   input             [batch, time, input_size] (preprojected: [batch, time, K·units], the
//                     input projections, and kernel has no elements)
//   input_h           [batch, units]
//   input_c           [batch, units] (lstm; read only for lstm)
//   kernel            [input_size, K·units], Keras gate order (lstm i f c o, gru z r h)
//   recurrent_kernel  [units, K·units]
//   bias              [K·units] (the input bias; no recurrent bias) or [2, K·units] (input,
//                     recurrent: GRU reset_after)
//   sequence_lengths  [batch] in [0, time], or [0]: every row has `time` steps
//   recurrent_mask    [batch, K·units], gate k's recurrent product multiplies h_prev ⊙ its
//                     block k (Keras recurrent dropout), or [0]: none
// K = 4 (lstm), 3 (gru), 1 (rnn_tanh, rnn_relu). activation / recurrent_activation: the cell
// input and h's / the gates' (hard_sigmoid is Keras 3's relu6(x + 3) / 6); reset_after = false:
// the gru candidate is act(x·W_h + b_h + (r ⊙ h)·R_h). is_training = false: reserve_space is
// empty (the registered gradient recomputes it). reuse_packed_weights (CPU, is_training =
// false): the kernel may keep kernel and recurrent_kernel packed for the engine's products
// from one call to the next while they are the same buffers; set it only where those buffers
// are never written in place while another tensor holds them (resource variables, constants;
// not reference variables). bf16_products (T = float, on the CPU; both ops, the backprop's
// set as its forward's): the products round their operands to bfloat16 and accumulate in
// float, as a bfloat16 op's do (a mixed-precision layer on its float32 variables); float
// products where the CPU has no AVX512_BF16, as for a bfloat16 op.
//
// TfRnn>KerasRNNMixed / KerasRNNMixedBackprop (a mixed-precision layer's call on its float32
// variables): the same inputs, outputs and attrs, with input, input_h, input_c, recurrent_mask,
// the outputs and their gradients of type T (bfloat16 or half), and kernel, recurrent_kernel,
// bias, their gradients and reserve_space float. The products are a bfloat16 op's for T =
// bfloat16 (bf16_products for T = half); everything else is computed in float, as the float32
// op with bf16_products computes it on the sequences converted to float.

#include "cc/ops/shape_util.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tfrnn {
namespace {

constexpr char kKerasAct[] = "{'tanh', 'sigmoid', 'relu', 'linear', 'hard_sigmoid'}";

#define TFRNN_KERAS_INPUTS                  \
  .Input("input: T")                        \
      .Input("input_h: T")                  \
      .Input("input_c: T")                  \
      .Input("kernel: T")                   \
      .Input("recurrent_kernel: T")         \
      .Input("bias: T")                     \
      .Input("sequence_lengths: int32")     \
      .Input("recurrent_mask: T")

// The mixed pair: sequences, states and the recurrent mask of type T, weights float.
#define TFRNN_KERAS_MIXED_INPUTS            \
  .Input("input: T")                        \
      .Input("input_h: T")                  \
      .Input("input_c: T")                  \
      .Input("kernel: float")               \
      .Input("recurrent_kernel: float")     \
      .Input("bias: float")                 \
      .Input("sequence_lengths: int32")     \
      .Input("recurrent_mask: T")

#define TFRNN_KERAS_ATTRS                                                                  \
  .Attr(kRnnTypes) TFRNN_KERAS_OTHER_ATTRS
#define TFRNN_KERAS_MIXED_ATTRS                                                            \
  .Attr("T: {bfloat16, half}") TFRNN_KERAS_OTHER_ATTRS
#define TFRNN_KERAS_OTHER_ATTRS                                                            \
  .Attr(kRnnMode)                                                                          \
      .Attr(absl::StrCat("activation: ", kKerasAct, " = 'tanh'"))                           \
      .Attr(absl::StrCat("recurrent_activation: ", kKerasAct, " = 'sigmoid'"))              \
      .Attr("reset_after: bool = true")                                                    \
      .Attr("preprojected: bool = false")                                                  \
      .Attr("bf16_products: bool = false")

// Ranks only: every size is checked by the kernel, which names the input.
absl::Status KerasInputRanks(InferenceContext* c, ShapeHandle* input, ShapeHandle* input_h) {
  ShapeHandle unused;
  TF_RETURN_IF_ERROR(WithRanks(c, {{0, 3, "input", input},
                                   {1, 2, "input_h", input_h},
                                   {3, 2, "kernel"},
                                   {4, 2, "recurrent_kernel"}}));
  TFRNN_SHAPE_CHECK(c->WithRankAtLeast(c->input(5), 1, &unused), "bias");
  TFRNN_SHAPE_CHECK(c->WithRankAtMost(c->input(5), 2, &unused), "bias");
  TFRNN_SHAPE_CHECK(c->WithRank(c->input(6), 1, &unused), "sequence_lengths");
  TFRNN_SHAPE_CHECK(c->WithRankAtLeast(c->input(7), 1, &unused), "recurrent_mask");
  TFRNN_SHAPE_CHECK(c->WithRankAtMost(c->input(7), 2, &unused), "recurrent_mask");
  return absl::OkStatus();
}

absl::Status KerasForwardShape(InferenceContext* c) {
  ShapeHandle input, input_h;
  TF_RETURN_IF_ERROR(KerasInputRanks(c, &input, &input_h));
  std::string mode;
  TF_RETURN_IF_ERROR(c->GetAttr("rnn_mode", &mode));
  c->set_output(0, c->MakeShape({c->Dim(input, 0), c->Dim(input, 1), c->Dim(input_h, 1)}));
  c->set_output(1, input_h);
  c->set_output(2, mode == "lstm" ? input_h : c->Vector(0));
  c->set_output(3, c->Vector(c->UnknownDim()));
  return absl::OkStatus();
}

absl::Status KerasBackpropShape(InferenceContext* c) {
  ShapeHandle input, input_h;
  TF_RETURN_IF_ERROR(KerasInputRanks(c, &input, &input_h));
  for (int k = 0; k < 6; ++k) c->set_output(k, c->input(k));
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("TfRnn>KerasRNN")
    TFRNN_KERAS_INPUTS
    .Output("output: T")
    .Output("output_h: T")
    .Output("output_c: T")
    .Output("reserve_space: T")
    TFRNN_KERAS_ATTRS
    .Attr("is_training: bool = true")
    .Attr("reuse_packed_weights: bool = false")
    .SetShapeFn(KerasForwardShape);

REGISTER_OP("TfRnn>KerasRNNBackprop")
    TFRNN_KERAS_INPUTS
    .Input("output_backprop: T")
    .Input("output_h_backprop: T")
    .Input("output_c_backprop: T")
    .Input("reserve_space: T")
    .Output("input_backprop: T")
    .Output("input_h_backprop: T")
    .Output("input_c_backprop: T")
    .Output("kernel_backprop: T")
    .Output("recurrent_kernel_backprop: T")
    .Output("bias_backprop: T")
    TFRNN_KERAS_ATTRS
    .SetShapeFn(KerasBackpropShape);

REGISTER_OP("TfRnn>KerasRNNMixed")
    TFRNN_KERAS_MIXED_INPUTS
    .Output("output: T")
    .Output("output_h: T")
    .Output("output_c: T")
    .Output("reserve_space: float")
    TFRNN_KERAS_MIXED_ATTRS
    .Attr("is_training: bool = true")
    .Attr("reuse_packed_weights: bool = false")
    .SetShapeFn(KerasForwardShape);

REGISTER_OP("TfRnn>KerasRNNMixedBackprop")
    TFRNN_KERAS_MIXED_INPUTS
    .Input("output_backprop: T")
    .Input("output_h_backprop: T")
    .Input("output_c_backprop: T")
    .Input("reserve_space: float")
    .Output("input_backprop: T")
    .Output("input_h_backprop: T")
    .Output("input_c_backprop: T")
    .Output("kernel_backprop: float")
    .Output("recurrent_kernel_backprop: float")
    .Output("bias_backprop: float")
    TFRNN_KERAS_MIXED_ATTRS
    .SetShapeFn(KerasBackpropShape);

}  // namespace tfrnn
