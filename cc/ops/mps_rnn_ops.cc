// Op registrations for the MPSGraph-style LSTM and GRU (Apple MPSGraph's LSTM / LSTMGradients
// and GRU / GRUGradients as TensorFlow ops, SEMANTICS.md §8). Optional operands are list
// inputs of length 0 (absent) or 1 (present); their length attrs are inferred from the call.
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

// The hidden size H from recurrent_weight ([K·H, H] or [2, K·H, H]).
absl::Status Hidden(InferenceContext* c, int dirs, DimensionHandle* H) {
  ShapeHandle r;
  TFRNN_SHAPE_CHECK(c->WithRank(c->input(1), dirs == 2 ? 3 : 2, &r), "recurrent_weight");
  *H = c->Dim(r, -1);
  return absl::OkStatus();
}

absl::Status LstmShape(InferenceContext* c) {
  bool bidirectional, produce_cell, training;
  TF_RETURN_IF_ERROR(c->GetAttr("bidirectional", &bidirectional));
  TF_RETURN_IF_ERROR(c->GetAttr("produce_cell", &produce_cell));
  TF_RETURN_IF_ERROR(c->GetAttr("training", &training));
  const int D = bidirectional ? 2 : 1;
  ShapeHandle src;
  TFRNN_SHAPE_CHECK(c->WithRank(c->input(0), 3, &src), "source");
  DimensionHandle H, DH, D4H;
  TF_RETURN_IF_ERROR(Hidden(c, D, &H));
  TF_RETURN_IF_ERROR(c->Multiply(H, D, &DH));
  TF_RETURN_IF_ERROR(c->Multiply(H, 4 * D, &D4H));
  c->set_output(0, c->MakeShape({c->Dim(src, 0), c->Dim(src, 1), DH}));
  c->set_output(1, produce_cell ? c->MakeShape({c->Dim(src, 0), c->Dim(src, 1), DH})
                                : c->Vector(0));
  c->set_output(2, training ? c->MakeShape({c->Dim(src, 0), c->Dim(src, 1), D4H})
                            : c->Vector(0));
  return absl::OkStatus();
}

absl::Status LstmGradShape(InferenceContext* c) {
  ShapeHandle src;
  TFRNN_SHAPE_CHECK(c->WithRank(c->input(0), 3, &src), "source");
  int out = 0;
  c->set_output(out++, c->input(0));
  c->set_output(out++, c->input(1));
  // Optional gradients have the shapes of their operands, whose lists are found by their
  // position in the op's input order.
  int n_state_grad, n_cell_grad, n_w, n_b, n_is, n_ic, n_mask, n_p, n_cog;
  TF_RETURN_IF_ERROR(c->GetAttr("n_state_gradient", &n_state_grad));
  TF_RETURN_IF_ERROR(c->GetAttr("n_cell_gradient", &n_cell_grad));
  TF_RETURN_IF_ERROR(c->GetAttr("n_input_weight", &n_w));
  TF_RETURN_IF_ERROR(c->GetAttr("n_bias", &n_b));
  TF_RETURN_IF_ERROR(c->GetAttr("n_init_state", &n_is));
  TF_RETURN_IF_ERROR(c->GetAttr("n_init_cell", &n_ic));
  TF_RETURN_IF_ERROR(c->GetAttr("n_mask", &n_mask));
  TF_RETURN_IF_ERROR(c->GetAttr("n_peephole", &n_p));
  TF_RETURN_IF_ERROR(c->GetAttr("n_cell_output_gradient", &n_cog));
  const int base = 5 + n_state_grad + n_cell_grad;
  const int w_at = base, b_at = w_at + n_w, is_at = b_at + n_b, ic_at = is_at + n_is,
            m_at = ic_at + n_ic, p_at = m_at + n_mask;
  for (int k = 0; k < n_w; ++k) c->set_output(out++, c->input(w_at + k));
  for (int k = 0; k < n_b; ++k) c->set_output(out++, c->input(b_at + k));
  for (int k = 0; k < n_p; ++k) c->set_output(out++, c->input(p_at + k));
  for (int k = 0; k < n_is; ++k) c->set_output(out++, c->input(is_at + k));
  for (int k = 0; k < n_ic; ++k) c->set_output(out++, c->input(ic_at + k));
  return absl::OkStatus();
}

absl::Status GruShape(InferenceContext* c) {
  bool bidirectional, training;
  TF_RETURN_IF_ERROR(c->GetAttr("bidirectional", &bidirectional));
  TF_RETURN_IF_ERROR(c->GetAttr("training", &training));
  const int D = bidirectional ? 2 : 1;
  ShapeHandle src;
  TFRNN_SHAPE_CHECK(c->WithRank(c->input(0), 3, &src), "source");
  DimensionHandle H, DH, D3H;
  TF_RETURN_IF_ERROR(Hidden(c, D, &H));
  TF_RETURN_IF_ERROR(c->Multiply(H, D, &DH));
  TF_RETURN_IF_ERROR(c->Multiply(H, 3 * D, &D3H));
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

#define TFRNN_MPS_LSTM_ATTRS                                                   \
  .Attr(kT)                                                                    \
      .Attr("reverse: bool = false")                                           \
      .Attr("bidirectional: bool = false")                                     \
      .Attr("produce_cell: bool = false")                                      \
      .Attr("training: bool = false")                                          \
      .Attr("forget_gate_last: bool = false")                                  \
      .Attr(std::string("input_gate_activation: ") + kActs + " = 'sigmoid'")   \
      .Attr(std::string("forget_gate_activation: ") + kActs + " = 'sigmoid'")  \
      .Attr(std::string("cell_gate_activation: ") + kActs + " = 'tanh'")       \
      .Attr(std::string("output_gate_activation: ") + kActs + " = 'sigmoid'")  \
      .Attr(std::string("activation: ") + kActs + " = 'tanh'")

REGISTER_OP("TfRnn>LSTM")
    .Input("source: T")
    .Input("recurrent_weight: T")
    .Input("input_weight: n_input_weight * T")
    .Input("bias: n_bias * T")
    .Input("init_state: n_init_state * T")
    .Input("init_cell: n_init_cell * T")
    .Input("mask: n_mask * T")
    .Input("peephole: n_peephole * T")
    .Output("state: T")
    .Output("cell: T")
    .Output("z_state: T")
    .Attr("n_input_weight: int >= 0")
    .Attr("n_bias: int >= 0")
    .Attr("n_init_state: int >= 0")
    .Attr("n_init_cell: int >= 0")
    .Attr("n_mask: int >= 0")
    .Attr("n_peephole: int >= 0")
    TFRNN_MPS_LSTM_ATTRS
    .SetShapeFn(LstmShape);

REGISTER_OP("TfRnn>LSTMGradients")
    .Input("source: T")
    .Input("recurrent_weight: T")
    .Input("source_gradient: T")
    .Input("z_state: T")
    .Input("cell_output_fwd: T")
    .Input("state_gradient: n_state_gradient * T")
    .Input("cell_gradient: n_cell_gradient * T")
    .Input("input_weight: n_input_weight * T")
    .Input("bias: n_bias * T")
    .Input("init_state: n_init_state * T")
    .Input("init_cell: n_init_cell * T")
    .Input("mask: n_mask * T")
    .Input("peephole: n_peephole * T")
    .Input("cell_output_gradient: n_cell_output_gradient * T")
    .Output("source_grad: T")
    .Output("recurrent_weight_grad: T")
    .Output("input_weight_grad: n_input_weight * T")
    .Output("bias_grad: n_bias * T")
    .Output("peephole_grad: n_peephole * T")
    .Output("init_state_grad: n_init_state * T")
    .Output("init_cell_grad: n_init_cell * T")
    .Attr("n_state_gradient: int >= 0")
    .Attr("n_cell_gradient: int >= 0")
    .Attr("n_input_weight: int >= 0")
    .Attr("n_bias: int >= 0")
    .Attr("n_init_state: int >= 0")
    .Attr("n_init_cell: int >= 0")
    .Attr("n_mask: int >= 0")
    .Attr("n_peephole: int >= 0")
    .Attr("n_cell_output_gradient: int >= 0")
    TFRNN_MPS_LSTM_ATTRS
    .SetShapeFn(LstmGradShape);

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
