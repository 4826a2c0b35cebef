// The CPU engine's workspaces. Each entry point lays out its scratch by one walk (Carve*),
// and the workspace size a caller allocates is that same walk run with no base: a Carver
// without a base only counts. Sizes are in elements of the compute type. No Eigen here.
#ifndef TF_RNN_OPS_CC_ENGINE_WORKSPACE_H_
#define TF_RNN_OPS_CC_ENGINE_WORKSPACE_H_

#include <algorithm>

#include "cc/engine/types.h"

namespace tfrnn {

// Consecutive pieces of a workspace, each from a multiple of kPieceAlign elements past the
// base (a cache line for float, where the base is aligned as TensorFlow's buffers are: AMX
// tile loads of packed weights and rows that straddle two lines take twice as long,
// amx_gemm.h); with a null base, pieces are null and only counted.
constexpr Index kPieceAlign = 16;
template <typename A>
class Carver {
 public:
  explicit Carver(A* base) : base_(base) {}
  A* Take(Index n) {
    used_ = (used_ + kPieceAlign - 1) / kPieceAlign * kPieceAlign;
    A* p = base_ != nullptr ? base_ + used_ : nullptr;
    used_ += n;
    return p;
  }
  Index used() const { return used_; }

 private:
  A* base_;
  Index used_ = 0;
};

// The size of a walk: `carve(&cv)` on a counting Carver.
template <typename F>
Index CountedSize(F carve) {
  Carver<float> cv(nullptr);
  carve(&cv);
  return cv.used();
}

// ---- the stacked engine (rnn_cpu.cc, rnn_cpu_backward.cc) ----------------------------------

// Copies of h ⊙ mask a forward step keeps: one per gate block with per-gate masks, else one.
inline Index RnnMaskedCopies(const RnnSpec& s) { return RnnGateMasks(s) ? RnnK(s) : 1; }

// Scratch of one (layer, direction) of the forward (LayerForward), shared by every layer.
template <typename A>
struct RnnFwdScratch {
  A *h_cur, *h_next;  // [B, Hs] each
  A* h_masked[2];     // h ⊙ mask per step parity: RnnMaskedCopies copies [B, Hs] each
  A* c;               // [B, H] the cell state (lstm)
  A* hr;              // [B, K·H] a step's recurrent product
  A* hh_step;         // [B, H] unprojected h / r ⊙ h of a step
  A* rpack;           // R packed per unit block, then W: beside R's rows when the input
                      // fuses (RnnFusesInput), else (wpack) after all of R (null when the
                      // products run unpacked)
  A* h_lanes[2];      // hᵀ [Hs, RnnLanesWidth] per step parity (lanes_gemm.h), or null
};
template <typename A>
RnnFwdScratch<A> CarveRnnFwd(const RnnSpec& s, Carver<A>* cv) {
  const Index B = s.B, H = s.H, Hs = RnnHs(s), K = RnnK(s), KH = K * H;
  const bool unpacked = RnnFwdUnpacked(s);
  RnnFwdScratch<A> w;
  w.h_cur = cv->Take(B * Hs);
  w.h_next = cv->Take(B * Hs);
  for (A*& hm : w.h_masked) hm = cv->Take(RnnMaskedCopies(s) * B * Hs);
  w.c = cv->Take(B * H);
  w.hr = cv->Take(B * KH);
  w.hh_step = cv->Take(B * H);
  w.rpack = nullptr;
  if (!unpacked) {
    Index wx = 0;  // W packed beside R, for the widest layer input that fuses (with small
                   // weights or in the lanes: rnn_cpu.cc LayerForward), or after R
                   // for a first layer whose chain may be pipelined (a batch-major x: its input
                   // projected per time row)
    for (Index in : {RnnInWidth(s, 0), s.L > 1 ? s.D * Hs : Index(0)}) {
      const bool fuses = RnnFusesInput(in, Hs, KH, s.bf16, true) ||
                         (RnnLanesWidth(s) > 0 && RnnLanesFuseInput(in, Hs));
      if (fuses && KH * in > wx) wx = KH * in;
    }
    if (FwdChainFits(s.T, s.B, s.H, Hs * KH, s.bf16)) {
      wx = std::max(wx, KH * RnnInWidth(s, 0));
    }
    // W beside R in the lanes for an LSTM's inference (lanes_lstm.h), any layer's input.
    if (LanesLstmFor(s, true)) {
      wx = std::max({wx, KH * RnnInWidth(s, 0), s.L > 1 ? KH * s.D * Hs : Index(0)});
    }
    w.rpack = cv->Take(KH * Hs + wx);
  }
  const Index lanes = RnnLanesWidth(s);
  for (A*& t : w.h_lanes) t = lanes > 0 ? cv->Take(Hs * lanes) : nullptr;
  return w;
}
// The forward's layers over the whole batch (no batch blocks).
inline Index RnnFwdLayersWorkspaceSize(const RnnSpec& s) {
  return CountedSize([&](Carver<float>* cv) { CarveRnnFwd(s, cv); });
}

// Batch blocks (types.h RnnBatchBlocks; RnnForward, rnn_cpu.cc): block i of n is the spec on
// its rows, and its scratch holds, each piece 16 elements aligned: the block's x and y rows
// (a time-major x and y at inference, unless the blocks use them in place: rnn_cpu_stack.cc
// InferenceRowsInPlace), its h0, c0, hn and cn rows (more than one layer or direction), then
// its own forward workspace. At inference its reserve is its share of the caller's, or its
// rows of the caller's in place as in training (ForwardBatchBlocks, rnn_cpu_stack.cc).
constexpr Index kBlockAlign = 16;
inline Index AlignUp(Index n) { return (n + kBlockAlign - 1) / kBlockAlign * kBlockAlign; }
inline RnnSpec RnnBlockSpec(const RnnSpec& s, Index n, Index i) {
  RnnSpec b = s;
  b.B = RnnBatchBlockRow(s.B, n, i + 1) - RnnBatchBlockRow(s.B, n, i);
  return b;
}
// A block's own layer workspace, aligned (CarveRnnBlock; the LSTM block ops' blocks).
inline Index RnnBlockLayersSize(const RnnSpec& b) { return AlignUp(RnnFwdLayersWorkspaceSize(b)); }
template <typename A>
struct RnnBlockScratch {
  A *x, *y, *h0, *c0, *hn, *cn, *ws;
};
template <typename A>
RnnBlockScratch<A> CarveRnnBlock(const RnnSpec& b, Carver<A>* cv) {
  const Index TB = b.T * b.B, Hs = RnnHs(b), LD = b.L * b.D;
  const bool states = LD > 1;
  RnnBlockScratch<A> w;
  const bool rows = !b.training;  // training: the whole batch's x and y rows in place
  w.x = rows ? cv->Take(AlignUp(TB * b.I)) : nullptr;
  w.y = rows ? cv->Take(AlignUp(TB * b.D * Hs)) : nullptr;
  w.h0 = states ? cv->Take(AlignUp(LD * b.B * Hs)) : nullptr;
  w.hn = states ? cv->Take(AlignUp(LD * b.B * Hs)) : nullptr;
  w.c0 = states ? cv->Take(AlignUp(LD * b.B * b.H)) : nullptr;
  w.cn = states ? cv->Take(AlignUp(LD * b.B * b.H)) : nullptr;
  w.ws = cv->Take(RnnBlockLayersSize(b));
  return w;
}
inline Index RnnBlockScratchSize(const RnnSpec& b) {
  return CountedSize([&](Carver<float>* cv) { CarveRnnBlock(b, cv); });
}
// Where block i of n starts in a buffer of the blocks' pieces one after the other, each
// size(block spec) elements: the sum over the blocks before it (i = n: all of them).
template <typename Size>
Index RnnBlocksBefore(const RnnSpec& s, Index n, Index i, Size size) {
  Index off = 0;
  for (Index j = 0; j < i; ++j) off += size(RnnBlockSpec(s, n, j));
  return off;
}
// A workspace of `whole` elements, or the blocks' pieces for any block count up to max_n,
// whichever is larger.
template <typename Size>
Index RnnBlocksWorkspaceSize(const RnnSpec& s, Index whole, Index max_n, Size size) {
  for (Index n = 2; n <= max_n; ++n) whole = std::max(whole, RnnBlocksBefore(s, n, n, size));
  return whole;
}
// The weights a one-layer call's batch blocks pack once for all of them, after the blocks'
// pieces (rnn_cpu_common.h PackShare): R, and W where the input fuses into the step's product;
// 0 with more layers or directions.
inline Index RnnBlocksPackSize(const RnnSpec& s) {
  if (s.L * s.D != 1) return 0;
  const Index Hs = RnnHs(s), KH = RnnK(s) * s.H, in = RnnInWidth(s, 0);
  return AlignUp(KH * (Hs + (RnnFusesInput(in, Hs, KH, s.bf16, true) ? in : 0)));
}
// The workspace of RnnForward: the layers' over the whole batch, or the batch blocks' (with
// their shared pack) for any block count the spec allows, whichever is larger; a multiple of
// 16 elements, so that a reserve placed after it keeps the workspace's alignment.
inline Index RnnFwdWorkspaceSize(const RnnSpec& s) {
  const Index blocks = RnnBlocksWorkspaceSize(s, 0, RnnBatchBlocksMax(s), RnnBlockScratchSize);
  return AlignUp(std::max(RnnFwdLayersWorkspaceSize(s),
                          blocks > 0 ? blocks + RnnBlocksPackSize(s) : 0));
}

// The LSTM block ops' forward in batch blocks (lstm_cpu.cc): where the layer's input fuses
// into its step's product (RnnTrainBatchBlocks), block i of n runs the layer on its rows of
// the op's [T, B, ·] tensors in place, with its own layer workspace (RnnBlockLayersSize, one
// after the other: RnnBlocksBefore).
inline Index LstmBlockBatchBlocksMax(const RnnSpec& s) {
  return RnnTrainBatchBlocks(s, s.bf16, true) ? RnnBatchBlocksMax(s) : 1;
}
inline Index LstmBlockLayersWorkspaceSize(const RnnSpec& s) {
  return RnnBlocksWorkspaceSize(s, RnnFwdLayersWorkspaceSize(s), LstmBlockBatchBlocksMax(s),
                                RnnBlockLayersSize);
}

// Buffers of one layer's backward (LayerBackward, StepBackward).
template <typename A>
struct BwdBufs {
  A *dgx, *dhr;           // [TB, KH] (dhr == dgx except for gru)
  A *dhr_prev, *dhr_cur;  // [B, KH]
  A *dh, *dc;             // [B, Hs], [B, H]
  A *dhtot, *dhh, *dtot;  // [TB, P], [B, H], [B, Hs]
  A* dhm;                 // [B, Hs] (mask; reset-before gru: dL/d(r ⊙ h_rec) of a step)
  A* hrec;                // [TB, Hs] h_prev ⊙ mask of every row (mask)
  A* gather;              // [TB, H] (reset-before gru; per-gate masks)
  A* rpack;               // [KH, Hs] R packed per unit block (LayerBackward)
  A* wpack;               // [KH, in] W packed for the input gradient's rows (PipelinedGrads)
};
template <typename A>
BwdBufs<A> CarveLayerBwd(const RnnSpec& s, Carver<A>* cv) {
  const Index TB = s.T * s.B, B = s.B, H = s.H, Hs = RnnHs(s), KH = RnnK(s) * H;
  BwdBufs<A> w;
  w.dgx = cv->Take(TB * KH);
  w.dhr = s.mode == RnnMode::kGru ? cv->Take(TB * KH) : w.dgx;
  w.dhr_prev = cv->Take(B * KH);
  w.dhr_cur = cv->Take(B * KH);
  w.dh = cv->Take(B * Hs);
  w.dc = cv->Take(B * H);
  w.dhtot = cv->Take(TB * s.P);
  w.dhh = cv->Take(B * H);
  w.dtot = cv->Take(B * Hs);
  w.dhm = cv->Take(B * Hs);
  w.hrec = cv->Take(s.has_mask ? TB * Hs : 0);
  w.gather = cv->Take(RnnBwdGathers(s) ? TB * H : 0);
  w.rpack = cv->Take(KH * Hs);
  w.wpack = cv->Take(KH * RnnMaxInWidth(s));
  return w;
}

// Scratch of the whole backward (RnnBackward): the layers' buffers, the gradient of a layer's
// output and of its input [T, B, D·Hs] each, and layer 0's input with padding rows zeroed.
template <typename A>
struct RnnBwdScratch {
  BwdBufs<A> layer;
  A *dy_buf, *din_buf;
  A* x_masked;  // [T, B, max(I, D·Hs)]
};
template <typename A>
RnnBwdScratch<A> CarveRnnBwd(const RnnSpec& s, Carver<A>* cv) {
  const Index TB = s.T * s.B, ycols = s.D * RnnHs(s);
  RnnBwdScratch<A> w;
  w.layer = CarveLayerBwd(s, cv);
  w.dy_buf = cv->Take(TB * ycols);
  w.din_buf = cv->Take(TB * ycols);
  w.x_masked = cv->Take(TB * (s.I > ycols ? s.I : ycols));
  return w;
}
inline Index RnnBwdWorkspaceSize(const RnnSpec& s) {
  return CountedSize([&](Carver<float>* cv) { CarveRnnBwd(s, cv); });
}

// ---- the LSTM block ops (lstm_block_mapping.h, lstm_cpu.cc) -----------------------------------

// Scratch of LstmForward over seq_len_max steps: the input projection [steps·B, 4H], the
// peephole vector and the recurrent bias [4H] each; a single step's rows [x, h_prev]
// [B, I + H] (kept small: a scratch over glibc's mmap threshold, 128 KiB, costs page faults
// on every call); more steps: the final states [B, H] x 2 and the layer's forward scratch
// (or its batch blocks': LstmBlockLayersWorkspaceSize).
template <typename A>
struct LstmFwdScratch {
  A *gx, *peep, *br;
  A* xh;            // one step
  A *hn, *cn, *ws;  // more steps (ws: RnnFwdLayersWorkspaceSize of the layer)
};
template <typename A>
LstmFwdScratch<A> CarveLstmFwd(Index seq_len_max, Index B, Index I, Index H, bool bf16,
                               Carver<A>* cv) {
  const Index G = 4 * H;
  LstmFwdScratch<A> w{};
  w.gx = cv->Take(seq_len_max * B * G);
  w.peep = cv->Take(G);
  w.br = cv->Take(G);
  if (seq_len_max <= 1) {
    w.xh = cv->Take(B * (I + H));
  } else {
    LstmCellSpec c;
    c.bf16 = bf16;
    w.hn = cv->Take(B * H);
    w.cn = cv->Take(B * H);
    w.ws = cv->Take(LstmBlockLayersWorkspaceSize(LstmBlockRnnSpec(c, seq_len_max, B, I, H)));
  }
  return w;
}
inline Index LstmFwdWorkspaceSize(Index seq_len_max, Index B, Index I, Index H,
                                  bool bf16 = false) {
  return CountedSize([&](Carver<float>* cv) { CarveLstmFwd(seq_len_max, B, I, H, bf16, cv); });
}

// Scratch of LstmBackward: the layer's backward buffers, the peephole vector and its
// gradient [4H] each, zero final-state gradients [B, H] x 2.
template <typename A>
struct LstmBwdScratch {
  BwdBufs<A> layer;
  A *peep, *dpeep, *zeros;
};
template <typename A>
LstmBwdScratch<A> CarveLstmBwd(Index seq_len_max, Index B, Index I, Index H, Carver<A>* cv) {
  LstmBwdScratch<A> w;
  w.layer = CarveLayerBwd(LstmBlockRnnSpec(LstmCellSpec(), seq_len_max, B, I, H), cv);
  w.peep = cv->Take(4 * H);
  w.dpeep = cv->Take(4 * H);
  w.zeros = cv->Take(2 * B * H);
  return w;
}
inline Index LstmBwdWorkspaceSize(Index seq_len_max, Index B, Index I, Index H) {
  return CountedSize([&](Carver<float>* cv) { CarveLstmBwd(seq_len_max, B, I, H, cv); });
}

// ---- the GRU block cell (gru_cpu.cc) ---------------------------------------------------------

template <typename A>
struct GruCellFwdScratch {
  A* gx;  // [B, 3H] [x, h_prev]·w_ru, then x·w_c + (r ⊙ h_prev)·w_c[I:]
  A* rh;  // [B, H] r ⊙ h_prev (also the engine's aux plane)
  A* bw;  // [3H] [b_ru, b_c]
  A* br;  // [3H] zeros
};
template <typename A>
GruCellFwdScratch<A> CarveGruCellFwd(Index B, Index H, Carver<A>* cv) {
  GruCellFwdScratch<A> w;
  w.gx = cv->Take(B * 3 * H);
  w.rh = cv->Take(B * H);
  w.bw = cv->Take(3 * H);
  w.br = cv->Take(3 * H);
  return w;
}
inline Index GruCellFwdWorkspaceSize(Index B, Index H) {
  return CountedSize([&](Carver<float>* cv) { CarveGruCellFwd(B, H, cv); });
}

template <typename A>
struct GruCellBwdScratch {
  A* dgx;  // [B, 3H] the gate gradients [d_r_bar, d_u_bar, d_c_bar]
  A* dhr;  // [B, 3H] the recurrent-product gradients (one step: the layer's rows)
  A* dhm;  // [B, H] d_hr = dL/d(r ⊙ h_prev)
};
template <typename A>
GruCellBwdScratch<A> CarveGruCellBwd(Index B, Index H, Carver<A>* cv) {
  GruCellBwdScratch<A> w;
  w.dgx = cv->Take(B * 3 * H);
  w.dhr = cv->Take(B * 3 * H);
  w.dhm = cv->Take(B * H);
  return w;
}
inline Index GruCellBwdWorkspaceSize(Index B, Index H) {
  return CountedSize([&](Carver<float>* cv) { CarveGruCellBwd(B, H, cv); });
}

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_ENGINE_WORKSPACE_H_
