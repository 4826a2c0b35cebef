// The GRU block cell's CPU adapter of the stacked-RNN engine (GRUBlockCell(Grad)):
// gru_cell_mapping.h maps the cell onto one reset-before gru step for both devices; this file
// gives it the workspace, SmallGemm (on w_ru and w_c in place: a single step of a few rows never
// waits for the pool) and the engine's StepForward / StepBackward. The recurrent products go
// straight into the pre-activation rows gx (the engine's hr is null).
#include "cc/engine/gru.h"

#include <algorithm>

#include "cc/engine/gru_cell_mapping.h"
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

template <typename A>
struct CpuFwdBufs {
  A *gx, *hr, *hrn, *rh, *bw, *br;
  Index hrn_ld;
  bool hr_acc, hrn_acc;
};

template <typename A>
struct CpuBwdBufs {
  A *dgx, *dhr, *dpn, *drh, *dx, *dh;
  Index dpn_ld;
};

// The CPU engine under gru_cell_mapping.h; carves the op's workspace.
template <typename A>
struct CpuGruCell {
  using Status = AlwaysOk;
  const CpuDevice& d;
  A* workspace;

  Status Zero(A* p, Index n) const {
    std::fill_n(p, n, A(0));
    return {};
  }
  Status Copy(A* dst, const A* src, Index n) const {
    std::copy_n(src, n, dst);
    return {};
  }
  Status Gemm(bool ta, bool tb, Index m, Index n, Index k, const A* a, Index lda, const A* b,
              Index ldb, A* c, Index ldc, bool accumulate) const {
    SmallGemm<A>(d, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, accumulate);
    return {};
  }

  CpuFwdBufs<A> CarveFwd(Index B, Index I, Index H) const {
    (void)I;
    Carver<A> cv(workspace);
    const GruCellFwdScratch<A> s = CarveGruCellFwd(B, H, &cv);
    // Both recurrent products are added into gx.
    return CpuFwdBufs<A>{s.gx, s.gx, s.gx + 2 * H, s.rh, s.bw, s.br, 3 * H, true, true};
  }
  Status StepForward(const GruCellFwdArgs<A>& a, const CpuFwdBufs<A>& w, StepPhase phase) const {
    const RnnSpec s = GruBlockRnnSpec(a.B, a.I, a.H);
    Layer<A> ly = CellLayer<A>(a.H, a.r, a.u, a.c, nullptr);
    ly.gx = w.gx;
    ly.aux = w.rh;
    ly.bW = w.bw;
    ly.bR = w.br;
    RnnFwdArgs<A> ra;
    ra.h0 = a.h_prev;
    ra.hn = a.h;
    rnn_cpu::StepForward<A>(d, s, ly, ra, static_cast<const A*>(nullptr), a.h, phase, w.rh);
    return {};
  }

  CpuBwdBufs<A> CarveBwd(Index B, Index I, Index H, const GruCellBwdArgs<A>& a) const {
    (void)I;
    Carver<A> cv(workspace);
    const GruCellBwdScratch<A> s = CarveGruCellBwd(B, H, &cv);
    // d_c_bar is the candidate block of the gate gradients; dx and dh are the outputs.
    return CpuBwdBufs<A>{s.dgx, s.dhr, s.dgx + 2 * H, s.dhm, a.d_x, a.d_h_prev, 3 * H};
  }
  Status StepBackward(const GruCellBwdArgs<A>& a, const CpuBwdBufs<A>& w, StepPhase phase) const {
    const RnnSpec s = GruBlockRnnSpec(a.B, a.I, a.H);
    BwdBufs<A> bw{};
    bw.dgx = w.dgx;
    bw.dhr = bw.dhr_cur = w.dhr;  // one step: the step's rows are the layer's rows
    bw.dhm = w.drh;
    bw.dh = w.dh;  // dL/dh_prev: the pointwise terms, then the products
    const Layer<A> ly = CellLayer<A>(a.H, a.r, a.u, a.c, a.h_prev);
    RnnBwdArgs<A> ra;
    ra.dact[0] = a.g_r;
    ra.dact[1] = a.g_u;
    ra.dact[2] = a.g_c;
    rnn_cpu::StepBackward<A>(d, s, ly, ra, a.d_h, bw, phase);
    return {};
  }
  Status SplitGates(const CpuBwdBufs<A>& w, const GruCellBwdArgs<A>& a) const {
    const Index H = a.H, G = 3 * H;
    for (Index b = 0; b < a.B; ++b) {
      std::copy_n(w.dgx + b * G, 2 * H, a.d_r_bar_u_bar + b * 2 * H);
      std::copy_n(w.dgx + b * G + 2 * H, H, a.d_c_bar + b * H);
    }
    return {};
  }
  Status FinishBackward(const GruCellBwdArgs<A>&, const CpuBwdBufs<A>&) const { return {}; }
};

}  // namespace

template <typename A>
void GruCellForward(const CpuDevice& d, const GruCellFwdArgs<A>& a, A* ws) {
  CpuGruCell<A> dev{d, ws};
  GruCellForwardOn(dev, a);
}

template <typename A>
void GruCellBackward(const CpuDevice& d, const GruCellBwdArgs<A>& a, A* ws) {
  CpuGruCell<A> dev{d, ws};
  GruCellBackwardOn(dev, a);
}

#define TFRNN_INSTANTIATE_GRU(A)                                                          \
  template void GruCellForward<A>(const CpuDevice&, const GruCellFwdArgs<A>&, A*);         \
  template void GruCellBackward<A>(const CpuDevice&, const GruCellBwdArgs<A>&, A*);
TFRNN_INSTANTIATE_GRU(float)
TFRNN_INSTANTIATE_GRU(double)
#undef TFRNN_INSTANTIATE_GRU

}  // namespace tfrnn
