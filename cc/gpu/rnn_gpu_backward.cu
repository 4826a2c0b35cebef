// Backward of the CUDA stacked-RNN engine (see rnn_gpu.h; the CPU twin is LayerBackward and
// RnnBackward in cc/engine/rnn_cpu.cc, whose structure and buffer roles this follows).
#include <algorithm>
#include <cstdint>

#include "cc/gpu/rnn_gpu_layer.cuh"
#include "cc/gpu/rnn_gpu_persistent.cuh"

namespace tfrnn {
namespace gpu {
namespace {

// dh[b, :] += src[b, :] ⊙ mask row of (b, step) for the rows that have that step; with
// `gates` > 1 the sum over g < gates (but `skip`) of block g of src ([gates, B, Hs]) ⊙ the
// mask columns g·gate_cols further on (per-gate masks: Σ_k (dhr_k · R_k) ⊙ mask_k).
template <typename T>
__global__ void AddMaskedKernel(StepMapDev sm, I64 step, I64 B, I64 Hs, I64 cols, I64 dcol,
                                const T* mask, bool per_step, const AccOf<T>* src,
                                AccOf<T>* dh, I64 gates, I64 gate_cols, I64 skip) {
  using A = AccOf<T>;
  const I64 BH = B * Hs;
  TFRNN_GRID_STRIDE(i, BH) {
    const I64 b = i / Hs, j = i % Hs;
    const I64 tau = sm.Tau(b, step);
    if (tau < 0) continue;
    const T* mrow = mask + ((per_step ? tau * B : 0) + b) * cols + dcol + j;
    A sum = dh[i];
    for (I64 gate = 0; gate < gates; ++gate) {
      if (gate != skip) sum += src[gate * BH + i] * Ld(mrow + gate * gate_cols);
    }
    dh[i] = sum;
  }
}

// Projection, before the pointwise step: dtot = dy + dh for rows with this step (0 otherwise),
// recorded in dhtot; the carry dh restarts at 0 for those rows.
template <typename T>
__global__ void ProjPreKernel(StepMapDev sm, I64 step, I64 B, I64 Hs, const T* dy, I64 yst,
                              I64 dcol, AccOf<T>* dh, T* dtot, T* dhtot) {
  using A = AccOf<T>;
  TFRNN_GRID_STRIDE(i, B * Hs) {
    const I64 b = i / Hs, j = i % Hs;
    const I64 tau = sm.Tau(b, step);
    if (tau < 0) {
      St(dtot + i, A(0));
      continue;
    }
    const I64 row = tau * B + b;
    const A d = Ld(dy + row * yst + dcol + j) + dh[i];
    St(dtot + i, d);
    St(dhtot + row * Hs + j, d);
    dh[i] = A(0);
  }
}

// One thread per (b, unit j).
template <typename T>
__global__ void BwdStepKernel(BwdStep<T> p) {
  TFRNN_GRID_STRIDE(i, p.B * p.H) BwdPoint(p, i / p.H, i % p.H);
}

// Second half of a reset-before gru step's backward (GruResetBwd in rnn_cpu.cc): with
// drh = dL/d(r ⊙ h_rec) = dpn · R_n, r's gradient is drh ⊙ h_rec and h_prev receives
// drh ⊙ r (⊙ mask); the carry's candidate slot is zeroed (the candidate reaches h_prev only
// through r ⊙ h_rec). One thread per (b, unit j).
template <typename T>
__global__ void GruResetKernel(StepMapDev sm, I64 step, I64 B, I64 H, I64 Hs, I64 KH, int pr,
                               int pn, int act_r, const T* r_plane, I64 act_ld, const T* g_r,
                               const T* hprev, const T* mask, bool per_step, I64 cols,
                               I64 dcol, const AccOf<T>* drh, AccOf<T>* dh, T* dhr_cur, T* dhr,
                               T* dgx) {
  using A = AccOf<T>;
  TFRNN_GRID_STRIDE(i, B * H) {
    const I64 b = i / H, j = i % H;
    St(dhr_cur + b * KH + pn * H + j, A(0));
    const I64 tau = sm.Tau(b, step);
    if (tau < 0) continue;
    const I64 row = tau * B + b;
    const A d = drh[b * Hs + j];
    const A rg = Ld(r_plane + row * act_ld + j);
    const A hp = Ld(hprev + row * Hs + j);
    const A m = mask != nullptr ? Ld(mask + ((per_step ? tau * B : 0) + b) * cols + dcol + j)
                                : A(1);
    const A gr = g_r != nullptr ? Ld(g_r + row * H + j) : A(0);  // r's output gradient
    const A dpr = ActGrad(act_r, rg, d * hp * m + gr);
    dh[b * Hs + j] += d * rg * m;
    St(dhr_cur + b * KH + pr * H + j, dpr);
    St(dhr + row * KH + pr * H + j, dpr);
    St(dgx + row * KH + pr * H + j, dpr);
  }
}

}  // namespace

template <typename T>
GpuStatus BwdStepGpu(const GpuContext& g, const BwdStep<T>& p) {
  if (p.B * p.H == 0) return GpuStatus::Ok();
  TFRNN_LAUNCH(Blocks(p.B * p.H), kThreads, g.stream, BwdStepKernel<T>)(p);
  TFRNN_CUDA_CHECK_LAUNCH("BwdStepKernel");
  return GpuStatus::Ok();
}

template <typename T>
GpuStatus GruResetGpu(const GpuContext& g, const BwdStep<T>& p, const T* mask,
                      bool mask_per_step, I64 mask_cols, I64 mask_col, const AccOf<T>* drh) {
  if (p.B * p.H == 0) return GpuStatus::Ok();
  const int pr = p.gate_pos[0], pn = p.gate_pos[2];
  TFRNN_LAUNCH(Blocks(p.B * p.H), kThreads, g.stream, GruResetKernel<T>)(p.sm, p.step, p.B, p.H,
      p.Hs, p.K * p.H, pr, pn, p.gate_act[0], p.ly.act[pr], p.ly.act_ld, p.dact[0], p.ly.hprev,
      mask, mask_per_step, mask_cols, mask_col, drh, p.dh, p.dhr_cur, p.dhr, p.dgx);
  TFRNN_CUDA_CHECK_LAUNCH("GruResetKernel");
  return GpuStatus::Ok();
}

namespace {

// out[r, j] = h[r, j] · mask row of (time r / B, batch r % B)[dcol + j] for all T·B rows (the
// operand R multiplied; rows past a sequence's end have h = 0 in the reserve).
template <typename T>
__global__ void MaskAllRowsKernel(const T* h, const T* mask, bool per_step, I64 B, I64 rows,
                                  I64 Hs, I64 cols, I64 dcol, T* out) {
  TFRNN_GRID_STRIDE(i, rows * Hs) {
    const I64 r = i / Hs, j = i % Hs;
    const I64 t = r / B, b = r % B;
    St(out + i, Ld(h + i) * Ld(mask + ((per_step ? t * B : 0) + b) * cols + dcol + j));
  }
}

// out [rows, n] = in[:, col0 : col0 + n] of a [rows, cols] matrix.
template <typename T>
__global__ void GatherColsKernel(const T* in, I64 rows, I64 cols, I64 col0, I64 n, T* out) {
  TFRNN_GRID_STRIDE(i, rows * n) {
    const I64 r = i / n, c = i % n;
    out[i] = in[r * cols + col0 + c];
  }
}

// Deterministic column sums of a [rows, cols] matrix: partial sums over fixed row chunks, then
// the chunks in order. No atomics.
template <typename T>
__global__ void ColumnPartialKernel(const T* in, I64 rows, I64 cols, I64 rows_per_chunk,
                                    AccOf<T>* partial) {
  const I64 col = blockIdx.x * static_cast<I64>(blockDim.x) + threadIdx.x;
  const I64 chunk = blockIdx.y;
  if (col >= cols) return;
  const I64 r0 = chunk * rows_per_chunk;
  const I64 r1 = r0 + rows_per_chunk < rows ? r0 + rows_per_chunk : rows;
  AccOf<T> acc = 0;
  for (I64 r = r0; r < r1; ++r) acc += Ld(in + r * cols + col);
  partial[chunk * cols + col] = acc;
}

template <typename T>
__global__ void ColumnFinishKernel(const AccOf<T>* partial, I64 chunks, I64 cols, T* out) {
  TFRNN_GRID_STRIDE(col, cols) {
    AccOf<T> acc = 0;
    for (I64 c = 0; c < chunks; ++c) acc += partial[c * cols + col];
    St(out + col, acc);
  }
}

template <typename T>
GpuStatus ColumnSum(const GpuContext& g, const T* in, I64 rows, I64 cols, const BwdBufs<T>& w,
                    T* out) {
  if (cols == 0) return GpuStatus::Ok();
  const I64 rpc = std::max<I64>(1, (rows + w.chunks - 1) / w.chunks);
  const I64 chunks = rows == 0 ? 0 : (rows + rpc - 1) / rpc;
  if (chunks > 0) {
    dim3 grid(static_cast<unsigned>((cols + kThreads - 1) / kThreads),
              static_cast<unsigned>(chunks));
    TFRNN_LAUNCH(grid, kThreads, g.stream, ColumnPartialKernel<T>)(in, rows, cols, rpc, w.partial);
    TFRNN_CUDA_CHECK_LAUNCH("ColumnPartialKernel");
  }
  TFRNN_LAUNCH(Blocks(cols), kThreads, g.stream, ColumnFinishKernel<T>)(w.partial, chunks, cols,
      out);
  TFRNN_CUDA_CHECK_LAUNCH("ColumnFinishKernel");
  return GpuStatus::Ok();
}

// Peephole gradients: dp[k·H + j] = Σ over every valid (b, step) of dpre[k·H + j] ⊙ c_prev[j],
// one thread per column, rows in a fixed order.
// The gate block o_new_block (-1: none; peephole_o_new's o) reads the new c instead.
template <typename T>
__global__ void PeepholeGradKernel(StepMapDev sm, I64 B, I64 H, I64 K, const T* dgx,
                                   const T* aux, const T* c0, int o_new_block, T* dp) {
  const I64 KH = K * H;
  TFRNN_GRID_STRIDE(col, KH) {
    const I64 j = col % H;
    const bool new_c = col / H == o_new_block;
    AccOf<T> acc = 0;
    for (I64 b = 0; b < B; ++b) {
      const I64 len = sm.Len(b);
      for (I64 st = 0; st < len; ++st) {
        const I64 tau = sm.Tau(b, st);
        const AccOf<T> cprev =
            new_c ? Ld(aux + (tau * B + b) * H + j)
                  : st == 0 ? Ld(c0 + b * H + j) : Ld(aux + (sm.Prev(tau) * B + b) * H + j);
        acc += Ld(dgx + (tau * B + b) * KH + col) * cprev;
      }
    }
    St(dp + col, acc);
  }
}

// din for input without W: skip input (Σ over gates of dgx) or preprojected (dgx into this
// direction's columns).
template <typename T>
__global__ void DinCopyKernel(const T* dgx, I64 rows, I64 K, I64 H, I64 in_cols,
                              bool preprojected, I64 col0, bool accumulate, T* din) {
  using A = AccOf<T>;
  const I64 KH = K * H;
  if (preprojected) {
    TFRNN_GRID_STRIDE(i, rows * KH) {
      const I64 r = i / KH, c = i % KH;
      din[r * in_cols + col0 + c] = dgx[i];
    }
  } else {
    TFRNN_GRID_STRIDE(i, rows * H) {
      const I64 r = i / H, j = i % H;
      T* out = din + r * in_cols + j;
      A acc = accumulate ? Ld(out) : A(0);
      for (I64 k = 0; k < K; ++k) acc += Ld(dgx + r * KH + k * H + j);
      St(out, acc);
    }
  }
}

// Layer 0's input with the rows past each sequence's length zeroed (values the forward never
// read must not reach the weight gradient as NaN·0).
template <typename T>
__global__ void MaskPaddedRowsKernel(const T* x, const int* lengths, I64 B, I64 I, I64 rows,
                                     T* out) {
  TFRNN_GRID_STRIDE(i, rows * I) {
    const I64 r = i / I, t = r / B, b = r % B;
    if (t < lengths[b]) {
      out[i] = x[i];
    } else {
      St(out + i, AccOf<T>(0));
    }
  }
}

}  // namespace

template <typename T>
GpuStatus LayerBackwardGpu(const GpuContext& g, const RnnSpec& s, I64 pseudo,
                           const LayerPtrs<T>& ly, const T* xin, const T* dyl,
                           const RnnBwdArgs<T>& a, const int* lengths_dev, I64 steps, T* din,
                           bool accumulate_din, BwdBufs<T> w) {
  const I64 B = s.B, H = s.H, Hs = RnnHs(s), K = RnnK(s), KH = K * H, TB = s.T * B;
  const bool proj = s.P > 0, gru = s.mode == RnnMode::kGru, lstm = s.mode == RnnMode::kLstm;
  const StepMapDev sm{lengths_dev, s.T, ly.reverse};
  const I64 yst = s.D * Hs;
  const bool xw = s.weights_xw;  // W [in, K·H], R [Hs, K·H]: the products transpose them
  TFRNN_GPU_RETURN_IF_ERROR(Zero(g, w.dgx, TB * KH));
  if (gru) TFRNN_GPU_RETURN_IF_ERROR(Zero(g, w.dhr, TB * KH));
  if (proj) TFRNN_GPU_RETURN_IF_ERROR(Zero(g, w.dhtot, TB * s.P));
  TFRNN_GPU_RETURN_IF_ERROR(Convert(g, w.dh, a.dhn + pseudo * B * Hs, B * Hs));
  if (lstm) TFRNN_GPU_RETURN_IF_ERROR(Convert(g, w.dc, a.dcn + pseudo * B * H, B * H));
  BwdStep<T> p;
  p.sm = sm;
  p.B = B;
  p.H = H;
  p.Hs = Hs;
  p.K = K;
  p.D = s.D;
  p.mode = static_cast<int>(s.mode);
  p.proj = proj;
  p.ly = ly;
  p.c0 = lstm ? a.c0 + pseudo * B * H : nullptr;
  p.dy = dyl;
  p.yst = yst;
  p.dgx = w.dgx;
  p.dhr = w.dhr;
  p.dh = w.dh;
  p.dc = w.dc;
  p.dhh = w.dhh;
  p.peephole = s.peephole;
  p.peep = s.peephole ? a.peephole + pseudo * KH : nullptr;
  p.dc_seq = lstm ? a.dc_seq : nullptr;
  p.peephole_o_new = s.peephole_o_new;
  p.exact_clip = lstm && s.exact_clip_grad && s.cell_clip > 0.f;
  p.cell_clip = static_cast<AccOf<T>>(s.cell_clip);
  for (int q = 0; q < 4; ++q) p.dact[q] = a.dact[q];
  p.dco = lstm ? a.dco : nullptr;
  for (int q = 0; q < 4; ++q) {
    p.gate_pos[q] = s.gate_pos[q];
    p.gate_act[q] = static_cast<int>(s.gate_act[q]);
  }
  p.cell_act = static_cast<int>(s.cell_act);
  const bool reset_before = gru && s.gru_reset_before;
  p.reset_before = reset_before;
  p.z_new = gru && s.gru_z_new;
  p.dpn = reset_before ? w.dpn : nullptr;
  const bool gate_masks = RnnGateMasks(s);
  if (const std::string m = GateMasksProblem(s); !m.empty()) return InvalidArgument(m);
  const I64 r_ld = RGateLd(s);  // R_k = RGate(s, ly, k): gate block k of R (xw: transposed)
  const I64 pn = gru ? s.gate_pos[2] : -1;
  // dh += dhr_{t+1} · R, masked by the recurrent mask of step mstep. With gate masks block k
  // of dhm is dhr_k · R_k (one batched product per run of gate blocks) and one launch adds
  // Σ_k dhm_k ⊙ mask_k; a reset-before gru's candidate reaches h_prev through r ⊙ h_rec
  // instead (GruResetGpu).
  const I64 BHs = B * Hs;
  auto add_recurrent = [&](I64 mstep) -> GpuStatus {
    if (!s.has_mask) return GemmT(g, false, xw, B, Hs, KH, w.dhr_prev, ly.R, w.dh, true);
    if (gate_masks) {
      TFRNN_GPU_RETURN_IF_ERROR(ForGateRuns(s, [&](I64 k0, I64 n) {
        return GemmLdBatchedT(g, false, xw, B, Hs, H, static_cast<const T*>(w.dhr_prev) + k0 * H,
                              KH, H, RGate(s, ly, k0), r_ld, RGateStride(s), w.dhm + k0 * BHs,
                              Hs, BHs, n, false);
      }));
    } else {
      TFRNN_GPU_RETURN_IF_ERROR(GemmT(g, false, xw, B, Hs, KH, w.dhr_prev, ly.R, w.dhm, false));
    }
    TFRNN_LAUNCH(Blocks(BHs), kThreads, g.stream, AddMaskedKernel<T>)(sm, mstep, B, Hs,
        RnnMaskWidth(s), MaskCol(s, ly.dcol, 0), a.mask, a.mask_per_step, w.dhm, w.dh,
        gate_masks ? K : 1, Hs, gate_masks && reset_before ? pn : -1);
    TFRNN_CUDA_CHECK_LAUNCH("AddMaskedKernel");
    return GpuStatus::Ok();
  };
  // Small batch: every step in one persistent or cluster kernel where the plan picks one
  // (DefaultBwd; rnn_gpu_persistent_bwd.cu).
  const bool persistent_ok = steps > 0 && StepChainBwdShape(s);
  const SequenceKernelPlan plan = persistent_ok ? PlanPersistentBwd<T>(s) : SequenceKernelPlan();
  if (plan.ok) {
    TFRNN_GPU_RETURN_IF_ERROR(PersistentBwd<T>(g, plan, p, ly.R, steps, w.dhr_cur,
                                               w.dhr_prev));
    // Step 0's dhr is in dhr_prev below: the kernel's last step wrote d1 when steps is even.
    if ((steps - 1) % 2 == 0) std::swap(w.dhr_prev, w.dhr_cur);
  }
  // Where none runs: the fused step kernel (one launch per step), if turned on and it fits.
  const SequenceKernelPlan fused =
      persistent_ok && !plan.ok ? PlanFusedStepBwd<T>(s) : SequenceKernelPlan();
  if (fused.ok) {
    TFRNN_GPU_RETURN_IF_ERROR(SwapMajor(g.stream, sizeof(T), ly.R, w.rt, KH, Hs, 1));
  }
  for (I64 st = plan.ok ? -1 : steps - 1; st >= 0; --st) {
    const bool has_next = st + 1 < steps;
    if (fused.ok) {
      p.step = st;
      p.dhr_cur = w.dhr_cur;
      TFRNN_GPU_RETURN_IF_ERROR(
          FusedStepBwd<T>(g, fused, p, w.rt, has_next ? w.dhr_prev : nullptr));
      std::swap(w.dhr_prev, w.dhr_cur);
      continue;
    }
    if (proj) {
      // dh += dhr_{t+1} · R  ([B, KH] · [KH, Hs]); then dtot, dhh = dtot · Pm.
      if (has_next) {
        TFRNN_GPU_RETURN_IF_ERROR(GemmT(g, false, xw, B, Hs, KH, w.dhr_prev, ly.R, w.dh,
                                        true));
      }
      TFRNN_LAUNCH(Blocks(B * Hs), kThreads, g.stream, ProjPreKernel<T>)(sm, st, B, Hs, dyl, yst,
          ly.dcol, w.dh, w.dtot, w.dhtot);
      TFRNN_CUDA_CHECK_LAUNCH("ProjPreKernel");
      TFRNN_GPU_RETURN_IF_ERROR(GemmT(g, false, false, B, H, Hs, w.dtot, ly.Pm, w.dhh, false));
    } else if (has_next) {
      TFRNN_GPU_RETURN_IF_ERROR(add_recurrent(st + 1));
    }
    p.step = st;
    p.dhr_cur = w.dhr_cur;
    TFRNN_GPU_RETURN_IF_ERROR(BwdStepGpu<T>(g, p));
    if (reset_before) {
      // drh = dpn · R_n  ([B, H] · [H, Hs]) into dhm, then r's gradient and dh_prev += ....
      TFRNN_GPU_RETURN_IF_ERROR(GemmLdT(g, false, xw, B, Hs, H, static_cast<const T*>(w.dpn),
                                        H, RGate(s, ly, pn), r_ld, w.dhm, Hs, false));
      TFRNN_GPU_RETURN_IF_ERROR(GruResetGpu<T>(g, p, s.has_mask ? a.mask : nullptr,
                                               a.mask_per_step, RnnMaskWidth(s),
                                               MaskCol(s, ly.dcol, pn), w.dhm));
    }
    std::swap(w.dhr_prev, w.dhr_cur);
  }
  if (steps > 0) TFRNN_GPU_RETURN_IF_ERROR(add_recurrent(0));
  using A = AccOf<T>;
  TFRNN_GPU_RETURN_IF_ERROR(Convert(g, a.dh0 + pseudo * B * Hs, static_cast<const A*>(w.dh),
                                    B * Hs));
  if (lstm) {
    TFRNN_GPU_RETURN_IF_ERROR(Convert(g, a.dc0 + pseudo * B * H, static_cast<const A*>(w.dc),
                                      B * H));
  }
  if (s.peephole && KH > 0) {
    TFRNN_LAUNCH(Blocks(KH), kThreads, g.stream, PeepholeGradKernel<T>)(sm, B, H, K, w.dgx,
        ly.aux, a.c0 + pseudo * B * H, s.peephole_o_new ? s.gate_pos[3] : -1,
        a.dpeephole + pseudo * KH);
    TFRNN_CUDA_CHECK_LAUNCH("PeepholeGradKernel");
  }
  // Weight and bias gradients: one GEMM or reduction each over all T·B rows
  // (xw: dW = xᵀ · dgx [in, K·H], else dgxᵀ · x [K·H, in]; likewise dR).
  if (ly.in > 0) {
    if (xw) {
      TFRNN_GPU_RETURN_IF_ERROR(GemmT(g, true, false, ly.in, KH, TB, xin,
                                      static_cast<const T*>(w.dgx), ly.dW, false));
    } else {
      TFRNN_GPU_RETURN_IF_ERROR(GemmT(g, true, false, KH, ly.in, TB,
                                      static_cast<const T*>(w.dgx), xin, ly.dW, false));
    }
  }
  auto grad_r = [&](I64 rows, const T* dhr_rows, const T* h_rows, bool acc) {
    return xw ? GemmT(g, true, false, Hs, KH, rows, h_rows, dhr_rows, ly.dR, acc)
              : GemmT(g, true, false, KH, Hs, rows, dhr_rows, h_rows, ly.dR, acc);
  };
  if (ly.hprev == nullptr) {
    // No h_prev plane (the block face: one direction, forward, every row valid): h_prev is
    // h0 for the first step's rows, then the layer's own outputs hseq of the step before.
    TFRNN_GPU_RETURN_IF_ERROR(grad_r(std::min<I64>(B, TB), static_cast<const T*>(w.dhr),
                                     a.h0 + pseudo * B * Hs, false));
    if (TB > B) {
      TFRNN_GPU_RETURN_IF_ERROR(grad_r(TB - B, static_cast<const T*>(w.dhr) + B * KH, ly.hseq,
                                       true));
    }
  } else if (gate_masks) {
    // R_k multiplied h_prev ⊙ mask_k: dR_k = Σ dhr_kᵀ · (h_prev ⊙ mask_k).
    // (xw: dR_k = Σ (h_prev ⊙ mask_k)ᵀ · dhr_k, columns [k·H, +H) of dR.)
    for (I64 k = 0; k < K && TB * Hs > 0; ++k) {
      if (reset_before && k == pn) continue;  // below
      TFRNN_LAUNCH(Blocks(TB * Hs), kThreads, g.stream, MaskAllRowsKernel<T>)(ly.hprev, a.mask,
          a.mask_per_step, B, TB, Hs, RnnMaskWidth(s), MaskCol(s, ly.dcol, k), w.hrec);
      TFRNN_CUDA_CHECK_LAUNCH("MaskAllRowsKernel");
      const T* dhr_k = static_cast<const T*>(w.dhr) + k * H;
      const T* hrec = static_cast<const T*>(w.hrec);
      TFRNN_GPU_RETURN_IF_ERROR(
          xw ? GemmLdT(g, true, false, Hs, H, TB, hrec, Hs, dhr_k, KH, ly.dR + k * H, KH, false)
             : GemmLdT(g, true, false, H, Hs, TB, dhr_k, KH, hrec, Hs, ly.dR + k * H * Hs, Hs,
                       false));
    }
  } else {
    // R multiplied h_prev ⊙ mask; the reserve holds h_prev.
    const T* hrec = ly.hprev;
    if (s.has_mask && TB * Hs > 0) {
      TFRNN_LAUNCH(Blocks(TB * Hs), kThreads, g.stream, MaskAllRowsKernel<T>)(ly.hprev, a.mask,
          a.mask_per_step, B, TB, Hs, yst, ly.dcol, w.hrec);
      TFRNN_CUDA_CHECK_LAUNCH("MaskAllRowsKernel");
      hrec = w.hrec;
    }
    TFRNN_GPU_RETURN_IF_ERROR(grad_r(TB, static_cast<const T*>(w.dhr), hrec, false));
  }
  if (reset_before) {
    // R_n multiplied r ⊙ h_rec (aux): dR_n = Σ dpnᵀ · (r ⊙ h_rec) (xw: Σ (r ⊙ h_rec)ᵀ · dpn
    // into columns [pn·H, +H) of dR).
    if (xw) {
      TFRNN_GPU_RETURN_IF_ERROR(GemmLdT(g, true, false, Hs, H, TB,
                                        static_cast<const T*>(ly.aux), H,
                                        static_cast<const T*>(w.dhr) + pn * H, KH,
                                        ly.dR + pn * H, KH, false));
    } else {
      if (TB * H > 0) {
        TFRNN_LAUNCH(Blocks(TB * H), kThreads, g.stream, GatherColsKernel<T>)(w.dhr, TB, KH,
            pn * H, H, w.gather);
        TFRNN_CUDA_CHECK_LAUNCH("GatherColsKernel");
      }
      TFRNN_GPU_RETURN_IF_ERROR(GemmT(g, true, false, H, Hs, TB,
                                      static_cast<const T*>(w.gather),
                                      static_cast<const T*>(ly.aux), ly.dR + pn * H * Hs,
                                      false));
    }
  }
  if (proj) {
    TFRNN_GPU_RETURN_IF_ERROR(GemmT(g, true, false, s.P, H, TB, static_cast<const T*>(w.dhtot),
                                    static_cast<const T*>(ly.hh), ly.dP, false));
  }
  TFRNN_GPU_RETURN_IF_ERROR(ColumnSum<T>(g, w.dgx, TB, KH, w, ly.dbW));
  if (ly.dbR != nullptr) TFRNN_GPU_RETURN_IF_ERROR(ColumnSum<T>(g, w.dhr, TB, KH, w, ly.dbR));
  // Gradient of the layer input.
  if (s.preprojected && pseudo < s.D) {
    if (TB * KH > 0) {
      TFRNN_LAUNCH(Blocks(TB * KH), kThreads, g.stream, DinCopyKernel<T>)(w.dgx, TB, K, H,
          ly.in_cols, true, (pseudo % s.D) * KH, false, din);
      TFRNN_CUDA_CHECK_LAUNCH("DinCopyKernel");
    }
  } else if (ly.in > 0 || ly.in_cols == 0) {
    TFRNN_GPU_RETURN_IF_ERROR(GemmT(g, false, xw, TB, ly.in, KH, w.dgx, ly.W, din,
                                    accumulate_din));
  } else if (TB * H > 0) {
    TFRNN_LAUNCH(Blocks(TB * H), kThreads, g.stream, DinCopyKernel<T>)(w.dgx, TB, K, H, ly.in_cols,
        false, 0, accumulate_din, din);
    TFRNN_CUDA_CHECK_LAUNCH("DinCopyKernel");
  }
  return GpuStatus::Ok();
}

int64_t RnnBwdWorkspaceBytesGpu(const RnnSpec& s, int elem_bytes) {
  return CountedBytes(elem_bytes, [&](auto t, Carver& cv) {
    CarveBwd<typename decltype(t)::type>(s, cv);
  });
}

template <typename T>
GpuStatus RnnBackwardGpu(const GpuContext& g, const RnnSpec& s, const RnnBwdArgs<T>& a,
                         const int* lengths_dev, void* workspace, int64_t workspace_bytes) {
  TFRNN_GPU_RETURN_IF_ERROR(ValidateRnnSpec(s));
  TFRNN_GPU_RETURN_IF_ERROR(CheckWorkspace("backward", workspace_bytes,
                                           RnnBwdWorkspaceBytesGpu(s, sizeof(T)), workspace));
  const I64 TB = s.T * s.B, B = s.B, ycols = s.D * RnnHs(s);
  Carver cv(workspace);
  BwdBufs<T> w = CarveBwd<T>(s, cv);
  bool padded = false;
  const I64 steps = MaxSteps(s, a.lengths, &padded);
  const int* len_dev = nullptr;
  TFRNN_GPU_RETURN_IF_ERROR(DeviceLengths(g, s, a.lengths, lengths_dev, padded, w.lengths,
                                          &len_dev));
  const T* x0 = a.x;
  if (len_dev != nullptr && RnnInWidth(s, 0) > 0 && TB * s.I > 0) {
    TFRNN_LAUNCH(Blocks(TB * s.I), kThreads, g.stream, MaskPaddedRowsKernel<T>)(a.x, len_dev, B,
        s.I, TB, w.x_masked);
    TFRNN_CUDA_CHECK_LAUNCH("MaskPaddedRowsKernel");
    x0 = w.x_masked;
  }
  T* reserve = const_cast<T*>(a.reserve);  // read only
  const T* dyl = a.dy;
  for (I64 l = s.L - 1; l >= 0; --l) {
    const T* xin = l == 0 ? x0 : a.reserve + RnnNextInOffset(s, l - 1);
    T* din = l == 0 ? a.dx : w.din_buf;
    for (I64 dd = 0; dd < s.D; ++dd) {
      const I64 pseudo = l * s.D + dd;
      const LayerPtrs<T> ly =
          MakeLayerPtrs<T>(s, pseudo, a.params, reserve, a.dparams, a.weights, a.dweights);
      TFRNN_GPU_RETURN_IF_ERROR(
          LayerBackwardGpu<T>(g, s, pseudo, ly, xin, dyl, a, len_dev, steps, din, dd > 0, w));
    }
    if (l > 0) {
      // dL/d(layer l-1 output) = dL/d(layer l input) ⊙ dropout mask.
      if (RnnHasMask(s)) {
        TFRNN_GPU_RETURN_IF_ERROR(Mul<T>(g, w.dy_buf, w.din_buf,
                                         a.reserve + RnnMaskOffset(s, l - 1), TB * ycols));
      } else {
        std::swap(w.dy_buf, w.din_buf);
      }
      dyl = w.dy_buf;
    }
  }
  return GpuStatus::Ok();
}

#define TFRNN_INSTANTIATE_BWD(T)                                                          \
  template GpuStatus RnnBackwardGpu<T>(const GpuContext&, const RnnSpec&,                 \
                                       const RnnBwdArgs<T>&, const int*, void*, int64_t); \
  template GpuStatus LayerBackwardGpu<T>(const GpuContext&, const RnnSpec&, I64,          \
                                         const LayerPtrs<T>&, const T*, const T*,         \
                                         const RnnBwdArgs<T>&, const int*, I64, T*, bool, \
                                         BwdBufs<T>);                                     \
  template GpuStatus BwdStepGpu<T>(const GpuContext&, const BwdStep<T>&);                 \
  template GpuStatus GruResetGpu<T>(const GpuContext&, const BwdStep<T>&, const T*, bool,  \
                                    I64, I64, const AccOf<T>*);
TFRNN_INSTANTIATE_BWD(__half)
TFRNN_INSTANTIATE_BWD(__nv_bfloat16)
TFRNN_INSTANTIATE_BWD(float)
TFRNN_INSTANTIATE_BWD(double)
#undef TFRNN_INSTANTIATE_BWD

}  // namespace gpu
}  // namespace tfrnn
