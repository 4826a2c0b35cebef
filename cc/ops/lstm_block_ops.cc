// Op registrations for the LSTM block family under the TfRnn> namespace: same inputs,
// outputs, attrs and defaults as stock TensorFlow, T widened to {half, bfloat16, float,
// double}. Shape functions check every rank and merge every shared dimension.
#include <string>

#include "absl/strings/str_cat.h"
#include "cc/ops/shape_util.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tfrnn {
namespace {

// Sizes shared by the family, merged across all inputs.
struct LstmShapeDims {
  DimensionHandle T, B, I, H;
  ShapeHandle x, cs_prev, h_prev, w, wci, wcf, wco, b;
};

// Checks x (rank x_rank), cs_prev, h_prev, w, wci, wcf, wco, b starting at input `first`.
absl::Status MergeLstmParams(InferenceContext* c, int first, int x_rank, LstmShapeDims* d) {
  TF_RETURN_IF_ERROR(WithRanks(c, {{first, x_rank, "x", &d->x},
                                   {first + 1, 2, "cs_prev", &d->cs_prev},
                                   {first + 2, 2, "h_prev", &d->h_prev},
                                   {first + 3, 2, "w", &d->w},
                                   {first + 4, 1, "wci", &d->wci},
                                   {first + 5, 1, "wcf", &d->wcf},
                                   {first + 6, 1, "wco", &d->wco},
                                   {first + 7, 1, "b", &d->b}}));
  d->T = x_rank == 3 ? c->Dim(d->x, 0) : c->MakeDim(1);
  d->B = c->Dim(d->x, x_rank - 2);
  d->I = c->Dim(d->x, x_rank - 1);
  d->H = c->Dim(d->cs_prev, 1);
  TFRNN_SHAPE_CHECK(c->Merge(d->B, c->Dim(d->cs_prev, 0), &d->B), "cs_prev");
  TFRNN_SHAPE_CHECK(c->Merge(d->B, c->Dim(d->h_prev, 0), &d->B), "h_prev");
  TFRNN_SHAPE_CHECK(c->Merge(d->H, c->Dim(d->h_prev, 1), &d->H), "h_prev");
  DimensionHandle h4;
  TFRNN_SHAPE_CHECK(c->Divide(c->Dim(d->w, 1), 4, /*evenly_divisible=*/true, &h4), "w");
  TFRNN_SHAPE_CHECK(c->Merge(d->H, h4, &d->H), "w");
  TFRNN_SHAPE_CHECK(c->Divide(c->Dim(d->b, 0), 4, /*evenly_divisible=*/true, &h4), "b");
  TFRNN_SHAPE_CHECK(c->Merge(d->H, h4, &d->H), "b");
  TFRNN_SHAPE_CHECK(c->Merge(d->H, c->Dim(d->wci, 0), &d->H), "wci");
  TFRNN_SHAPE_CHECK(c->Merge(d->H, c->Dim(d->wcf, 0), &d->H), "wcf");
  TFRNN_SHAPE_CHECK(c->Merge(d->H, c->Dim(d->wco, 0), &d->H), "wco");
  DimensionHandle ih;
  TF_RETURN_IF_ERROR(c->Add(d->I, d->H, &ih));
  TFRNN_SHAPE_CHECK(c->Merge(ih, c->Dim(d->w, 0), &ih), "w");
  return absl::OkStatus();
}

// Checks `count` inputs from `first` to be [T, B, H] (sequence) or [B, H] (cell).
absl::Status MergeActivations(InferenceContext* c, int first, int count, bool sequence,
                              LstmShapeDims* d) {
  static const char* const kSeqNames[] = {"i",  "cs", "f",       "o",      "ci",
                                          "co", "h",  "cs_grad", "h_grad", "i_grad",
                                          "f_grad", "o_grad", "ci_grad", "co_grad"};
  static const char* const kCellNames[] = {"i", "cs", "f", "o", "ci", "co", "cs_grad", "h_grad"};
  for (int k = first; k < first + count; ++k) {
    const std::string name = sequence ? kSeqNames[k - first] : kCellNames[k - first];
    ShapeHandle s;
    TFRNN_SHAPE_CHECK(c->WithRank(c->input(k), sequence ? 3 : 2, &s), name.c_str());
    int j = 0;
    if (sequence) TFRNN_SHAPE_CHECK(c->Merge(d->T, c->Dim(s, j++), &d->T), name.c_str());
    TFRNN_SHAPE_CHECK(c->Merge(d->B, c->Dim(s, j++), &d->B), name.c_str());
    TFRNN_SHAPE_CHECK(c->Merge(d->H, c->Dim(s, j), &d->H), name.c_str());
  }
  return absl::OkStatus();
}

absl::Status CellShape(InferenceContext* c) {
  LstmShapeDims d;
  TF_RETURN_IF_ERROR(MergeLstmParams(c, 0, 2, &d));
  // As its kernel (and stock's), LSTMBlockCell rejects an empty batch or cell; the other ops
  // of the family compute an empty result.
  if (c->ValueKnown(d.B) && c->Value(d.B) == 0) {
    return Named(absl::InvalidArgumentError("empty batch dimension (batch_size = 0)"), "x");
  }
  if (c->ValueKnown(d.H) && c->Value(d.H) == 0) {
    return Named(absl::InvalidArgumentError("empty (cell_size = 0)"), "cs_prev");
  }
  ShapeHandle out = c->Matrix(d.B, d.H);
  for (int k = 0; k < 7; ++k) c->set_output(k, out);
  return absl::OkStatus();
}

absl::Status CellGradShape(InferenceContext* c) {
  LstmShapeDims d;
  TF_RETURN_IF_ERROR(MergeLstmParams(c, 0, 2, &d));
  TF_RETURN_IF_ERROR(MergeActivations(c, 8, 8, /*sequence=*/false, &d));
  DimensionHandle h4;
  TF_RETURN_IF_ERROR(c->Multiply(d.H, 4, &h4));
  c->set_output(0, c->Matrix(d.B, d.H));
  c->set_output(1, c->Matrix(d.B, h4));
  for (int k = 2; k < 5; ++k) c->set_output(k, c->Vector(d.H));
  return absl::OkStatus();
}

absl::Status SequenceShape(InferenceContext* c) {
  ShapeHandle unused;
  TFRNN_SHAPE_CHECK(c->WithRank(c->input(0), 0, &unused), "seq_len_max");
  LstmShapeDims d;
  TF_RETURN_IF_ERROR(MergeLstmParams(c, 1, 3, &d));
  ShapeHandle out = c->MakeShape({d.T, d.B, d.H});
  for (int k = 0; k < 7; ++k) c->set_output(k, out);
  return absl::OkStatus();
}

// BlockLSTMGrad(V2) and the exact-gradient op: 9 forward inputs, 7 activations, cs_grad,
// h_grad (and 5 gate-output grads for the exact op). Outputs take the shapes of x, cs_prev,
// h_prev, w, wci, wcf, wco, b.
absl::Status SequenceGradShape(InferenceContext* c, int extra_grads) {
  ShapeHandle unused;
  TFRNN_SHAPE_CHECK(c->WithRank(c->input(0), 0, &unused), "seq_len_max");
  LstmShapeDims d;
  TF_RETURN_IF_ERROR(MergeLstmParams(c, 1, 3, &d));
  TF_RETURN_IF_ERROR(MergeActivations(c, 9, 9 + extra_grads, /*sequence=*/true, &d));
  const ShapeHandle outs[8] = {d.x, d.cs_prev, d.h_prev, d.w, d.wci, d.wcf, d.wco, d.b};
  for (int k = 0; k < 8; ++k) c->set_output(k, outs[k]);
  return absl::OkStatus();
}

}  // namespace

// The inputs every op of the family has (after BlockLSTM's seq_len_max): x and the weights.
#define TFRNN_LSTM_PARAM_INPUTS                                                             \
  .Input("x: T")                                                                            \
      .Input("cs_prev: T")                                                                  \
      .Input("h_prev: T")                                                                   \
      .Input("w: T")                                                                        \
      .Input("wci: T")                                                                      \
      .Input("wcf: T")                                                                      \
      .Input("wco: T")                                                                      \
      .Input("b: T")
// The forward's activations i, cs, f, o, ci, co as outputs (KIND .Output) or as the
// gradients' inputs (KIND .Input).
#define TFRNN_LSTM_ACTS(KIND) \
  KIND("i: T") KIND("cs: T") KIND("f: T") KIND("o: T") KIND("ci: T") KIND("co: T")
// The peephole weights' gradients.
#define TFRNN_LSTM_PEEPHOLE_GRADS .Output("wci_grad: T").Output("wcf_grad: T").Output("wco_grad: T")

REGISTER_OP("TfRnn>LSTMBlockCell")
    TFRNN_LSTM_PARAM_INPUTS
    TFRNN_LSTM_ACTS(.Output)
    .Output("h: T")
    .Attr("forget_bias: float = 1.0")
    .Attr("cell_clip: float = 3.0")
    .Attr("use_peephole: bool = false")
    .Attr(kBlockTypes)
    .SetShapeFn(CellShape)
    .Doc(R"doc(One LSTM step (ICFO gate layout), as tf.raw_ops.LSTMBlockCell.)doc");

REGISTER_OP("TfRnn>LSTMBlockCellGrad")
    TFRNN_LSTM_PARAM_INPUTS
    TFRNN_LSTM_ACTS(.Input)
    .Input("cs_grad: T")
    .Input("h_grad: T")
    .Output("cs_prev_grad: T")
    .Output("dicfo: T")
    TFRNN_LSTM_PEEPHOLE_GRADS
    .Attr("use_peephole: bool")
    .Attr(kBlockTypes)
    .SetShapeFn(CellGradShape)
    .Doc(R"doc(Backward of one LSTM step, as tf.raw_ops.LSTMBlockCellGrad.)doc");

#define TFRNN_REGISTER_BLOCK_LSTM_FWD(NAME, ATTRS)                                         \
  REGISTER_OP(NAME)                                                                       \
      .Input("seq_len_max: int64") TFRNN_LSTM_PARAM_INPUTS TFRNN_LSTM_ACTS(.Output)       \
      .Output("h: T") ATTRS.Attr("use_peephole: bool = false")                            \
      .Attr(kBlockTypes)                                                                  \
      .SetShapeFn(SequenceShape)

TFRNN_REGISTER_BLOCK_LSTM_FWD("TfRnn>BlockLSTM",
                              .Attr("forget_bias: float = 1.0").Attr("cell_clip: float = 3.0"))
    .Doc(R"doc(LSTM over a sequence (ICFO), as tf.raw_ops.BlockLSTM. All seven outputs are
zero for t >= seq_len_max; seq_len_max outside [0, timelen] is an InvalidArgument error.)doc");

TFRNN_REGISTER_BLOCK_LSTM_FWD("TfRnn>BlockLSTMV2", .Attr("cell_clip: float = 0.0"))
    .Doc(R"doc(LSTM over a sequence (IFCO, no forget bias), as tf.raw_ops.BlockLSTMV2.)doc");

#define TFRNN_BLOCK_LSTM_GRAD_INPUTS                                                      \
  .Input("seq_len_max: int64") TFRNN_LSTM_PARAM_INPUTS TFRNN_LSTM_ACTS(.Input)            \
      .Input("h: T")                                                                      \
      .Input("cs_grad: T")                                                                \
      .Input("h_grad: T")

#define TFRNN_BLOCK_LSTM_GRAD_OUTPUTS                                                     \
  .Output("x_grad: T")                                                                    \
      .Output("cs_prev_grad: T")                                                          \
      .Output("h_prev_grad: T")                                                           \
      .Output("w_grad: T") TFRNN_LSTM_PEEPHOLE_GRADS                                      \
      .Output("b_grad: T")

#define TFRNN_REGISTER_BLOCK_LSTM_GRAD(NAME)                                       \
  REGISTER_OP(NAME) TFRNN_BLOCK_LSTM_GRAD_INPUTS TFRNN_BLOCK_LSTM_GRAD_OUTPUTS        \
      .Attr("use_peephole: bool")                                                     \
      .Attr(kBlockTypes)                                                              \
      .SetShapeFn([](InferenceContext* c) { return SequenceGradShape(c, 0); })

TFRNN_REGISTER_BLOCK_LSTM_GRAD("TfRnn>BlockLSTMGrad")
    .Doc(R"doc(Backward of BlockLSTM (ICFO), as tf.raw_ops.BlockLSTMGrad.)doc");

TFRNN_REGISTER_BLOCK_LSTM_GRAD("TfRnn>BlockLSTMGradV2")
    .Doc(R"doc(Backward of BlockLSTMV2 (IFCO), as tf.raw_ops.BlockLSTMGradV2.)doc");

// Not a stock op: the exact gradient of BlockLSTM / BlockLSTMV2 / LSTMBlockCell used by the
// registered gradients. Unlike BlockLSTMGrad it also takes the gradients of the i, f, o, ci
// and co outputs, and differentiates the cell clip exactly (zero through clipped values).
REGISTER_OP("TfRnn>BlockLSTMGradExact") TFRNN_BLOCK_LSTM_GRAD_INPUTS
    .Input("i_grad: T")
    .Input("f_grad: T")
    .Input("o_grad: T")
    .Input("ci_grad: T")
    .Input("co_grad: T") TFRNN_BLOCK_LSTM_GRAD_OUTPUTS
    .Attr("use_peephole: bool")
    .Attr("cell_clip: float")
    .Attr("gate_order: {'icfo', 'ifco'}")
    .Attr(kBlockTypes)
    .SetShapeFn([](InferenceContext* c) { return SequenceGradShape(c, 5); })
    .Doc(R"doc(Exact gradient of the LSTM block ops with respect to all seven outputs.)doc");

}  // namespace tfrnn
