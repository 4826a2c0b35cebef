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
// products where the CPU has no AVX512_BF16, as for a bfloat16 op. input_grad = false
// (backprop): input_backprop is zeros and the input's gradient is not computed (the CPU
// engine skips its products, also under XLA on the CPU); the registered gradient sets it where
// the tape asks for no gradient of input (a model's first layer: GradientTape's
// skip_input_indices).
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

// The inputs of both pairs: sequences, states and the recurrent mask of type T, the weights of
// type W ("T", or the mixed pair's "float").
#define TFRNN_KERAS_INPUTS(W)               \
  .Input("input: T")                        \
      .Input("input_h: T")                  \
      .Input("input_c: T")                  \
      .Input("kernel: " W)                  \
      .Input("recurrent_kernel: " W)        \
      .Input("bias: " W)                    \
      .Input("sequence_lengths: int32")     \
      .Input("recurrent_mask: T")

#define TFRNN_KERAS_ATTRS(TYPES)                                                           \
  .Attr(TYPES)                                                                             \
      .Attr(kRnnMode)                                                                      \
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

// An op pair NAME / NAME "Backprop" whose T takes TYPES and whose weights, their gradients and
// the reserve are of type W.
#define TFRNN_REGISTER_KERAS_PAIR(NAME, TYPES, W)      \
  REGISTER_OP(NAME)                                    \
  TFRNN_KERAS_INPUTS(W)                                \
      .Output("output: T")                             \
      .Output("output_h: T")                           \
      .Output("output_c: T")                           \
      .Output("reserve_space: " W)                     \
          TFRNN_KERAS_ATTRS(TYPES)                     \
      .Attr("is_training: bool = true")                \
      .Attr("reuse_packed_weights: bool = false")      \
      .SetShapeFn(KerasForwardShape);                  \
  REGISTER_OP(NAME "Backprop")                         \
  TFRNN_KERAS_INPUTS(W)                                \
      .Input("output_backprop: T")                     \
      .Input("output_h_backprop: T")                   \
      .Input("output_c_backprop: T")                   \
      .Input("reserve_space: " W)                      \
      .Output("input_backprop: T")                     \
      .Output("input_h_backprop: T")                   \
      .Output("input_c_backprop: T")                   \
      .Output("kernel_backprop: " W)                   \
      .Output("recurrent_kernel_backprop: " W)         \
      .Output("bias_backprop: " W)                     \
          TFRNN_KERAS_ATTRS(TYPES)                     \
      .Attr("input_grad: bool = true")                 \
      .SetShapeFn(KerasBackpropShape)

TFRNN_REGISTER_KERAS_PAIR("TfRnn>KerasRNN", kRnnTypes, "T");
TFRNN_REGISTER_KERAS_PAIR("TfRnn>KerasRNNMixed", "T: {bfloat16, half}", "float");

}  // namespace tfrnn
