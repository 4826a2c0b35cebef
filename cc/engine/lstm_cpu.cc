// The LSTM block ops' face of the stacked-RNN engine (see lstm.h for their equations and
// layouts): LSTMBlockCell(Grad), BlockLSTM(V2), BlockLSTMGrad(V2) and the exact-gradient op run
// as one layer of rnn_cpu.cc (LstmBlockRnnSpec, types.h): w [I+H, 4H] is W = w[:I] and
// R = w[I:] (weights_xw), b the input bias and forget_bias the recurrent bias of f, the gate
// activations and c, tanh(c), h the caller's [T, N, H] planes, T = seq_len_max steps.
#include <algorithm>
#include <vector>

#include "cc/engine/lstm.h"
#include "cc/engine/packed_gemm.h"
#include "cc/engine/rnn_cpu_common.h"

namespace tfrnn {
namespace {

using namespace rnn_cpu;  // NOLINT

// The engine layer of a block op (SetLstmBlockLayer, types.h); its pre-activations in gx.
template <typename A>
Layer<A> BlockLayer(const RnnSpec& s, const A* w, const A* b, const A* br, A* gx, const A* i,
                    const A* f, const A* ci, const A* o, const A* cs, const A* co) {
  Layer<A> ly;
  SetLstmBlockLayer(s, w, b, br, i, f, ci, o, cs, co, &ly);
  ly.gx = gx;
  ly.gx_scratch = true;
  return ly;
}

// The engine's peephole vector [4H] in block order: wci, wcf, wco at i, f, o; zero at c'.
template <typename A>
void PackPeephole(const RnnSpec& s, const A* wci, const A* wcf, const A* wco, A* p) {
  const Index H = s.N;
  std::fill_n(p, 4 * H, A(0));
  std::copy_n(wci, H, p + s.gate_pos[0] * H);
  std::copy_n(wcf, H, p + s.gate_pos[1] * H);
  std::copy_n(wco, H, p + s.gate_pos[3] * H);
}

// The engine's peephole gradient [4H] into the three [H] outputs (zeros without peephole).
template <typename A>
void UnpackPeepholeGrad(const CpuDevice& d, const RnnSpec& s, const A* dp, A* wci_grad,
                        A* wcf_grad, A* wco_grad) {
  const Index H = s.N;
  if (!s.peephole) {
    for (A* g : {wci_grad, wcf_grad, wco_grad}) Zero(d, g, H);
    return;
  }
  std::copy_n(dp + s.gate_pos[0] * H, H, wci_grad);
  std::copy_n(dp + s.gate_pos[1] * H, H, wcf_grad);
  std::copy_n(dp + s.gate_pos[3] * H, H, wco_grad);
}

}  // namespace

template <typename A>
void LstmForward(const CpuDevice& d, const LstmCellSpec& c, const LstmFwdArgs<A>& a,
                 A* workspace) {
  const Index T = a.T, N = a.N, I = a.I, H = a.H, L = a.seq_len_max, G = 4 * H, NH = N * H;
  if (L > 0) {
    const RnnSpec s = LstmBlockRnnSpec(c, L, N, I, H);
    Carver<A> cv(workspace);
    const LstmFwdScratch<A> w = CarveLstmFwd(L, N, I, H, c.bf16, &cv);
    A* gx = w.gx;
    A* peep = w.peep;
    A* br = w.br;
    std::fill_n(br, G, A(0));
    std::fill_n(br + s.gate_pos[1] * H, H, static_cast<A>(c.forget_bias));
    if (c.use_peephole) PackPeephole<A>(s, a.wci, a.wcf, a.wco, peep);
    const Layer<A> ly = BlockLayer<A>(s, a.w, a.b, br, gx, a.i, a.f, a.ci, a.o, a.cs, a.co);
    RnnFwdArgs<A> ra;
    ra.x = a.x;
    ra.h0 = a.h_prev;
    ra.c0 = a.cs_prev;
    ra.y = a.h;
    ra.peephole = peep;
    if (L == 1) {
      // A single step (LSTMBlockCell, or seq_len_max 1): one product [x, h_prev]·w by
      // SmallGemm on w in place (packing would not pay for one product; w's I + H rows are
      // one matrix, so it streams once and the pool is woken at most once), then the
      // pointwise pass, whose final states are the outputs h and cs themselves.
      ra.hn = a.h;
      ra.cn = a.cs;
      A* xh = w.xh;
      for (Index n = 0; n < N; ++n) {
        std::copy_n(a.x + n * I, I, xh + n * (I + H));
        std::copy_n(a.h_prev + n * H, H, xh + n * (I + H) + I);
      }
      SmallGemm<A>(d, false, false, N, G, I + H, xh, I + H, a.w, G, gx, G, false);
      StepForward<A>(d, s, ly, ra, static_cast<const A*>(nullptr), a.h);
    } else {
      ra.hn = w.hn;
      ra.cn = w.cn;
      LayerForward<A>(d, s, 0, ly, a.x, ra, a.h, w.ws);
    }
  }
  // Steps past seq_len_max: all seven outputs are zero.
  const Index tail = (T - L) * NH, start = L * NH;
  for (A* q : {a.i, a.cs, a.f, a.o, a.ci, a.co, a.h}) Zero(d, q + start, tail);
}

template <typename A>
void LstmBackward(const CpuDevice& d, const LstmCellSpec& c, const LstmBwdArgs<A>& a,
                  A* workspace) {
  const Index T = a.T, N = a.N, I = a.I, H = a.H, L = a.seq_len_max, G = 4 * H, NH = N * H;
  Zero(d, a.x_grad + L * N * I, (T - L) * N * I);  // x_grad is zero past seq_len_max
  if (L == 0) {
    for (A* q : {a.cs_prev_grad, a.h_prev_grad}) Zero(d, q, NH);
    Zero(d, a.w_grad, (I + H) * G);
    Zero(d, a.b_grad, G);
    for (A* q : {a.wci_grad, a.wcf_grad, a.wco_grad}) Zero(d, q, H);
    return;
  }
  RnnSpec s = LstmBlockRnnSpec(c, L, N, I, H);
  s.exact_clip_grad = a.exact_clip_grad;
  Carver<A> cv(workspace);
  const LstmBwdScratch<A> scratch = CarveLstmBwd(L, N, H, &cv);
  const BwdBufs<A>& w = scratch.layer;
  A* peep = scratch.peep;
  A* dpeep = scratch.dpeep;
  A* zeros = scratch.zeros;  // the final-state gradients: [N, H] x 2
  Zero(d, zeros, 2 * NH);
  if (c.use_peephole) PackPeephole<A>(s, a.wci, a.wcf, a.wco, peep);
  Layer<A> ly = BlockLayer<A>(s, a.w, nullptr, nullptr, nullptr, a.i, a.f, a.ci, a.o, a.cs, a.co);
  ly.hseq = a.h;  // h_prev of step t > 0 is h[t-1]
  ly.dW = a.w_grad;
  ly.dR = a.w_grad + I * G;
  ly.dbW = a.b_grad;
  RnnBwdArgs<A> ra;
  ra.x = a.x;
  ra.h0 = a.h_prev;
  ra.c0 = a.cs_prev;
  ra.dy = a.h_grad;
  ra.dhn = zeros;
  ra.dcn = zeros + NH;
  ra.dx = a.x_grad;
  ra.dh0 = a.h_prev_grad;
  ra.dc0 = a.cs_prev_grad;
  ra.peephole = peep;
  ra.dpeephole = dpeep;
  ra.dc_seq = a.cs_grad;
  ra.dact[0] = a.i_grad;
  ra.dact[1] = a.f_grad;
  ra.dact[2] = a.ci_grad;
  ra.dact[3] = a.o_grad;
  ra.dco = a.co_grad;
  LayerBackward<A>(d, s, 0, ly, a.x, a.h_grad, ra, a.x_grad, false, w);
  UnpackPeepholeGrad<A>(d, s, dpeep, a.wci_grad, a.wcf_grad, a.wco_grad);
}

template <typename A>
void LstmCellBackward(const CpuDevice& d, const LstmCellSpec& c, const LstmCellBwdArgs<A>& a) {
  const Index N = a.N, H = a.H, G = 4 * H;
  const RnnSpec s = LstmBlockRnnSpec(c, 1, N, 0, H);
  std::vector<A> peep(c.use_peephole ? 2 * G : 0);
  if (c.use_peephole) PackPeephole<A>(s, a.wci, a.wcf, a.wco, peep.data());
  const Layer<A> ly = BlockLayer<A>(s, nullptr, nullptr, nullptr, nullptr, a.i, a.f, a.ci, a.o,
                                    a.cs, a.co);
  // No carries and no GEMMs: the gate gradients go straight to dgates (co is given, so the
  // step's gradient rows may be dgates itself), dL/dc_prev to cs_prev_grad.
  BwdBufs<A> w{};
  w.dgx = w.dhr = w.dhr_cur = a.dgates;
  w.dc = a.cs_prev_grad;
  Zero(d, a.cs_prev_grad, N * H);
  RnnBwdArgs<A> ra;
  ra.c0 = a.cs_prev;
  ra.dc_seq = a.cs_grad;
  ra.peephole = peep.data();
  ra.dpeephole = peep.data() + (c.use_peephole ? G : 0);
  StepBackward<A>(d, s, ly, ra, a.h_grad, w);
  UnpackPeepholeGrad<A>(d, s, ra.dpeephole, a.wci_grad, a.wcf_grad, a.wco_grad);
}

#define TFRNN_INSTANTIATE_LSTM(A)                                                         \
  template void LstmForward<A>(const CpuDevice&, const LstmCellSpec&, const LstmFwdArgs<A>&, \
                               A*);                                                        \
  template void LstmBackward<A>(const CpuDevice&, const LstmCellSpec&,                    \
                                const LstmBwdArgs<A>&, A*);                                \
  template void LstmCellBackward<A>(const CpuDevice&, const LstmCellSpec&,                \
                                    const LstmCellBwdArgs<A>&);
TFRNN_INSTANTIATE_LSTM(float)
TFRNN_INSTANTIATE_LSTM(double)
#undef TFRNN_INSTANTIATE_LSTM

}  // namespace tfrnn
