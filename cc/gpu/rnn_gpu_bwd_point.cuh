// The fused pointwise work of one backward step of the CUDA stacked-RNN engine, shared by the
// per-step kernel (rnn_gpu_backward.cu) and the persistent backward (rnn_gpu_persistent.cu).
#ifndef TF_RNN_OPS_CC_GPU_RNN_GPU_BWD_POINT_CUH_
#define TF_RNN_OPS_CC_GPU_RNN_GPU_BWD_POINT_CUH_

#include "cc/gpu/rnn_gpu_common.cuh"

namespace tfrnn {
namespace gpu {

// Everything the fused pointwise backward kernel of one step reads and writes.
template <typename T>
struct BwdStep {
  using A = AccOf<T>;
  StepMapDev sm;
  I64 step, B, H, Hs, K, D;
  int mode;
  bool proj;
  LayerPtrs<T> ly;
  // Pointers a face may leave unset are null by default, options off.
  const T* c0 = nullptr;  // [B, H] this pseudo-layer's initial cell state (lstm)
  const T* dy;       // [T, B, D·Hs] dL/d(layer output)
  I64 yst;
  T* dgx;            // [TB, KH]
  T* dhr;            // [TB, KH] (gru)
  T* dhr_cur;        // [B, KH]
  I64 dhr_ld = 0;    // > 0: the rows of dhr_cur are dhr_ld apart instead of KH
  A* dh;             // [B, Hs]
  A* dc = nullptr;             // [B, H]
  const A* dhh = nullptr;      // [B, H] (projection)
  const T* peep = nullptr;     // [KH] (peephole)
  bool peephole = false;
  const T* dc_seq = nullptr;   // [T, B, D·H] or null
  // lstm, the block ops: o's peephole reads the new c; no gradient through a clipped c
  // (exact_clip: |c| >= cell_clip). Gradients arriving at the gate activations (logical order
  // i, f, c', o; gru r, z, n) and at cell_act(c) (lstm), [T·B, H] each, or null.
  bool peephole_o_new = false, exact_clip = false;
  A cell_clip = A(0);
  const T* dact[4] = {nullptr, nullptr, nullptr, nullptr};
  const T* dco = nullptr;
  int gate_pos[4], gate_act[4], cell_act;
  bool reset_before = false, z_new = false;  // gru options (see FwdStep)
  T* dpn = nullptr;  // [B, H] (reset-before gru): dpn of the step, 0 for rows without it
};

// One (batch row b, unit j) of a step's backward. dh holds the carry dL/dh from later steps,
// dc the carry dL/dc; with projection dhh holds dL/d(unprojected h) and dh is left alone.
template <typename T>
__device__ __forceinline__ void BwdPoint(const BwdStep<T>& p, I64 b, I64 j) {
  using A = AccOf<T>;
  const I64 H = p.H, KH = p.K * p.H;
  const I64 tau = p.sm.Tau(b, p.step);
  T* dr = p.dhr_cur + b * (p.dhr_ld > 0 ? p.dhr_ld : KH) + j;
  if (tau < 0) {
    for (I64 k = 0; k < p.K; ++k) St(dr + k * H, A(0));
    if (p.dpn != nullptr) St(p.dpn + b * H + j, A(0));
    return;
  }
  const I64 row = tau * p.B + b;
  const T* g = p.ly.acts + row * KH + j;
  T* dg = p.dgx + row * KH + j;
  A* dhc = p.dh + b * p.Hs + j;
  const A dt = p.proj ? p.dhh[b * H + j] : Ld(p.dy + row * p.yst + p.ly.dcol + j) + *dhc;
  switch (p.mode) {
    case static_cast<int>(RnnMode::kLstm): {
      const int* pos = p.gate_pos;
      auto act = [&](int q) { return Ld(p.ly.act[pos[q]] + row * p.ly.act_ld + j); };
      auto extra = [&](const T* gr) { return gr != nullptr ? Ld(gr + row * H + j) : A(0); };
      const A i_ = act(0), f = act(1), cc = act(2), o = act(3);
      const A cs = Ld(p.ly.aux + row * H + j);
      const A cprev = p.step == 0 ? Ld(p.c0 + b * H + j)
                                  : Ld(p.ly.aux + (p.sm.Prev(tau) * p.B + b) * H + j);
      A dc = p.dc[b * H + j];
      if (p.dc_seq != nullptr) {
        dc += Ld(p.dc_seq + row * p.D * H + (p.ly.dcol / p.Hs) * H + j);
      }
      const A tc = Act(p.cell_act, cs);
      dc += ActGrad(p.cell_act, tc, dt * o + extra(p.dco));
      A d[4];
      d[3] = ActGrad(p.gate_act[3], o, dt * tc + extra(p.dact[3]));
      if (p.peephole && p.peephole_o_new) dc += d[3] * Ld(p.peep + pos[3] * H + j);
      if (p.exact_clip && !(fabs(cs) < p.cell_clip)) dc = A(0);
      d[0] = ActGrad(p.gate_act[0], i_, dc * cc + extra(p.dact[0]));
      d[1] = ActGrad(p.gate_act[1], f, dc * cprev + extra(p.dact[1]));
      d[2] = ActGrad(p.gate_act[2], cc, dc * i_ + extra(p.dact[2]));
      A dcn = dc * f;
      if (p.peephole) {
        for (int q = 0; q < (p.peephole_o_new ? 3 : 4); ++q) {
          dcn += d[q] * Ld(p.peep + pos[q] * H + j);
        }
      }
      p.dc[b * H + j] = dcn;
      for (int q = 0; q < 4; ++q) {
        St(dr + pos[q] * H, d[q]);
        St(dg + pos[q] * H, d[q]);
      }
      if (!p.proj) *dhc = A(0);
      break;
    }
    case static_cast<int>(RnnMode::kGru): {
      const int pr = p.gate_pos[0], pz = p.gate_pos[1], pn = p.gate_pos[2];
      auto act = [&](int k) { return Ld(p.ly.act[k] + row * p.ly.act_ld + j); };
      auto extra = [&](const T* gr) { return gr != nullptr ? Ld(gr + row * H + j) : A(0); };
      const A rg = act(pr), z = act(pz), n = act(pn);
      const A hp = Ld(p.ly.hprev + row * p.Hs + j);  // h_prev before any mask
      A dpn, dpz;
      if (p.z_new) {
        dpn = dt * z;
        dpz = dt * (n - hp);
        *dhc = dt * (A(1) - z);
      } else {
        dpn = dt * (A(1) - z);
        dpz = dt * (hp - n);
        *dhc = dt * z;
      }
      dpz = ActGrad(p.gate_act[1], z, dpz + extra(p.dact[1]));
      dpn = ActGrad(p.gate_act[2], n, dpn + extra(p.dact[2]));
      T* dhr_row = p.dhr + row * KH + j;
      St(dg + pz * H, dpz);
      St(dg + pn * H, dpn);
      if (p.reset_before) {
        // r's gradient needs dL/d(r ⊙ h_rec) = dpn · R_n over every unit: GruResetKernel.
        St(dr + pr * H, A(0));
        St(dr + pz * H, dpz);
        St(dr + pn * H, dpn);
        St(dhr_row + pz * H, dpz);
        St(dhr_row + pn * H, dpn);
        St(p.dpn + b * H + j, dpn);
      } else {
        const A hrn = Ld(p.ly.aux + row * H + j);
        const A dpr = ActGrad(p.gate_act[0], rg, dpn * hrn + extra(p.dact[0]));
        St(dg + pr * H, dpr);
        St(dr + pr * H, dpr);
        St(dr + pz * H, dpz);
        St(dr + pn * H, dpn * rg);
        St(dhr_row + pr * H, dpr);
        St(dhr_row + pz * H, dpz);
        St(dhr_row + pn * H, dpn * rg);
      }
      break;
    }
    default: {  // rnn_tanh, rnn_relu: g holds h
      const A h = Ld(g);
      const A d = p.mode == static_cast<int>(RnnMode::kTanh) ? dt * (A(1) - h * h)
                                                             : (h > A(0) ? dt : A(0));
      St(dg, d);
      St(dr, d);
      *dhc = A(0);
      break;
    }
  }
}

}  // namespace gpu
}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_GPU_RNN_GPU_BWD_POINT_CUH_
