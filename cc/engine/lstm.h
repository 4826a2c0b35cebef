// The LSTM engine: one definition of the LSTM cell maths, forward and backward, over a
// time-major sequence, used by every LSTM op face (LSTMBlockCell(Grad), BlockLSTM(Grad),
// BlockLSTMV2, BlockLSTMGradV2, and the exact-gradient op behind the registered gradients).
// No TensorFlow includes.
//
// Notation: T time steps, N batch, I input size, H cell size ("C" in TF's docs).
// Pre-activation gate rows are [N, 4H]; the four H-wide blocks sit where `order` says:
//
//     gates row:  | block 0 | block 1 | block 2 | block 3 |
//     ICFO:       |    i    |   ci    |    f    |    o    |   BlockLSTM, LSTMBlockCell
//     IFCO:       |    i    |    f    |   ci    |    o    |   BlockLSTMV2, Keras, cuDNN
//
// Forward, per step (xh = [x_t, h_{t-1}], w = [I+H, 4H] with rows 0..I-1 for x):
//     gates = xh · w + b
//     i  = σ(gates_i + [peephole] cs_{t-1} ⊙ wci)
//     ci = tanh(gates_c)
//     f  = σ(gates_f + forget_bias + [peephole] cs_{t-1} ⊙ wcf)
//     cs = clip(i ⊙ ci + f ⊙ cs_{t-1}, ±cell_clip)        (no clip when cell_clip <= 0)
//     co = tanh(cs)
//     o  = σ(gates_o + [peephole] cs ⊙ wco)
//     h  = o ⊙ co
// The input projection x·w[0:I] is one GEMM over all steps; each step adds h_{t-1}·w[I:].
// Steps t >= seq_len_max produce zeros in all seven outputs.
//
// Backward: one pointwise pass and one recurrent GEMM per step (descending t); after the loop
// x_grad and w_grad are single GEMMs over all steps, b and peephole gradients reductions.
#ifndef TF_RNN_OPS_CC_ENGINE_LSTM_H_
#define TF_RNN_OPS_CC_ENGINE_LSTM_H_

#include "cc/engine/cpu_device.h"

namespace tfrnn {

// Block index of each gate within a 4H row.
struct LstmGateOrder {
  int i, c, f, o;
};
constexpr LstmGateOrder kIcfo = {0, 1, 2, 3};
constexpr LstmGateOrder kIfco = {0, 2, 1, 3};

struct LstmCellSpec {
  LstmGateOrder order = kIcfo;
  float forget_bias = 0.f;
  float cell_clip = 0.f;   // <= 0: no clipping
  bool use_peephole = false;
};

// Forward over a time-major sequence. Every pointer is dense row-major.
template <typename A>
struct LstmFwdArgs {
  Index T = 0, N = 0, I = 0, H = 0;
  Index seq_len_max = 0;    // steps actually computed, 0 <= seq_len_max <= T
  const A* x = nullptr;        // [T, N, I]
  const A* cs_prev = nullptr;  // [N, H]
  const A* h_prev = nullptr;   // [N, H]
  const A* w = nullptr;        // [I+H, 4H]
  const A* wci = nullptr;      // [H]   (read only with use_peephole)
  const A* wcf = nullptr;      // [H]
  const A* wco = nullptr;      // [H]
  const A* b = nullptr;        // [4H]
  // Outputs, [T, N, H] each.
  A *i = nullptr, *cs = nullptr, *f = nullptr, *o = nullptr, *ci = nullptr, *co = nullptr,
    *h = nullptr;
};

// Elements of type A of scratch the forward needs (the gate pre-activations of all steps).
Index LstmFwdWorkspaceSize(Index seq_len_max, Index N, Index H);

template <typename A>
void LstmForward(const CpuDevice& d, const LstmCellSpec& spec, const LstmFwdArgs<A>& a,
                 A* workspace);

// Backward over a sequence (BlockLSTMGrad semantics, plus optional extras).
template <typename A>
struct LstmBwdArgs {
  Index T = 0, N = 0, I = 0, H = 0;
  Index seq_len_max = 0;
  const A* x = nullptr;        // [T, N, I]
  const A* cs_prev = nullptr;  // [N, H]
  const A* h_prev = nullptr;   // [N, H]
  const A* w = nullptr;        // [I+H, 4H]
  const A* wci = nullptr;      // [H]
  const A* wcf = nullptr;
  const A* wco = nullptr;
  // Forward activations, [T, N, H] each.
  const A *i = nullptr, *cs = nullptr, *f = nullptr, *o = nullptr, *ci = nullptr,
          *co = nullptr, *h = nullptr;
  // Incoming gradients dL/dcs[t], dL/dh[t], [T, N, H].
  const A* cs_grad = nullptr;
  const A* h_grad = nullptr;
  // Optional incoming gradients of the other five outputs, [T, N, H] or null (= zero).
  // The raw *Grad ops ignore them (stock semantics); the registered gradient uses them.
  const A *i_grad = nullptr, *f_grad = nullptr, *o_grad = nullptr, *ci_grad = nullptr,
          *co_grad = nullptr;
  // When true and spec.cell_clip > 0, the gradient through a clipped cell value is zero (the
  // exact derivative of clip). When false the clip is straight-through (stock *Grad ops).
  bool exact_clip_grad = false;
  // Outputs.
  A* x_grad = nullptr;        // [T, N, I]
  A* cs_prev_grad = nullptr;  // [N, H]
  A* h_prev_grad = nullptr;   // [N, H]
  A* w_grad = nullptr;        // [I+H, 4H]
  A* wci_grad = nullptr;      // [H]
  A* wcf_grad = nullptr;
  A* wco_grad = nullptr;
  A* b_grad = nullptr;        // [4H]
};

// Elements of scratch the backward needs (the gate gradients of all steps).
Index LstmBwdWorkspaceSize(Index seq_len_max, Index N, Index H);

template <typename A>
void LstmBackward(const CpuDevice& d, const LstmCellSpec& spec, const LstmBwdArgs<A>& a,
                  A* workspace);

// One step of the pointwise backward with no carries and no GEMMs (LSTMBlockCellGrad):
// writes dgates [N, 4H] (dicfo), cs_prev_grad [N, H], and peephole grads [H] (zeros when
// spec.use_peephole is false). Reads every input before writing any output, so outputs may
// not alias inputs anyway: the face allocates fresh outputs.
template <typename A>
struct LstmCellBwdArgs {
  Index N = 0, H = 0;
  const A *cs_prev = nullptr, *wci = nullptr, *wcf = nullptr, *wco = nullptr;
  const A *i = nullptr, *cs = nullptr, *f = nullptr, *o = nullptr, *ci = nullptr,
          *co = nullptr;
  const A *cs_grad = nullptr, *h_grad = nullptr;
  A *cs_prev_grad = nullptr, *dgates = nullptr, *wci_grad = nullptr, *wcf_grad = nullptr,
    *wco_grad = nullptr;
};

template <typename A>
void LstmCellBackward(const CpuDevice& d, const LstmCellSpec& spec,
                      const LstmCellBwdArgs<A>& a);

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_ENGINE_LSTM_H_
