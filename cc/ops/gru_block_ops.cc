// Op registrations for the GRU block family under TfRnn>: stock inputs, outputs and attrs,
// T widened to {half, bfloat16, float, double}.
#include "absl/strings/str_cat.h"
#include "cc/ops/shape_util.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tfrnn {
namespace {

// Checks x, h_prev, w_ru, w_c, b_ru, b_c (and `acts` [B, H] inputs after them); returns the
// merged batch, input and cell sizes.
absl::Status GruShapes(InferenceContext* c, int acts, DimensionHandle* B, DimensionHandle* I,
                       DimensionHandle* H) {
  ShapeHandle x, h_prev, w_ru, w_c, b_ru, b_c;
  TF_RETURN_IF_ERROR(WithRanks(c, {{0, 2, "x", &x},
                                   {1, 2, "h_prev", &h_prev},
                                   {2, 2, "w_ru", &w_ru},
                                   {3, 2, "w_c", &w_c},
                                   {4, 1, "b_ru", &b_ru},
                                   {5, 1, "b_c", &b_c}}));
  *B = c->Dim(x, 0);
  *I = c->Dim(x, 1);
  *H = c->Dim(h_prev, 1);
  TFRNN_SHAPE_CHECK(c->Merge(*B, c->Dim(h_prev, 0), B), "h_prev");
  DimensionHandle h2;
  TFRNN_SHAPE_CHECK(c->Divide(c->Dim(w_ru, 1), 2, /*evenly_divisible=*/true, &h2), "w_ru");
  TFRNN_SHAPE_CHECK(c->Merge(*H, h2, H), "w_ru");
  TFRNN_SHAPE_CHECK(c->Divide(c->Dim(b_ru, 0), 2, /*evenly_divisible=*/true, &h2), "b_ru");
  TFRNN_SHAPE_CHECK(c->Merge(*H, h2, H), "b_ru");
  TFRNN_SHAPE_CHECK(c->Merge(*H, c->Dim(w_c, 1), H), "w_c");
  TFRNN_SHAPE_CHECK(c->Merge(*H, c->Dim(b_c, 0), H), "b_c");
  DimensionHandle ih, unused;
  TF_RETURN_IF_ERROR(c->Add(*I, *H, &ih));
  TFRNN_SHAPE_CHECK(c->Merge(ih, c->Dim(w_ru, 0), &unused), "w_ru");
  TFRNN_SHAPE_CHECK(c->Merge(ih, c->Dim(w_c, 0), &unused), "w_c");
  static const char* const kNames[] = {"r", "u", "c", "d_h", "r_grad", "u_grad", "c_grad"};
  for (int k = 6; k < 6 + acts; ++k) {
    ShapeHandle s;
    TFRNN_SHAPE_CHECK(c->WithRank(c->input(k), 2, &s), kNames[k - 6]);
    TFRNN_SHAPE_CHECK(c->Merge(*B, c->Dim(s, 0), B), kNames[k - 6]);
    TFRNN_SHAPE_CHECK(c->Merge(*H, c->Dim(s, 1), H), kNames[k - 6]);
  }
  return absl::OkStatus();
}

absl::Status GruGradShape(InferenceContext* c, int acts) {
  DimensionHandle B, I, H, H2;
  TF_RETURN_IF_ERROR(GruShapes(c, acts, &B, &I, &H));
  TF_RETURN_IF_ERROR(c->Multiply(H, 2, &H2));
  c->set_output(0, c->Matrix(B, I));
  c->set_output(1, c->Matrix(B, H));
  c->set_output(2, c->Matrix(B, H));
  c->set_output(3, c->Matrix(B, H2));
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("TfRnn>GRUBlockCell")
    .Input("x: T")
    .Input("h_prev: T")
    .Input("w_ru: T")
    .Input("w_c: T")
    .Input("b_ru: T")
    .Input("b_c: T")
    .Output("r: T")
    .Output("u: T")
    .Output("c: T")
    .Output("h: T")
    .Attr(kBlockTypes)
    .SetShapeFn([](InferenceContext* c) {
      DimensionHandle B, I, H;
      TF_RETURN_IF_ERROR(GruShapes(c, 0, &B, &I, &H));
      for (int k = 0; k < 4; ++k) c->set_output(k, c->Matrix(B, H));
      return absl::OkStatus();
    })
    .Doc(R"doc(One GRU step (reset before the recurrent product), as tf.raw_ops.GRUBlockCell.)doc");

#define TFRNN_GRU_GRAD_INPUTS \
  .Input("x: T")              \
      .Input("h_prev: T")     \
      .Input("w_ru: T")       \
      .Input("w_c: T")        \
      .Input("b_ru: T")       \
      .Input("b_c: T")        \
      .Input("r: T")          \
      .Input("u: T")          \
      .Input("c: T")          \
      .Input("d_h: T")

#define TFRNN_GRU_GRAD_OUTPUTS \
  .Output("d_x: T")            \
      .Output("d_h_prev: T")   \
      .Output("d_c_bar: T")    \
      .Output("d_r_bar_u_bar: T")

REGISTER_OP("TfRnn>GRUBlockCellGrad") TFRNN_GRU_GRAD_INPUTS TFRNN_GRU_GRAD_OUTPUTS
    .Attr(kBlockTypes)
    .SetShapeFn([](InferenceContext* c) { return GruGradShape(c, 4); })
    .Doc(R"doc(Backward of one GRU step, as tf.raw_ops.GRUBlockCellGrad.)doc");

// Not a stock op: GRUBlockCellGrad that also takes the gradients of the r, u and c outputs,
// used by the registered gradient of TfRnn>GRUBlockCell.
REGISTER_OP("TfRnn>GRUBlockCellGradExact") TFRNN_GRU_GRAD_INPUTS
    .Input("r_grad: T")
    .Input("u_grad: T")
    .Input("c_grad: T") TFRNN_GRU_GRAD_OUTPUTS
    .Attr(kBlockTypes)
    .SetShapeFn([](InferenceContext* c) { return GruGradShape(c, 7); })
    .Doc(R"doc(Exact gradient of GRUBlockCell with respect to all four outputs.)doc");

}  // namespace tfrnn
