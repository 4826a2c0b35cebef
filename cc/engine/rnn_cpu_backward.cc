// CPU implementation of the stacked-RNN engine, backward (see rnn.h for the equations,
// types.h for the params and reserve layouts; the forward is in rnn_cpu.cc).
#include "cc/engine/rnn.h"

#include "cc/engine/packed_gemm.h"
#include "cc/engine/rnn_cpu_common.h"
#include "cc/engine/weight_grads.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace tfrnn {
namespace {

using namespace rnn_cpu;  // NOLINT

// dh[b, cols] += src[b, cols] ⊙ mask row of (b, step) for the rows that have that step.
template <typename A>
void AddMasked(const RnnSpec& s, const StepMap& sm, const A* mask, bool per_step, Index dcol,
               Index step, Index j0, Index len, const A* src, A* dh) {
  const Index Hs = RnnHs(s);
  for (Index b = 0; b < s.B; ++b) {
    const Index tau = sm.Tau(b, step);
    if (tau < 0) continue;
    Vec<A>(dh + b * Hs + j0, len) +=
        CVec<A>(src + b * Hs + j0, len) *
        CVec<A>(MaskRow(s, mask, per_step, tau, b) + dcol + j0, len);
  }
}

// Pointwise backward at step `step` for units [j0, j0 + len). dh holds the carry dL/dh from
// later steps (without the direct h_prev term of this step's rows; see below), dc the carry
// dL/dc. With projection, dhh holds dL/d(unprojected h) of the rows and dh is not touched.
template <typename A>
void BwdBlock(const RnnSpec& s, const StepMap& sm, const Layer<A>& ly, const A* c0p,
              const A* dyl, Index step, Index j0, Index len, const BwdBufs<A>& w,
              const A* peep, const RnnBwdArgs<A>& a) {
  const Index B = s.B, H = s.H, Hs = RnnHs(s), K = RnnK(s), KH = K * H, yst = s.D * Hs;
  const bool proj = s.P > 0;
  const bool clip_mask = s.exact_clip_grad && s.cell_clip > 0.f;  // the LSTM's
  const A one(1);
  // The LSTM's common case (logistic gates, tanh cell and candidate; no projection,
  // peepholes, clip mask or extra activation gradients) compiled on its own, dL/dh formed in
  // its chunk loop: with the activations' switches and the optional terms in the loop, the
  // loop kept its values on the stack.
  const bool plain = s.mode == RnnMode::kLstm && !proj && LstmStandard(s) &&
                     !clip_mask && a.dco == nullptr &&
                     a.dact[0] == nullptr && a.dact[1] == nullptr && a.dact[2] == nullptr &&
                     a.dact[3] == nullptr;
  for (Index b = 0; b < B; ++b) {
    const Index tau = sm.Tau(b, step);
    A* dr = w.dhr_cur + b * KH + j0;
    if (tau < 0) {
      for (Index k = 0; k < K; ++k) Vec<A>(dr + k * H, len).setZero();
      continue;
    }
    const Index row = tau * B + b;
    A* dg = w.dgx + row * KH + j0;
    const bool carry = !proj && w.dh != nullptr;  // no dh: no carry (a single step)
    Vec<A> dhc(carry ? w.dh + b * Hs + j0 : dg, carry ? len : 0);
    auto act = [&](Index k) { return CVec<A>(ly.Act(k, row) + j0, len); };
    // dL/dh of this step, materialised in the slot of the gate written last (lstm: o, gru: the
    // candidate, rnn: the only one).
    const Index last = s.mode == RnnMode::kLstm ? s.gate_pos[3] : K - 1;
    Vec<A> dt(dr + last * H, len);
    if (plain) {
      // below, per chunk
    } else if (proj) {
      dt = CVec<A>(w.dhh + b * H + j0, len);
    } else if (carry) {
      dt = CVec<A>(dyl + row * yst + ly.dcol + j0, len) + dhc;
    } else {
      dt = CVec<A>(dyl + row * yst + ly.dcol + j0, len);
    }
    switch (s.mode) {
      case RnnMode::kLstm: {
        // One pass over the units in packet chunks, the step's gradients in registers.
        const int* pos = s.gate_pos;
        const A* csr = ly.aux + row * H + j0;
        const A* cpr = step == 0 ? c0p + b * H + j0 : ly.aux + (sm.Prev(tau) * B + b) * H + j0;
        const A* cor = ly.co != nullptr ? ly.co + row * H + j0 : nullptr;
        const A* dcs = a.dc_seq != nullptr
                           ? a.dc_seq + row * s.D * H + (ly.dcol / Hs) * H + j0
                           : nullptr;
        A* dcb = w.dc + b * H + j0;
        const A* dtr = dr + last * H;  // dL/dh of the step (above; plain: dyr + dhcp)
        const A* dyr = dyl + row * yst + ly.dcol + j0;
        A* dhcp = carry ? dhc.data() : nullptr;
        const bool o_new = s.peephole && s.peephole_o_new;
        auto chunks = [&](auto plain_tag) {
          constexpr bool kPlain = decltype(plain_tag)::value;
          ChunkedPadded<A>(len, [&](auto chunk, Index o0, Index wd) TFRNN_INLINE_LAMBDA {
            using C = decltype(chunk);
            using L = typename C::L;
            auto in = [&](const A* p) TFRNN_INLINE_LAMBDA { return C::In(p + o0, wd); };
            auto put = [&](A* p, const auto& v) TFRNN_INLINE_LAMBDA { C::Out(p + o0, wd, v); };
            auto plane = [&](int q) { return in(ly.Act(pos[q], row) + j0); };
            const auto i = plane(0), f = plane(1), cc = plane(2), o = plane(3);
            const auto cs = in(csr), cprev = in(cpr);
            // Optional extra gradient of an activation, [TB, H] (RnnBwdArgs::dact, dco).
            auto add_grad = [&](const A* g, L& v) {
              if constexpr (!kPlain) {
                if (g != nullptr) v += in(g + row * H + j0);
              }
            };
            // d *= act'(y): `act` in general, the plain case's `fixed` activation.
            auto grad = [&](RnnAct act, RnnAct fixed, const auto& y, L& d) TFRNN_INLINE_LAMBDA {
              MulActGrad(kPlain ? fixed : act, y, d);
            };
            auto peep_of = [&](int q) { return in(peep + pos[q] * H + j0); };
            L dt;
            if constexpr (kPlain) {
              dt = in(dyr);
              if (dhcp != nullptr) {
                dt += in(dhcp);
                put(dhcp, L::Zero());
              }
            } else {
              dt = in(dtr);
            }
            // cell_act(c): the forward's (ly.co), or recomputed.
            L tc;
            if (cor != nullptr) {
              tc = in(cor);
            } else {
              tc = cs;
              ActivateIn(kPlain ? RnnAct::kTanh : s.cell_act, tc);
            }
            L dc = in(dcb);
            if (dcs != nullptr) dc += in(dcs);
            L tmp = dt * o;
            add_grad(a.dco, tmp);
            grad(s.cell_act, RnnAct::kTanh, tc, tmp);
            dc += tmp;
            L dout = dt * tc;
            add_grad(a.dact[3], dout);
            grad(s.gate_act[3], RnnAct::kSigmoid, o, dout);
            if (!kPlain && o_new) dc += dout * peep_of(3);
            if (!kPlain && clip_mask) dc = (cs.abs() < A(s.cell_clip)).select(dc, A(0));
            L di = dc * cc;
            add_grad(a.dact[0], di);
            grad(s.gate_act[0], RnnAct::kSigmoid, i, di);
            L df = dc * cprev;
            add_grad(a.dact[1], df);
            grad(s.gate_act[1], RnnAct::kSigmoid, f, df);
            L dcc = dc * i;
            add_grad(a.dact[2], dcc);
            grad(s.gate_act[2], RnnAct::kTanh, cc, dcc);
            dc *= f;
            if (!kPlain && s.peephole) {
              dc += di * peep_of(0) + df * peep_of(1) + dcc * peep_of(2);
              if (!o_new) dc += dout * peep_of(3);
            }
            put(dcb, dc);
            for (A* g : {dr, dg}) {
              put(g + pos[0] * H, di);
              put(g + pos[1] * H, df);
              put(g + pos[2] * H, dcc);
              put(g + pos[3] * H, dout);
              if (dg == dr) break;
            }
          });
        };
        if (plain) {
          chunks(std::true_type());
        } else {
          chunks(std::false_type());
          if (carry) dhc.setZero();
        }
        break;
      }
      case RnnMode::kGru: {
        // One pass over the units in packet chunks, the step's gradients in registers.
        const int pr = s.gate_pos[0], pz = s.gate_pos[1], pn = s.gate_pos[2];
        const bool rb = s.gru_reset_before;
        const A* hpr = ly.hprev + row * Hs + j0;
        const A* auxr = rb ? nullptr : ly.aux + row * H + j0;
        const A* dtr = dr + last * H;  // dL/dh of the step (above)
        A* dhcp = carry ? w.dh + b * Hs + j0 : nullptr;
        A* dhr_row = w.dhr + row * KH + j0;
        ChunkedPadded<A>(len, [&](auto chunk, Index o0, Index wd) TFRNN_INLINE_LAMBDA {
          using C = decltype(chunk);
          using L = typename C::L;
          auto in = [&](const A* p) TFRNN_INLINE_LAMBDA { return C::In(p + o0, wd); };
          auto put = [&](A* p, const L& v) TFRNN_INLINE_LAMBDA { C::Out(p + o0, wd, v); };
          auto plane = [&](int k) { return in(ly.Act(k, row) + j0); };
          const auto rg = plane(pr), z = plane(pz), n = plane(pn), hp = in(hpr);
          const L dt = in(dtr);
          L dpn, dpz;
          if (s.gru_z_new) {
            dpn = dt * z;
            dpz = dt * (n - hp);
            if (dhcp != nullptr) put(dhcp, dt * (one - z));
          } else {
            dpn = dt * (one - z);
            dpz = dt * (hp - n);
            if (dhcp != nullptr) put(dhcp, dt * z);
          }
          if (a.dact[1] != nullptr) dpz += in(a.dact[1] + row * H + j0);
          if (a.dact[2] != nullptr) dpn += in(a.dact[2] + row * H + j0);
          MulActGrad(s.gate_act[1], z, dpz);
          MulActGrad(s.gate_act[2], n, dpn);
          put(dg + pz * H, dpz);
          put(dg + pn * H, dpn);
          put(dr + pz * H, dpz);
          put(dhr_row + pz * H, dpz);
          if (rb) {
            // r's gradient needs dL/d(r ⊙ h_rec) = dpn · R_n over every unit: GruResetBwd.
            // Until then the carry's candidate slot holds dpn.
            put(dr + pr * H, L::Zero());
            put(dr + pn * H, dpn);
            put(dhr_row + pn * H, dpn);
          } else {
            L dpr = dpn * in(auxr);
            MulActGrad(s.gate_act[0], rg, dpr);
            const L dnr = dpn * rg;
            put(dg + pr * H, dpr);
            for (A* g : {dr, dhr_row}) {
              put(g + pr * H, dpr);
              put(g + pn * H, dnr);
            }
          }
        });
        break;
      }
      case RnnMode::kTanh:
      case RnnMode::kRelu: {
        CVec<A> h = act(0);
        if (s.mode == RnnMode::kTanh) {
          dt = dt * (one - h.square());
        } else {
          dt = (h > A(0)).select(dt, A(0));
        }
        Vec<A>(dg, len) = dt;
        dhc.setZero();
        break;
      }
    }
  }
}

// Second half of a reset-before gru step's backward, units [j0, j0 + len): with
// drh = dL/d(r ⊙ h_rec) = dpn · R_n (dpn of every unit is in the carry's candidate slot;
// ly.R null: w.dhm already holds drh), r's gradient is drh ⊙ h_rec (+ a.dact[0]) and h_prev
// receives drh ⊙ r (⊙ mask).
template <typename A>
void GruResetBwd(const RnnSpec& s, const StepMap& sm, const Layer<A>& ly, const A* mask,
                 bool mask_per_step, Index step, Index j0, Index len, const BwdBufs<A>& w,
                 const RnnBwdArgs<A>& a) {
  const Index B = s.B, H = s.H, Hs = RnnHs(s), KH = RnnK(s) * H;
  const int pr = s.gate_pos[0], pn = s.gate_pos[2];
  if (ly.R != nullptr) {
    Eigen::Map<const MatRM<A>, 0, OStride> dpn(w.dhr_cur + pn * H, B, H, OStride(KH));
    Eigen::Map<MatRM<A>, 0, OStride> drh(w.dhm + j0, B, len, OStride(Hs));
    if (s.weights_xw) {  // R_n is R's columns [pn·H, (pn+1)·H), stored [Hs, K·H]
      Eigen::Map<const MatRM<A>, 0, OStride> rnt(ly.R + j0 * KH + pn * H, len, H, OStride(KH));
      drh.noalias() = dpn * rnt.transpose();
    } else {
      Eigen::Map<const MatRM<A>, 0, OStride> rn(ly.R + pn * H * Hs + j0, H, len, OStride(Hs));
      drh.noalias() = dpn * rn;
    }
  }
  for (Index b = 0; b < B; ++b) {
    const Index tau = sm.Tau(b, step);
    if (tau < 0) continue;
    const Index row = tau * B + b;
    const A* m = s.has_mask
                     ? MaskRow(s, mask, mask_per_step, tau, b) + MaskCol(s, ly.dcol, pn) + j0
                     : nullptr;
    const A* g = a.dact[0] != nullptr ? a.dact[0] + row * H + j0 : nullptr;
    Chunked<A>(len, [&](auto width, Index o0, Index wd) TFRNN_INLINE_LAMBDA {
      using V = VecN<A, decltype(width)::value>;
      using CV = CVecN<A, decltype(width)::value>;
      using L = Loc<A, decltype(width)::value>;
      const CV d(w.dhm + b * Hs + j0 + o0, wd), rg(ly.Act(pr, row) + j0 + o0, wd);
      const CV hp(ly.hprev + row * Hs + j0 + o0, wd);
      V dh(w.dh + b * Hs + j0 + o0, wd);
      L dpr;
      if (m != nullptr) {
        const CV mk(m + o0, wd);
        dpr = d * hp * mk;
        dh += d * rg * mk;
      } else {
        dpr = d * hp;
        dh += d * rg;
      }
      if (g != nullptr) dpr += CV(g + o0, wd);
      MulActGrad(s.gate_act[0], rg, dpr);
      V(w.dgx + row * KH + pr * H + j0 + o0, wd) = dpr;
      V(w.dhr_cur + b * KH + pr * H + j0 + o0, wd) = dpr;
      V(w.dhr + row * KH + pr * H + j0 + o0, wd) = dpr;
    });
  }
}

// The pipelined layer backward (LayerBackward's conditions): chain(i) for i in [0, steps]
// runs the step chain (i = steps: dh0) on the caller while tasks compute, per chunk of finished
// steps [s0, s1) (time rows [tau0, tau1) of dgx/dhr: every sequence has full length, or the
// direction is forward, where the rows of steps past a sequence's length are zero):
//   per column panel [c0, c1) of the KH gate columns, in chunk order (a fixed order of
//   summation): dW[c0:c1] (+)= dgxᵀ·x, dR[c0:c1] (+)= dhrᵀ·h_prev, dbW/dbR (+)= column sums
//   (weights_xw: the transposed products into the columns [c0, c1) of dW, dR);
//   din rows (+)= dgx · W.
template <typename A, typename Chain>
void PipelinedGrads(const CpuDevice& d, const RnnSpec& s, const Layer<A>& ly, bool reverse,
                    Index steps, const A* xin, const A* h0, A* din, bool accumulate_din,
                    const BwdBufs<A>& w, Chain&& chain) {
  const Index B = s.B, Hs = RnnHs(s), KH = RnnK(s) * s.H, in = ly.in, T = s.T;
  const bool b16 = bf16::ProductsFor(s), xw = s.weights_xw;
  const bool wgrads = ly.WeightGrads();
  auto first_row = [&](Index s0, Index s1) { return (reverse ? T - s1 : s0) * B; };
  // W is packed once for the din rows of every chunk (Eigen's product would pack it per chunk
  // and read the gate gradients' rows through its own packing: docs/PERFORMANCE.md, "The
  // backward's input gradient"), beside the chain's first step; a null din: no input gradient
  // (RnnBwdArgs::dx).
  auto pack_w = [&] {
    if (in == 0 || din == nullptr) return;
    if (xw) {
      packed::PackColMajor<A>(KH, in, ly.W, KH, w.wpack, b16);
    } else {
      packed::PackRowMajor<A>(KH, in, ly.W, in, w.wpack, 0, 0, b16);
    }
  };
  // The bias gradients' column sums, over all chunks, rounded to A at the end (SumAcc); the
  // lstm's dbR (dhr is dgx) is dbW.
  const bool sum_r_own = ly.dbR != nullptr && w.dhr != w.dgx;
  SumAcc sum_w = SumAcc::Zero(KH), sum_r = SumAcc::Zero(sum_r_own ? KH : 0);
  // The side work beside the chain, in chains' worth: dW and dR (without weight gradients:
  // none), din.
  const double side = double((din != nullptr ? in : 0) + (wgrads ? in + Hs : 0)) / Hs;
  // The din rows of each chunk in as many parts as threads: with the panels, the last
  // chunk's tasks end near together (30×8×512×512: 5-7 % faster than in one part).
  const int helpers = SideHelpers(d, double(steps) * B * KH * (in + Hs), side);
  ChainWithChunkGrads(
      d, steps, B, KH, helpers, helpers + 1, chain, pack_w,
      [&](Index s0, Index s1, Index c0, Index c1, bool first) {
        if (!wgrads) return;
        const Index r0 = first_row(s0, s1), rows = (s1 - s0) * B, len = c1 - c0;
        // The first chunk of a panel sets it, the later ones add.
        WeightGradPanel<A>(s, b16, in, len, rows, w.dgx + r0 * KH + c0, xin + r0 * in, ly.dW,
                           c0, !first);
        HprevParts(s, ly, h0, r0, rows, [&](const A* hp, Index r, Index n) {
          // The lstm's dhr is dgx: the whole panel just multiplied by x again.
          const bool same = w.dhr == w.dgx && in > 0 && r == 0 && n == rows;
          WeightGradPanel<A>(s, b16, Hs, len, n, w.dhr + (r0 + r) * KH + c0, hp, ly.dR, c0,
                             !first || r > 0, same);
        });
        auto column_sums = [&](SumAcc& acc, const A* g) {
          auto v = acc.segment(c0, len);
          if (first) v.setZero();
          for (Index r = 0; r < rows; ++r) {
            v += CVec<A>(g + (r0 + r) * KH + c0, len).template cast<double>();
          }
        };
        column_sums(sum_w, w.dgx);
        if (sum_r_own) column_sums(sum_r, w.dhr);
      },
      [&](Index s0, Index s1) {
        if (in == 0 || din == nullptr) return;
        const Index r0 = first_row(s0, s1), rows = (s1 - s0) * B;
        packed::Gemm<A>(rows, KH, in, w.dgx + r0 * KH, KH, w.wpack, din + r0 * in, in,
                        accumulate_din, b16);
      });
  if (!wgrads) return;
  Vec<A>(ly.dbW, KH) = sum_w.template cast<A>();
  if (ly.dbR != nullptr) Vec<A>(ly.dbR, KH) = (sum_r_own ? sum_r : sum_w).template cast<A>();
}

// Peephole gradients: dp[gate] = Σ over steps dpre[gate] ⊙ c_prev (peephole_o_new: o's with
// the new c).
template <typename A>
void PeepholeGrads(const CpuDevice& d, const RnnSpec& s, const StepMap& sm, const Layer<A>& ly,
                   const A* c0p, const A* dgx, A* dp) {
  const Index B = s.B, H = s.H, K = RnnK(s), KH = K * H;
  const Index o_new = s.peephole_o_new ? s.gate_pos[3] : -1;
  constexpr Index kChunk = 64;
  const Index chunks = (H + kChunk - 1) / kChunk;
  ParallelFor(d, chunks, static_cast<double>(s.T * B) * kChunk * 8, [&](Index c0, Index c1) {
    for (Index ch = c0; ch < c1; ++ch) {
      const Index j0 = ch * kChunk, len = std::min(kChunk, H - j0);
      Eigen::Array<double, Eigen::Dynamic, Eigen::Dynamic> acc =
          Eigen::Array<double, Eigen::Dynamic, Eigen::Dynamic>::Zero(len, K);  // SumAcc per gate
      for (Index b = 0; b < B; ++b) {
        for (Index st = 0; st < sm.Len(b); ++st) {
          const Index tau = sm.Tau(b, st), row = tau * B + b;
          const A* cp = st == 0 ? c0p + b * H : ly.aux + (sm.Prev(tau) * B + b) * H;
          CVec<A> cprev(cp + j0, len), cnew(ly.aux + row * H + j0, len);
          const A* dg = dgx + row * KH;
          for (Index k = 0; k < K; ++k) {
            acc.col(k) += (CVec<A>(dg + k * H + j0, len) * (k == o_new ? cnew : cprev))
                              .template cast<double>();
          }
        }
      }
      for (Index k = 0; k < K; ++k) Vec<A>(dp + k * H + j0, len) = acc.col(k).template cast<A>();
    }
  });
}

}  // namespace

namespace rnn_cpu {

template <typename A>
void LayerBackward(const CpuDevice& d, const RnnSpec& s, Index pseudo, const Layer<A>& ly,
                   const A* xin, const A* dyl, const RnnBwdArgs<A>& a, A* din,
                   bool accumulate_din, const BwdBufs<A>& w0) {
  const Index B = s.B, H = s.H, Hs = RnnHs(s), K = RnnK(s), KH = K * H, TB = s.T * B;
  const bool proj = s.P > 0, gru = s.mode == RnnMode::kGru;
  const bool reset_before = gru && s.gru_reset_before, b16 = bf16::ProductsFor(s);
  const StepMap sm = StepMap::Of(s, pseudo, a.lengths);
  const bool wgrads = ly.WeightGrads();  // none: a frozen layer's backward
  const A* peep = s.peephole ? a.peephole + pseudo * KH : nullptr;
  BwdBufs<A> w = w0;
  // Rows no sequence reaches get no gradient (with every sequence full length, the steps
  // write every row).
  if (!sm.AllFull(B)) {
    Zero(d, w.dgx, TB * KH);
    if (gru) Zero(d, w.dhr, TB * KH);
  }
  if (proj) Zero(d, w.dhtot, TB * s.P);
  std::copy_n(a.dhn + pseudo * B * Hs, B * Hs, w.dh);
  const A* c0p = s.mode == RnnMode::kLstm ? a.c0 + pseudo * B * H : nullptr;
  if (s.mode == RnnMode::kLstm) std::copy_n(a.dcn + pseudo * B * H, B * H, w.dc);
  const Index steps = sm.MaxSteps(B);
  // Small batch, no projection, mask or reset-before gru, an input GEMM, and steps that are
  // time rows (as in LayerForward): the step chain on one thread, the weight, bias and input
  // gradients of finished steps beside it (types.h BwdChainPipelined).
  const bool pipelined = (!sm.reverse || sm.AllFull(B)) && !proj && !s.has_mask &&
                         !reset_before && !s.preprojected && ly.in > 0 &&
                         ly.in == ly.in_cols &&
                         BwdChainPipelined(steps, B, Hs * KH, b16, d.numThreads());
  const UnitBlocks ub = UnitBlocksOf(d, H, pipelined);
  const Index U = ub.U, blocks = ub.n;
  const double cost = (proj ? 0.0 : 2.0 * B * KH * U / 16) + kCostPerElem * B * U * K;
  const Index yst = s.D * Hs;
  const A* h0 = a.h0 + pseudo * B * Hs;
  if (!proj) {
    // dhr · R[:, units j0..]: B[k, c] = R[k, j0 + c] (K = KH; weights_xw: R[j0 + c, k]), packed
    // once per layer; block j0 starts at j0·KH. A reset-before gru candidate reaches h_prev
    // only through r ⊙ h_rec (GruResetBwd), not through R·h: its rows are packed as zeros.
    // With per-gate masks (mask_gates) each gate's rows are packed on their own: the step
    // multiplies gate k's dhr by R_k and adds the result ⊙ mask_k to dh.
    const Index zk0 = reset_before ? s.gate_pos[2] * H : 0, zk1 = reset_before ? zk0 + H : 0;
    // With weights_xw a reset-before gru packs per gate too (its candidate's block left out).
    const bool gate_masks = RnnGateMasks(s), per_gate = gate_masks || (reset_before && s.weights_xw);
    // Fewer blocks than threads (the pipelined chain's one block): each block's packing in
    // runs of panels, one per thread (R of H = 512 is 4 MiB to pack before the first step).
    const Index parts = per_gate || zk1 > zk0 || blocks == 0
                            ? 1
                            : std::max<Index>(1, d.numThreads() / blocks);
    if (steps > 0) {
      ParallelFor(d, blocks * parts, 2.0 * U * KH / parts, [&](Index i0, Index i1) {
        for (Index i = i0; i < i1; ++i) {
          const Index blk = i / parts, j0 = ub.Start(blk), len = ub.Len(blk);
          if (parts > 1) {
            packed::PackPart<A>(KH, len, s.weights_xw ? ly.R + j0 * KH : ly.R + j0,
                                s.weights_xw ? KH : Hs, s.weights_xw, w.rpack + j0 * KH, b16,
                                i % parts, parts);
          } else if (per_gate) {  // one packed [H, len] block per gate, at k·H·len
            for (Index k = 0; k < K; ++k) {
              A* dst = w.rpack + j0 * KH + k * H * len;
              if (s.weights_xw) {
                packed::PackColMajor<A>(H, len, ly.R + j0 * KH + k * H, KH, dst, b16);
              } else {
                packed::PackRowMajor<A>(H, len, ly.R + k * H * Hs + j0, Hs, dst, 0, 0, b16);
              }
            }
          } else if (s.weights_xw) {
            packed::PackColMajor<A>(KH, len, ly.R + j0 * KH, KH, w.rpack + j0 * KH, b16);
          } else {
            packed::PackRowMajor<A>(KH, len, ly.R + j0, Hs, w.rpack + j0 * KH, zk0, zk1, b16);
          }
        }
      });
      // One work item per (phase of a step, unit block) on StepLoop, steps in reverse: the
      // block's share of dh += dhr_{t+1} · R, then its pointwise backward (a reset-before gru
      // step has a second phase, GruResetBwd, which needs dpn of every unit). A last item per
      // block adds dhr of step 0 · R to dh: the gradient of h0. The per-step dhr alternates
      // between two buffers.
      A* dr[2] = {w.dhr_cur, w.dhr_prev};
      // Steps that are time rows, dhr == dgx (not gru): a step's gate gradients are written
      // once, to its dgx rows, and the next step's recurrent product reads them there.
      const bool in_dgx = !gru && (!sm.reverse || sm.AllFull(B));
      auto step_rows = [&](Index st) {
        return w.dgx + (sm.reverse ? s.T - 1 - st : st) * B * KH;
      };
      const Index phases = reset_before ? 2 : 1;
      auto item = [&](Index t, Index blk) {
        const Index i = t / phases, st = steps - 1 - i;
        const bool second = t % phases == 1;
        const Index j0 = ub.Start(blk), len = ub.Len(blk);
        BwdBufs<A> wl = w;
        if (in_dgx) {
          if (st >= 0) wl.dhr_cur = step_rows(st);
          if (st + 1 < steps) wl.dhr_prev = step_rows(st + 1);
        } else {
          wl.dhr_cur = dr[i % 2];
          wl.dhr_prev = dr[1 - i % 2];
        }
        if (!second && st + 1 < steps) {
          const A* rp = w.rpack + j0 * KH;
          if (gate_masks) {
            for (Index k = 0; k < K; ++k) {
              if (reset_before && k == s.gate_pos[2]) continue;
              packed::Gemm<A>(B, H, len, wl.dhr_prev + k * H, KH, rp + k * H * len, w.dhm + j0,
                              Hs, false, b16);
              AddMasked<A>(s, sm, a.mask, a.mask_per_step, MaskCol(s, ly.dcol, k), st + 1, j0,
                           len, w.dhm, w.dh);
            }
          } else if (per_gate) {
            for (Index k = 0; k < K; ++k) {
              if (k == s.gate_pos[2]) continue;  // reset-before: GruResetBwd
              packed::Gemm<A>(B, H, len, wl.dhr_prev + k * H, KH, rp + k * H * len, w.dh + j0,
                              Hs, true, b16);
            }
          } else if (s.has_mask) {
            packed::Gemm<A>(B, KH, len, wl.dhr_prev, KH, rp, w.dhm + j0, Hs, false, b16);
            AddMasked<A>(s, sm, a.mask, a.mask_per_step, ly.dcol, st + 1, j0, len, w.dhm, w.dh);
          } else {
            packed::Gemm<A>(B, KH, len, wl.dhr_prev, KH, rp, w.dh + j0, Hs, true, b16);
          }
        }
        if (st < 0) return;
        if (second) {
          GruResetBwd<A>(s, sm, ly, a.mask, a.mask_per_step, st, j0, len, wl, a);
        } else {
          BwdBlock<A>(s, sm, ly, c0p, dyl, st, j0, len, wl, peep, a);
        }
      };
      if (pipelined) {
        PipelinedGrads<A>(d, s, ly, sm.reverse, steps, xin, h0, din, accumulate_din, w,
                          [&](Index t) { item(t, 0); });
        // Time rows no sequence reaches (shorter sequences): no gradient.
        if (din != nullptr && !accumulate_din) {
          Zero(d, din + steps * B * ly.in, (s.T - steps) * B * ly.in);
        }
      } else {
        StepLoop(d, steps * phases + 1, blocks, cost, item);
      }
    }
  } else {
    // Projection (never with a recurrent mask: see LayerForward): per step on the pool.
    for (Index st = steps - 1; st >= 0; --st) {
      if (st + 1 < steps) Gemm<A>(d, false, false, B, Hs, KH, w.dhr_prev, ly.R, w.dh, true);
      for (Index b = 0; b < B; ++b) {
        const Index tau = sm.Tau(b, st);
        Vec<A> dt(w.dtot + b * Hs, Hs);
        if (tau < 0) {
          dt.setZero();
          continue;
        }
        const Index row = tau * B + b;
        dt = CVec<A>(dyl + row * yst + ly.dcol, Hs) + CVec<A>(w.dh + b * Hs, Hs);
        Vec<A>(w.dhtot + row * Hs, Hs) = dt;
        Vec<A>(w.dh + b * Hs, Hs).setZero();
      }
      Gemm<A>(d, false, false, B, H, Hs, w.dtot, ly.Pm, w.dhh, false);
      ParallelFor(d, blocks, cost, [&](Index b0, Index b1) {
        for (Index blk = b0; blk < b1; ++blk) {
          const Index j0 = ub.Start(blk), len = ub.Len(blk);
          BwdBlock<A>(s, sm, ly, c0p, dyl, st, j0, len, w, peep, a);
        }
      });
      std::swap(w.dhr_prev, w.dhr_cur);
    }
    if (steps > 0) Gemm<A>(d, false, false, B, Hs, KH, w.dhr_prev, ly.R, w.dh, true);
  }
  std::copy_n(w.dh, B * Hs, a.dh0 + pseudo * B * Hs);
  if (s.mode == RnnMode::kLstm) std::copy_n(w.dc, B * H, a.dc0 + pseudo * B * H);

  if (s.peephole && wgrads) {
    PeepholeGrads<A>(d, s, sm, ly, c0p, w.dgx, a.dpeephole + pseudo * KH);
  }

  if (pipelined) return;  // the weight, bias and input gradients are done
  // Weight and bias gradients (none for a layer without dW, dR and dbW: RnnBwdArgs).
  if (wgrads) {
    // One GEMM or reduction each over all T·B rows; with bf16 products the bias sums taken by
    // dW's and dR's conversions of the gate gradients (GemmB16: ColumnSum's sums, in its
    // order; a GRU 20x128x512x1024's ColumnSum passes: 3.5 %).
    const bool sums_fused = b16 && std::is_same<A, float>::value;
    const bool dbw_fused = sums_fused && ly.in > 0;
    const bool dbr_fused = sums_fused && ly.dbR != nullptr && w.dhr != w.dgx && !RnnGateMasks(s);
    SumAcc sums_w = SumAcc::Zero(dbw_fused ? KH : 0), sums_r = SumAcc::Zero(dbr_fused ? KH : 0);
    // The lstm in the Keras layout (dhr is dgx): dW = xᵀ·dg and dR = h_prevᵀ·dg multiply the
    // same gate gradients, the B operand of both, packed once for the two (GemmLargeShared).
    const bool shared = b16 && s.weights_xw && w.dhr == w.dgx && ly.in > 0 && !s.has_mask &&
                        !RnnGateMasks(s) && SharedWeightGrads(d, s, ly, h0, TB, xin, w.dgx,
                                                              dbw_fused ? sums_w.data() : nullptr);
    if (ly.in > 0 && !shared) {
      WeightGrad<A>(d, s, b16, ly.in, TB, w.dgx, xin, ly.dW, false,
                    dbw_fused ? sums_w.data() : nullptr);
    }
    // R multiplied h_prev ⊙ mask (gate block k: ⊙ mask_k with mask_gates); reserve holds h_prev.
    auto masked_hprev = [&](Index k) {
      const Index col = MaskCol(s, ly.dcol, k);
      ParallelFor(d, TB, 2.0 * Hs, [&](Index r0, Index r1) {
        for (Index r = r0; r < r1; ++r) {
          Vec<A>(w.hrec + r * Hs, Hs) =
              CVec<A>(ly.hprev + r * Hs, Hs) *
              CVec<A>(MaskRow(s, a.mask, a.mask_per_step, r / B, r % B) + col, Hs);
        }
      });
      return w.hrec;
    };
    // Gate block k's columns of dhr, [TB, H] (RnnBwdGathers), for its own dR_k GEMM.
    auto gate_columns = [&](Index k) {
      ParallelFor(d, TB, 2.0 * H, [&](Index r0, Index r1) {
        for (Index r = r0; r < r1; ++r) std::copy_n(w.dhr + r * KH + k * H, H, w.gather + r * H);
      });
      return w.gather;
    };
    if (RnnGateMasks(s)) {
      for (Index k = 0; k < K; ++k) {
        if (reset_before && k == s.gate_pos[2]) continue;  // below
        const A* hrec = masked_hprev(k);
        if (s.weights_xw) {
          WeightGradCols<A>(d, s, b16, Hs, TB, w.dhr + k * H, hrec, ly.dR, k * H, H);
        } else {
          GemmB16<A>(d, b16, true, false, H, Hs, TB, gate_columns(k), hrec, ly.dR + k * H * Hs,
                     false);
        }
      }
    } else if (s.has_mask) {
      WeightGrad<A>(d, s, b16, Hs, TB, w.dhr, masked_hprev(0), ly.dR, false,
                    dbr_fused ? sums_r.data() : nullptr);
    } else if (!shared) {
      HprevParts(s, ly, h0, 0, TB, [&](const A* hp, Index r, Index n) {
        WeightGrad<A>(d, s, b16, Hs, n, w.dhr + r * KH, hp, ly.dR, r > 0,
                      dbr_fused ? sums_r.data() : nullptr);
      });
    }
    if (reset_before) {  // R_n multiplied r ⊙ h_rec (aux)
      const Index pn = s.gate_pos[2];
      if (s.weights_xw) {
        WeightGradCols<A>(d, s, b16, Hs, TB, w.dhr + pn * H, ly.aux, ly.dR, pn * H, H);
      } else {
        Gemm<A>(d, true, false, H, Hs, TB, gate_columns(pn), ly.aux, ly.dR + pn * H * Hs, false);
      }
    }
    if (proj) Gemm<A>(d, true, false, s.P, H, TB, w.dhtot, ly.hh, ly.dP, false);
    if (dbw_fused) {
      Vec<A>(ly.dbW, KH) = sums_w.template cast<A>();
    } else {
      ColumnSum<A>(d, w.dgx, TB, KH, ly.dbW);
    }
    if (ly.dbR != nullptr) {
      if (w.dhr == w.dgx) {
        std::copy_n(ly.dbW, KH, ly.dbR);  // the lstm's dhr is dgx
      } else if (dbr_fused) {
        Vec<A>(ly.dbR, KH) = sums_r.template cast<A>();
      } else {
        ColumnSum<A>(d, w.dhr, TB, KH, ly.dbR);
      }
    }
  }
  // Gradient of the layer input (none for a null din: RnnBwdArgs::dx).
  if (din == nullptr) return;
  if (s.preprojected && pseudo < s.D) {
    ParallelFor(d, TB, 2.0 * KH, [&](Index r0, Index r1) {
      for (Index r = r0; r < r1; ++r) {
        std::copy_n(w.dgx + r * KH, KH, din + r * ly.in_cols + (pseudo % s.D) * KH);
      }
    });
  } else if (ly.in > 0 || ly.in_cols == 0) {
    GemmB16<A>(d, b16, false, s.weights_xw, TB, ly.in, KH, w.dgx, ly.W, din, accumulate_din);
  } else {
    ParallelFor(d, TB, 2.0 * KH, [&](Index r0, Index r1) {
      for (Index r = r0; r < r1; ++r) {
        Vec<A> out(din + r * ly.in_cols, H);
        if (!accumulate_din) out.setZero();
        for (Index k = 0; k < K; ++k) out += CVec<A>(w.dgx + r * KH + k * H, H);
      }
    });
  }
}

template <typename A>
void StepBackward(const CpuDevice& d, const RnnSpec& s, const Layer<A>& ly,
                  const RnnBwdArgs<A>& a, const A* dyl, const BwdBufs<A>& w,
                  StepPhase phase) {
  const StepMap sm{nullptr, 1, false};
  const A* peep = s.peephole ? a.peephole : nullptr;
  ForUnitBlocks(d, s.H, s.B * s.H, [&](Index j0, Index len) {
    if (phase == StepPhase::kAfterProduct) {
      GruResetBwd<A>(s, sm, ly, nullptr, false, 0, j0, len, w, a);
    } else {
      BwdBlock<A>(s, sm, ly, a.c0, dyl, 0, j0, len, w, peep, a);
    }
  });
  if (phase == StepPhase::kAfterProduct) return;
  if (s.peephole) PeepholeGrads<A>(d, s, sm, ly, a.c0, w.dgx, a.dpeephole);
}

}  // namespace rnn_cpu

template <typename A>
void RnnBackward(const CpuDevice& d, const RnnSpec& s, const RnnBwdArgs<A>& a, A* ws) {
  const Index TB = s.T * s.B, B = s.B, Hs = RnnHs(s), ycols = s.D * Hs;
  Carver<A> cv(ws);
  const RnnBwdScratch<A> scratch = CarveRnnBwd(s, &cv);
  const BwdBufs<A>& w = scratch.layer;
  A* dy_buf = scratch.dy_buf;
  A* din_buf = scratch.din_buf;
  A* x_masked = scratch.x_masked;
  // Layer 0's input with padding rows zeroed, so that values past a sequence's length (which
  // the forward never read) cannot reach the weight gradient as NaN·0.
  const A* x0 = a.x;
  if (a.lengths != nullptr && RnnInWidth(s, 0) > 0) {
    bool padded = false;
    for (Index b = 0; b < B; ++b) padded = padded || a.lengths[b] < s.T;
    if (padded) {
      const Index I = s.I;
      ParallelFor(d, TB, 2.0 * I, [&](Index r0, Index r1) {
        for (Index r = r0; r < r1; ++r) {
          const Index t = r / B, b = r % B;
          if (t < a.lengths[b]) {
            std::copy_n(a.x + r * I, I, x_masked + r * I);
          } else {
            std::fill_n(x_masked + r * I, I, A(0));
          }
        }
      });
      x0 = x_masked;
    }
  }
  A* reserve = const_cast<A*>(a.reserve);  // read only
  const A* dyl = a.dy;
  for (Index l = s.L - 1; l >= 0; --l) {
    const A* xin = l == 0 ? x0 : a.reserve + RnnNextInOffset(s, l - 1);
    A* din = l == 0 ? a.dx : din_buf;
    for (Index dd = 0; dd < s.D; ++dd) {
      const Index pseudo = l * s.D + dd;
      Layer<A> ly;
      ly.gx = SetRnnLayer(s, pseudo, a.params, reserve, a.dparams, a.weights, a.dweights, &ly);
      LayerBackward<A>(d, s, pseudo, ly, xin, dyl, a, din, dd > 0, w);
    }
    if (l > 0) {
      // dL/d(layer l-1 output) = dL/d(layer l input) ⊙ dropout mask.
      if (RnnHasMask(s)) {
        MulInto<A>(d, din_buf, a.reserve + RnnMaskOffset(s, l - 1), dy_buf, TB * ycols);
      } else {
        std::swap(dy_buf, din_buf);
      }
      dyl = dy_buf;
    }
  }
}

#define TFRNN_INSTANTIATE_RNN_BWD(A)                                                          \
  template void RnnBackward<A>(const CpuDevice&, const RnnSpec&, const RnnBwdArgs<A>&, A*);    \
  template void rnn_cpu::LayerBackward<A>(const CpuDevice&, const RnnSpec&, Index,             \
                                          const rnn_cpu::Layer<A>&, const A*, const A*,        \
                                          const RnnBwdArgs<A>&, A*, bool,                      \
                                          const BwdBufs<A>&);                                  \
  template void rnn_cpu::StepBackward<A>(const CpuDevice&, const RnnSpec&,                     \
                                         const rnn_cpu::Layer<A>&, const RnnBwdArgs<A>&,       \
                                         const A*, const BwdBufs<A>&, StepPhase);
TFRNN_INSTANTIATE_RNN_BWD(float)
TFRNN_INSTANTIATE_RNN_BWD(double)
#undef TFRNN_INSTANTIATE_RNN_BWD

}  // namespace tfrnn
