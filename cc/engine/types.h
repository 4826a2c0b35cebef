// Plain problem descriptions shared by the engine and its callers: no Eigen, no TensorFlow.
// See lstm.h for the equations and layouts.
#ifndef TF_RNN_OPS_CC_ENGINE_TYPES_H_
#define TF_RNN_OPS_CC_ENGINE_TYPES_H_

#include <cstddef>

namespace tfrnn {

using Index = std::ptrdiff_t;

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


// Elements of scratch (of the compute type) the forward needs: the gate pre-activations of
// all computed steps.
inline Index LstmFwdWorkspaceSize(Index seq_len_max, Index N, Index H) {
  return seq_len_max * N * 4 * H;
}

// Elements of scratch the backward needs: the gate gradients of all steps and a zero row.
inline Index LstmBwdWorkspaceSize(Index seq_len_max, Index N, Index H) {
  return seq_len_max * N * 4 * H + H;
}

// GRU cell with the reset applied before the recurrent product (GRUBlockCell, Keras
// reset_after=False):
//     [r_bar, u_bar] = [x, h_prev] · w_ru + b_ru            w_ru: [I+H, 2H], r block first
//     r = σ(r_bar), u = σ(u_bar)
//     c = tanh([x, h_prev ⊙ r] · w_c + b_c)                 w_c: [I+H, H]
//     h = u ⊙ h_prev + (1 - u) ⊙ c
template <typename A>
struct GruCellFwdArgs {
  Index N = 0, I = 0, H = 0;
  const A* x = nullptr;       // [N, I]
  const A* h_prev = nullptr;  // [N, H]
  const A* w_ru = nullptr;    // [I+H, 2H]
  const A* w_c = nullptr;     // [I+H, H]
  const A* b_ru = nullptr;    // [2H]
  const A* b_c = nullptr;     // [H]
  A *r = nullptr, *u = nullptr, *c = nullptr, *h = nullptr;  // [N, H] each
};

inline Index GruCellFwdWorkspaceSize(Index N, Index H) { return N * 2 * H + 2 * N * H; }

// Backward of one GRU step (GRUBlockCellGrad):
//     d_c_bar = (d_h ⊙ (1-u) + g_c) ⊙ (1 - c²)
//     d_u_bar = (d_h ⊙ (h_prev - c) + g_u) ⊙ u(1-u)
//     d_hr    = d_c_bar · w_c[I:]ᵀ
//     d_r_bar = (d_hr ⊙ h_prev + g_r) ⊙ r(1-r)
//     d_x     = d_c_bar · w_c[:I]ᵀ + [d_r_bar, d_u_bar] · w_ru[:I]ᵀ
//     d_h_prev = [d_r_bar, d_u_bar] · w_ru[I:]ᵀ + d_hr ⊙ r + d_h ⊙ u
// g_r, g_u, g_c are the gradients of the r, u, c outputs: optional (null = zero); the raw
// op ignores them like stock, the registered gradient passes them.
template <typename A>
struct GruCellBwdArgs {
  Index N = 0, I = 0, H = 0;
  const A *x = nullptr, *h_prev = nullptr, *w_ru = nullptr, *w_c = nullptr;
  const A *r = nullptr, *u = nullptr, *c = nullptr, *d_h = nullptr;
  const A *g_r = nullptr, *g_u = nullptr, *g_c = nullptr;
  A* d_x = nullptr;            // [N, I]
  A* d_h_prev = nullptr;       // [N, H]
  A* d_c_bar = nullptr;        // [N, H]
  A* d_r_bar_u_bar = nullptr;  // [N, 2H]
};

inline Index GruCellBwdWorkspaceSize(Index N, Index H) { return N * H; }

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_ENGINE_TYPES_H_
