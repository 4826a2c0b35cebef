// The fused pointwise work of one forward step of the CUDA stacked-RNN engine, shared by the
// per-step kernel (rnn_gpu_forward.cu) and the persistent kernel (rnn_gpu_persistent.cu).
#ifndef TF_RNN_OPS_CC_GPU_RNN_GPU_FWD_POINT_CUH_
#define TF_RNN_OPS_CC_GPU_RNN_GPU_FWD_POINT_CUH_

#include "cc/gpu/rnn_gpu_common.cuh"

namespace tfrnn {
namespace gpu {

// Everything the fused pointwise kernel of one step reads and writes.
template <typename T>
struct FwdStep {
  using A = AccOf<T>;
  StepMapDev sm;
  I64 step, B, H, Hs, K;
  int mode;
  bool proj;
  LayerPtrs<T> ly;
  const A* hr;      // R·h_rec (no bias): [B, K·H], or hr[b·hr_ld + k·hr_kst + j] with hr_ld > 0
  I64 hr_ld = 0, hr_kst = 0;
  const T* h_cur;   // [B, Hs] h entering the step
  const T* h_rec;   // [B, Hs] h entering the recurrent product (h_cur, or h_cur ⊙ mask)
  T* h_next;        // [B, Hs] (without projection)
  I64 h_ld = 0;     // > 0: the rows of h_cur, h_rec and h_next are h_ld apart instead of Hs
  A* c;             // [B, H] cell state carry (lstm)
  T* hh_step;       // [B, H] unprojected h of the step (projection)
  T* y;             // [T, B, D·Hs] layer output
  I64 yst;
  const T* peep;    // [K·H] (spec.peephole)
  bool peephole;
  bool peephole_o_new;  // o's peephole term reads the new c (the block ops)
  A cell_clip;          // > 0: c = clip(c, ±cell_clip)
  int gate_pos[4], gate_act[4], cell_act;
  // gru: reset before the recurrent product (two phases per step, as FwdBlock in rnn_cpu.cc:
  // kBeforeProduct r, z and r ⊙ h_rec into aux and hh_step; kAfterProduct the candidate and
  // h once hrn holds R_n·(r ⊙ h_rec)); z_new: h = z ⊙ n + (1-z) ⊙ h_prev.
  StepPhase phase = StepPhase::kWhole;
  bool z_new = false;
  const A* hrn = nullptr;  // [B, H] (kAfterProduct)
};

// The step for (batch row b, unit j). gx/acts row at τ holds W·x (no bias) on entry and the
// gate activations on exit. Equations in rnn.h.
template <typename T>
__device__ __forceinline__ void FwdPoint(const FwdStep<T>& p, I64 b, I64 j) {
  using A = AccOf<T>;
  const I64 H = p.H, KH = p.K * p.H;
  const I64 tau = p.sm.Tau(b, p.step);
  const I64 hb = b * (p.h_ld > 0 ? p.h_ld : p.Hs) + j;  // (b, j) in h_cur, h_rec, h_next
  if (tau < 0) {  // past this sequence's end: h passes through (projection: ProjPostKernel)
    if (!p.proj) p.h_next[hb] = p.h_cur[hb];
    if (p.phase == StepPhase::kBeforeProduct) St(p.hh_step + b * H + j, A(0));
    return;
  }
  const I64 row = tau * p.B + b;
  T* g = p.ly.acts + row * KH + j;
  const I64 hks = p.hr_ld > 0 ? p.hr_kst : H;
  const A* r = p.hr + b * (p.hr_ld > 0 ? p.hr_ld : KH) + j;
  const T* bw = p.ly.bW + j;
  const T* br = p.ly.bR + j;
  // W·x of gate block k: in the acts rows, or in gx (the block face, Acc).
  const A* gxa = p.ly.gx != nullptr ? p.ly.gx + row * KH + j : nullptr;
  auto wx = [&](I64 k) { return gxa != nullptr ? gxa[k * H] : Ld(g + k * H); };
  auto pre = [&](I64 k) { return wx(k) + r[k * hks] + Ld(bw + k * H) + Ld(br + k * H); };
  // The reserve keeps h_prev before any recurrent mask (as rnn_cpu.cc).
  if (!p.proj && p.phase != StepPhase::kAfterProduct && p.ly.hprev != nullptr) {
    p.ly.hprev[row * p.Hs + j] = p.h_cur[hb];
  }
  A h;
  switch (p.mode) {
    case static_cast<int>(RnnMode::kLstm): {
      const A cprev = p.c[b * H + j];
      // Every load before the first store (a store may alias a later load, which would then
      // wait for the gate before it): the four pre-activations and peephole weights.
      A x[4], pw[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        x[q] = pre(p.gate_pos[q]);
        pw[q] = p.peephole ? Ld(p.peep + p.gate_pos[q] * H + j) : A(0);
      }
      A v[4] = {A(0), A(0), A(0), A(0)};
      // The gate with the peephole term of c (c_prev, or for o with peephole_o_new the new c).
      auto gate = [&](int q, A cpeep) {
        v[q] = Act(p.gate_act[q], p.peephole ? x[q] + pw[q] * cpeep : x[q]);
        St(p.ly.act[p.gate_pos[q]] + row * p.ly.act_ld + j, v[q]);
      };
      gate(0, cprev);
      gate(1, cprev);
      gate(2, cprev);
      if (!p.peephole_o_new) gate(3, cprev);
      // c = f ⊙ c_prev + i ⊙ c' (clipped to ±cell_clip),  h = o ⊙ act(c)
      A cs = v[1] * cprev + v[0] * v[2];
      if (p.cell_clip > A(0)) cs = cs < -p.cell_clip ? -p.cell_clip
                                                     : (cs > p.cell_clip ? p.cell_clip : cs);
      if (p.peephole_o_new) gate(3, cs);
      p.c[b * H + j] = cs;
      St(p.ly.aux + row * H + j, cs);
      const A tc = Act(p.cell_act, cs);
      if (p.ly.co != nullptr) St(p.ly.co + row * H + j, tc);
      h = v[3] * tc;
      if (p.proj) {
        St(p.ly.hh + row * H + j, h);
        St(p.hh_step + b * H + j, h);
      }
      break;
    }
    case static_cast<int>(RnnMode::kGru): {
      // r = act_r(pre_r), z = act_z(pre_z);
      // reset after:  n = act_n(gx_n + bW_n + r ⊙ (hr_n + bR_n))
      // reset before: n = act_n(gx_n + bW_n + R_n·(r ⊙ h_rec) + bR_n)
      const int pr = p.gate_pos[0], pz = p.gate_pos[1], pn = p.gate_pos[2];
      auto act = [&](int k) { return p.ly.act[k] + row * p.ly.act_ld + j; };
      A rg, z;
      // The loads of the candidate and h_prev before the first store (as for lstm): gx_n + bW_n
      // and h_prev where n and h are computed, hr_n + bR_n with the reset after.
      const bool before = p.phase == StepPhase::kBeforeProduct;
      const A nwx = before ? A(0) : wx(pn) + Ld(bw + pn * H);
      const A nr = p.phase == StepPhase::kWhole ? r[pn * hks] + Ld(br + pn * H) : A(0);
      const A hp = before ? A(0) : Ld(p.h_cur + hb);
      if (p.phase != StepPhase::kAfterProduct) {
        rg = Act(p.gate_act[0], pre(pr));
        z = Act(p.gate_act[1], pre(pz));
        St(act(pr), rg);
        St(act(pz), z);
      } else {
        rg = Ld(act(pr));
        z = Ld(act(pz));
      }
      if (before) {
        const A rh = rg * Ld(p.h_rec + hb);
        St(p.ly.aux + row * H + j, rh);
        St(p.hh_step + b * H + j, rh);
        return;  // h in kAfterProduct
      }
      A nx;
      if (p.phase == StepPhase::kAfterProduct) {
        nx = nwx + p.hrn[b * H + j] + Ld(br + pn * H);
      } else {
        St(p.ly.aux + row * H + j, nr);
        nx = nwx + rg * nr;
      }
      const A n = Act(p.gate_act[2], nx);
      St(act(pn), n);
      h = p.z_new ? z * n + (A(1) - z) * hp : (A(1) - z) * n + z * hp;
      break;
    }
    case static_cast<int>(RnnMode::kTanh): {
      h = tanh(pre(0));
      St(g, h);
      break;
    }
    default: {  // relu
      const A x = pre(0);
      h = x > A(0) ? x : A(0);
      St(g, h);
      break;
    }
  }
  if (!p.proj) {
    St(p.h_next + hb, h);
    St(p.y + row * p.yst + p.ly.dcol + j, h);
  }
}

}  // namespace gpu
}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_GPU_RNN_GPU_FWD_POINT_CUH_
