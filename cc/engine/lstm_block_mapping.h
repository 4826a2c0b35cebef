// The LSTM block ops mapped onto the stacked-RNN engine, written once for both devices:
// BlockLSTM(V2) and BlockLSTMGrad(V2) (and the exact-gradient op) run as one layer of the
// engine (LstmBlockRnnSpec, types.h). w [I+H, 4H] is W = w[:I] and R = w[I:] (weights_xw), b
// the input bias and forget_bias the recurrent bias of f, the gate activations, c and tanh(c)
// the caller's [T, B, H] planes (act_ld = H), h the layer output, seq_len_max steps; the rest of
// the T steps is zero.
//
// The device comes in as an adapter `Dev` (lstm_cpu.cc for the CPU engine, cc/gpu/lstm_gpu.cu
// for the CUDA engine) with
//   Status, Layer                     the engine's status and layer-pointer types;
//   Zero(p, n), Copy(dst, src, n), Fill(p, n, float v) -> Status, on the device's memory;
//   CarveFwd(s) -> buffers with gx, peep, br, hn, cn; CarveBwd(s) -> buffers with peep, dpeep,
//     zeros [2, B, H], both from the workspace the adapter was given;
//   LayerForward(s, ly, ra, w, a), LayerBackward(s, ly, ra, w, a) -> Status: the engine's layer
//     pass over the filled layer pointers and arguments.
// No device headers: this compiles under g++ and nvcc alike.
#ifndef TF_RNN_OPS_CC_ENGINE_LSTM_BLOCK_MAPPING_H_
#define TF_RNN_OPS_CC_ENGINE_LSTM_BLOCK_MAPPING_H_

#include "cc/engine/types.h"

namespace tfrnn {

// The status of an engine that cannot fail (the CPU engine): always ok.
struct AlwaysOk {
  static AlwaysOk Ok() { return {}; }
  bool ok() const { return true; }
};

#define TFRNN_MAPPING_TRY(expr)   \
  do {                            \
    auto _st = (expr);            \
    if (!_st.ok()) return _st;    \
  } while (0)

// The engine's peephole vector [4H] in block order: wci, wcf, wco at i, f, o; zero at c'.
template <typename Dev, typename A>
typename Dev::Status PackLstmPeephole(Dev& dev, const RnnSpec& s, const A* wci, const A* wcf,
                                      const A* wco, A* p) {
  const Index H = s.H;
  TFRNN_MAPPING_TRY(dev.Zero(p, 4 * H));
  TFRNN_MAPPING_TRY(dev.Copy(p + s.gate_pos[0] * H, wci, H));
  TFRNN_MAPPING_TRY(dev.Copy(p + s.gate_pos[1] * H, wcf, H));
  return dev.Copy(p + s.gate_pos[3] * H, wco, H);
}

// The engine's peephole gradient [4H] into the three [H] outputs; zeros where dp is null (no
// peephole).
template <typename Dev, typename A>
typename Dev::Status UnpackLstmPeepholeGrad(Dev& dev, const RnnSpec& s, const A* dp,
                                            A* wci_grad, A* wcf_grad, A* wco_grad) {
  const Index H = s.H;
  A* const grads[3] = {wci_grad, wcf_grad, wco_grad};
  const int gate[3] = {0, 1, 3};
  for (int k = 0; k < 3; ++k) {
    if (grads[k] == nullptr) continue;  // no weight gradients (LstmBwdArgs::w_grad)
    TFRNN_MAPPING_TRY(dp == nullptr ? dev.Zero(grads[k], H)
                                    : dev.Copy(grads[k], dp + s.gate_pos[gate[k]] * H, H));
  }
  return Dev::Status::Ok();
}

// The engine inputs a block op's forward and backward share: x, the initial states and the
// peephole vector (RnnArgs: RnnFwdArgs or RnnBwdArgs).
template <typename BlockArgs, typename A, typename RnnArgs>
void SetLstmBlockInputs(const BlockArgs& a, const A* peep, RnnArgs* ra) {
  ra->x = a.x;
  ra->h0 = a.h_prev;
  ra->c0 = a.cs_prev;
  ra->peephole = peep;
}

template <typename Dev, typename A>
typename Dev::Status LstmBlockForward(Dev& dev, const LstmCellSpec& c, const LstmFwdArgs<A>& a) {
  const Index steps = a.seq_len_max, B = a.B, H = a.H, BH = B * H;
  if (steps > 0 && B > 0) {
    const RnnSpec s = LstmBlockRnnSpec(c, steps, B, a.I, H);
    const auto w = dev.CarveFwd(s);
    TFRNN_MAPPING_TRY(dev.Zero(w.br, 4 * H));
    TFRNN_MAPPING_TRY(dev.Fill(w.br + s.gate_pos[1] * H, H, c.forget_bias));
    if (c.use_peephole) TFRNN_MAPPING_TRY(PackLstmPeephole(dev, s, a.wci, a.wcf, a.wco, w.peep));
    typename Dev::Layer ly;
    SetLstmBlockLayer(s, a.w, a.b, w.br, a.i, a.f, a.ci, a.o, a.cs, a.co, &ly);
    ly.gx = w.gx;
    RnnFwdArgs<A> ra;
    SetLstmBlockInputs(a, w.peep, &ra);
    ra.y = a.h;
    ra.hn = w.hn;
    ra.cn = w.cn;
    TFRNN_MAPPING_TRY(dev.LayerForward(s, ly, ra, w, a));
  }
  // Steps past seq_len_max (0 <= seq_len_max <= T, checked by the callers): all seven outputs
  // are zero.
  A* const outs[7] = {a.i, a.cs, a.f, a.o, a.ci, a.co, a.h};
  for (A* out : outs) TFRNN_MAPPING_TRY(dev.Zero(out + steps * BH, (a.T - steps) * BH));
  return Dev::Status::Ok();
}

template <typename Dev, typename A>
typename Dev::Status LstmBlockBackward(Dev& dev, const LstmCellSpec& c,
                                       const LstmBwdArgs<A>& a) {
  const Index T = a.T, B = a.B, I = a.I, H = a.H, G = 4 * H, BH = B * H;
  const Index steps = a.seq_len_max;
  if (a.x_grad != nullptr) {  // (null: no input gradient, RnnBwdArgs::dx)
    TFRNN_MAPPING_TRY(dev.Zero(a.x_grad + steps * B * I, (T - steps) * B * I));  // past them: 0
  }
  RnnSpec s = LstmBlockRnnSpec(c, steps, B, I, H);
  if (steps == 0 || B == 0) {
    TFRNN_MAPPING_TRY(dev.Zero(a.cs_prev_grad, BH));
    TFRNN_MAPPING_TRY(dev.Zero(a.h_prev_grad, BH));
    if (a.w_grad != nullptr) {
      TFRNN_MAPPING_TRY(dev.Zero(a.w_grad, (I + H) * G));
      TFRNN_MAPPING_TRY(dev.Zero(a.b_grad, G));
    }
    return UnpackLstmPeepholeGrad(dev, s, static_cast<const A*>(nullptr), a.wci_grad,
                                  a.wcf_grad, a.wco_grad);
  }
  s.exact_clip_grad = a.exact_clip_grad;
  const auto w = dev.CarveBwd(s);
  TFRNN_MAPPING_TRY(dev.Zero(w.zeros, 2 * BH));
  if (c.use_peephole) TFRNN_MAPPING_TRY(PackLstmPeephole(dev, s, a.wci, a.wcf, a.wco, w.peep));
  typename Dev::Layer ly;
  SetLstmBlockLayer(s, a.w, static_cast<const A*>(nullptr), static_cast<const A*>(nullptr), a.i,
                    a.f, a.ci, a.o, a.cs, a.co, &ly);
  ly.hseq = a.h;  // h_prev of step t > 0 is h[t-1]
  ly.dW = a.w_grad;  // null: no weight gradients (w_grad, wci/wcf/wco_grad, b_grad null)
  ly.dR = a.w_grad != nullptr ? a.w_grad + I * G : nullptr;
  ly.dbW = a.b_grad;
  RnnBwdArgs<A> ra;
  SetLstmBlockInputs(a, w.peep, &ra);
  ra.dy = a.h_grad;
  ra.dhn = w.zeros;  // the block ops have no final-state outputs
  ra.dcn = w.zeros + BH;
  ra.dx = a.x_grad;
  ra.dh0 = a.h_prev_grad;
  ra.dc0 = a.cs_prev_grad;
  ra.dpeephole = w.dpeep;
  ra.dc_seq = a.cs_grad;
  ra.dact[0] = a.i_grad;
  ra.dact[1] = a.f_grad;
  ra.dact[2] = a.ci_grad;
  ra.dact[3] = a.o_grad;
  ra.dco = a.co_grad;
  TFRNN_MAPPING_TRY(dev.LayerBackward(s, ly, ra, w, a));
  return UnpackLstmPeepholeGrad(dev, s, c.use_peephole ? w.dpeep : nullptr, a.wci_grad,
                                a.wcf_grad, a.wco_grad);
}

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_ENGINE_LSTM_BLOCK_MAPPING_H_
