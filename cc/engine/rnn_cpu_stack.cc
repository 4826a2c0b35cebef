// CPU implementation of the stacked-RNN engine, forward: the layers in order, the batch in
// blocks of rows, and a bfloat16 op's operands as its words (RnnForward; one layer's forward,
// LayerForward, is in rnn_cpu.cc).
#include "cc/engine/rnn.h"

#include "cc/engine/lanes_gemm.h"
#include "cc/engine/rnn_cpu_common.h"

#include <cstdint>
#include <type_traits>

namespace tfrnn {
namespace {

using namespace rnn_cpu;  // NOLINT

inline uint64_t Mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Dropout mask of layer l's output: 0 or 1/(1-p), a pure function of (seed, layer, index).
template <typename A>
void MakeMask(const CpuDevice& d, const RnnSpec& s, Index l, A* mask, Index n) {
  const double p = s.dropout;
  const A scale = p < 1.0 ? static_cast<A>(1.0 / (1.0 - p)) : A(0);
  const uint64_t key = Mix(s.seed ^ Mix(static_cast<uint64_t>(l) + 0x5bd1e995ULL));
  ParallelFor(d, n, 20, [&](Index i0, Index i1) {
    for (Index i = i0; i < i1; ++i) {
      const double u = static_cast<double>(Mix(key ^ static_cast<uint64_t>(i)) >> 11) *
                       (1.0 / 9007199254740992.0);
      mask[i] = u >= p ? scale : A(0);
    }
  });
}

// Layer l's direction `pseudo` as ForwardLayers runs it over the whole batch (layout: the
// reserve's spec).
template <typename A>
Layer<A> FwdLayer(const RnnSpec& s, const RnnFwdArgs<A>& a, const RnnSpec& layout, Index l,
                  Index pseudo, A* reserve) {
  Layer<A> ly;
  ly.gx = SetRnnLayer<Layer<A>, A>(layout, pseudo, a.params, reserve, nullptr, a.weights, {},
                                   &ly);
  if (!s.training) ly.hprev = nullptr;  // inference: no backward reads the rows' h_prev
  ly.x_batch_major = a.batch_major && l == 0;
  ly.y_batch_major = a.batch_major && l + 1 == s.L;
  return ly;
}

// The layers over the whole batch, one after the other (ws: RnnFwdLayersWorkspaceSize). With
// `whole` (a training batch block, RnnTrainBatchBlocks): s is the block's spec, and its rows of
// x, y and the reserve are those of `whole`'s buffers from row b0 on, used in place.
template <typename A>
void ForwardLayers(const CpuDevice& d, const RnnSpec& s, const RnnFwdArgs<A>& a, A* ws,
                   const RnnSpec* whole = nullptr, Index b0 = 0, PackShare* share = nullptr) {
  const Index TB = s.T * s.B, Hs = RnnHs(s), ycols = s.D * Hs;
  const RnnSpec& layout = whole != nullptr ? *whole : s;  // the reserve's
  A* reserve = a.reserve;
  for (Index l = 0; l < s.L; ++l) {
    const A* xin =
        l == 0 ? a.x + b0 * s.I : reserve + RnnNextInOffset(layout, l - 1) + b0 * ycols;
    A* ylayer = (l + 1 == s.L ? a.y : reserve + RnnNextInOffset(layout, l)) + b0 * ycols;
    // Rows past a sequence's length are zeros; the others are all written.
    if (!StepMap{a.lengths, s.T, false}.AllFull(s.B)) Zero(d, ylayer, TB * ycols);
    for (Index dd = 0; dd < s.D; ++dd) {
      const Index pseudo = l * s.D + dd;
      Layer<A> ly = FwdLayer(s, a, layout, l, pseudo, reserve);
      if (whole != nullptr) ly.AtBlockRows(b0, whole->B, RnnK(s) * s.H, s.H, Hs);
      ly.pack_share = share;
      if (a.words16.x != nullptr) {  // one layer (Reads16)
        ly.x16 = a.words16.x;
        ly.W16 = a.words16.W;
        ly.R16 = a.words16.R;
        ly.y16 = a.words16.y;
      }
      LayerForward<A>(d, s, pseudo, ly, xin, a, ylayer, ws);
    }
    if (l + 1 < s.L && RnnHasMask(s)) {
      A* mask = reserve + RnnMaskOffset(s, l);
      MakeMask<A>(d, s, l, mask, TB * ycols);
      MulInto<A>(d, ylayer, mask, ylayer, TB * ycols);
    }
  }
}

// n pieces of len elements, piece i from src + i · sld to dst + i · dld: a block's rows of each
// slab [n, B, w] gathered (src the whole, sld = B·w, dld = len) or scattered back.
template <typename A>
void CopySlabs(const A* src, Index sld, A* dst, Index dld, Index n, Index len) {
  for (Index i = 0; i < n; ++i) std::copy_n(src + i * sld, len, dst + i * dld);
}

// Whether n batch blocks of an inference call use a time-major x and y and the reserve in
// place, time-major over the whole batch as in training (ForwardLayers' `whole`), instead of
// gathering x's rows into each block's scratch and scattering y's back (3-4 % of the samples
// of a raw CudnnRNN inference at 200×16×64×128 and 100×32×128×50 on 2 cores): where every
// block's layers take the road that reads and writes their rows row_B apart, the input fused
// into the step's product (RoadOf's fused, neither in the lanes nor on its bf16 words' road;
// RnnTrainBatchBlocks' spec and every sequence full length).
template <typename A>
bool InferenceRowsInPlace(const RnnSpec& s, const RnnFwdArgs<A>& a, Index n,
                          const CpuDevice& one) {
  if (s.training || a.batch_major || !RnnTrainBatchBlocks(s, bf16::ProductsFor(s), FuseWide()) ||
      !StepMap{a.lengths, s.T, false}.AllFull(s.B)) {
    return false;
  }
  for (Index i = 0; i < n; ++i) {
    const RnnSpec bs = RnnBlockSpec(s, n, i);
    const Index b0 = RnnBatchBlockRow(s.B, n, i);
    RnnFwdArgs<A> b = a;
    b.lengths = a.lengths != nullptr ? a.lengths + b0 : nullptr;
    for (Index pseudo = 0; pseudo < s.L * s.D; ++pseudo) {
      Layer<A> ly = FwdLayer(bs, b, s, pseudo / s.D, pseudo, a.reserve);
      ly.AtBlockRows(b0, s.B, RnnK(s) * s.H, s.H, RnnHs(s));
      const FwdRoad r = RoadOf<A>(one, bs, pseudo, ly, StepMap::Of(s, pseudo, b.lengths));
      if (!r.fused || r.lanes_bp > 0 || r.words) return false;
    }
  }
  return true;
}

// The forward in n batch blocks (types.h RnnBatchBlocks): block i, its rows from b0, runs the
// layers on its rows as a call of its own on one thread. At inference its operands' rows are
// used in place where they are contiguous (a batch-major x and y; the states of one layer and
// direction) or where its road reads them in place (InferenceRowsInPlace), else gathered into
// and scattered from its scratch (workspace.h CarveRnnBlock), and its reserve is the rows'
// share of the caller's. In training its rows of x, y and the reserve are used in place,
// time-major over the whole batch (ForwardLayers' `whole`). The blocks are claimed by the
// caller and the pool's threads as they start (StepLoop), and a block computes the same
// whichever thread runs it.
template <typename A>
void ForwardBatchBlocks(const CpuDevice& d, const RnnSpec& s, const RnnFwdArgs<A>& a, A* ws,
                        Index n) {
  const Index T = s.T, B = s.B, H = s.H, Hs = RnnHs(s), ycols = s.D * Hs, LD = s.L * s.D;
  const CpuDevice one(d.getPool(), 1);
  const bool lstm = s.mode == RnnMode::kLstm;
  const bool in_place = s.training || InferenceRowsInPlace(s, a, n, one);
  const double cost = 2.0 * double(T) * B / n * RnnK(s) * H * (s.I + Hs);
  // One layer: the blocks pack its weights once, together, after their pieces (PackShare).
  // Per-sequence lengths can put blocks on different roads (a block of full-length rows fuses
  // the input into its step's product, one with a shorter row projects it apart: rnn_cpu.cc
  // RoadOf), whose packings differ: a block whose layout is not the share's packs its own in
  // its workspace. At inference with the caller's kept packings (pack_cache.h) the share's is
  // kept from call to call.
  PackShare shared;
  shared.dst = ws + RnnBlocksBefore(s, n, n, RnnBlockScratchSize);
  shared.cols = RnnK(s) * H;
  if (!s.training) {
    shared.cache = a.pack_cache;
    shared.weights_id = a.weights_id;
  }
  PackShare* const share = RnnBlocksPackSize(s) > 0 ? &shared : nullptr;
  StepLoop(d, 1, n, cost, [&](Index, Index i) {
    const RnnSpec bs = RnnBlockSpec(s, n, i);
    const Index b0 = RnnBatchBlockRow(B, n, i);
    Carver<A> cv(ws + RnnBlocksBefore(s, n, i, RnnBlockScratchSize));
    const RnnBlockScratch<A> w = CarveRnnBlock(bs, &cv);
    RnnFwdArgs<A> b = a;
    b.pack_cache = nullptr;  // the blocks pack once per call (PackShare) or each their own
    b.lengths = a.lengths != nullptr ? a.lengths + b0 : nullptr;
    if (!in_place) b.reserve = a.reserve + RnnBlocksBefore(s, n, i, RnnReserveSize);
    if (a.batch_major) {
      b.x = a.x + b0 * T * s.I;
      b.y = a.y + b0 * T * ycols;
      if (a.words16.x != nullptr) {  // Reads16
        b.words16.x = a.words16.x + b0 * T * s.I;
        b.words16.y = a.words16.y + b0 * T * ycols;
      }
    } else if (!in_place) {
      CopySlabs(a.x + b0 * s.I, B * s.I, w.x, bs.B * s.I, T, bs.B * s.I);
      b.x = w.x;
      b.y = w.y;
    }
    if (LD == 1) {
      b.h0 = a.h0 + b0 * Hs;
      b.hn = a.hn + b0 * Hs;
      if (lstm) {
        b.c0 = a.c0 + b0 * H;
        b.cn = a.cn + b0 * H;
      }
    } else {
      CopySlabs(a.h0 + b0 * Hs, B * Hs, w.h0, bs.B * Hs, LD, bs.B * Hs);
      b.h0 = w.h0;
      b.hn = w.hn;
      if (lstm) {
        CopySlabs(a.c0 + b0 * H, B * H, w.c0, bs.B * H, LD, bs.B * H);
        b.c0 = w.c0;
        b.cn = w.cn;
      }
    }
    if (in_place) {
      ForwardLayers<A>(one, bs, b, w.ws, &s, b0, share);
    } else {
      ForwardLayers<A>(one, bs, b, w.ws, nullptr, 0, share);
      if (!a.batch_major) {
        CopySlabs(w.y, bs.B * ycols, a.y + b0 * ycols, B * ycols, T, bs.B * ycols);
      }
    }
    if (LD > 1) {
      CopySlabs(w.hn, bs.B * Hs, a.hn + b0 * Hs, B * Hs, LD, bs.B * Hs);
      if (lstm) CopySlabs(w.cn, bs.B * H, a.cn + b0 * H, B * H, LD, bs.B * H);
    }
  });
  shared.Finish();
}

// The blocks RnnForward runs: RnnBatchBlocks at inference (TileBatchBlocks: fewer with large
// weights on AMX tiles), TrainBatchBlocks in training with every sequence full length (the
// fused road's condition).
// At inference with float products, one block (the unit blocks of StepLoop) instead of batch
// blocks too small for the lanes where the whole batch's unit blocks take them (each batch
// block would stream all of R from L3 at every step for its rows, each unit block streams its
// slice once). With bf16 products only for lanes_lstm.h's LSTM (bf16 50×32×128×512: 11.3
// against 11.7 ms, 50×48×512×512 24.6 against 26.0): elsewhere their batch blocks were as fast
// or faster (100×32×128×384 1.1-1.6x, 50×32×128×512 level; docs/PERFORMANCE_BF16.md), half the
// bytes of R streaming.
template <typename A>
Index ForwardBlocks(const CpuDevice& d, const RnnSpec& s, const RnnFwdArgs<A>& a) {
  if (!s.training) {
    const Index n = TileBatchBlocks(s, RnnBatchBlocks(s, d.numThreads()));
    const bool full = s.T > 1 && StepMap{a.lengths, s.T, false}.AllFull(s.B);
    const bool lanes = n > 1 && (!bf16::ProductsFor(s) || LanesLstmFor(s, full)) &&
                       LanesFor<A>(s, false, UnitBlock(d, s.H), full) &&
                       RnnLanesWidth(RnnBlockSpec(s, n, 0)) == 0;
    return lanes ? 1 : n;
  }
  const bool full = !a.batch_major && StepMap{a.lengths, s.T, false}.AllFull(s.B);
  return full ? TrainBatchBlocks(d, s) : 1;
}

// Whether the forward reads a bfloat16 op's x, W and R and writes its y as their bf16 words
// (RnnFwdArgs::words16): one layer with bf16 products, over the whole batch or in batch
// blocks of a batch-major x and y, on the LSTM's road with its gates in the lanes
// (lanes_lstm.h) or on the packed step (RoadOf's words: x's rows projected by bf16::GemmLarge
// from their words or, fused with R, each step's rows read as pair words; W and R packed from
// their words; y's floats converted into its words after the layer). Packing and transposes
// make the same pair words from the words as from their floats, and y's words are rounded as
// the op's boundary conversion would, so the results keep their bits while the op's
// conversions into and out of float drop out (bf16 inference, 2 cores: 50×32×128×512 and
// 100×64×256×256 about 7 % faster on the lanes).
template <typename A>
bool LayerReads16(const CpuDevice& d, const RnnSpec& s, const RnnFwdArgs<A>& a) {
  const Layer<A> ly = FwdLayer(s, a, s, 0, 0, a.reserve);
  return RoadOf<A>(d, s, 0, ly, StepMap::Of(s, 0, a.lengths)).words;
}
template <typename A>
bool Reads16(const CpuDevice& d, const RnnSpec& s, const RnnFwdArgs<A>& a) {
  if (s.L != 1 || s.D != 1 || s.training || !s.weights_xw || a.params != nullptr ||
      !bf16::ProductsFor(s)) {
    return false;
  }
  const Index n = ForwardBlocks(d, s, a);
  if (n == 1) return LayerReads16(d, s, a);
  // Batch blocks (ForwardBatchBlocks) each on one thread, their rows of a batch-major x and y
  // in place.
  if (!a.batch_major) return false;
  const CpuDevice one(d.getPool(), 1);
  for (Index i = 0; i < n; ++i) {
    RnnFwdArgs<A> b = a;
    if (a.lengths != nullptr) b.lengths = a.lengths + RnnBatchBlockRow(s.B, n, i);
    if (!LayerReads16(one, RnnBlockSpec(s, n, i), b)) return false;
  }
  return true;
}

}  // namespace

template <typename A>
void RnnForward(const CpuDevice& d, const RnnSpec& s, const RnnFwdArgs<A>& a, A* ws) {
  if constexpr (std::is_same<A, float>::value) {
    if (a.words16.x != nullptr && !Reads16(d, s, a)) {
      // The words in float for the other roads, and y's floats back into its words.
      using W = const Eigen::bfloat16*;
      const Index KH = RnnK(s) * s.H, TB = s.T * s.B, w_rows = RnnInWidth(s, 0);
      Convert(d, reinterpret_cast<W>(a.words16.x), const_cast<A*>(a.x), TB * s.I);
      if (a.words16.W != nullptr) {  // (else the weights are floats already)
        Convert(d, reinterpret_cast<W>(a.words16.W), const_cast<A*>(a.weights.W), w_rows * KH);
        Convert(d, reinterpret_cast<W>(a.words16.R), const_cast<A*>(a.weights.R),
                RnnHs(s) * KH);
      }
      RnnFwdArgs<A> b = a;
      b.words16 = {};
      RnnForward(d, s, b, ws);
      Convert(d, static_cast<const A*>(a.y), reinterpret_cast<Eigen::bfloat16*>(a.words16.y),
              TB * s.D * RnnHs(s));
      return;
    }
  }
  const Index n = ForwardBlocks(d, s, a);
  if (n > 1) {
    ForwardBatchBlocks<A>(d, s, a, ws, n);
  } else {
    ForwardLayers<A>(d, s, a, ws);
  }
}

#define TFRNN_INSTANTIATE_RNN_STACK(A) \
  template void RnnForward<A>(const CpuDevice&, const RnnSpec&, const RnnFwdArgs<A>&, A*);
TFRNN_INSTANTIATE_RNN_STACK(float)
TFRNN_INSTANTIATE_RNN_STACK(double)
#undef TFRNN_INSTANTIATE_RNN_STACK

}  // namespace tfrnn
