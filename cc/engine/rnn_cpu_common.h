// Pieces shared by the stacked-RNN engine's CPU forward (rnn_cpu.cc) and backward
// (rnn_cpu_backward.cc): the step map of a direction, one layer's pointers, activations
// and their derivatives, recurrent-mask rows.
#ifndef TF_RNN_OPS_CC_ENGINE_RNN_CPU_COMMON_H_
#define TF_RNN_OPS_CC_ENGINE_RNN_CPU_COMMON_H_

#include <algorithm>
#include <atomic>
#include <mutex>
#include <tuple>

#include "cc/engine/activations.h"
#include "cc/engine/bf16_gemm.h"
#include "cc/engine/cpu_device.h"
#include "cc/engine/packed_gemm.h"
#include "cc/engine/step_loops.h"
#include "cc/engine/types.h"
#include "cc/engine/workspace.h"

namespace tfrnn {
namespace rnn_cpu {

inline constexpr double kCostPerElem = 50;

// Which time index sequence b visits at step s of one direction (-1: none).
struct StepMap {
  const int* lengths;
  Index T;
  bool reverse;
  Index Len(Index b) const { return lengths != nullptr ? lengths[b] : T; }
  Index Tau(Index b, Index s) const {
    const Index n = Len(b);
    if (s >= n) return -1;
    return reverse ? n - 1 - s : s;
  }
  Index Prev(Index tau) const { return reverse ? tau + 1 : tau - 1; }
  // Every one of the B sequences has length T.
  bool AllFull(Index B) const {
    for (Index b = 0; b < B; ++b) {
      if (Len(b) != T) return false;
    }
    return true;
  }
  Index MaxSteps(Index B) const {
    if (lengths == nullptr) return B > 0 ? T : 0;
    Index m = 0;
    for (Index b = 0; b < B; ++b) m = std::max<Index>(m, lengths[b]);
    return m;
  }
  // The steps of (layer, direction) `pseudo`: its second direction, or a one-direction
  // spec's `reverse`, walks each sequence backwards.
  static StepMap Of(const RnnSpec& s, Index pseudo, const int* lengths) {
    return {lengths, s.T, pseudo % s.D == 1 || (s.D == 1 && s.reverse)};
  }
};

// Row of time tau, sequence b in a [T, B, ·] sequence, or with batch_major a [B, T, ·] one.
inline Index SeqRow(bool batch_major, Index T, Index B, Index tau, Index b) {
  return batch_major ? b * T + tau : tau * B + b;
}

// The weights of a one-layer call's batch blocks (rnn_cpu_stack.cc ForwardBatchBlocks), packed
// once for all of them instead of once per block: every block whose road packs the one
// product of all K·H columns (no lanes, no separate gate products) claims pieces of kPieceCols
// columns
// (the last piece takes the rest, at least kPieceCols) and packs them into `dst`, then waits
// until every piece is done. Pieces are claimed only by running blocks, so a block that finds
// none left waits only for pieces being packed; a lone block packs them all. A piece boundary
// is a multiple of every ISA build's panel width (packed_gemm.h: 48, 24, 16 or 8 columns;
// bf16_gemm.h: 32 pair columns) and at least kPieceCols columns before the end, so each
// piece's panels are those of the whole pack (PackRowMajor, PackColMajor).
// A block first names its packing's layout (Begin): the first block's is the share's, and a
// block whose layout differs packs its own instead. With `cache` (an inference call whose
// caller keeps packings, pack_cache.h) the share packs into the kept buffer, or reads it
// where the weights and the layout are those packed last; Finish keeps it for the next call.
struct PackShare {
  static constexpr Index kPieceCols = 96;
  void* dst = nullptr;  // RnnBlocksPackSize elements (workspace.h)
  Index cols = 0;       // K·H
  PackCache* cache = nullptr;
  uint64_t weights_id = 0;
  std::atomic<Index> next{0}, done{0};

  // The buffer to read the packing from (and pack into with Run) for a block whose layout is
  // `layout` (PackCache::Key's fields) of `bytes`, or null if the share holds another layout.
  void* Begin(const int64_t (&layout)[PackCache::Key::kFields], size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (begun_) {
      return std::equal(layout, layout + PackCache::Key::kFields, key_.f) ? dst : nullptr;
    }
    begun_ = true;
    std::copy_n(layout, PackCache::Key::kFields, key_.f);
    key_.id = weights_id;
    if (cache != nullptr) {
      use_ = cache->Acquire(key_, bytes);
      if (use_.buf != nullptr) {
        dst = use_.buf.get();
        if (use_.ready) {  // packed by an earlier call: no piece left to pack
          next.store(Pieces(), std::memory_order_relaxed);
          done.store(Pieces(), std::memory_order_relaxed);
        }
      }
    }
    return dst;
  }
  // fn(c0, c1) packs columns [c0, c1).
  template <typename Fn>
  void Run(Fn&& fn) {
    const Index n = Pieces();
    for (Index i = next.fetch_add(1, std::memory_order_relaxed); i < n;
         i = next.fetch_add(1, std::memory_order_relaxed)) {
      fn(i * kPieceCols, i + 1 == n ? cols : (i + 1) * kPieceCols);
      done.fetch_add(1, std::memory_order_release);
    }
    SpinUntil([&] { return done.load(std::memory_order_acquire) >= n; });
  }
  // After every block has finished: a packing made into the kept buffer is kept.
  void Finish() {
    if (use_.buf != nullptr && !use_.ready &&
        done.load(std::memory_order_acquire) >= Pieces()) {
      cache->Publish(key_, use_);
    }
  }

 private:
  Index Pieces() const { return std::max<Index>(1, cols / kPieceCols); }
  std::mutex mu_;
  bool begun_ = false;
  PackCache::Key key_;
  PackCache::Use use_;
};

// Pointers of one (layer, direction). SetRnnLayer (types.h) points them into the params,
// reserve and dparams buffers; the LSTM block ops (lstm_block_mapping.h) at their own tensors.
template <typename A>
struct Layer {
  Index in = 0;       // width of the W matrices (0: skip input)
  Index in_cols = 0;  // columns of the layer's input tensor
  const A *W = nullptr, *R = nullptr, *Pm = nullptr, *bW = nullptr, *bR = nullptr;
  A* gx = nullptr;       // [TB, KH]: W·x of each row (SetRnnLayer: the gate activations' rows)
  bool gx_scratch = false;  // gx is not the activation planes: a fused-input step may keep its
                            // pre-activations in a one-step buffer instead of gx's rows
  A* act[4] = {};        // gate block k's activations of row r at act[k] + r·act_ld
  Index act_ld = 0;
  A *aux = nullptr, *hh = nullptr;
  A* hprev = nullptr;       // [TB, Hs] h_prev of each row (forward: written if not null)
  const A* hseq = nullptr;  // backward without hprev: the layer's h outputs [TB, Hs]; h_prev is
                            // h0 for the first step, else hseq's previous row (one direction,
                            // forward, every sequence full length)
  A* co = nullptr;          // lstm: cell_act(c) of each row [TB, H], written and read if given
  A *dW = nullptr, *dR = nullptr, *dP = nullptr, *dbW = nullptr, *dbR = nullptr;  // dbR: opt.
  // Whether the backward computes the weight, bias and peephole gradients: not for a layer
  // whose dW, dR and dbW are all null (RnnBwdArgs::dparams; their products and sums skipped).
  bool WeightGrads() const { return dW != nullptr || dR != nullptr || dbW != nullptr; }
  Index dcol = 0;  // column offset of this direction in the layer output
  // The layer's input and output sequences: time-major [T, B, ·] (row tau·B + b), or
  // batch-major [B, T, ·] (row b·T + tau: the first layer's x, the last layer's y of a
  // forward with RnnFwdArgs::batch_major; SeqRow).
  bool x_batch_major = false, y_batch_major = false;
  // The rows of gx, the activations, aux, co, hh and hprev are batch-major too (LayerForward
  // sets it for an inference layer whose x is batch-major: its input projection then writes
  // them in x's order, with no transpose; in training they are the reserve's time-major rows).
  bool rows_batch_major = false;
  // A training batch block's layer (types.h RnnTrainBatchBlocks): its time-major rows (x, y,
  // the reserve's) are its share of the whole batch's, row_B rows apart per time row, from the
  // pointers' first row; 0: the spec's own B. Only the forward's fused road (RnnFusesInput)
  // reads it: the others project all of a layer's rows as one matrix.
  Index row_B = 0;
  Index RowB(Index B) const { return row_B > 0 ? row_B : B; }
  // A one-layer call's batch block: the packed weights it shares with the other blocks
  // (PackShare), or null.
  PackShare* pack_share = nullptr;
  // A bfloat16 op's layer input, W, R and output as its tensors' bf16 words (RnnFwdArgs::
  // words16), on the road that reads and writes them (rnn_cpu_stack.cc Reads16); else null.
  const uint16_t *x16 = nullptr, *W16 = nullptr, *R16 = nullptr;
  uint16_t* y16 = nullptr;
  // Points the layer at the rows of a batch block from row b0 of buffers of `rows` rows per
  // time row (row_B); KH: the gate rows' width of gx.
  void AtBlockRows(Index b0, Index rows, Index KH, Index H, Index Hs) {
    row_B = rows;
    auto move = [b0](auto*& p, Index width) {
      if (p != nullptr) p += b0 * width;
    };
    move(gx, KH);
    for (A*& a : act) move(a, act_ld);
    move(aux, H);
    move(hh, H);
    move(hprev, Hs);
    move(co, H);
  }
  Index Row(Index T, Index B, Index tau, Index b) const {
    return SeqRow(rows_batch_major, T, RowB(B), tau, b);
  }
  Index YRow(Index T, Index B, Index tau, Index b) const {
    return SeqRow(y_batch_major, T, RowB(B), tau, b);
  }
  A* Act(Index k, Index row) const { return act[k] + row * act_ld; }
};

// x = act(x), in place, for any Eigen array x (a one-packet VecN, a Loc, a Vec).
template <typename X>
EIGEN_ALWAYS_INLINE void ActivateIn(RnnAct act, X& x) {
  using S = typename X::Scalar;
  switch (act) {
    case RnnAct::kNone:
      break;
    case RnnAct::kRelu:
      x = x.max(S(0));
      break;
    case RnnAct::kTanh:
      x = x.tanh();
      break;
    case RnnAct::kSigmoid:
      x = Logistic(x);
      break;
    case RnnAct::kHardSigmoid:
      x = (x * S(0.2) + S(0.5)).max(S(0)).min(S(1));
      break;
    case RnnAct::kKerasHardSigmoid:
      x = (x * S(1.0 / 6.0) + S(0.5)).max(S(0)).min(S(1));
      break;
  }
}

// v = act(v), in place, in one-packet chunks (no scalar libm peel for tanh and sigmoid:
// cpu_device.h Chunked).
template <typename A>
void Activate(RnnAct act, Vec<A>& v) {
  if (act == RnnAct::kNone) return;
  Chunked<A>(v.size(), [&](auto width, Index c, Index w) TFRNN_INLINE_LAMBDA {
    VecN<A, decltype(width)::value> x(v.data() + c, w);
    ActivateIn(act, x);
  });
}

// d *= act'(x), given y = act(x) (every supported activation's derivative is a function of y),
// for any Eigen arrays y and d.
template <typename Y, typename D>
EIGEN_ALWAYS_INLINE void MulActGrad(RnnAct act, const Y& y, D& d) {
  using S = typename D::Scalar;
  switch (act) {
    case RnnAct::kNone:
      break;
    case RnnAct::kRelu:
      d = (y > S(0)).select(d, S(0));
      break;
    case RnnAct::kTanh:
      d *= S(1) - y.square();
      break;
    case RnnAct::kSigmoid:
      d *= y * (S(1) - y);
      break;
    case RnnAct::kHardSigmoid:
      d = (y > S(0) && y < S(1)).select(d * S(0.2), S(0));
      break;
    case RnnAct::kKerasHardSigmoid:
      d = (y > S(0) && y < S(1)).select(d * S(1.0 / 6.0), S(0));
      break;
  }
}

// A register-sized local array for one Chunked chunk of width W (a packet, or Eigen::Dynamic
// for the shorter tail, with a packet's fixed capacity: no heap).
template <typename A, int W>
using Loc = Eigen::Array<A, W, 1, 0,
                         W == Eigen::Dynamic ? Eigen::internal::unpacket_traits<typename Eigen::
                                                   internal::packet_traits<A>::type>::size
                                             : W,
                         1>;

// A chunk of ChunkedPadded: a whole packet of a row (kPad false), or its last 1 to P - 1
// elements as one packet (kPad true) whose lanes past the row read as zero and are never
// stored (packed_gemm.h LoadN / StoreN). The chunk's operands are read with In(p, n) (a map of
// the packet, or the n elements in a local packet) and written with Out(p, n, v) (its first n
// elements).
template <typename A, bool kPad>
struct PacketChunk {
  static constexpr int kWidth = int(packed::kP<A>);
  using L = Loc<A, kWidth>;
  static EIGEN_ALWAYS_INLINE auto In(const A* p, Index n) {
    if constexpr (!kPad) {
      return CVecN<A, kWidth>(p);
    } else {
      L v;
      Eigen::internal::pstoreu(v.data(), packed::LoadN<A>(p, n));
      return v;
    }
  }
  template <typename X>
  static EIGEN_ALWAYS_INLINE void Out(A* p, Index n, const X& x) {
    if constexpr (!kPad) {
      VecN<A, kWidth> m(p);
      m = x;
    } else {
      const L v = x;
      packed::StoreN<A>(p, Eigen::internal::ploadu<packed::Packet<A>>(v.data()), n);
    }
  }
};

// Calls fn(chunk, c, n) over [0, len): a PacketChunk<A, false> per whole packet, then for the
// rest of the row one PacketChunk<A, true>. Unlike Chunked (half and quarter packets, then a
// dynamic tail whose tanh is libm's tanhf, element by element), every element runs the same
// packet operations, the row's tail in one packet: a row of 50 units is four packets. fn
// should be an inlined lambda (TFRNN_INLINE_LAMBDA).
template <typename A, typename Fn>
EIGEN_ALWAYS_INLINE void ChunkedPadded(Index len, Fn&& fn) {
  constexpr Index P = PacketChunk<A, false>::kWidth;
  Index c = 0;
  for (; c + P <= len; c += P) fn(PacketChunk<A, false>(), c, P);
  if (c < len) fn(PacketChunk<A, true>(), c, len - c);
}

// Row of the mask for sequence b at time tau (column offset applied by the caller: MaskCol).
template <typename A>
const A* MaskRow(const RnnSpec& s, const A* mask, bool per_step, Index tau, Index b) {
  return mask + ((per_step ? tau * s.B : 0) + b) * RnnMaskWidth(s);
}

// Runs fn(j0, len) over the unit blocks [j0, j0 + len) of H units for the pointwise pass of a
// single step of `elems` = rows × units (StepForward, StepBackward; PointwiseRows's
// threshold): inline unless large (waking a pool thread costs more than a small step's pass),
// else on the pool.
template <typename Fn>
void ForUnitBlocks(const CpuDevice& d, Index H, Index elems, Fn&& fn) {
  if (elems <= kInlineElems) {  // one block: splitting on one thread only adds row overhead
    fn(Index(0), H);
    return;
  }
  const UnitBlocks ub = UnitBlocksOf(d, H);
  ParallelFor(d, ub.n, kCostPerElem * double(elems) / double(ub.n), [&](Index b0, Index b1) {
    for (Index blk = b0; blk < b1; ++blk) fn(ub.Start(blk), ub.Len(blk));
  });
}

// TF_RNN_OPS_CPU_FUSE_WIDE=0 (read once per process): neither FuseWide nor FuseSmallBatch.
inline bool FuseWideAllowed() {
  static const bool on = EnvChoice("TF_RNN_OPS_CPU_FUSE_WIDE", {"0"}) != 0;
  return on;
}

// Whether this engine's forward fuses the input's product with R's for weights past the L2
// rule too (types.h RnnFusesInput's `wide`): the AVX2 engine, which has no lanes road. The
// AVX-512 engine keeps the L2 rule beside its lanes (there the input fuses in the lanes by its
// own rule, RnnLanesFuseInput) and at batch blocks (measured level at B = 16-64), except for
// small batches (FuseSmallBatch); the AVX engine is not measured.
inline bool FuseWide() {
#if defined(__AVX2__) && !defined(__AVX512F__)
  return FuseWideAllowed();
#else
  return false;
#endif
}

// The AVX-512 engine's forward of a small batch over the whole batch (3 to 15 rows where no batch
// blocks take it: types.h RnnBatchBlocks; not in a block, which runs on one thread), its steps
// split into unit blocks on 2-4 threads, with float products: the input fuses with R up to
// kFusedWeightsMax too (RnnFusesInput's `wide`). Unfused, the input's projection is one product of
// T·B rows on the pool (Eigen's contraction), whose time varies from call to call, and its rows go
// through memory; fused, each step streams W beside R (I/H more bytes a step) at the products' rate
// of the step. Measured (2-core Zen 4, engine alone, fastest / median of 60 calls, ms, L2 rule →
// fused): 100×4×128×256 1.78-1.81 / 2.08-2.09 → 1.76 / 1.79-1.80, 100×8×64×512 11.3-11.5 /
// 11.9-12.0 → 10.6-10.8 / 11.1-11.2, 100×12×128×256 5.16-5.17 / 5.38-5.42 → 4.94-4.99 / 5.09-5.12,
// 30×8×512×512 6.5-6.6 / 7.0-7.2 → 5.9 / 6.0-6.3; at 1-2 rows the fused step (as many FMAs as
// weights read) was slower (100×1×128×256 0.84 → 0.97 at the fastest), on one thread level or
// either way by 2-4 %, and with bf16 products (the projection of x's words) up to 6 % slower
// (100×8×256×512 9.6 → 10.2).
inline bool FuseSmallBatch(const CpuDevice& d, Index B, bool bf16_products) {
#if defined(__AVX512F__)
  const int threads = d.numThreads();
  return !bf16_products && B >= 3 && B < 2 * kBatchBlockRows && threads >= 2 &&
         threads <= kBatchBlockMaxThreads && FuseWideAllowed();
#else
  (void)d, (void)B, (void)bf16_products;
  return false;
#endif
}

// Batch blocks with the bf16 products on AMX tiles (amx_gemm.h): n where a layer's [W; R]
// takes at most kBatchBlockTileWeights bytes, else 1. Each block streams all of R at every
// step, the unit blocks a slice each; the tiles multiply so fast that R's bytes set the step's
// time once they pass a core's L2. 2-core Intel Xeon with AMX (2 MiB of L2 a core), engine
// alone, bf16 LSTM inference, blocks against none: 100×64×256×256 (1 MiB) 1.49x,
// 100×32×384×384 (2.3 MiB) 1.19x, 100×16×384×384 1.05x, 50×32×128×512 (2.5 MiB) 1.04x,
// 100×16×256×512 (3 MiB) 0.68x, 100×16×448×448 (3.1 MiB) 0.90x, 100×16×512×512 (4 MiB)
// 0.68x, 100×32×512×512 0.88x.
constexpr double kBatchBlockTileWeights = 2.5 * 1024 * 1024;
inline Index TileBatchBlocks(const RnnSpec& s, Index n) {
  const bool tiles = bf16::ProductsFor(s) && bf16::amx::Enabled();
  return n > 1 && tiles && RnnBatchBlockWeights(s) > kBatchBlockTileWeights ? 1 : n;
}

// Whether a step's products on AMX tiles read their packed weights (KR rows of KH columns, as
// bf16 pairs) from past a core's L2: each of the step's `threads` reads more than
// bf16::amx::kStreamBytes of them at every step (bf16::GemmConverted then fetches B ahead).
inline bool RnnStreamsR(bool b16, Index KR, Index KH, Index threads) {
  return b16 && bf16::amx::Enabled() &&
         bf16::Pairs(KR) * KH * Index(sizeof(uint32_t)) >
             bf16::amx::kStreamBytes * std::max<Index>(1, threads);
}

// The batch blocks of a forward whose rows a block writes in place (training, the LSTM block
// ops): RnnBatchBlocks where RnnTrainBatchBlocks holds with this CPU's products (and
// TileBatchBlocks), else 1.
inline Index TrainBatchBlocks(const CpuDevice& d, const RnnSpec& s) {
  return RnnTrainBatchBlocks(s, bf16::ProductsFor(s), FuseWide())
             ? TileBatchBlocks(s, RnnBatchBlocks(s, d.numThreads()))
             : 1;
}

// The roads of a forward layer (LayerForward), from the spec, the layer and its steps.
struct FwdRoad {
  bool unpacked = false, pipelined = false;
  Index lanes_bp = 0;  // the batch in the lanes: the padded rows of hᵀ, else 0
  bool tlanes = false;  // the LSTM's gates in the lanes too
  bool fused = false;   // [x_t, h_{t-1}] · [W; R] per step instead of an input projection
  // A bfloat16 op's words (Layer::x16, W16, R16, y16) read and written as they are: the
  // LSTM's gates in the lanes, or the packed step on an input projection of x's rows in
  // order (RnnForward's Reads16).
  bool words = false;
};
template <typename A>
FwdRoad RoadOf(const CpuDevice& d, const RnnSpec& s, Index pseudo, const Layer<A>& ly,
               const StepMap& sm);

// One (layer, direction) of the forward: ylayer [T, B, D·Hs] receives h, a.hn / a.cn the final
// states of pseudo-layer `pseudo`; ws has RnnFwdLayersWorkspaceSize(s) elements (rnn_cpu.cc).
template <typename A>
void LayerForward(const CpuDevice& d, const RnnSpec& s, Index pseudo, const Layer<A>& ly,
                  const A* xin, const RnnFwdArgs<A>& a, A* ylayer, A* ws);

// One step (T == 1, one layer and direction, no mask or projection) whose ly.gx rows hold W·x
// and hr [B, K·H] R·h0: the pointwise pass alone, into ylayer, a.hn and a.cn. A reset-before
// gru step runs as kBeforeProduct (r, z and r ⊙ h0 into rh [B, H]), then, once the caller has
// put R_n·rh into hr's candidate block, kAfterProduct (StepPhase, types.h).
template <typename A>
void StepForward(const CpuDevice& d, const RnnSpec& s, const Layer<A>& ly,
                 const RnnFwdArgs<A>& a, const A* hr, A* ylayer,
                 StepPhase phase = StepPhase::kWhole,
                 A* rh = nullptr);

// Backward of LayerForward (rnn_cpu_backward.cc): the gradients of the layer's weights into
// ly.dW..., of its input into din (+= with accumulate_din), of its initial states into a.dh0,
// a.dc0.
template <typename A>
void LayerBackward(const CpuDevice& d, const RnnSpec& s, Index pseudo, const Layer<A>& ly,
                   const A* xin, const A* dyl, const RnnBwdArgs<A>& a, A* din,
                   bool accumulate_din, const BwdBufs<A>& w);

// The pointwise backward of one step (T == 1) with no GEMMs: the pre-activation gradients
// into w.dgx (w.dhr_cur may be w.dgx; lstm: w.dh null: no carry), lstm: dL/dc_prev into w.dc
// (which holds the incoming carry), peephole gradients into a.dpeephole. A reset-before gru
// step (w.dh: dL/dh_prev, zero on entry; w.dhr: [B, K·H]) runs as kBeforeProduct, then, once
// the caller has put dL/d(r ⊙ h_prev) into w.dhm, kAfterProduct (r's gradient; h_prev's
// through r).
template <typename A>
void StepBackward(const CpuDevice& d, const RnnSpec& s, const Layer<A>& ly,
                  const RnnBwdArgs<A>& a, const A* dyl, const BwdBufs<A>& w,
                  StepPhase phase = StepPhase::kWhole);

}  // namespace rnn_cpu
}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_ENGINE_RNN_CPU_COMMON_H_
