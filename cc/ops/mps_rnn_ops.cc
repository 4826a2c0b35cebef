// Op registrations for the MPSGraph-style LSTM and GRU (Apple MPSGraph's LSTM / LSTMGradients
// and GRU / GRUGradients as TensorFlow ops, docs/SEMANTICS.md §8). Optional operands are list
// inputs of length 0 (absent) or 1 (present); their length attrs are inferred from the call.
#include <initializer_list>
#include <map>
#include <string>
#include <utility>

#include "cc/ops/shape_util.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tfrnn {
namespace {

constexpr char kActs[] = "{'none', 'relu', 'tanh', 'sigmoid', 'hard_sigmoid'}";

// The hidden size H from recurrent_weight ([K·H, H] or [2, K·H, H]).
absl::Status Hidden(InferenceContext* c, int dirs, DimensionHandle* H) {
  ShapeHandle r;
  TFRNN_SHAPE_CHECK(c->WithRank(c->input(1), dirs == 2 ? 3 : 2, &r), "recurrent_weight");
  *H = c->Dim(r, -1);
  return absl::OkStatus();
}

// state [T, B, D·H], then (LSTM) cell [T, B, D·H] or [0], then z_state [T, B, D·K·H] or [0].
absl::Status ForwardShape(InferenceContext* c, int gates, bool lstm) {
  bool bidirectional, produce_cell = false, training;
  TF_RETURN_IF_ERROR(c->GetAttr("bidirectional", &bidirectional));
  if (lstm) TF_RETURN_IF_ERROR(c->GetAttr("produce_cell", &produce_cell));
  TF_RETURN_IF_ERROR(c->GetAttr("training", &training));
  const int D = bidirectional ? 2 : 1;
  ShapeHandle src;
  TFRNN_SHAPE_CHECK(c->WithRank(c->input(0), 3, &src), "source");
  DimensionHandle H, DH, DKH;
  TF_RETURN_IF_ERROR(Hidden(c, D, &H));
  TF_RETURN_IF_ERROR(c->Multiply(H, D, &DH));
  TF_RETURN_IF_ERROR(c->Multiply(H, gates * D, &DKH));
  int out = 0;
  c->set_output(out++, c->MakeShape({c->Dim(src, 0), c->Dim(src, 1), DH}));
  if (lstm) {
    c->set_output(out++, produce_cell ? c->MakeShape({c->Dim(src, 0), c->Dim(src, 1), DH})
                                      : c->Vector(0));
  }
  c->set_output(out, training ? c->MakeShape({c->Dim(src, 0), c->Dim(src, 1), DKH})
                              : c->Vector(0));
  return absl::OkStatus();
}

// The gradients op: source and recurrent_weight checked as in the forward; source_grad and
// recurrent_weight_grad have the shapes of inputs 0 and 1;
// each optional gradient list has the shape of its operand's list. `lists` names the optional
// input lists in input order (after the 5 fixed inputs), `grads` those with a gradient output,
// in output order.
absl::Status GradShape(InferenceContext* c, std::initializer_list<const char*> lists,
                       std::initializer_list<const char*> grads) {
  ShapeHandle src;
  TFRNN_SHAPE_CHECK(c->WithRank(c->input(0), 3, &src), "source");
  bool bidirectional;
  TF_RETURN_IF_ERROR(c->GetAttr("bidirectional", &bidirectional));
  DimensionHandle H;
  TF_RETURN_IF_ERROR(Hidden(c, bidirectional ? 2 : 1, &H));  // the forward's rank checks
  c->set_output(0, c->input(0));
  c->set_output(1, c->input(1));
  std::map<std::string, std::pair<int, int>> at;  // list name -> (first input, length)
  int next = 5;
  for (const char* name : lists) {
    int n;
    TF_RETURN_IF_ERROR(c->GetAttr(absl::StrCat("n_", name), &n));
    at[name] = {next, n};
    next += n;
  }
  int out = 2;
  for (const char* name : grads) {
    const auto [first, n] = at.at(name);
    for (int k = 0; k < n; ++k) c->set_output(out++, c->input(first + k));
  }
  return absl::OkStatus();
}

absl::Status LstmGradShape(InferenceContext* c) {
  return GradShape(c,
                   {"state_gradient", "cell_gradient", "input_weight", "bias", "init_state",
                    "init_cell", "mask", "peephole", "cell_output_gradient"},
                   {"input_weight", "bias", "peephole", "init_state", "init_cell"});
}

absl::Status GruGradShape(InferenceContext* c) {
  return GradShape(c,
                   {"state_gradient", "input_weight", "bias", "init_state", "mask",
                    "secondary_bias"},
                   {"input_weight", "bias", "init_state", "secondary_bias"});
}

}  // namespace

// Inputs every MPS op starts with, and those of the gradients ops after them.
#define TFRNN_MPS_HEAD_INPUTS       \
  .Input("source: T")               \
      .Input("recurrent_weight: T")
#define TFRNN_MPS_GRAD_INPUTS(FWD_OUT)     \
  .Input("source_gradient: T")             \
      .Input("z_state: T")                 \
      .Input(FWD_OUT)                      \
      .Input("state_gradient: n_state_gradient * T")
// The optional operands both families have first (list inputs of length n_<name>), their
// length attrs, and the gradients ops' outputs up to their gradients.
#define TFRNN_MPS_OPERAND_INPUTS                 \
  .Input("input_weight: n_input_weight * T")     \
      .Input("bias: n_bias * T")                 \
      .Input("init_state: n_init_state * T")
#define TFRNN_MPS_OPERAND_ATTRS        \
  .Attr("n_input_weight: int >= 0")    \
      .Attr("n_bias: int >= 0")        \
      .Attr("n_init_state: int >= 0")
#define TFRNN_MPS_GRAD_OUTPUTS                             \
  .Output("source_grad: T")                                \
      .Output("recurrent_weight_grad: T")                  \
      .Output("input_weight_grad: n_input_weight * T")     \
      .Output("bias_grad: n_bias * T")

// The attrs both families' descriptors start with.
#define TFRNN_MPS_DIRECTION_ATTRS                                              \
  .Attr(kRnnTypes)                                                             \
      .Attr("reverse: bool = false")                                           \
      .Attr("bidirectional: bool = false")

#define TFRNN_MPS_LSTM_ATTRS                                                   \
  TFRNN_MPS_DIRECTION_ATTRS                                                    \
      .Attr("produce_cell: bool = false")                                      \
      .Attr("training: bool = false")                                          \
      .Attr("forget_gate_last: bool = false")                                  \
      .Attr(std::string("input_gate_activation: ") + kActs + " = 'sigmoid'")   \
      .Attr(std::string("forget_gate_activation: ") + kActs + " = 'sigmoid'")  \
      .Attr(std::string("cell_gate_activation: ") + kActs + " = 'tanh'")       \
      .Attr(std::string("output_gate_activation: ") + kActs + " = 'sigmoid'")  \
      .Attr(std::string("activation: ") + kActs + " = 'tanh'")

REGISTER_OP("TfRnn>LSTM")
    TFRNN_MPS_HEAD_INPUTS
    TFRNN_MPS_OPERAND_INPUTS
    .Input("init_cell: n_init_cell * T")
    .Input("mask: n_mask * T")
    .Input("peephole: n_peephole * T")
    .Output("state: T")
    .Output("cell: T")
    .Output("z_state: T")
    TFRNN_MPS_OPERAND_ATTRS
    .Attr("n_init_cell: int >= 0")
    .Attr("n_mask: int >= 0")
    .Attr("n_peephole: int >= 0")
    TFRNN_MPS_LSTM_ATTRS
    .SetShapeFn([](InferenceContext* c) { return ForwardShape(c, 4, true); });

REGISTER_OP("TfRnn>LSTMGradients")
    TFRNN_MPS_HEAD_INPUTS
    TFRNN_MPS_GRAD_INPUTS("cell_output_fwd: T")
    .Input("cell_gradient: n_cell_gradient * T")
    TFRNN_MPS_OPERAND_INPUTS
    .Input("init_cell: n_init_cell * T")
    .Input("mask: n_mask * T")
    .Input("peephole: n_peephole * T")
    .Input("cell_output_gradient: n_cell_output_gradient * T")
    TFRNN_MPS_GRAD_OUTPUTS
    .Output("peephole_grad: n_peephole * T")
    .Output("init_state_grad: n_init_state * T")
    .Output("init_cell_grad: n_init_cell * T")
    .Attr("n_state_gradient: int >= 0")
    .Attr("n_cell_gradient: int >= 0")
    TFRNN_MPS_OPERAND_ATTRS
    .Attr("n_init_cell: int >= 0")
    .Attr("n_mask: int >= 0")
    .Attr("n_peephole: int >= 0")
    .Attr("n_cell_output_gradient: int >= 0")
    TFRNN_MPS_LSTM_ATTRS
    .SetShapeFn(LstmGradShape);

#define TFRNN_MPS_GRU_ATTRS                                                    \
  TFRNN_MPS_DIRECTION_ATTRS                                                    \
      .Attr("training: bool = false")                                          \
      .Attr("reset_gate_first: bool = false")                                  \
      .Attr("reset_after: bool = false")                                       \
      .Attr("flip_z: bool = false")                                            \
      .Attr(std::string("update_gate_activation: ") + kActs + " = 'sigmoid'")  \
      .Attr(std::string("reset_gate_activation: ") + kActs + " = 'sigmoid'")   \
      .Attr(std::string("output_gate_activation: ") + kActs + " = 'tanh'")

REGISTER_OP("TfRnn>GRU")
    TFRNN_MPS_HEAD_INPUTS
    TFRNN_MPS_OPERAND_INPUTS
    .Input("mask: n_mask * T")
    .Input("secondary_bias: n_secondary_bias * T")
    .Output("state: T")
    .Output("z_state: T")
    TFRNN_MPS_OPERAND_ATTRS
    .Attr("n_mask: int >= 0")
    .Attr("n_secondary_bias: int >= 0")
    TFRNN_MPS_GRU_ATTRS
    .SetShapeFn([](InferenceContext* c) { return ForwardShape(c, 3, false); });

REGISTER_OP("TfRnn>GRUGradients")
    TFRNN_MPS_HEAD_INPUTS
    TFRNN_MPS_GRAD_INPUTS("output_fwd: T")
    TFRNN_MPS_OPERAND_INPUTS
    .Input("mask: n_mask * T")
    .Input("secondary_bias: n_secondary_bias * T")
    TFRNN_MPS_GRAD_OUTPUTS
    .Output("init_state_grad: n_init_state * T")
    .Output("secondary_bias_grad: n_secondary_bias * T")
    .Attr("n_state_gradient: int >= 0")
    TFRNN_MPS_OPERAND_ATTRS
    .Attr("n_mask: int >= 0")
    .Attr("n_secondary_bias: int >= 0")
    TFRNN_MPS_GRU_ATTRS
    .SetShapeFn(GruGradShape);

}  // namespace tfrnn
