// Op registrations for the MPSGraph-style GRU (Apple MPSGraph's GRU / GRUGradients as
// TensorFlow ops, SEMANTICS.md §8). Optional operands are list inputs of length 0 (absent) or
// 1 (present); their length attrs are inferred from the call.
#include <string>

#include "cc/ops/shape_util.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tfrnn {
namespace {

using ::tensorflow::shape_inference::DimensionHandle;
using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

constexpr char kT[] = "T: {bfloat16, half, float, double}";
constexpr char kActs[] = "{'none', 'relu', 'tanh', 'sigmoid', 'hard_sigmoid'}";

absl::Status GruShape(InferenceContext* c) {
  bool bidirectional, training;
  TF_RETURN_IF_ERROR(c->GetAttr("bidirectional", &bidirectional));
  TF_RETURN_IF_ERROR(c->GetAttr("training", &training));
  const int D = bidirectional ? 2 : 1;
  ShapeHandle src, r;
  TFRNN_SHAPE_CHECK(c->WithRank(c->input(0), 3, &src), "source");
  TFRNN_SHAPE_CHECK(c->WithRank(c->input(1), D == 2 ? 3 : 2, &r), "recurrent_weight");
  DimensionHandle DH, D3H;
  TF_RETURN_IF_ERROR(c->Multiply(c->Dim(r, -1), D, &DH));
  TF_RETURN_IF_ERROR(c->Multiply(c->Dim(r, -1), 3 * D, &D3H));
  c->set_output(0, c->MakeShape({c->Dim(src, 0), c->Dim(src, 1), DH}));
  c->set_output(1, training ? c->MakeShape({c->Dim(src, 0), c->Dim(src, 1), D3H})
                            : c->Vector(0));
  return absl::OkStatus();
}

absl::Status GruGradShape(InferenceContext* c) {
  ShapeHandle src;
  TFRNN_SHAPE_CHECK(c->WithRank(c->input(0), 3, &src), "source");
  int out = 0;
  c->set_output(out++, c->input(0));
  c->set_output(out++, c->input(1));
  // Optional gradients have the shapes of their operands, found by position in the inputs.
  int n_state_grad, n_w, n_b, n_is, n_mask, n_b2;
  TF_RETURN_IF_ERROR(c->GetAttr("n_state_gradient", &n_state_grad));
  TF_RETURN_IF_ERROR(c->GetAttr("n_input_weight", &n_w));
  TF_RETURN_IF_ERROR(c->GetAttr("n_bias", &n_b));
  TF_RETURN_IF_ERROR(c->GetAttr("n_init_state", &n_is));
  TF_RETURN_IF_ERROR(c->GetAttr("n_mask", &n_mask));
  TF_RETURN_IF_ERROR(c->GetAttr("n_secondary_bias", &n_b2));
  const int w_at = 5 + n_state_grad, b_at = w_at + n_w, is_at = b_at + n_b,
            m_at = is_at + n_is, b2_at = m_at + n_mask;
  for (int k = 0; k < n_w; ++k) c->set_output(out++, c->input(w_at + k));
  for (int k = 0; k < n_b; ++k) c->set_output(out++, c->input(b_at + k));
  for (int k = 0; k < n_is; ++k) c->set_output(out++, c->input(is_at + k));
  for (int k = 0; k < n_b2; ++k) c->set_output(out++, c->input(b2_at + k));
  return absl::OkStatus();
}

}  // namespace

#define TFRNN_MPS_GRU_ATTRS                                                    \
  .Attr(kT)                                                                    \
      .Attr("reverse: bool = false")                                           \
      .Attr("bidirectional: bool = false")                                     \
      .Attr("training: bool = false")                                          \
      .Attr("reset_gate_first: bool = false")                                  \
      .Attr("reset_after: bool = false")                                       \
      .Attr("flip_z: bool = false")                                            \
      .Attr(std::string("update_gate_activation: ") + kActs + " = 'sigmoid'")  \
      .Attr(std::string("reset_gate_activation: ") + kActs + " = 'sigmoid'")   \
      .Attr(std::string("output_gate_activation: ") + kActs + " = 'tanh'")

REGISTER_OP("TfRnn>GRU")
    .Input("source: T")
    .Input("recurrent_weight: T")
    .Input("input_weight: n_input_weight * T")
    .Input("bias: n_bias * T")
    .Input("init_state: n_init_state * T")
    .Input("mask: n_mask * T")
    .Input("secondary_bias: n_secondary_bias * T")
    .Output("state: T")
    .Output("z_state: T")
    .Attr("n_input_weight: int >= 0")
    .Attr("n_bias: int >= 0")
    .Attr("n_init_state: int >= 0")
    .Attr("n_mask: int >= 0")
    .Attr("n_secondary_bias: int >= 0")
    TFRNN_MPS_GRU_ATTRS
    .SetShapeFn(GruShape);

REGISTER_OP("TfRnn>GRUGradients")
    .Input("source: T")
    .Input("recurrent_weight: T")
    .Input("source_gradient: T")
    .Input("z_state: T")
    .Input("output_fwd: T")
    .Input("state_gradient: n_state_gradient * T")
    .Input("input_weight: n_input_weight * T")
    .Input("bias: n_bias * T")
    .Input("init_state: n_init_state * T")
    .Input("mask: n_mask * T")
    .Input("secondary_bias: n_secondary_bias * T")
    .Output("source_grad: T")
    .Output("recurrent_weight_grad: T")
    .Output("input_weight_grad: n_input_weight * T")
    .Output("bias_grad: n_bias * T")
    .Output("init_state_grad: n_init_state * T")
    .Output("secondary_bias_grad: n_secondary_bias * T")
    .Attr("n_state_gradient: int >= 0")
    .Attr("n_input_weight: int >= 0")
    .Attr("n_bias: int >= 0")
    .Attr("n_init_state: int >= 0")
    .Attr("n_mask: int >= 0")
    .Attr("n_secondary_bias: int >= 0")
    TFRNN_MPS_GRU_ATTRS
    .SetShapeFn(GruGradShape);

}  // namespace tfrnn
