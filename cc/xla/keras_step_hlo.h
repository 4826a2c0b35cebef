// One step of TfRnn>KerasRNN in HLO, for the XLA kernel (keras_rnn_xla.cc): a streaming call
// (one time step of a few rows, at inference) compiles to two dots and the step's pointwise
// code, which XLA fuses with the graph around it, instead of a custom call into the engine.
// At one step of one row the engine's product is a small part of the call; what a custom
// call adds (its thunk, the checks of its buffers, a call across the library boundary)
// is not (docs/PERFORMANCE_KERAS.md, "The streaming step under XLA").
//
// The step's semantics are the engine's (cc/engine/rnn.h; rnn_cpu.cc PointwiseRows) for
// the Keras op's problems: one layer and direction, no projection, peephole, clip, mask,
// sequence lengths or pre-projected input. Logical gate q lives in block gate_pos[q] of the
// K·H columns; bias is [K·H] (input bias only) or [2, K·H] (input bias, recurrent bias).
#ifndef TF_RNN_OPS_CC_XLA_KERAS_STEP_HLO_H_
#define TF_RNN_OPS_CC_XLA_KERAS_STEP_HLO_H_

#include "cc/engine/types.h"
#include "xla/hlo/builder/lib/constants.h"
#include "xla/hlo/builder/xla_builder.h"

namespace tfrnn {

// Whether a KerasRNN forward of `s` (has_lengths: sequence_lengths is not [0]) compiles to
// HLO: one step of the rows the engine's unpacked road takes (types.h RnnFwdUnpacked), not
// training (no reserve), nothing beyond the plain cell.
inline bool KerasStepInHlo(const RnnSpec& s, bool has_lengths) {
  return !s.training && s.T == 1 && s.B >= 1 && RnnFwdUnpacked(s) && !has_lengths &&
         !s.preprojected && s.L == 1 && s.D == 1 && !s.peephole && s.cell_clip <= 0.f &&
         !s.skip_input && !s.reverse;
}

// The step's new h (and c: lstm), in the compute type of the operands.
struct HloStep {
  xla::XlaOp h, c;
};

namespace keras_step {

// clamp(slope · x + 0.5, 0, 1)
inline xla::XlaOp HardSigmoid(xla::XlaOp x, double slope) {
  const xla::XlaOp y = x * xla::ScalarLike(x, slope) + xla::ScalarLike(x, 0.5);
  return xla::Clamp(xla::ScalarLike(x, 0.0), y, xla::ScalarLike(x, 1.0));
}

inline xla::XlaOp Activate(RnnAct act, xla::XlaOp x) {
  switch (act) {
    case RnnAct::kNone:
      return x;
    case RnnAct::kRelu:
      return xla::Max(x, xla::ScalarLike(x, 0.0));
    case RnnAct::kTanh:
      return xla::Tanh(x);
    case RnnAct::kSigmoid:
      return xla::Logistic(x);
    case RnnAct::kHardSigmoid:
      return HardSigmoid(x, 0.2);
    case RnnAct::kKerasHardSigmoid:
      return HardSigmoid(x, 1.0 / 6.0);
  }
  return x;
}

// Columns [k·H, (k+1)·H) of a [B, K·H] value.
inline xla::XlaOp Block(xla::XlaOp v, Index k, Index H) {
  return xla::SliceInDim(v, k * H, (k + 1) * H, 1, 1);
}

}  // namespace keras_step

// x [B, I], h0 [B, H], c0 [B, H] (lstm), kernel [I, K·H], recurrent [H, K·H], bias [K·H] or
// [2, K·H] (two_biases), all in one floating type; s passes KerasStepInHlo.
inline HloStep EmitKerasStep(const RnnSpec& s, bool two_biases, xla::XlaOp x, xla::XlaOp h0,
                             xla::XlaOp c0, xla::XlaOp kernel, xla::XlaOp recurrent,
                             xla::XlaOp bias) {
  using keras_step::Activate;
  using keras_step::Block;
  using xla::ScalarLike;
  const Index H = s.H, KH = RnnK(s) * H;
  xla::XlaOp b_in = bias, b_rec;
  if (two_biases) {
    b_in = xla::Reshape(xla::SliceInDim(bias, 0, 1, 1, 0), {KH});
    b_rec = xla::Reshape(xla::SliceInDim(bias, 1, 2, 1, 0), {KH});
  }
  // [B, K·H] input part (bias added) and recurrent part (recurrent bias added).
  const xla::XlaOp gx = xla::Add(xla::Dot(x, kernel), b_in, {1});
  auto rec = [&](xla::XlaOp hr, xla::XlaOp r) {
    const xla::XlaOp p = xla::Dot(hr, r);
    return two_biases ? xla::Add(p, b_rec, {1}) : p;
  };
  const int* pos = s.gate_pos;
  switch (s.mode) {
    case RnnMode::kLstm: {
      const xla::XlaOp pre = gx + rec(h0, recurrent);
      auto gate = [&](int q) { return Activate(s.gate_act[q], Block(pre, pos[q], H)); };
      const xla::XlaOp c = gate(1) * c0 + gate(0) * gate(2);
      return {gate(3) * Activate(s.cell_act, c), c};
    }
    case RnnMode::kGru: {
      const Index pr = pos[0], pz = pos[1], pn = pos[2];
      const xla::XlaOp hr = rec(h0, recurrent);  // every block; reset-before reads r and z's
      const xla::XlaOp r =
          Activate(s.gate_act[0], Block(gx, pr, H) + Block(hr, pr, H));
      const xla::XlaOp z =
          Activate(s.gate_act[1], Block(gx, pz, H) + Block(hr, pz, H));
      xla::XlaOp n;
      if (s.gru_reset_before) {  // n = act(x·W_n + b_n + (r ⊙ h)·R_n + br_n)
        xla::XlaOp p = xla::Dot(r * h0, Block(recurrent, pn, H));
        if (two_biases) p = xla::Add(p, xla::SliceInDim(b_rec, pn * H, (pn + 1) * H, 1, 0), {1});
        n = Activate(s.gate_act[2], Block(gx, pn, H) + p);
      } else {
        n = Activate(s.gate_act[2], Block(gx, pn, H) + r * Block(hr, pn, H));
      }
      const xla::XlaOp one = ScalarLike(z, 1.0);
      return {s.gru_z_new ? z * n + (one - z) * h0 : (one - z) * n + z * h0, xla::XlaOp()};
    }
    case RnnMode::kTanh:
      return {xla::Tanh(gx + rec(h0, recurrent)), xla::XlaOp()};
    case RnnMode::kRelu:
      return {xla::Max(gx + rec(h0, recurrent), ScalarLike(gx, 0.0)), xla::XlaOp()};
  }
  return {};
}

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_XLA_KERAS_STEP_HLO_H_
