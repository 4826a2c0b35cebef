// CPU implementation of the stacked-RNN engine, forward: one layer and direction (see rnn.h
// for the equations, types.h for the params and reserve layouts; the stack of layers and its
// batch blocks are in rnn_cpu_stack.cc, the backward in rnn_cpu_backward.cc).
#include "cc/engine/rnn.h"

#include "cc/engine/fwd_rows.h"
#include "cc/engine/lanes_gemm.h"
#include "cc/engine/lanes_lstm.h"
#include "cc/engine/packed_gemm.h"
#include "cc/engine/rnn_cpu_common.h"

#include <cstdint>
#include <memory>
#include <utility>

namespace tfrnn {
namespace {

using namespace rnn_cpu;  // NOLINT

// ---------------------------------------------------------------------------------------------
// Forward.

// Pointwise forward of rows valid at step `step`, units [j0, j0 + len). gx/acts row at τ holds
// W·x (no bias) on entry and the gate activations on exit; hr holds R·h_prev (no bias), or is
// null when the gx rows already hold W·x + R·h_prev. gstep (nullable): row b's whole
// pre-activation (W·x + R·h_prev, no bias) is at gstep + b·K·H instead of gx's row.
// kWhole does the whole step. A reset-before gru step has two: kBeforeProduct computes r, z and
// rh = r ⊙ h_rec (into aux and rh_step, the operand of the candidate's recurrent product,
// which needs every unit's r), kAfterProduct the candidate and h once hr's candidate block is
// R_n·rh.
template <typename A>
void FwdBlock(const RnnSpec& s, const StepMap& sm, const Layer<A>& ly, Index step, Index j0,
              Index len, const A* hr, const A* h_cur, const A* h_rec, A* h_next, A* c,
              A* hh_step, A* y, const A* peep, StepPhase phase,
              const A* gstep = nullptr) {
  const Index B = s.B, H = s.H, Hs = RnnHs(s), K = RnnK(s), KH = K * H, yst = s.D * Hs;
  const bool proj = s.P > 0;
  for (Index b = 0; b < B; ++b) {
    const Index tau = sm.Tau(b, step);
    if (tau < 0) {  // the state passes through (in kAfterProduct of a two-phase step)
      if (phase == StepPhase::kBeforeProduct) {
        Vec<A>(hh_step + b * H + j0, len).setZero();
      } else if (!proj) {
        Vec<A>(h_next + b * Hs + j0, len) = CVec<A>(h_cur + b * Hs + j0, len);
      }
      continue;
    }
    const Index row = ly.Row(s.T, B, tau, b);
    const Index yrow = ly.YRow(s.T, B, tau, b);
    const A* gx = gstep != nullptr ? gstep + b * KH + j0 : ly.gx + row * KH + j0;
    const A* r = hr != nullptr ? hr + b * KH + j0 : nullptr;
    const A* bw = ly.bW + j0;
    const A* br = ly.bR + j0;
    // v = the pre-activation of gate block k (v may be gx's own block: element-wise).
    auto pre = [&](Index k, Vec<A> v) {
      if (r != nullptr) {
        v = CVec<A>(gx + k * H, len) + CVec<A>(r + k * H, len) + CVec<A>(bw + k * H, len) +
            CVec<A>(br + k * H, len);
      } else {
        v = CVec<A>(gx + k * H, len) + CVec<A>(bw + k * H, len) + CVec<A>(br + k * H, len);
      }
    };
    auto act = [&](Index k) { return Vec<A>(ly.Act(k, row) + j0, len); };
    A* hout = proj ? hh_step + b * H + j0 : h_next + b * Hs + j0;
    Vec<A> h(hout, len);
    if (!proj && phase != StepPhase::kAfterProduct && ly.hprev != nullptr) {
      Vec<A>(ly.hprev + row * Hs + j0, len) = CVec<A>(h_cur + b * Hs + j0, len);
    }
    switch (s.mode) {
      case RnnMode::kLstm: {
        LstmRow<A> lr;
        lr.gx = gx;
        lr.hr = r;
        lr.bw = bw;
        lr.br = br;
        lr.peep = peep != nullptr ? peep + j0 : nullptr;
        for (int q = 0; q < 4; ++q) lr.act[q] = ly.Act(s.gate_pos[q], row) + j0;
        lr.c = c + b * H + j0;
        lr.cs = ly.aux + row * H + j0;
        lr.co = ly.co != nullptr ? ly.co + row * H + j0 : nullptr;
        lr.h = hout;
        lr.hh = proj ? ly.hh + row * H + j0 : nullptr;
        lr.y = proj ? nullptr : y + yrow * yst + ly.dcol + j0;
        // Planes only in training: at inference no backward reads them (a non-standard row
        // keeps its gates in the planes as scratch).
        if (!LstmStandard(s)) {
          (r != nullptr ? LstmFwdRow<A, false, true, true> : LstmFwdRow<A, false, false, true>)(
              s, lr, len);
        } else if (s.training) {
          (r != nullptr ? LstmFwdRow<A, true, true, true> : LstmFwdRow<A, true, false, true>)(
              s, lr, len);
        } else {
          (r != nullptr ? LstmFwdRow<A, true, true, false> : LstmFwdRow<A, true, false, false>)(
              s, lr, len);
        }
        break;
      }
      case RnnMode::kGru: {
        const int pr = s.gate_pos[0], pz = s.gate_pos[1], pn = s.gate_pos[2];
        if (phase == StepPhase::kWhole && r != nullptr && !proj &&
            s.gate_act[0] == RnnAct::kSigmoid && s.gate_act[1] == RnnAct::kSigmoid &&
            s.gate_act[2] == RnnAct::kTanh) {
          GruRow<A> gr;
          gr.gx = gx;
          gr.hr = r;
          gr.bw = bw;
          gr.br = br;
          gr.hp = h_cur + b * Hs + j0;
          gr.act[0] = ly.Act(pr, row) + j0;
          gr.act[1] = ly.Act(pz, row) + j0;
          gr.act[2] = ly.Act(pn, row) + j0;
          gr.aux = ly.aux + row * H + j0;
          gr.h = hout;
          gr.y = y + yrow * yst + ly.dcol + j0;
          (s.training ? GruFwdRow<A, true> : GruFwdRow<A, false>)(s, gr, len);
          continue;  // y written
        }
        Vec<A> rg = act(pr), z = act(pz), n = act(pn);
        CVec<A> gxn(gx + pn * H, len);  // read before n is written (they may be one buffer)
        if (phase != StepPhase::kAfterProduct) {
          pre(pr, rg);
          Activate(s.gate_act[0], rg);
          pre(pz, z);
          Activate(s.gate_act[1], z);
        }
        Vec<A> aux(ly.aux + row * H + j0, len);
        if (phase == StepPhase::kBeforeProduct) {
          aux = rg * CVec<A>(h_rec + b * Hs + j0, len);
          Vec<A>(hh_step + b * H + j0, len) = aux;
          continue;  // h in kAfterProduct
        }
        if (phase == StepPhase::kAfterProduct && r == nullptr) {  // gx holds R_n·rh too
          n = gxn + CVec<A>(bw + pn * H, len) + CVec<A>(br + pn * H, len);
        } else if (phase == StepPhase::kAfterProduct) {
          n = gxn + CVec<A>(bw + pn * H, len) + CVec<A>(r + pn * H, len) +
              CVec<A>(br + pn * H, len);
        } else {
          aux = CVec<A>(r + pn * H, len) + CVec<A>(br + pn * H, len);
          n = gxn + CVec<A>(bw + pn * H, len) + rg * aux;
        }
        Activate(s.gate_act[2], n);
        CVec<A> hp(h_cur + b * Hs + j0, len);
        if (s.gru_z_new) {
          h = z * n + (A(1) - z) * hp;
        } else {
          h = (A(1) - z) * n + z * hp;
        }
        break;
      }
      case RnnMode::kTanh: {
        Vec<A> a = act(0);
        pre(0, a);
        Activate(RnnAct::kTanh, a);
        h = a;
        break;
      }
      case RnnMode::kRelu: {
        Vec<A> a = act(0);
        pre(0, a);
        a = a.max(A(0));
        h = a;
        break;
      }
    }
    if (!proj && s.mode != RnnMode::kLstm) Vec<A>(y + yrow * yst + ly.dcol + j0, len) = h;
  }
}

}  // namespace

namespace rnn_cpu {

template <typename A>
FwdRoad RoadOf(const CpuDevice& d, const RnnSpec& s, Index pseudo, const Layer<A>& ly,
               const StepMap& sm) {
  const Index B = s.B, H = s.H;
  const Index steps = sm.MaxSteps(B);
  const bool all_full = sm.AllFull(B);
  FwdRoad r;
  // Few steps of few rows, no mask or projection (types.h RnnFwdUnpacked): the products on
  // the weights in place, no packing. (A row past its length keeps its state in FwdBlock.)
  r.unpacked = RnnFwdUnpacked(s) && steps > 0;
  // Small steps, no projection, an input GEMM: the step chain on one thread, the input
  // projection of chunks of steps ahead of it on the others (as LstmForward does; types.h
  // FwdChainPipelined). Step s reads time row s of every sequence unless a reversed direction
  // has sequences shorter than T (then steps and time rows differ per sequence).
  r.pipelined = !r.unpacked && (!sm.reverse || all_full) && s.P == 0 &&
                !(s.preprojected && pseudo < s.D) && ly.in > 0 &&
                FwdChainPipelined(steps, B, H, RnnHs(s) * RnnK(s) * H, bf16::ProductsFor(s),
                                  d.numThreads());
  // The batch in the lanes (lanes_gemm.h, types.h RnnLanesWidth): R packed by units for the
  // transposed product, whose operand hᵀ each unit block writes for its units after its step.
  // The layer's part of the LSTM's road with its gates in the lanes (lanes_lstm.h): every
  // step a time row of every sequence, the input's product fused with R's in each step.
  const bool lstm_layer_ok = all_full && steps > 1 && ly.in > 0 && ly.in == ly.in_cols &&
                             !ly.gx_scratch && ly.row_B == 0 && ly.co == nullptr;
  if (LanesFor<A>(s, r.pipelined || r.unpacked, UnitBlock(d, H), lstm_layer_ok)) {
    r.lanes_bp = RnnLanesWidth(s);
    // A standard LSTM in the lanes, its batch whole packets, every step a time row of every
    // sequence: the gates stay transposed from the step's products (the input's fused with
    // R's whatever its width) to the pointwise pass (lanes_lstm.h), which in training writes
    // the reserve's planes too.
    r.tlanes = LanesLstmFor(s, lstm_layer_ok);
  }
  // Small weights (types.h RnnFusesInput; larger ones too on the AVX2 engine and for a small
  // batch, rnn_cpu_common.h FuseWide, FuseSmallBatch) or a narrow input in the lanes
  // (RnnLanesFuseInput), every sequence full length, no mask or projection, not gru (whose
  // candidate keeps R·h apart): per step and unit block one packed product
  // [x_t, h_{t-1}] · [W; R] per gate, written to the step's gx rows (hr stays zero), instead of
  // the input projection. In the lanes W streams with R, each weight read once per step, and
  // the step's rows are written once instead of projected, read and written back. The LSTM's
  // gates in the lanes fuse the input whatever its width.
  const bool b16 = bf16::ProductsFor(s), lanes = r.lanes_bp > 0;
  const Index Hs = RnnHs(s), KH = RnnK(s) * H;
  const bool wide = FuseWide() || FuseSmallBatch(d, B, b16);
  r.fused = r.tlanes ||
            (!r.unpacked && !r.pipelined && s.P == 0 && !s.has_mask &&
             s.mode != RnnMode::kGru && !s.preprojected && steps > 1 && ly.in == ly.in_cols &&
             all_full && ((lanes && RnnLanesFuseInput(ly.in, Hs)) ||
                          RnnFusesInput(ly.in, Hs, KH, b16, wide)));
  // The packed step's words: x's rows projected in their order (at inference a batch-major x
  // keeps its order unless the chain is pipelined), or fused, each step's rows of an even
  // input width as their pair words; W and R packed from their words; y's floats converted
  // into its words after the layer.
  r.words = b16 && (r.tlanes || (!r.unpacked && !r.pipelined && !lanes && s.P == 0 &&
                                 !s.preprojected && !s.training && ly.in > 0 &&
                                 ly.in == ly.in_cols && (!r.fused || ly.in % 2 == 0)));
  return r;
}

template <typename A>
void LayerForward(const CpuDevice& d, const RnnSpec& s, Index pseudo, const Layer<A>& layer,
                  const A* xin, const RnnFwdArgs<A>& a, A* ylayer, A* ws) {
  Layer<A> ly = layer;
  const Index B = s.B, H = s.H, Hs = RnnHs(s), K = RnnK(s), KH = K * H, TB = s.T * B;
  const bool proj = s.P > 0, b16 = bf16::ProductsFor(s);
  const StepMap sm = StepMap::Of(s, pseudo, a.lengths);
  Carver<A> cv(ws);
  const RnnFwdScratch<A> w = CarveRnnFwd(s, &cv);
  A* h_cur = w.h_cur;
  A* h_next = w.h_next;
  const Index GM = RnnMaskedCopies(s);
  A* c = w.c;
  A* hr = w.hr;
  A* hh_step = w.hh_step;
  A* rpack = w.rpack;  // R packed per unit block (below)
  const A* peep = s.peephole ? a.peephole + pseudo * KH : nullptr;
  const Index d_idx = pseudo % s.D;
  const bool reset_before = s.mode == RnnMode::kGru && s.gru_reset_before;
  const Index steps = sm.MaxSteps(B);
  const bool all_full = sm.AllFull(B);  // every row of the layer's output is written
  const FwdRoad road = RoadOf<A>(d, s, pseudo, ly, sm);
  const bool unpacked = road.unpacked, pipelined = road.pipelined;
  const Index lanes_bp = road.lanes_bp;
  const bool lanes = lanes_bp > 0;
  const bool tlanes = road.tlanes, fused = road.fused;  // RoadOf
  if (ly.x16 != nullptr && !road.words) std::abort();  // Reads16 chose this layer's road
  // A batch-major x: at inference (no backward reads the rows) the rows batch-major too, so
  // that the input projection is one product in x's order, unless the chain is pipelined
  // (its chunks of steps are time rows); else time-major rows, the projection per time row.
  ly.rows_batch_major = ly.x_batch_major && !s.training && !pipelined;
  const bool x_strided = ly.x_batch_major && !ly.rows_batch_major;
  // The B rows of time row tau in gx start at gx_step(tau), gld apart.
  const Index gld = (ly.rows_batch_major ? s.T : 1) * KH;
  auto gx_step = [&](Index tau) { return ly.gx + ly.Row(s.T, B, tau, 0) * KH; };
  const UnitBlocks ub = UnitBlocksOf(d, H, pipelined);
  const Index U = ub.U, blocks = ub.n;
  const Index xr = fused ? ly.in : 0, KR = xr + Hs;  // rows of the packed per-step weights
  // One unit block (the pipelined chain, one thread) whose gates all multiply the same
  // operand: the block's K·H columns are contiguous in the output row, so its gates are one
  // product of K·H columns instead of K of H (fewer partial panels and calls: a gate of 128
  // columns is panels of 48, 48 and 32, the four gates together ten of 48 and one of 32).
  const bool merged = blocks == 1 && !reset_before && GM <= 1;
  const bool r_streams =
      RnnStreamsR(b16, KR, KH, std::min<Index>(d.numThreads(), blocks));  // (bf16 on tiles)
  const Index KG = merged ? 1 : K;  // products per unit block and operand
  // A batch block of a one-layer call (ForwardBatchBlocks) on that one product, packed, not
  // in the lanes: its pieces of the weights every such block of the same layout reads
  // (PackShare; set below).
  PackShare* share =
      merged && !lanes && !pipelined && !unpacked && !proj ? ly.pack_share : nullptr;
  const double cost = (proj ? 0.0 : 2.0 * B * KR * U * K / 16) + kCostPerElem * B * U * K;
  // The B rows of time row tau in the layer input start at x_step(tau), xld apart (time-major
  // or batch-major: Layer::x_batch_major), in a bfloat16 op's x as it is (Reads16) at
  // ly.x16 + x_offset(tau); x_row(r): x's row for gx's row r.
  const Index xld = (ly.x_batch_major ? s.T : 1) * ly.in_cols;
  auto x_offset = [&](Index tau) {
    return SeqRow(ly.x_batch_major, s.T, ly.RowB(B), tau, 0) * ly.in_cols;
  };
  auto x_step = [&](Index tau) { return xin + x_offset(tau); };
  auto x_row = [&](Index r) {
    return xin + (x_strided ? SeqRow(true, s.T, B, r / B, r % B) : r) * ly.in_cols;
  };
  // The input projection of a batch-major x into time-major rows: per time row (project), on
  // W packed per unit block as R is (wpack) when the chain is pipelined (its side work).
  const bool wpacked = x_strided && pipelined;
  // The input projection as one product of x's rows in gx's order (the last of its roads
  // below). With bf16 products, where the caller keeps packings, on W packed whole
  // (bf16::PackWhole) beside R's, once for the calls that share the packing (wwhole).
  const bool proj_whole = !fused && !(s.preprojected && pseudo < s.D) && !pipelined &&
                          !(unpacked && ly.in > 0) && !(x_strided && ly.in > 0) &&
                          (ly.in > 0 || ly.in_cols == 0);
  const bool wwhole = b16 && std::is_same<A, float>::value && proj_whole && ly.in > 0;
  // The packing's layout (PackCache::Key's fields).
  const int64_t wfield = wpacked ? 1 : wwhole ? 2 : 0;  // W's packing beside R's, if any
  const int64_t layout[] = {K,      H,        Hs,  ly.in,  xr,     U,
                            blocks, lanes_bp, b16, merged, wfield, s.weights_xw,
                            ly.W16 != nullptr, ly.R16 != nullptr, int64_t(sizeof(A)), KR};
  static_assert(sizeof(layout) / sizeof(layout[0]) == PackCache::Key::kFields, "the fields");
  if (share != nullptr) {  // the share's packing where it has this layout, else our own
    void* p = share->Begin(layout, sizeof(A) * KH * KR);
    if (p != nullptr) {
      rpack = static_cast<A*>(p);
    } else {
      share = nullptr;
    }
  }
  // The per-layer packing below (not the batch blocks' shared one): at inference of one layer
  // and direction whose caller keeps the packed weights between calls (pack_cache.h), this
  // call's packing when the weights and the layout are those packed last, else a buffer to
  // pack into and keep.
  const bool packs = share == nullptr && !unpacked && steps > 0 && !proj;
  PackCache* cache = packs && s.L * s.D == 1 && !s.training ? a.pack_cache : nullptr;
  PackCache::Key pack_key;
  PackCache::Use kept;
  if (cache != nullptr) {
    pack_key.id = a.weights_id;
    std::copy_n(layout, PackCache::Key::kFields, pack_key.f);
    kept = cache->Acquire(pack_key, sizeof(A) * KH * (KR + (wpacked || wwhole ? ly.in : 0)));
    if (kept.buf != nullptr) {
      rpack = static_cast<A*>(kept.buf.get());
    } else {
      cache = nullptr;  // no memory for a kept packing: the workspace's, this call only
    }
  }
  A* const wpack = rpack + KH * Hs;
  // W packed whole for the projection (wwhole, kept packings only; after R's KH · KR).
  float* const wkept = cache != nullptr && wwhole ? reinterpret_cast<float*>(rpack + KH * KR)
                                                  : nullptr;
  // R·h for the units [j0, j0 + len) of gate k: B[h, c] = R[k·H + j0 + c, h] (weights_xw:
  // R[h, k·H + j0 + c]), packed once per layer for packed::Gemm; block j0 starts at j0·K·KR,
  // its gate k at k·len·KR (fused: W's xr rows for the gate, then R's). W (wpacked) the same
  // way at wpack, with in rows. Merged: the one block's K·H columns as if one gate.
  // Columns [c0, c0 + n) of M's K·H (W or R, `rows` rows; M stored [KH, rows] or with
  // weights_xw [rows, KH]; M16: a bfloat16 op's words of M) packed for packed::Gemm at dst.
  auto pack_cols = [&](const A* M, const uint16_t* M16, Index rows, Index c0, Index n, A* dst) {
    if constexpr (std::is_same<A, float>::value) {
      if (M16 != nullptr) return bf16::Pack<uint16_t>(rows, n, M16 + c0, KH, 1, dst);
    }
    if (s.weights_xw) {
      packed::PackRowMajor<A>(rows, n, M + c0, KH, dst, 0, 0, b16);
    } else {
      packed::PackColMajor<A>(rows, n, M + c0 * rows, rows, dst, b16);
    }
  };
  if (share != nullptr && steps > 0) {
    // Columns [c0, c1) of the product's panels, as the whole pack below would place them.
    share->Run([&](Index c0, Index c1) {
      if (fused) pack_cols(ly.W, ly.W16, xr, c0, c1 - c0, rpack + c0 * xr);
      pack_cols(ly.R, ly.R16, Hs, c0, c1 - c0, rpack + xr * KH + c0 * Hs);
    });
  } else if (packs && !kept.ready) {  // (ready: packed by an earlier call)
    ParallelFor(d, blocks, 2.0 * U * K * (Hs + ly.in), [&](Index b0, Index b1) {
      for (Index blk = b0; blk < b1; ++blk) {
        const Index j0 = ub.Start(blk), len = ub.Len(blk);
        // The `rows` rows of M (W or R) for gate k's units.
        const Index cols = merged ? KH : len;
        auto pack = [&](const A* M, const uint16_t* M16, Index rows, Index k, A* dst) {
          if (M16 != nullptr && lanes) {  // a bfloat16 op's weights as they are (weights_xw)
            lanes::PackLanesPairs<A, uint16_t>(int(lanes_bp / 16), rows, cols, M16 + k * H + j0,
                                               KH, 1, dst);
          } else if (lanes) {  // B[h, c] = R[k·H + j0 + c, h] (weights_xw: R[h, k·H + j0 + c])
            const A* src = s.weights_xw ? M + k * H + j0 : M + (k * H + j0) * rows;
            (b16 ? lanes::PackLanesPairs<A> : lanes::PackLanes<A>)(
                int(lanes_bp / 16), rows, cols, src, s.weights_xw ? KH : 1,
                s.weights_xw ? 1 : rows, dst);
          } else {
            pack_cols(M, M16, rows, k * H + j0, cols, dst);
          }
        };
        for (Index k = 0; k < KG; ++k) {
          A* dst = rpack + j0 * K * KR + k * len * KR;
          if (fused) pack(ly.W, ly.W16, xr, k, dst);
          pack(ly.R, ly.R16, Hs, k, dst + xr * cols);
          if (wpacked) pack(ly.W, nullptr, ly.in, k, wpack + (j0 * K + k * len) * ly.in);
        }
      }
    });
    if constexpr (std::is_same<A, float>::value) {
      if (wkept != nullptr && ly.W16 != nullptr) {  // as the projection below reads W
        bf16::PackWhole<uint16_t>(d, false, KH, ly.in, ly.W16, wkept);
      } else if (wkept != nullptr) {
        bf16::PackWhole<A>(d, !s.weights_xw, KH, ly.in, ly.W, wkept);
      }
    }
    if (cache != nullptr) cache->Publish(pack_key, kept);
  }
  // Time-major gx rows of time rows [t0, t1) = the input's rows · W, on the calling thread:
  // one product, or from a batch-major x one per time row.
  auto project = [&](Index t0, Index t1) {
    const Index ldw = s.weights_xw ? KH : ly.in;
    if (!x_strided) {
      GemmB16Serial<A>(b16, false, !s.weights_xw, (t1 - t0) * B, KH, ly.in, x_step(t0), xld,
                       ly.W, ldw, ly.gx + t0 * B * KH, KH, false);
      return;
    }
    for (Index t = t0; t < t1; ++t) {
      if (!wpacked) {
        GemmB16Serial<A>(b16, false, !s.weights_xw, B, KH, ly.in, x_step(t), xld, ly.W, ldw,
                         ly.gx + t * B * KH, KH, false);
        continue;
      }
      const packed::Rows<A> x = packed::PrepareRows<A>(B, ly.in, x_step(t), xld, b16, 0);
      for (Index blk = 0; blk < blocks; ++blk) {
        const Index j0 = ub.Start(blk), len = ub.Len(blk), cols = merged ? KH : len;
        for (Index k = 0; k < KG; ++k) {
          packed::Gemm<A>(B, ly.in, cols, x, wpack + (j0 * K + k * len) * ly.in,
                          ly.gx + t * B * KH + k * H + j0, KH, false);
        }
      }
    }
  };
  // gx = W·x for every step (skip input: x itself for every gate; preprojected: x's columns
  // of this direction).
  if (fused) {
    // below, per step
  } else if (s.preprojected && pseudo < s.D) {
    ParallelFor(d, TB, 2.0 * KH, [&](Index r0, Index r1) {
      for (Index r = r0; r < r1; ++r) std::copy_n(x_row(r) + d_idx * KH, KH, ly.gx + r * KH);
    });
  } else if (pipelined) {
    // below, in chunks of steps ahead of the chain; time rows no sequence reaches: zeros
    Zero(d, ly.gx + steps * B * KH, (s.T - steps) * B * KH);
  } else if (unpacked && ly.in > 0) {
    // One product of all rows, or with time-major rows of a batch-major x one per time row.
    const Index n = x_strided ? s.T : 1, rows = TB / n, lda = x_strided ? xld : ly.in_cols;
    for (Index t = 0; t < n; ++t) {
      SmallGemm<A>(d, false, !s.weights_xw, rows, KH, ly.in, x_step(t), lda, ly.W,
                   s.weights_xw ? KH : ly.in, ly.gx + t * rows * KH, KH, false);
    }
  } else if (x_strided && ly.in > 0) {  // training: time-major rows of a batch-major x
    ParallelFor(d, s.T, 2.0 * B * ly.in * KH, [&](Index t0, Index t1) { project(t0, t1); });
  } else if (proj_whole) {  // x's rows in gx's order
    if constexpr (std::is_same<A, float>::value) {
      if (ly.x16 != nullptr && (ly.W16 != nullptr || wkept != nullptr)) {
        // a bfloat16 op's words (weights_xw: W [in, KH]), or x's words on W packed (kept)
        bf16::GemmLarge<uint16_t>(d, false, false, TB, KH, ly.in, ly.x16, ly.W16, ly.gx, false,
                                  nullptr, nullptr, wkept);
      } else if (ly.x16 != nullptr) {  // x's words on W's floats, packed for this call
        std::unique_ptr<float[]> wp(new float[KH * ly.in]);
        bf16::PackWhole<A>(d, !s.weights_xw, KH, ly.in, ly.W, wp.get());
        bf16::GemmLarge<uint16_t>(d, false, false, TB, KH, ly.in, ly.x16, nullptr, ly.gx, false,
                                  nullptr, nullptr, wp.get());
      } else if (wkept != nullptr) {
        bf16::GemmLarge<A>(d, false, !s.weights_xw, TB, KH, ly.in, xin, ly.W, ly.gx, false,
                           nullptr, nullptr, wkept);
      }
    }
    if (ly.x16 == nullptr && wkept == nullptr) {
      // On one thread (a batch block, or a one-thread pool) with float products, small
      // weights and K·H off the multiples of 8: the packed kernel on W packed for this call,
      // whose last panel is one masked packet, where Eigen's contraction runs the last rows of
      // its blocks on narrow kernels (one thread, 1600 × 128 × K·H: 230 against 188 GF/s at
      // K·H = 150, 244 against 233 at 300; level or slower at multiples of 8).
      const bool packed_proj = std::is_same<A, float>::value && !b16 &&
                               d.numThreads() <= 1 && KH % 8 != 0 &&
                               double(KH) * double(ly.in) <= double(Index(1) << 16);
      if (packed_proj) {
        std::unique_ptr<A[]> wp(new A[KH * ly.in]);
        pack_cols(ly.W, nullptr, ly.in, 0, KH, wp.get());
        packed::Gemm<A>(TB, ly.in, KH, xin, ly.in, wp.get(), ly.gx, KH, false);
      } else {
        GemmB16<A>(d, b16, false, !s.weights_xw, TB, KH, ly.in, xin, ly.W, ly.gx, false);
      }
    }
  } else {
    ParallelFor(d, TB, 2.0 * KH, [&](Index r0, Index r1) {
      for (Index r = r0; r < r1; ++r) {
        for (Index k = 0; k < K; ++k) {
          Vec<A>(ly.gx + r * KH + k * H, H) = CVec<A>(x_row(r), H);
        }
      }
    });
  }
  if (ly.hprev != nullptr && !all_full) Zero(d, ly.hprev, TB * Hs);
  if (proj) Zero(d, ly.hh, TB * H);
  std::copy_n(a.h0 + pseudo * B * Hs, B * Hs, h_cur);
  if (s.mode == RnnMode::kLstm) std::copy_n(a.c0 + pseudo * B * H, B * H, c);
  if (lanes) {  // hᵀ of h0; the lanes past B stay zero
    for (A* t : w.h_lanes) std::fill_n(t, Hs * lanes_bp, A(0));
    LanesTranspose<A>(B, Hs, h_cur, Hs, w.h_lanes[0], lanes_bp, b16);
  }
  if (unpacked) {
    // Per step: hr = h·R on R in place, then the pointwise pass (which reads the step's W·x
    // in gx), on the calling thread unless the step is large (ForUnitBlocks); a reset-before
    // gru step puts the candidate's product R_n·(r ⊙ h) into hr between its two phases.
    A* hb[2] = {h_cur, h_next};
    const Index ldr = s.weights_xw ? KH : Hs;
    const int pn = s.gate_pos[2];
    for (Index st = 0; st < steps; ++st) {
      A* hp = hb[st % 2];
      A* hn = hb[1 - st % 2];
      SmallGemm<A>(d, false, !s.weights_xw, B, KH, Hs, hp, Hs, ly.R, ldr, hr, KH, false);
      auto pointwise = [&](StepPhase phase) {
        ForUnitBlocks(d, H, B * H, [&](Index j0, Index len) {
          FwdBlock<A>(s, sm, ly, st, j0, len, hr, hp, hp, hn, c, hh_step, ylayer, peep, phase);
        });
      };
      if (reset_before) {
        pointwise(StepPhase::kBeforeProduct);
        const A* rn = ly.R + (s.weights_xw ? pn * H : pn * H * Hs);
        SmallGemm<A>(d, false, !s.weights_xw, B, H, Hs, hh_step, H, rn, ldr, hr + pn * H, KH,
                     false);
        pointwise(StepPhase::kAfterProduct);
      } else {
        pointwise(StepPhase::kWhole);
      }
    }
    h_cur = hb[steps % 2];
  } else if (tlanes) {
    if constexpr (std::is_same<A, float>::value) {
      // Per step and unit block the products into the thread's scratch, then the pointwise
      // pass on them (the cell state transposed in h_next meanwhile; h's rows at the last step).
      A* cT = h_next;
      lanes::TransposeInto(B, H, c, H, cT, B, false);
      const Index yst = s.D * Hs, ldy = (ly.y_batch_major ? s.T : 1) * yst;
      const int nb = int(B / 16);
      // Every sequence has full length on this road: step st is time row sm.Tau(0, st) of
      // every row. Training: h0 as the first step's h_prev rows (each step writes the next
      // one's).
      if (ly.hprev != nullptr) {
        std::copy_n(h_cur, B * Hs, ly.hprev + ly.Row(s.T, B, sm.Tau(0, 0), 0) * Hs);
      }
      StepLoop(d, steps, blocks, cost, [&](Index st, Index blk) {
        const Index par = st % 2, tau = sm.Tau(0, st);
        const Index j0 = ub.Start(blk), len = ub.Len(blk), cols = merged ? KH : len;
        const A* xT = ly.x16 != nullptr
                          ? LanesRows<A>(B, xr, ly.x16 + x_offset(tau), xld, B, true)
                          : LanesRows<A>(B, xr, x_step(tau), xld, B, b16);
        A* ct = lanes::Scratch(K * len * B);
        for (Index k = 0; k < KG; ++k) {
          const A* wp = rpack + (j0 * K + k * len) * KR;
          lanes::Product(nb, b16, xr, cols, wp, xT, ct + k * len * B, false);
          lanes::Product(nb, b16, Hs, cols, wp + xr * cols, w.h_lanes[par], ct + k * len * B,
                         true);
        }
        const bool last = st + 1 == steps;
        const Index y0 = ly.YRow(s.T, B, tau, 0) * yst + ly.dcol;
        // Training: the step's planes in the reserve's time-major rows (the backward's).
        lanes::StepPlanes planes;
        if (s.training) {
          const Index row0 = ly.Row(s.T, B, tau, 0);
          for (int q = 0; q < 4; ++q) planes.act[q] = ly.Act(s.gate_pos[q], row0);
          planes.ld = ly.act_ld;
          planes.cs = ly.aux + row0 * H;
          planes.lds = H;
          if (!last && ly.hprev != nullptr) {
            planes.hprev = ly.hprev + ly.Row(s.T, B, sm.Tau(0, st + 1), 0) * Hs;
          }
          planes.ldh = Hs;
        }
        lanes::LstmPointwiseT(s.gate_pos, H, B, j0, len, ct, ly.bW, ly.bR, s.cell_clip, cT,
                              last ? nullptr : w.h_lanes[1 - par], b16, ylayer + y0,
                              ly.y16 != nullptr ? ly.y16 + y0 : nullptr, ldy,
                              last ? h_cur : nullptr, s.training ? &planes : nullptr);
      });
      lanes::TransposeInto(H, B, cT, B, c, H, false);
    }
  } else if (!proj) {
    // Steps that are time rows, not gru (whose candidate keeps R·h apart): R·h is added to
    // the step's gx rows in place (fused: [x_t, h]·[W; R] written there), and the pointwise
    // pass reads no separate hr.
    // A fused step whose gx is scratch (the block ops) computes into the one-step buffer hr,
    // which stays in cache, instead of gx's rows.
    const bool in_gx = fused || (s.mode != RnnMode::kGru && (!sm.reverse || all_full));
    const A* hr_arg = in_gx ? nullptr : hr;
    const A* gstep = fused && ly.gx_scratch ? hr : nullptr;
    // x_t (fused) and h are the work item's operands (packed::PrepareRows: with bf16 products
    // converted once for all of its gate blocks).
    // tau: the step's time row (in_gx).
    auto block_gemm = [&](Index tau, const packed::Rows<A>& x, const packed::Rows<A>& h, Index k,
                          Index j0, Index len) {
      const A* wp = rpack + j0 * K * KR + k * len * KR;
      if (in_gx) {
        A* out = (gstep != nullptr ? hr : gx_step(tau)) + k * H + j0;
        const Index ldo = gstep != nullptr ? KH : gld;
        if (fused) packed::Gemm<A>(B, xr, len, x, wp, out, ldo, false);
        packed::Gemm<A>(B, Hs, len, h, wp + xr * len, out, ldo, true);
        return;
      }
      packed::Gemm<A>(B, Hs, len, h, wp, hr + k * H + j0, KH, false);
    };
    // hm = h ⊙ mask of step st for the units [j0, j0 + len), GM copies (rows without that
    // step: h itself, never read).
    auto mask_rows = [&](Index st, Index j0, Index len, const A* h, A* hm) {
      for (Index g = 0; g < GM; ++g) {
        const Index col = MaskCol(s, ly.dcol, g) + j0;
        for (Index b = 0; b < B; ++b) {
          const Index tau = sm.Tau(b, st);
          Vec<A> out(hm + (g * B + b) * Hs + j0, len);
          if (tau < 0) {
            out = CVec<A>(h + b * Hs + j0, len);
          } else {
            out = CVec<A>(h + b * Hs + j0, len) *
                  CVec<A>(MaskRow(s, a.mask, a.mask_per_step, tau, b) + col, len);
          }
        }
      }
    };
    // One work item per (phase of a step, unit block): the block's slice of R·h_rec for every
    // gate, then its pointwise pass, on StepLoop (no barrier per step). A reset-before gru step
    // has two phases: the candidate's product needs r ⊙ h_rec of every unit. h alternates
    // between two buffers by step parity, and so does h ⊙ mask, which the blocks of step st
    // write for step st + 1 as they finish their units.
    A* hb[2] = {h_cur, h_next};
    A* const* hm = w.h_masked;
    if (s.has_mask && steps > 0) mask_rows(0, 0, Hs, hb[0], hm[0]);
    const Index phases = reset_before ? 2 : 1;
    const int pn = s.gate_pos[2];
    auto item = [&](Index t, Index blk) {
      const Index st = t / phases, par = st % 2;
      const StepPhase phase = !reset_before ? StepPhase::kWhole
                              : t % 2 == 0 ? StepPhase::kBeforeProduct
                                           : StepPhase::kAfterProduct;
      const Index j0 = ub.Start(blk), len = ub.Len(blk);
      // The recurrent operand of gate block k: h, h ⊙ mask, or h ⊙ mask_k.
      auto h_rec = [&](Index k) {
        return s.has_mask ? hm[par] + (GM > 1 ? k : 0) * B * Hs : hb[par];
      };
      const packed::Rows<A> none;
      const Index tau = sm.reverse ? s.T - 1 - st : st;
      if (phase == StepPhase::kAfterProduct) {
        block_gemm(tau, none, packed::PrepareRows<A>(B, Hs, hh_step, Hs, b16, 1), pn, j0, len);
      } else if (lanes) {
        // xᵀ of the step (fused), then per gate block the product into the step's rows: added
        // to W·x in gx, written over them (fused), or written to the separate R·h rows.
        const A* xT = fused ? LanesRows<A>(B, xr, x_step(tau), xld, lanes_bp, b16) : nullptr;
        for (Index k = 0; k < KG; ++k) {
          const Index cols = merged ? KH : len;
          const A* wp = rpack + j0 * K * KR + k * len * KR;  // fused: W's xr rows, then R's
          const A* hT = w.h_lanes[par];
          if (fused) {
            A* out = (gstep != nullptr ? hr : gx_step(tau)) + k * H + j0;
            LanesGemm<A>(lanes_bp, B, Hs, cols, wp + xr * cols, hT, out,
                         gstep != nullptr ? KH : gld, false, xr, wp, xT, b16);
          } else if (in_gx) {
            LanesGemm<A>(lanes_bp, B, Hs, cols, wp, hT, gx_step(tau) + k * H + j0, gld, true, 0,
                         nullptr, nullptr, b16);
          } else {
            LanesGemm<A>(lanes_bp, B, Hs, cols, wp, hT, hr + k * H + j0, KH, false, 0, nullptr,
                         nullptr, b16);
          }
        }
      } else {
        const packed::Rows<A> x =
            !fused               ? none
            : ly.x16 != nullptr ? packed::WordRows<A>(ly.x16 + x_offset(tau), xld)
                                 : packed::PrepareRows<A>(B, xr, x_step(tau), xld, b16, 0);
        packed::Rows<A> h;  // converted again only for another operand (h ⊙ mask_k)
        for (Index k = 0; k < KG; ++k) {
          if (reset_before && k == pn) continue;
          if (h.a != h_rec(k)) {
            h = packed::PrepareRows<A>(B, Hs, h_rec(k), Hs, b16, 1);
            h.streams = r_streams;
          }
          block_gemm(tau, x, h, k, j0, merged ? KH : len);
        }
      }
      FwdBlock<A>(s, sm, ly, st, j0, len, hr_arg, hb[par], h_rec(pn), hb[1 - par], c, hh_step,
                  ylayer, peep, phase, gstep);
      if (lanes && st + 1 < steps) {  // hᵀ of the block's units for the next step
        // (bf16: pair rows from j0 / 2 on; unit blocks start at multiples of 16)
        LanesTranspose<A>(B, len, hb[1 - par] + j0, Hs,
                          w.h_lanes[1 - par] + (b16 ? j0 / 2 : j0) * lanes_bp, lanes_bp, b16);
      }
      if (s.has_mask && phase != StepPhase::kBeforeProduct && st + 1 < steps) {
        mask_rows(st + 1, j0, len, hb[1 - par], hm[1 - par]);
      }
    };
    if (pipelined) {
      // gx of each chunk of steps [s0, s1) (time rows [tau0, tau1)), before its steps run.
      ChainWithChunksAhead(
          d, steps, phases, B,
          SideHelpers(d, double(steps) * B * KH * (ly.in + Hs), double(ly.in) / Hs),
          [&](Index t) { item(t, 0); },
          [&](Index s0, Index s1) {
            project(sm.reverse ? s.T - s1 : s0, sm.reverse ? s.T - s0 : s1);
          });
    } else {
      StepLoop(d, steps * phases, blocks, cost, item);
    }
    h_cur = hb[steps % 2];
  } else {
    // Projection: per step R·h, the pointwise pass, then the projection, each on the pool.
    // (The projection comes only from CudnnRNN and the recurrent mask only from the MPSGraph
    // ops: the two never meet.)
    for (Index st = 0; st < steps; ++st) {
      Gemm<A>(d, false, true, B, KH, Hs, h_cur, ly.R, hr, false);
      ParallelFor(d, blocks, cost, [&](Index b0, Index b1) {
        for (Index blk = b0; blk < b1; ++blk) {
          const Index j0 = ub.Start(blk), len = ub.Len(blk);
          FwdBlock<A>(s, sm, ly, st, j0, len, hr, h_cur, h_cur, h_next, c, hh_step, ylayer,
                      peep, StepPhase::kWhole);
        }
      });
      Gemm<A>(d, false, true, B, Hs, H, hh_step, ly.Pm, h_next, false);
      const Index yst = s.D * Hs;
      for (Index b = 0; b < B; ++b) {
        const Index tau = sm.Tau(b, st);
        if (tau < 0) {
          std::copy_n(h_cur + b * Hs, Hs, h_next + b * Hs);
        } else {
          const Index row = ly.Row(s.T, B, tau, b);
          const Index yrow = ly.YRow(s.T, B, tau, b);
          std::copy_n(h_next + b * Hs, Hs, ylayer + yrow * yst + ly.dcol);
          if (ly.hprev != nullptr) std::copy_n(h_cur + b * Hs, Hs, ly.hprev + row * Hs);
        }
      }
      std::swap(h_cur, h_next);
    }
  }
  std::copy_n(h_cur, B * Hs, a.hn + pseudo * B * Hs);
  if (s.mode == RnnMode::kLstm) std::copy_n(c, B * H, a.cn + pseudo * B * H);
  if (ly.y16 != nullptr && !tlanes) {  // the packed step's words (one layer and direction)
    Convert(d, static_cast<const A*>(ylayer), reinterpret_cast<Eigen::bfloat16*>(ly.y16),
            TB * Hs);
  }
}

template <typename A>
void StepForward(const CpuDevice& d, const RnnSpec& s, const Layer<A>& ly,
                 const RnnFwdArgs<A>& a, const A* hr, A* ylayer, StepPhase phase, A* rh) {
  const Index B = s.B, H = s.H;
  const StepMap sm{nullptr, 1, false};
  const A* peep = s.peephole ? a.peephole : nullptr;
  if (s.mode == RnnMode::kLstm) std::copy_n(a.c0, B * H, a.cn);  // FwdBlock updates c in place
  ForUnitBlocks(d, H, B * H, [&](Index j0, Index len) {
    FwdBlock<A>(s, sm, ly, 0, j0, len, hr, a.h0, a.h0, a.hn, a.cn, rh, ylayer, peep, phase);
  });
}

}  // namespace rnn_cpu

#define TFRNN_INSTANTIATE_RNN_FWD(A)                                                          \
  template rnn_cpu::FwdRoad rnn_cpu::RoadOf<A>(const CpuDevice&, const RnnSpec&, Index,        \
                                               const rnn_cpu::Layer<A>&, const StepMap&);      \
  template void rnn_cpu::LayerForward<A>(const CpuDevice&, const RnnSpec&, Index,              \
                                         const rnn_cpu::Layer<A>&, const A*,                   \
                                         const RnnFwdArgs<A>&, A*, A*);                        \
  template void rnn_cpu::StepForward<A>(const CpuDevice&, const RnnSpec&,                      \
                                        const rnn_cpu::Layer<A>&, const RnnFwdArgs<A>&,        \
                                        const A*, A*, StepPhase, A*);
TFRNN_INSTANTIATE_RNN_FWD(float)
TFRNN_INSTANTIATE_RNN_FWD(double)
#undef TFRNN_INSTANTIATE_RNN_FWD

}  // namespace tfrnn
