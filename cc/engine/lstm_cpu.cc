// CPU implementation of the LSTM engine (see lstm.h for the equations and layouts).
#include "cc/engine/lstm.h"

#include <vector>

#include "cc/engine/packed_gemm.h"

namespace tfrnn {
namespace {

// Rough cycle costs per element, for the pool's work splitting.
constexpr double kFwdCostPerElem = 60;
constexpr double kBwdCostPerElem = 40;

// Forward pointwise pass for rows [n0, n1) and units [j0, j0 + len) of one step. `gates`
// holds x·Wx + h·Wh (no bias).
template <typename A>
void FwdRows(const LstmCellSpec& s, Index H, Index n0, Index n1, Index j0, Index len,
             const A* gates, const A* b, const A* cp, const A* wci, const A* wcf, const A* wco,
             A* i, A* cs, A* f, A* o, A* ci, A* co, A* h) {
  const A fb = static_cast<A>(s.forget_bias);
  const A clip = static_cast<A>(s.cell_clip);
  const bool do_clip = s.cell_clip > 0.f;
  for (Index n = n0; n < n1; ++n) {
    Chunked<A>(len, [&](auto width, Index c, Index w) {
      constexpr int W = decltype(width)::value;
      using V = VecN<A, W>;
      using CV = CVecN<A, W>;
      const Index jc = j0 + c;
      const A* g = gates + n * 4 * H + jc;
      CV gi(g + s.order.i * H, w), gc(g + s.order.c * H, w), gf(g + s.order.f * H, w),
          go(g + s.order.o * H, w);
      CV bi(b + s.order.i * H + jc, w), bc(b + s.order.c * H + jc, w),
          bf(b + s.order.f * H + jc, w), bo(b + s.order.o * H + jc, w);
      const Index r = n * H + jc;
      CV cpn(cp + r, w);
      V in(i + r, w), csn(cs + r, w), fn(f + r, w), on(o + r, w), cin(ci + r, w),
          con(co + r, w), hn(h + r, w);
      if (s.use_peephole) {
        in = (gi + bi + cpn * CV(wci + jc, w)).logistic();
        fn = (gf + bf + fb + cpn * CV(wcf + jc, w)).logistic();
      } else {
        in = (gi + bi).logistic();
        fn = (gf + bf + fb).logistic();
      }
      cin = (gc + bc).tanh();
      csn = in * cin + fn * cpn;
      if (do_clip) csn = csn.max(-clip).min(clip);
      con = csn.tanh();
      if (s.use_peephole) {
        on = (go + bo + csn * CV(wco + jc, w)).logistic();
      } else {
        on = (go + bo).logistic();
      }
      hn = on * con;
    });
  }
}

// Inputs of one backward step. Optional gradients are given as (pointer, row stride), with
// stride 0 pointing at a row of zeros when absent.
template <typename A>
struct BwdStep {
  const A *cp, *i, *cs, *f, *o, *ci, *co;  // [N, H]
  const A *cs_grad, *h_grad;                // [N, H]
  const A* dh_carry;                        // [N, H], dL/dh from step t+1 (through h_prev)
  Index dh_stride;
  const A *gi, *gf, *go, *gci, *gco;        // gate-output grads
  Index g_stride[5];
  A* dcs_carry;  // [N, H] in: dL/dcs_prev from step t+1; out: dL/dcs_{t-1}
  A* dgates;     // [N, 4H] out
};

// Backward pointwise pass for rows [n0, n1) of one step:
//   dh   = h_grad + dh_carry
//   do   = o(1-o) ⊙ (dh ⊙ co + g_o)
//   dcs  = (1-co²) ⊙ (dh ⊙ o + g_co) + cs_grad + dcs_carry [+ do ⊙ wco]
//          [⊙ (|cs| < clip) with the exact clip gradient]
//   dci  = (1-ci²) ⊙ (dcs ⊙ i + g_ci)
//   df   = f(1-f) ⊙ (dcs ⊙ cs_prev + g_f)
//   di   = i(1-i) ⊙ (dcs ⊙ ci + g_i)
//   dcs_prev = dcs ⊙ f [+ di ⊙ wci + df ⊙ wcf]
template <typename A>
void BwdRows(const LstmCellSpec& s, bool exact_clip, Index H, Index n0, Index n1, Index j0,
             Index len, const BwdStep<A>& st, const A* wci, const A* wcf, const A* wco) {
  const A clip = static_cast<A>(s.cell_clip);
  const bool mask_clip = exact_clip && s.cell_clip > 0.f;
  const A one(1);
  for (Index n = n0; n < n1; ++n) {
    Chunked<A>(len, [&](auto width, Index c, Index w) {
      constexpr int W = decltype(width)::value;
      using V = VecN<A, W>;
      using CV = CVecN<A, W>;
      const Index jc = j0 + c, r = n * H + jc;
      CV cpn(st.cp + r, w), in(st.i + r, w), csn(st.cs + r, w), fn(st.f + r, w),
          on(st.o + r, w), cin(st.ci + r, w), con(st.co + r, w);
      CV csg(st.cs_grad + r, w), hg(st.h_grad + r, w),
          dhc(st.dh_carry + n * st.dh_stride + jc, w);
      CV gi(st.gi + n * st.g_stride[0] + jc, w), gf(st.gf + n * st.g_stride[1] + jc, w),
          go(st.go + n * st.g_stride[2] + jc, w), gci(st.gci + n * st.g_stride[3] + jc, w),
          gco(st.gco + n * st.g_stride[4] + jc, w);
      A* dg = st.dgates + n * 4 * H + jc;
      V di(dg + s.order.i * H, w), dci(dg + s.order.c * H, w), df(dg + s.order.f * H, w),
          dout(dg + s.order.o * H, w);
      V dcs(st.dcs_carry + r, w);  // carry in, dcs in the middle, carry out
      // dh is used twice; materialise it in the o block first, then overwrite with do.
      dout = hg + dhc;
      dcs = (one - con.square()) * (dout * on + gco) + csg + dcs;
      dout = on * (one - on) * (dout * con + go);
      if (s.use_peephole) dcs += dout * CV(wco + jc, w);
      if (mask_clip) dcs = (csn.abs() < clip).select(dcs, A(0));
      dci = (one - cin.square()) * (dcs * in + gci);
      df = fn * (one - fn) * (dcs * cpn + gf);
      di = in * (one - in) * (dcs * cin + gi);
      if (s.use_peephole) {
        dcs = dcs * fn + di * CV(wci + jc, w) + df * CV(wcf + jc, w);
      } else {
        dcs = dcs * fn;
      }
    });
  }
}

// Peephole gradients over `rows` rows of dgates [rows, 4H]:
//   wci_grad = Σ di ⊙ cs_prev_row, wcf_grad = Σ df ⊙ cs_prev_row, wco_grad = Σ do ⊙ cs_row.
// cs_prev_row(r) is cp_first[r] for r < N, else cp_rest[r - N] (the previous step's cs).
template <typename A>
void PeepholeGrads(const CpuDevice& d, const LstmCellSpec& s, Index rows, Index N, Index H,
                   const A* dgates, const A* cp_first, const A* cp_rest, const A* cs_rows,
                   A* wci_grad, A* wcf_grad, A* wco_grad) {
  if (!s.use_peephole || rows == 0) {
    Zero(d, wci_grad, H);
    Zero(d, wcf_grad, H);
    Zero(d, wco_grad, H);
    return;
  }
  constexpr Index kChunk = 64;
  const Index chunks = (H + kChunk - 1) / kChunk;
  ParallelFor(d, chunks, static_cast<double>(rows) * kChunk * 6, [&](Index c0, Index c1) {
    for (Index c = c0; c < c1; ++c) {
      const Index h0 = c * kChunk, len = std::min(kChunk, H - h0);
      Vec<A> gci(wci_grad + h0, len), gcf(wcf_grad + h0, len), gco(wco_grad + h0, len);
      gci.setZero();
      gcf.setZero();
      gco.setZero();
      for (Index r = 0; r < rows; ++r) {
        const A* dg = dgates + r * 4 * H;
        const A* cp = r < N ? cp_first + r * H : cp_rest + (r - N) * H;
        CVec<A> cpr(cp + h0, len), csr(cs_rows + r * H + h0, len);
        gci += CVec<A>(dg + s.order.i * H + h0, len) * cpr;
        gcf += CVec<A>(dg + s.order.f * H + h0, len) * cpr;
        gco += CVec<A>(dg + s.order.o * H + h0, len) * csr;
      }
    }
  });
}

// Weights packed per unit block for packed::Gemm. Block b covers units [b·U, b·U + len).
//   forward, recurrent only: block j0 starts at j0·4H and holds per gate g
//             B[k, c] = w_h[k, g·H + j0 + c] (K = H): H·len elements per gate
//   forward, fused input: block j0 starts at j0·4(I+H) and holds per gate g the x rows,
//             B[k, c] = w[k, g·H + j0 + c] (K = I), then the h rows (K = H)
//   backward: block j0 starts at j0·4H, B[k, c] = w_h[j0 + c, k] (K = 4H)
// (w_h = w[I:], the recurrent rows.)
enum class Pack { kFwdRecurrent, kFwdFused, kBwd };
template <typename A>
void PackWeights(const CpuDevice& d, Pack kind, Index I, Index H, Index U, const A* w, A* out,
                 bool b16) {
  const Index blocks = (H + U - 1) / U, G = 4 * H;
  const Index xrows = kind == Pack::kFwdFused ? I : 0;
  ParallelFor(d, blocks, 4.0 * U * (xrows + H), [&](Index b0, Index b1) {
    for (Index blk = b0; blk < b1; ++blk) {
      const Index j0 = blk * U, len = std::min(U, H - j0);
      if (kind == Pack::kBwd) {
        packed::PackColMajor<A>(G, len, w + I * G + j0 * G, G, out + j0 * G, b16);
        continue;
      }
      A* dst = out + j0 * 4 * (xrows + H);
      for (int g = 0; g < 4; ++g) {
        packed::PackRowMajor<A>(xrows, len, w + g * H + j0, G, dst, 0, 0, b16);
        dst += xrows * len;
        packed::PackRowMajor<A>(H, len, w + I * G + g * H + j0, G, dst, 0, 0, b16);
        dst += H * len;
      }
    }
  });
}

// dh[:, j0 : j0 + len] = dgates · w_h[j0 : j0 + len, :]ᵀ   (single-threaded block; `wp` is the
// block's packed w_hᵀ, or null: w_h directly).
template <typename A>
void RecurrentBwdBlock(Index N, Index H, Index j0, Index len, const A* dgates, const A* wp,
                       const A* w_h, A* dh, bool b16) {
  if (wp != nullptr) {
    packed::Gemm<A>(N, 4 * H, len, dgates, 4 * H, wp, dh + j0, H, false, b16);
    return;
  }
  Eigen::Map<const MatRM<A>, 0, OStride> dg(dgates, N, 4 * H, OStride(4 * H));
  Eigen::Map<const MatRM<A>, 0, OStride> wb(w_h + j0 * 4 * H, len, 4 * H, OStride(4 * H));
  Eigen::Map<MatRM<A>, 0, OStride> out(dh + j0, N, len, OStride(H));
  out.noalias() = dg * wb.transpose();
}

// The forward of seq_len_max != 1 steps (see LstmForward for the ways to the pre-activations);
// steps past seq_len_max are left to the caller.
template <typename A>
void LstmForwardSteps(const CpuDevice& d, const LstmCellSpec& s, const LstmFwdArgs<A>& a,
                      A* workspace) {
  const Index N = a.N, I = a.I, H = a.H, L = a.seq_len_max;
  const Index NH = N * H, G = 4 * H;
  const bool pipelined = FwdChainPipelined(L, N, H, d.numThreads());
  const bool fused = !pipelined && LstmFusesInput(L, N, I, H);
  const Index U = pipelined ? H : UnitBlock(d, H), blocks = (H + U - 1) / U;
  const Index xrows = fused ? I : 0;  // rows of w in the per-step product besides w[I:]
  const bool b16 = s.bf16 && bf16::Available();
  if (!fused && !pipelined) {
    GemmB16<A>(d, b16, false, false, L * N, G, I, a.x, a.w, workspace, false);
  }
  A* w_packed = nullptr;
  if (LstmUsesPacked(L, N)) {
    w_packed = workspace + (fused ? N * G : L * N * G);
    PackWeights<A>(d, fused ? Pack::kFwdFused : Pack::kFwdRecurrent, I, H, U, a.w, w_packed,
                   b16);
  }
  auto step_block = [&](Index t, Index blk) {
    const Index j0 = blk * U, len = std::min(U, H - j0);
    A* gates = fused ? workspace : workspace + t * N * G;
    const A* hp = t == 0 ? a.h_prev : a.h + (t - 1) * NH;
    const A* wp = w_packed + j0 * 4 * (xrows + H);
    for (int g = 0; g < 4; ++g) {
      A* out = gates + g * H + j0;
      if (xrows > 0) {
        packed::Gemm<A>(N, I, len, a.x + t * N * I, I, wp, out, G, false, b16);
        wp += I * len;
      }
      // Adds to the input projection, except in a fused product without input rows.
      packed::Gemm<A>(N, H, len, hp, H, wp, out, G, !fused || xrows > 0, b16);
      wp += H * len;
    }
    const A* cp = t == 0 ? a.cs_prev : a.cs + (t - 1) * NH;
    const Index off = t * NH;
    FwdRows<A>(s, H, 0, N, j0, len, gates, a.b, cp, a.wci, a.wcf, a.wco, a.i + off, a.cs + off,
               a.f + off, a.o + off, a.ci + off, a.co + off, a.h + off);
  };
  if (pipelined) {
    // The input projection of each chunk of steps [t0, t1), before its steps run.
    ChainWithChunksAhead(
        d, L, 1, N, SideHelpers(d, 4.0 * L * N * H * (I + H), double(I) / H),
        [&](Index t) { step_block(t, 0); },
        [&](Index t0, Index t1) {
          GemmB16Serial<A>(b16, false, false, (t1 - t0) * N, G, I, a.x + t0 * N * I, I, a.w, G,
                           workspace + t0 * N * G, G, false);
        });
  } else {
    const double block_cost = 8.0 * N * (xrows + H) * U / 16 + kFwdCostPerElem * N * U;
    StepLoop(d, L, blocks, block_cost, step_block);
  }
}

}  // namespace

template <typename A>
void LstmForward(const CpuDevice& d, const LstmCellSpec& s, const LstmFwdArgs<A>& a,
                 A* workspace) {
  const Index T = a.T, N = a.N, I = a.I, H = a.H, L = a.seq_len_max;
  const Index NH = N * H, G = 4 * H;
  // Per step and unit block: the block's gate columns of the step's pre-activations, then its
  // pointwise pass. The ways to the pre-activations:
  //  - small steps (pipelined): one thread runs the steps, each h_{t-1} · w[I:] with w[I:]
  //    packed once, added to the input projection that the other threads compute in chunks of
  //    steps ahead of it;
  //  - small weights (fused): [x_t, h_{t-1}] · w with all of w packed once, into one step's
  //    gate buffer that every step reuses. A separate input projection's [L·N, 4H] result
  //    makes a round trip through memory (written, read back by the recurrent product, read
  //    again by the pointwise pass) that cost more than the GEMM at small batch sizes; the
  //    block's packed weights, (I+H)·len per gate, stay in its core's L2;
  //  - otherwise the input projection of all steps as one GEMM, plus h_{t-1} · w[I:] with
  //    w[I:] packed once;
  //  - a single step: both products by SmallGemm on w in place (packing would not pay).
  if (L == 1) {
    // A single step (LSTMBlockCell, or seq_len_max 1): gates = x·w[:I] + h_prev·w[I:] by
    // SmallGemm (no weight packing, no step loop), then the pointwise pass, inline unless it
    // is large.
    SmallGemm<A>(d, false, false, N, G, I, a.x, I, a.w, G, workspace, G, false);
    SmallGemm<A>(d, false, false, N, G, H, a.h_prev, H, a.w + I * G, G, workspace, G, true);
    PointwiseRows(d, N, H, kFwdCostPerElem, [&](Index n0, Index n1) {
      FwdRows<A>(s, H, n0, n1, 0, H, workspace, a.b, a.cs_prev, a.wci, a.wcf, a.wco, a.i, a.cs,
                 a.f, a.o, a.ci, a.co, a.h);
    });
  } else {
    LstmForwardSteps<A>(d, s, a, workspace);
  }
  // Steps past seq_len_max: all seven outputs are zero.
  const Index tail = (T - L) * NH, start = L * NH;
  for (A* p : {a.i, a.cs, a.f, a.o, a.ci, a.co, a.h}) Zero(d, p + start, tail);
}

// Gradients over the steps [ta, tb) whose gate gradients are done, on the calling thread (the
// GEMM work beside the pipelined backward's step chain):
//   x_grad[t] = dgates[t] · w[0:I]ᵀ                                    (XGradSteps)
//   w_grad[:, c0:c1] (+)= [x_t, h_{t-1}]ᵀ · dgates[t][:, c0:c1],
//   b_grad[c0:c1] (+)= Σ_rows dgates[t][:, c0:c1]           (GradPanelSteps; `first`: set)
template <typename A>
void XGradSteps(const LstmBwdArgs<A>& a, const A* dgates_all, Index ta, Index tb, bool b16) {
  const Index N = a.N, I = a.I, G = 4 * a.H, rows = (tb - ta) * N;
  GemmB16Serial<A>(b16, false, true, rows, I, G, dgates_all + ta * N * G, G, a.w, G,
                   a.x_grad + ta * N * I, I, false);
}

template <typename A>
void GradPanelSteps(const LstmBwdArgs<A>& a, const A* dgates_all, Index ta, Index tb, Index c0,
                    Index c1, bool first, bool b16) {
  const Index N = a.N, I = a.I, H = a.H, G = 4 * H, rows = (tb - ta) * N, len = c1 - c0;
  const A* dg0 = dgates_all + ta * N * G + c0;
  A* wx = a.w_grad + c0;
  A* wh = a.w_grad + I * G + c0;
  // h_{t-1}: h_prev for t = 0, else h[t-1] (rows contiguous from there on).
  const Index lead = ta == 0 ? N : 0;
  const A* h_rest = a.h + (ta == 0 ? 0 : (ta - 1) * N * H);
  Vec<A> bg(a.b_grad + c0, len);
  // The first chunk of a panel sets it, the later ones add (a fixed order of summation).
  GemmB16Serial<A>(b16, true, false, I, len, rows, a.x + ta * N * I, I, dg0, G, wx, G, !first);
  if (lead) GemmB16Serial<A>(b16, true, false, H, len, N, a.h_prev, H, dg0, G, wh, G, !first);
  if (rows > lead) {
    GemmB16Serial<A>(b16, true, false, H, len, rows - lead, h_rest, H, dg0 + lead * G, G, wh, G,
                     !first || lead > 0);
  }
  if (first) bg.setZero();
  for (Index r = 0; r < rows; ++r) bg += CVec<A>(dg0 + r * G, len);
}

template <typename A>
void LstmBackward(const CpuDevice& d, const LstmCellSpec& s, const LstmBwdArgs<A>& a,
                  A* workspace) {
  const Index T = a.T, N = a.N, I = a.I, H = a.H, L = a.seq_len_max;
  const Index NH = N * H, G = 4 * H;
  A* dgates_all = workspace;         // [L, N, 4H]
  A* zeros = workspace + L * N * G;  // [H]
  Zero(d, zeros, H);
  const A* w_h = a.w + I * G;
  A* w_packed = LstmUsesPacked(L, N) ? zeros + H : nullptr;  // w[I:]ᵀ packed per unit block
  // Small batch: the step chain on one thread, the GEMMs over finished steps beside it.
  const bool pipelined = BwdChainPipelined(L, N, d.numThreads());
  const Index U = pipelined ? H : UnitBlock(d, H), blocks = (H + U - 1) / U;
  const bool b16 = s.bf16 && bf16::Available();
  if (w_packed != nullptr) PackWeights<A>(d, Pack::kBwd, I, H, U, a.w, w_packed, b16);
  // The state-gradient outputs double as the carries between steps.
  Zero(d, a.cs_prev_grad, NH);
  Zero(d, a.h_prev_grad, NH);
  const double block_cost = 8.0 * N * H * U / 16 + kBwdCostPerElem * N * U;
  const A* opt[5] = {a.i_grad, a.f_grad, a.o_grad, a.ci_grad, a.co_grad};
  // Steps run in descending t; the last loop step (t = -1) is dL/dh_prev = dgates[0]·w[I:]ᵀ.
  auto step_block = [&](Index step, Index blk) {
    const Index t = L - 1 - step;
    const Index j0 = blk * U, len = std::min(U, H - j0);
    const A* wp = w_packed ? w_packed + j0 * G : nullptr;
    // dL/dh_t (through h_t feeding step t+1) = dgates[t+1] · w[I:]ᵀ, for these units.
    if (t + 1 < L) RecurrentBwdBlock<A>(N, H, j0, len, dgates_all + (t + 1) * N * G, wp, w_h,
                                        a.h_prev_grad, b16);
    if (t < 0) return;
    const Index off = t * NH;
    BwdStep<A> st;
    st.cp = t == 0 ? a.cs_prev : a.cs + (t - 1) * NH;
    st.i = a.i + off;
    st.cs = a.cs + off;
    st.f = a.f + off;
    st.o = a.o + off;
    st.ci = a.ci + off;
    st.co = a.co + off;
    st.cs_grad = a.cs_grad + off;
    st.h_grad = a.h_grad + off;
    st.dh_carry = a.h_prev_grad;
    st.dh_stride = H;
    const A** g[5] = {&st.gi, &st.gf, &st.go, &st.gci, &st.gco};
    for (int k = 0; k < 5; ++k) {
      *g[k] = opt[k] ? opt[k] + off : zeros;
      st.g_stride[k] = opt[k] ? H : 0;
    }
    st.dcs_carry = a.cs_prev_grad;
    st.dgates = dgates_all + t * N * G;
    BwdRows<A>(s, a.exact_clip_grad, H, 0, N, j0, len, st, a.wci, a.wcf, a.wco);
  };
  const Index steps = L > 0 ? L + 1 : 0;
  Zero(d, a.x_grad + L * N * I, (T - L) * N * I);  // x_grad is zero past seq_len_max
  if (L == 0) {
    Zero(d, a.w_grad, (I + H) * G);
    Zero(d, a.b_grad, G);
  } else if (pipelined) {
    // The chain visits t = L - 1 down to 0 (then the h_prev item): the chunks it hands over
    // are ranges [t0, t1) of t.
    ChainWithChunkGrads(
        d, L, N, G, SideHelpers(d, 4.0 * L * N * H * (I + H), double(2 * I + H) / H),
        [&](Index step) { step_block(step, 0); },
        [&](Index t0, Index t1, Index c0, Index c1, bool first) {
          GradPanelSteps<A>(a, dgates_all, t0, t1, c0, c1, first, b16);
        },
        [&](Index t0, Index t1) { XGradSteps<A>(a, dgates_all, t0, t1, b16); });
  } else {
    StepLoop(d, steps, blocks, block_cost, step_block);
    // x_grad = dgates · w[0:I]ᵀ over all steps.
    GemmB16<A>(d, b16, false, true, L * N, I, G, dgates_all, a.w, a.x_grad, false);
    // w_grad[0:I] = xᵀ · dgates ; w_grad[I:] = h_prevᵀ · dgates[0] + h[0:L-1]ᵀ · dgates[1:L].
    GemmB16<A>(d, b16, true, false, I, G, L * N, a.x, dgates_all, a.w_grad, false);
    A* wg_h = a.w_grad + I * G;
    GemmB16<A>(d, b16, true, false, H, G, N, a.h_prev, dgates_all, wg_h, false);
    if (L > 1) {
      GemmB16<A>(d, b16, true, false, H, G, (L - 1) * N, a.h, dgates_all + N * G, wg_h, true);
    }
    // b_grad = column sums of dgates.
    ColumnSum<A>(d, dgates_all, L * N, G, a.b_grad);
  }
  PeepholeGrads<A>(d, s, L * N, N, H, dgates_all, a.cs_prev, a.cs, a.cs, a.wci_grad, a.wcf_grad,
                   a.wco_grad);
}

template <typename A>
void LstmCellBackward(const CpuDevice& d, const LstmCellSpec& s, const LstmCellBwdArgs<A>& a) {
  const Index N = a.N, H = a.H;
  std::vector<A> zeros(static_cast<size_t>(H), A(0));
  Zero(d, a.cs_prev_grad, N * H);
  BwdStep<A> st;
  st.cp = a.cs_prev;
  st.i = a.i;
  st.cs = a.cs;
  st.f = a.f;
  st.o = a.o;
  st.ci = a.ci;
  st.co = a.co;
  st.cs_grad = a.cs_grad;
  st.h_grad = a.h_grad;
  st.dh_carry = zeros.data();
  st.dh_stride = 0;
  st.gi = st.gf = st.go = st.gci = st.gco = zeros.data();
  for (Index& k : st.g_stride) k = 0;
  st.dcs_carry = a.cs_prev_grad;
  st.dgates = a.dgates;
  PointwiseRows(d, N, H, kBwdCostPerElem, [&](Index n0, Index n1) {
    BwdRows<A>(s, /*exact_clip=*/false, H, n0, n1, 0, H, st, a.wci, a.wcf, a.wco);
  });
  PeepholeGrads<A>(d, s, N, N, H, a.dgates, a.cs_prev, a.cs_prev, a.cs, a.wci_grad, a.wcf_grad,
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
