// What TfRnn>KerasRNN / KerasRNNBackprop (the Keras layers' ops, cc/ops/keras_rnn_ops.cc) add
// to the cuDNN semantics: the Keras activations, GRU reset_after = false, pre-projected input,
// and the per-gate recurrent mask (Keras recurrent dropout), applied to the RnnSpec.
#ifndef TF_RNN_OPS_CC_KERNELS_KERAS_RNN_EXTRAS_H_
#define TF_RNN_OPS_CC_KERNELS_KERAS_RNN_EXTRAS_H_

#include <string>
#include <utility>

#include "cc/kernels/kernel_util.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tfrnn {

struct KerasExtras {
  bool on = false;  // the op is a Keras one
  RnnAct act = RnnAct::kTanh, rec_act = RnnAct::kSigmoid;
  bool reset_after = true, preprojected = false;

  static absl::Status ParseAct(const std::string& op, const char* attr, const std::string& name,
                               RnnAct* out) {
    static const std::pair<const char*, RnnAct> kActs[] = {
        {"tanh", RnnAct::kTanh},
        {"sigmoid", RnnAct::kSigmoid},
        {"relu", RnnAct::kRelu},
        {"linear", RnnAct::kNone},
        {"hard_sigmoid", RnnAct::kKerasHardSigmoid}};
    if (LookupName(kActs, name, out)) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": attr ", attr, " must be tanh, sigmoid, relu, linear or hard_sigmoid, got '", name,
        "'"));
  }

  absl::Status Read(tensorflow::OpKernelConstruction* c) {
    on = c->HasAttr("recurrent_activation");
    if (!on) return absl::OkStatus();
    const std::string op = c->def().op();
    std::string a, r;
    TF_RETURN_IF_ERROR(c->GetAttr("activation", &a));
    TF_RETURN_IF_ERROR(c->GetAttr("recurrent_activation", &r));
    TF_RETURN_IF_ERROR(ParseAct(op, "activation", a, &act));
    TF_RETURN_IF_ERROR(ParseAct(op, "recurrent_activation", r, &rec_act));
    TF_RETURN_IF_ERROR(c->GetAttr("reset_after", &reset_after));
    TF_RETURN_IF_ERROR(c->GetAttr("preprojected", &preprojected));
    return absl::OkStatus();
  }

  // Before the size checks (the params count depends on preprojected). `x_shape` names the
  // input's shape in errors.
  absl::Status Apply(const std::string& op, const std::string& x_shape, RnnSpec* s) const {
    if (!on) return absl::OkStatus();
    if (s->mode == RnnMode::kLstm) {
      s->gate_act[0] = s->gate_act[1] = s->gate_act[3] = rec_act;  // i, f, o
      s->gate_act[2] = act;                                        // cell input
      s->cell_act = act;
    } else if (s->mode == RnnMode::kGru) {
      s->gate_act[0] = s->gate_act[1] = rec_act;  // r, z
      s->gate_act[2] = act;                       // candidate
      s->gru_reset_before = !reset_after;
    }
    if (preprojected) {
      const int64_t per = s->D * RnnK(*s);
      if (s->I % per != 0 || s->I / per != s->H) {
        return absl::InvalidArgumentError(absl::StrCat(
            op, ": with preprojected the input must hold the input projections, last "
                "dimension gates * units = ",
            RnnK(*s), " * ", s->H, ", got input ", x_shape));
      }
      s->preprojected = true;
    }
    return absl::OkStatus();
  }

  // After the size checks: recurrent_mask m, [batch, dir · K · num_units] or [0] (none);
  // sets s->has_mask when there is one.
  absl::Status MaskShape(const std::string& op, const TensorShape& m, RnnSpec* s) const {
    if (!on) return absl::OkStatus();
    if (m.dims() == 1 && m.dim_size(0) == 0) return absl::OkStatus();
    const int64_t cols = s->D * RnnK(*s) * s->H;
    if (m.dims() != 2 || m.dim_size(0) != s->B || m.dim_size(1) != cols) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": recurrent_mask must have shape [batch, gates * units] = [", s->B, ", ", cols,
          "] or [0] (no mask), got ", ShapeStr(m)));
    }
    if (s->L != 1 || s->P != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": recurrent_mask needs num_layers 1 and num_proj 0, got num_layers ", s->L,
          " and num_proj ", s->P));
    }
    s->has_mask = true;
    s->mask_gates = true;
    return absl::OkStatus();
  }
};

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_KERNELS_KERAS_RNN_EXTRAS_H_
