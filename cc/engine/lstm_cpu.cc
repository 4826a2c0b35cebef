// The LSTM block ops' CPU adapter of the stacked-RNN engine: lstm_block_mapping.h maps
// LSTMBlockCell, BlockLSTM(V2), BlockLSTMGrad(V2) and the exact-gradient op onto one layer of
// rnn_cpu.cc for both devices; this file gives it the CPU's memory operations, workspace and
// layer passes (and keeps LSTMBlockCellGrad, a single pointwise step with no products).
#include <algorithm>
#include <vector>

#include "cc/engine/lstm.h"
#include "cc/engine/lstm_block_mapping.h"
#include "cc/engine/packed_gemm.h"
#include "cc/engine/rnn_cpu_common.h"

namespace tfrnn {
namespace {

using namespace rnn_cpu;  // NOLINT

// The CPU engine under lstm_block_mapping.h; carves the op's workspace.
template <typename A>
struct CpuLstmBlock {
  using Status = AlwaysOk;
  using Layer = rnn_cpu::Layer<A>;
  const CpuDevice& d;
  bool bf16;
  A* workspace;

  Status Zero(A* p, Index n) const {
    tfrnn::Zero(d, p, n);
    return {};
  }
  Status Copy(A* dst, const A* src, Index n) const {
    std::copy_n(src, n, dst);
    return {};
  }
  Status Fill(A* p, Index n, float v) const {
    std::fill_n(p, n, static_cast<A>(v));
    return {};
  }
  LstmFwdScratch<A> CarveFwd(const RnnSpec& s) const {
    Carver<A> cv(workspace);
    return CarveLstmFwd(s.T, s.B, s.I, s.H, bf16, &cv);
  }
  LstmBwdScratch<A> CarveBwd(const RnnSpec& s) const {
    Carver<A> cv(workspace);
    return CarveLstmBwd(s.T, s.B, s.I, s.H, &cv);
  }

  Status LayerForward(const RnnSpec& s, Layer ly, RnnFwdArgs<A> ra, const LstmFwdScratch<A>& w,
                      const LstmFwdArgs<A>& a) const {
    ly.gx_scratch = true;
    if (s.T > 1) {
      const Index n = TrainBatchBlocks(d, s);
      if (n > 1) {
        BlockRowsForward(s, ly, ra, w, a, n);
      } else {
        rnn_cpu::LayerForward<A>(d, s, 0, ly, a.x, ra, a.h, w.ws);
      }
      return {};
    }
    // A single step (LSTMBlockCell, or seq_len_max 1): one product [x, h_prev]·w by SmallGemm
    // on w in place (packing would not pay for one product; w's I + H rows are one matrix, so
    // it streams once and the pool is woken at most once), then the pointwise pass, whose
    // final states are the outputs h and cs themselves.
    const Index B = s.B, I = s.I, H = s.H, G = 4 * H;
    ra.hn = a.h;
    ra.cn = a.cs;
    for (Index b = 0; b < B; ++b) {
      std::copy_n(a.x + b * I, I, w.xh + b * (I + H));
      std::copy_n(a.h_prev + b * H, H, w.xh + b * (I + H) + I);
    }
    SmallGemm<A>(d, false, false, B, G, I + H, w.xh, I + H, a.w, G, w.gx, G, false);
    StepForward<A>(d, s, ly, ra, static_cast<const A*>(nullptr), a.h);
    return {};
  }
  // The layer in n batch blocks (workspace.h LstmBlockBatchBlocksMax), each on one thread,
  // its rows of the op's tensors in place (Layer::AtBlockRows), claimed through StepLoop.
  void BlockRowsForward(const RnnSpec& s, const Layer& ly, const RnnFwdArgs<A>& ra,
                        const LstmFwdScratch<A>& w, const LstmFwdArgs<A>& a, Index n) const {
    const Index B = s.B, H = s.H;
    const CpuDevice one(d.getPool(), 1);
    StepLoop(d, 1, n, 2.0 * double(s.T) * B / n * 4 * H * (s.I + H), [&](Index, Index i) {
      const RnnSpec bs = RnnBlockSpec(s, n, i);
      const Index b0 = RnnBatchBlockRow(B, n, i);
      Layer lb = ly;
      lb.AtBlockRows(b0, B, 4 * H, H, H);
      RnnFwdArgs<A> rb = ra;
      rb.h0 = ra.h0 + b0 * H;
      rb.c0 = ra.c0 + b0 * H;
      rb.hn = ra.hn + b0 * H;
      rb.cn = ra.cn + b0 * H;
      rnn_cpu::LayerForward<A>(one, bs, 0, lb, a.x + b0 * s.I, rb, a.h + b0 * H,
                               w.ws + RnnBlocksBefore(s, n, i, RnnBlockLayersSize));
    });
  }
  Status LayerBackward(const RnnSpec& s, const Layer& ly, const RnnBwdArgs<A>& ra,
                       const LstmBwdScratch<A>& w, const LstmBwdArgs<A>& a) const {
    rnn_cpu::LayerBackward<A>(d, s, 0, ly, a.x, a.h_grad, ra, a.x_grad, false, w.layer);
    return {};
  }
};

}  // namespace

template <typename A>
void LstmForward(const CpuDevice& d, const LstmCellSpec& c, const LstmFwdArgs<A>& a,
                 A* workspace) {
  CpuLstmBlock<A> dev{d, c.bf16, workspace};
  LstmBlockForward(dev, c, a);
}

template <typename A>
void LstmBackward(const CpuDevice& d, const LstmCellSpec& c, const LstmBwdArgs<A>& a,
                  A* workspace) {
  CpuLstmBlock<A> dev{d, c.bf16, workspace};
  LstmBlockBackward(dev, c, a);
}

template <typename A>
void LstmCellBackward(const CpuDevice& d, const LstmCellSpec& c, const LstmCellBwdArgs<A>& a) {
  const Index B = a.B, H = a.H, G = 4 * H;
  const RnnSpec s = LstmBlockRnnSpec(c, 1, B, 0, H);
  CpuLstmBlock<A> dev{d, c.bf16, nullptr};
  std::vector<A> peep(c.use_peephole ? 2 * G : 0);
  A* const dpeep = c.use_peephole ? peep.data() + G : nullptr;
  if (c.use_peephole) PackLstmPeephole(dev, s, a.wci, a.wcf, a.wco, peep.data());
  rnn_cpu::Layer<A> ly;
  SetLstmBlockLayer(s, static_cast<const A*>(nullptr), static_cast<const A*>(nullptr),
                    static_cast<const A*>(nullptr), a.i, a.f, a.ci, a.o, a.cs, a.co, &ly);
  // No carries and no GEMMs: the gate gradients go straight to dgates (co is given, so the
  // step's gradient rows may be dgates itself), dL/dc_prev to cs_prev_grad.
  BwdBufs<A> w{};
  w.dgx = w.dhr = w.dhr_cur = a.dgates;
  w.dc = a.cs_prev_grad;
  Zero(d, a.cs_prev_grad, B * H);
  RnnBwdArgs<A> ra;
  ra.c0 = a.cs_prev;
  ra.dc_seq = a.cs_grad;
  ra.peephole = peep.data();
  ra.dpeephole = dpeep;
  StepBackward<A>(d, s, ly, ra, a.h_grad, w);
  UnpackLstmPeepholeGrad(dev, s, static_cast<const A*>(dpeep), a.wci_grad, a.wcf_grad,
                         a.wco_grad);
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
