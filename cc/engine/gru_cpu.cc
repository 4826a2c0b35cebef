// The GRU block cell's face of the stacked-RNN engine (GRUBlockCell(Grad); see types.h for the
// equations): one step of a reset-before gru (GruBlockRnnSpec), gates r, u, c in blocks 0, 1, 2
// of 3H columns. w_ru and w_c are two tensors, so the face computes the products itself
// (SmallGemm on them in place: a single step of a few rows never waits for the pool) and the
// engine's StepForward / StepBackward run the pointwise passes between them.
#include "cc/engine/gru.h"

#include <algorithm>

#include "cc/engine/packed_gemm.h"
#include "cc/engine/rnn_cpu_common.h"

namespace tfrnn {
namespace {

using namespace rnn_cpu;  // NOLINT

// The engine layer of the cell: activation planes r, u, c [B, H] (act_ld = H).
template <typename A>
Layer<A> CellLayer(Index H, const A* r, const A* u, const A* c, const A* h_prev) {
  Layer<A> ly;
  // The forward writes the planes; the backward only reads them.
  ly.act[0] = const_cast<A*>(r);
  ly.act[1] = const_cast<A*>(u);
  ly.act[2] = const_cast<A*>(c);
  ly.act_ld = H;
  ly.hprev = const_cast<A*>(h_prev);
  return ly;
}

}  // namespace

template <typename A>
void GruCellForward(const CpuDevice& d, const GruCellFwdArgs<A>& a, A* ws) {
  const Index B = a.B, I = a.I, H = a.H, G = 3 * H;
  const RnnSpec s = GruBlockRnnSpec(B, I, H);
  Carver<A> cv(ws);
  const GruCellFwdScratch<A> w = CarveGruCellFwd(B, H, &cv);
  A *gx = w.gx, *rh = w.rh, *bw = w.bw, *br = w.br;
  std::copy_n(a.b_ru, 2 * H, bw);
  std::copy_n(a.b_c, H, bw + 2 * H);
  std::fill_n(br, G, A(0));
  Layer<A> ly = CellLayer<A>(H, a.r, a.u, a.c, nullptr);
  ly.gx = gx;
  ly.aux = rh;
  ly.bW = bw;
  ly.bR = br;
  RnnFwdArgs<A> ra;
  ra.h0 = a.h_prev;
  ra.hn = a.h;
  SmallGemm<A>(d, false, false, B, 2 * H, I, a.x, I, a.w_ru, 2 * H, gx, G, false);
  SmallGemm<A>(d, false, false, B, H, I, a.x, I, a.w_c, H, gx + 2 * H, G, false);
  SmallGemm<A>(d, false, false, B, 2 * H, H, a.h_prev, H, a.w_ru + I * 2 * H, 2 * H, gx, G,
               true);
  // The recurrent products are in gx (hr null).
  StepForward<A>(d, s, ly, ra, static_cast<const A*>(nullptr), a.h, StepPhase::kBeforeProduct,
                 rh);
  SmallGemm<A>(d, false, false, B, H, H, rh, H, a.w_c + I * H, H, gx + 2 * H, G, true);
  StepForward<A>(d, s, ly, ra, static_cast<const A*>(nullptr), a.h, StepPhase::kAfterProduct,
                 rh);
}

template <typename A>
void GruCellBackward(const CpuDevice& d, const GruCellBwdArgs<A>& a, A* ws) {
  const Index B = a.B, I = a.I, H = a.H, G = 3 * H;
  const RnnSpec s = GruBlockRnnSpec(B, I, H);
  Carver<A> cv(ws);
  const GruCellBwdScratch<A> scratch = CarveGruCellBwd(B, H, &cv);
  BwdBufs<A> w{};
  w.dgx = scratch.dgx;
  w.dhr = w.dhr_cur = scratch.dhr;  // one step: the step's rows are the layer's rows
  w.dhm = scratch.dhm;
  w.dh = a.d_h_prev;          // dL/dh_prev: the pointwise terms, then the products
  std::fill_n(a.d_h_prev, B * H, A(0));
  const Layer<A> ly = CellLayer<A>(H, a.r, a.u, a.c, a.h_prev);
  RnnBwdArgs<A> ra;
  ra.dact[0] = a.g_r;
  ra.dact[1] = a.g_u;
  ra.dact[2] = a.g_c;
  StepBackward<A>(d, s, ly, ra, a.d_h, w, StepPhase::kBeforeProduct);
  // d_hr = d_c_bar · w_c[I:]ᵀ
  SmallGemm<A>(d, false, true, B, H, H, w.dgx + 2 * H, G, a.w_c + I * H, H, w.dhm, H, false);
  StepBackward<A>(d, s, ly, ra, a.d_h, w, StepPhase::kAfterProduct);
  for (Index b = 0; b < B; ++b) {
    std::copy_n(w.dgx + b * G, 2 * H, a.d_r_bar_u_bar + b * 2 * H);
    std::copy_n(w.dgx + b * G + 2 * H, H, a.d_c_bar + b * H);
  }
  // d_x = d_c_bar · w_c[:I]ᵀ + [d_r_bar, d_u_bar] · w_ru[:I]ᵀ
  // d_h_prev += [d_r_bar, d_u_bar] · w_ru[I:]ᵀ
  SmallGemm<A>(d, false, true, B, I, H, a.d_c_bar, H, a.w_c, H, a.d_x, I, false);
  SmallGemm<A>(d, false, true, B, I, 2 * H, a.d_r_bar_u_bar, 2 * H, a.w_ru, 2 * H, a.d_x, I,
               true);
  SmallGemm<A>(d, false, true, B, H, 2 * H, a.d_r_bar_u_bar, 2 * H, a.w_ru + I * 2 * H, 2 * H,
               a.d_h_prev, H, true);
}

#define TFRNN_INSTANTIATE_GRU(A)                                                          \
  template void GruCellForward<A>(const CpuDevice&, const GruCellFwdArgs<A>&, A*);         \
  template void GruCellBackward<A>(const CpuDevice&, const GruCellBwdArgs<A>&, A*);
TFRNN_INSTANTIATE_GRU(float)
TFRNN_INSTANTIATE_GRU(double)
#undef TFRNN_INSTANTIATE_GRU

}  // namespace tfrnn
