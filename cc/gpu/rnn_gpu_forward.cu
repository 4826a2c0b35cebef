// Forward of the CUDA stacked-RNN engine (see rnn_gpu.h; the CPU twin is LayerForward and
// RnnForward in cc/engine/rnn_cpu.cc, whose structure this follows step for step).
#include <algorithm>
#include <cstdint>

#include "cc/gpu/rnn_gpu_fwd_point.cuh"
#include "cc/gpu/rnn_gpu_layer.cuh"
#include "cc/gpu/rnn_gpu_persistent.cuh"

namespace tfrnn {
namespace gpu {
namespace {

// One thread per (b, unit j).
template <typename T>
__global__ void FwdStepKernel(FwdStep<T> p) {
  TFRNN_GRID_STRIDE(i, p.B * p.H) FwdPoint(p, i / p.H, i % p.H);
}

// After the projection GEMM h_next = hh_step · Pmᵀ: rows past their end keep h_cur; the others
// go to the output and the reserve's h_prev.
template <typename T>
__global__ void ProjPostKernel(StepMapDev sm, I64 step, I64 B, I64 Hs, const T* h_cur,
                               T* h_next, T* y, I64 yst, I64 dcol, T* hprev) {
  TFRNN_GRID_STRIDE(i, B * Hs) {
    const I64 b = i / Hs, j = i % Hs;
    const I64 tau = sm.Tau(b, step);
    if (tau < 0) {
      h_next[i] = h_cur[i];
    } else {
      const I64 row = tau * B + b;
      y[row * yst + dcol + j] = h_next[i];
      hprev[row * Hs + j] = h_cur[i];  // before any recurrent mask
    }
  }
}

// gx without W: skip input (x itself for every gate) or preprojected input (this direction's
// K·H columns of x).
template <typename T>
__global__ void GxCopyKernel(const T* x, I64 in_cols, I64 rows, I64 K, I64 H, bool preprojected,
                             I64 col0, T* acts) {
  const I64 KH = K * H;
  TFRNN_GRID_STRIDE(i, rows * KH) {
    const I64 r = i / KH, c = i % KH;
    acts[i] = preprojected ? x[r * in_cols + col0 + c] : x[r * in_cols + c % H];
  }
}

__host__ __device__ inline uint64_t Mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Dropout mask of a layer's output: 0 or 1/(1-p), the same pure function of (seed, layer,
// index) as MakeMask in rnn_cpu.cc, so CPU and GPU draw identical masks.
template <typename T>
__global__ void DropoutMaskKernel(uint64_t key, double p, double scale, T* mask, I64 n) {
  TFRNN_GRID_STRIDE(i, n) {
    const double u = static_cast<double>(Mix(key ^ static_cast<uint64_t>(i)) >> 11) *
                     (1.0 / 9007199254740992.0);
    St(mask + i, static_cast<AccOf<T>>(u >= p ? scale : 0.0));
  }
}

}  // namespace

template <typename T>
GpuStatus FwdStepGpu(const GpuContext& g, const FwdStep<T>& p) {
  if (p.B * p.H == 0) return GpuStatus::Ok();
  TFRNN_LAUNCH(Blocks(p.B * p.H), kThreads, g.stream, FwdStepKernel<T>)(p);
  TFRNN_CUDA_CHECK_LAUNCH("FwdStepKernel");
  return GpuStatus::Ok();
}

template <typename T>
GpuStatus LayerForwardGpu(const GpuContext& g, const RnnSpec& s, I64 pseudo,
                          const LayerPtrs<T>& ly, const T* xin, const RnnFwdArgs<T>& a,
                          const int* lengths_dev, I64 steps, T* ylayer, FwdBufs<T> w) {
  using A = AccOf<T>;
  const I64 B = s.B, H = s.H, Hs = RnnHs(s), K = RnnK(s), KH = K * H, TB = s.T * B;
  const bool proj = s.P > 0;
  const StepMapDev sm{lengths_dev, s.T, ly.reverse};
  // gx = W·x for every step at once.
  if (s.preprojected && pseudo < s.D) {
    if (TB * KH > 0) {
      TFRNN_LAUNCH(Blocks(TB * KH), kThreads, g.stream, GxCopyKernel<T>)(xin, ly.in_cols, TB, K, H,
          true, (pseudo % s.D) * KH, ly.acts);
      TFRNN_CUDA_CHECK_LAUNCH("GxCopyKernel");
    }
  } else if (ly.in > 0 || ly.in_cols == 0) {
    // Into the acts rows, or for the block face into gx (Acc); W [in, K·H] with weights_xw.
    const bool tw = !s.weights_xw;
    TFRNN_GPU_RETURN_IF_ERROR(
        ly.gx != nullptr ? GemmT(g, false, tw, TB, KH, ly.in, xin, ly.W, ly.gx, false)
                         : GemmT(g, false, tw, TB, KH, ly.in, xin, ly.W, ly.acts, false));
  } else if (TB * KH > 0) {
    TFRNN_LAUNCH(Blocks(TB * KH), kThreads, g.stream, GxCopyKernel<T>)(xin, ly.in_cols, TB, K, H,
        false, 0, ly.acts);
    TFRNN_CUDA_CHECK_LAUNCH("GxCopyKernel");
  }
  if (ly.hprev != nullptr) TFRNN_GPU_RETURN_IF_ERROR(Zero(g, ly.hprev, TB * Hs));
  if (proj) TFRNN_GPU_RETURN_IF_ERROR(Zero(g, ly.hh, TB * H));
  // Reset-before gru: the backward's dR_n GEMM reads r ⊙ h_rec (aux) of every row, also of
  // rows past a sequence's end, which no step writes.
  if (s.mode == RnnMode::kGru && s.gru_reset_before) {
    TFRNN_GPU_RETURN_IF_ERROR(Zero(g, ly.aux, TB * H));
  }
  TFRNN_GPU_RETURN_IF_ERROR(Copy(g, w.h_cur, a.h0 + pseudo * B * Hs, B * Hs));
  if (s.mode == RnnMode::kLstm) {
    TFRNN_GPU_RETURN_IF_ERROR(Convert(g, w.c, a.c0 + pseudo * B * H, B * H));
  }
  FwdStep<T> p;
  p.sm = sm;
  p.B = B;
  p.H = H;
  p.Hs = Hs;
  p.K = K;
  p.mode = static_cast<int>(s.mode);
  p.proj = proj;
  p.ly = ly;
  p.hr = w.hr;
  p.c = w.c;
  p.hh_step = w.hh_step;
  p.y = ylayer;
  p.yst = s.D * Hs;
  p.peephole = s.peephole;
  p.peep = s.peephole ? a.peephole + pseudo * KH : nullptr;
  p.peephole_o_new = s.peephole_o_new;
  p.cell_clip = static_cast<A>(s.cell_clip > 0.f ? s.cell_clip : 0.f);
  for (int q = 0; q < 4; ++q) {
    p.gate_pos[q] = s.gate_pos[q];
    p.gate_act[q] = static_cast<int>(s.gate_act[q]);
  }
  p.cell_act = static_cast<int>(s.cell_act);
  const bool reset_before = s.mode == RnnMode::kGru && s.gru_reset_before;
  p.z_new = s.mode == RnnMode::kGru && s.gru_z_new;
  p.hrn = w.hrn;
  // Small batch: every step in one persistent kernel (rnn_gpu_persistent.cuh); it reads R as
  // [K·H, Hs] and W·x from the acts rows, so not for the block face.
  const bool gate_masks = RnnGateMasks(s);
  if (const std::string m = GateMasksProblem(s); !m.empty()) return InvalidArgument(m);
  const bool persistent_ok = steps > 0 && !s.weights_xw && ly.gx == nullptr && !gate_masks;
  const SequenceKernelPlan plan = persistent_ok ? PlanPersistentFwd<T>(s) : SequenceKernelPlan();
  if (plan.ok) {
    TFRNN_GPU_RETURN_IF_ERROR(PersistentFwd<T>(g, plan, p, ly.R, s.has_mask ? a.mask : nullptr,
                                               a.mask_per_step, steps, w.h_cur, w.h_next,
                                               w.hr));
    if (steps % 2 == 1) std::swap(w.h_cur, w.h_next);
  }
  // Where it does not: the fused step kernel (one launch per step), if turned on and it fits.
  const SequenceKernelPlan fused =
      persistent_ok && !plan.ok ? PlanFusedStepFwd<T>(s) : SequenceKernelPlan();
  const bool xw = s.weights_xw;
  const I64 r_ld = RGateLd(s);  // R_k = RGate(s, ly, k): gate block k of R
  const I64 BHs = B * Hs;
  // With per-gate masks a reset-before gru's candidate block pn has no product of its own
  // here: its masked h is the h_rec of r ⊙ h_rec (hrn below).
  const I64 pn = s.mode == RnnMode::kGru ? s.gate_pos[2] : -1;
  for (I64 st = 0; st < (plan.ok ? 0 : steps); ++st) {
    if (fused.ok) {
      p.step = st;
      p.h_cur = w.h_cur;
      p.h_rec = w.h_cur;
      p.h_next = w.h_next;
      p.phase = StepPhase::kWhole;
      TFRNN_GPU_RETURN_IF_ERROR(FusedStepFwd<T>(g, fused, p, ly.R, s.has_mask ? a.mask : nullptr,
                                                a.mask_per_step, w.hr));
      std::swap(w.h_cur, w.h_next);
      continue;
    }
    // The h that enters the recurrent product: h_prev, or h_prev ⊙ mask.
    const T* h_rec = w.h_cur;
    if (gate_masks) {
      // h_masked block k = h_prev ⊙ mask_k (one launch for all K), then for each run of gate
      // blocks one batched product hr[:, k·H, +H) = h_masked_k · R_kᵀ.
      TFRNN_LAUNCH(Blocks(K * BHs), kThreads, g.stream, MaskRowsKernel<T>)(sm, st, B, Hs,
          RnnMaskWidth(s), MaskCol(s, ly.dcol, 0), a.mask, a.mask_per_step, w.h_cur,
          w.h_masked, K, Hs);
      TFRNN_CUDA_CHECK_LAUNCH("MaskRowsKernel");
      if (reset_before) h_rec = w.h_masked + pn * BHs;
      TFRNN_GPU_RETURN_IF_ERROR(ForGateRuns(s, [&](I64 k0, I64 n) {
        return GemmLdBatchedT(g, false, !xw, B, H, Hs, static_cast<const T*>(w.h_masked) + k0 * BHs,
                              Hs, BHs, RGate(s, ly, k0), r_ld, RGateStride(s), w.hr + k0 * H, KH,
                              H, n, false);
      }));
    } else {
      if (s.has_mask) {
        TFRNN_LAUNCH(Blocks(BHs), kThreads, g.stream, MaskRowsKernel<T>)(sm, st, B, Hs,
            s.D * Hs, ly.dcol, a.mask, a.mask_per_step, w.h_cur, w.h_masked, 1, 0);
        TFRNN_CUDA_CHECK_LAUNCH("MaskRowsKernel");
        h_rec = w.h_masked;
      }
      // hr = h_rec · Rᵀ  ([B, Hs] · [Hs, K·H]; R itself with weights_xw), kept in Acc.
      TFRNN_GPU_RETURN_IF_ERROR(GemmT(g, false, !xw, B, KH, Hs, h_rec, ly.R, w.hr, false));
    }
    p.step = st;
    p.h_cur = w.h_cur;
    p.h_rec = h_rec;
    p.h_next = w.h_next;
    p.phase = reset_before ? StepPhase::kBeforeProduct : StepPhase::kWhole;
    TFRNN_GPU_RETURN_IF_ERROR(FwdStepGpu<T>(g, p));
    if (reset_before) {
      // The candidate's recurrent product needs r of every unit: hrn = (r ⊙ h_rec) · R_nᵀ
      // ([B, H] · [H, Hs]ᵀ, R_n the candidate's block of R), then kAfterProduct.
      TFRNN_GPU_RETURN_IF_ERROR(GemmLdT(g, false, !xw, B, H, Hs,
                                        static_cast<const T*>(w.hh_step), H, RGate(s, ly, pn), r_ld,
                                        w.hrn, H, false));
      p.phase = StepPhase::kAfterProduct;
      TFRNN_GPU_RETURN_IF_ERROR(FwdStepGpu<T>(g, p));
    }
    if (proj) {
      // h = hh · Pmᵀ  ([B, H] · [H, P])
      TFRNN_GPU_RETURN_IF_ERROR(GemmT(g, false, true, B, Hs, H, w.hh_step, ly.Pm, w.h_next,
                                      false));
      TFRNN_LAUNCH(Blocks(B * Hs), kThreads, g.stream, ProjPostKernel<T>)(sm, st, B, Hs, w.h_cur,
          w.h_next, ylayer, s.D * Hs, ly.dcol, ly.hprev);
      TFRNN_CUDA_CHECK_LAUNCH("ProjPostKernel");
    }
    std::swap(w.h_cur, w.h_next);
  }
  TFRNN_GPU_RETURN_IF_ERROR(Copy(g, a.hn + pseudo * B * Hs, w.h_cur, B * Hs));
  if (s.mode == RnnMode::kLstm) {
    TFRNN_GPU_RETURN_IF_ERROR(Convert(g, a.cn + pseudo * B * H, static_cast<const A*>(w.c), B * H));
  }
  return GpuStatus::Ok();
}

int64_t RnnFwdWorkspaceBytesGpu(const RnnSpec& s, int elem_bytes) {
  return CountedBytes(elem_bytes, [&](auto t, Carver& cv) {
    CarveFwd<typename decltype(t)::type>(s, cv);
  });
}

template <typename T>
GpuStatus RnnForwardGpu(const GpuContext& g, const RnnSpec& s, const RnnFwdArgs<T>& a,
                        const int* lengths_dev, void* workspace, int64_t workspace_bytes) {
  TFRNN_GPU_RETURN_IF_ERROR(ValidateRnnSpec(s));
  TFRNN_GPU_RETURN_IF_ERROR(CheckWorkspace("forward", workspace_bytes,
                                           RnnFwdWorkspaceBytesGpu(s, sizeof(T)), workspace));
  Carver cv(workspace);
  FwdBufs<T> w = CarveFwd<T>(s, cv);
  bool padded = false;
  const I64 steps = MaxSteps(s, a.lengths, &padded);
  const int* len_dev = nullptr;
  TFRNN_GPU_RETURN_IF_ERROR(DeviceLengths(g, s, a.lengths, lengths_dev, padded, w.lengths,
                                          &len_dev));
  const I64 TB = s.T * s.B, ycols = s.D * RnnHs(s);
  T* reserve = a.reserve;
  for (I64 l = 0; l < s.L; ++l) {
    const T* xin = l == 0 ? a.x : reserve + RnnNextInOffset(s, l - 1);
    T* ylayer = l + 1 == s.L ? a.y : reserve + RnnNextInOffset(s, l);
    TFRNN_GPU_RETURN_IF_ERROR(Zero(g, ylayer, TB * ycols));
    for (I64 dd = 0; dd < s.D; ++dd) {
      const I64 pseudo = l * s.D + dd;
      const LayerPtrs<T> ly = MakeLayerPtrs<T>(s, pseudo, a.params, reserve, nullptr, a.weights);
      TFRNN_GPU_RETURN_IF_ERROR(
          LayerForwardGpu<T>(g, s, pseudo, ly, xin, a, len_dev, steps, ylayer, w));
    }
    if (l + 1 < s.L && RnnHasMask(s) && TB * ycols > 0) {
      T* mask = reserve + RnnMaskOffset(s, l);
      const double p = s.dropout;
      const double scale = p < 1.0 ? 1.0 / (1.0 - p) : 0.0;
      const uint64_t key = Mix(s.seed ^ Mix(static_cast<uint64_t>(l) + 0x5bd1e995ULL));
      TFRNN_LAUNCH(Blocks(TB * ycols), kThreads, g.stream, DropoutMaskKernel<T>)(key, p, scale,
          mask, TB * ycols);
      TFRNN_CUDA_CHECK_LAUNCH("DropoutMaskKernel");
      TFRNN_GPU_RETURN_IF_ERROR(Mul<T>(g, ylayer, ylayer, mask, TB * ycols));
    }
  }
  return GpuStatus::Ok();
}

#define TFRNN_INSTANTIATE_FWD(T)                                                          \
  template GpuStatus RnnForwardGpu<T>(const GpuContext&, const RnnSpec&,                  \
                                      const RnnFwdArgs<T>&, const int*, void*, int64_t);  \
  template GpuStatus LayerForwardGpu<T>(const GpuContext&, const RnnSpec&, I64,           \
                                        const LayerPtrs<T>&, const T*, const RnnFwdArgs<T>&, \
                                        const int*, I64, T*, FwdBufs<T>);                \
  template GpuStatus FwdStepGpu<T>(const GpuContext&, const FwdStep<T>&);
TFRNN_INSTANTIATE_FWD(__half)
TFRNN_INSTANTIATE_FWD(__nv_bfloat16)
TFRNN_INSTANTIATE_FWD(float)
TFRNN_INSTANTIATE_FWD(double)
#undef TFRNN_INSTANTIATE_FWD

}  // namespace gpu
}  // namespace tfrnn
