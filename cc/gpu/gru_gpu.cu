// The GRU block cell's face of the CUDA stacked-RNN engine (see gru_gpu.h; the CPU twin is
// cc/engine/gru_cpu.cc, which this follows): one step of a reset-before gru (GruBlockRnnSpec,
// types.h), gates r, u, c in blocks 0, 1, 2 of 3H columns. w_ru and w_c are two tensors, so
// the face computes the products itself (into column blocks of the pre-activation rows) and
// the engine's step kernels (FwdStepGpu phases 1 and 2, BwdStepGpu and GruResetGpu) run the
// pointwise work between them.
#include <cstdint>
#include <string>

#include "cc/gpu/gru_gpu.h"
#include "cc/gpu/rnn_gpu_layer.cuh"

namespace tfrnn {
namespace gpu {
namespace {

// d_r_bar_u_bar [B, 2H] and d_c_bar [B, H] from the gate gradients [B, 3H].
template <typename T>
__global__ void SplitGatesKernel(const T* dg, I64 B, I64 H, T* d_rbub, T* d_cbar) {
  TFRNN_GRID_STRIDE(i, B * 3 * H) {
    const I64 n = i / (3 * H), c = i % (3 * H);
    if (c < 2 * H) {
      d_rbub[n * 2 * H + c] = dg[i];
    } else {
      d_cbar[n * H + c - 2 * H] = dg[i];
    }
  }
}

template <typename T>
struct CellFwdBufs {
  AccOf<T> *gx, *hr, *hrn;  // [B, 3H] W·x, [B, 3H] R·h (r, u blocks), [B, H] R_c·(r ⊙ h)
  T* rh;                    // [B, H] r ⊙ h_prev
  T *bw, *br;               // [3H] [b_ru, b_c] and zeros
};
template <typename T>
CellFwdBufs<T> CarveCellFwd(I64 B, I64 H, Carver& cv) {
  CellFwdBufs<T> w;
  w.gx = cv.Take<AccOf<T>>(B * 3 * H);
  w.hr = cv.Take<AccOf<T>>(B * 3 * H);
  w.hrn = cv.Take<AccOf<T>>(B * H);
  w.rh = cv.Take<T>(B * H);
  w.bw = cv.Take<T>(3 * H);
  w.br = cv.Take<T>(3 * H);
  return w;
}

template <typename T>
struct CellBwdBufs {
  T *dgx, *dhr, *dhr_cur;  // [B, 3H] gate gradients, the engine's recurrent-product gradients
  T* dpn;                  // [B, H]
  AccOf<T> *dh, *drh;      // [B, H] dL/dh_prev, dL/d(r ⊙ h_prev)
  AccOf<T>* dx;            // [B, I]
};
template <typename T>
CellBwdBufs<T> CarveCellBwd(I64 B, I64 I, I64 H, Carver& cv) {
  CellBwdBufs<T> w;
  w.dgx = cv.Take<T>(B * 3 * H);
  w.dhr = cv.Take<T>(B * 3 * H);
  w.dhr_cur = cv.Take<T>(B * 3 * H);
  w.dpn = cv.Take<T>(B * H);
  w.dh = cv.Take<AccOf<T>>(B * H);
  w.drh = cv.Take<AccOf<T>>(B * H);
  w.dx = cv.Take<AccOf<T>>(B * I);
  return w;
}

// The engine layer of the cell: activation planes r, u, c [B, H] (act_ld = H).
template <typename T>
LayerPtrs<T> CellLayer(I64 H, const T* r, const T* u, const T* c) {
  LayerPtrs<T> ly;
  // The forward writes the planes; the backward only reads them.
  ly.act[0] = const_cast<T*>(r);
  ly.act[1] = const_cast<T*>(u);
  ly.act[2] = const_cast<T*>(c);
  ly.act_ld = H;
  return ly;
}

template <typename S>
void SetCellSpec(const RnnSpec& s, S* p) {
  p->sm = StepMapDev{nullptr, 1, false};
  p->step = 0;
  p->B = s.B;
  p->H = s.H;
  p->Hs = s.H;
  p->K = 3;
  p->mode = static_cast<int>(s.mode);
  p->proj = false;
  p->peep = nullptr;
  p->peephole = false;
  p->peephole_o_new = false;
  p->cell_clip = 0;
  for (int q = 0; q < 4; ++q) {
    p->gate_pos[q] = s.gate_pos[q];
    p->gate_act[q] = static_cast<int>(s.gate_act[q]);
  }
  p->cell_act = static_cast<int>(s.cell_act);
  p->z_new = s.gru_z_new;
}

}  // namespace

int64_t GruCellFwdWorkspaceBytesGpu(int64_t B, int64_t I, int64_t H, int elem_bytes) {
  (void)I;
  return CountedBytes(elem_bytes, [&](auto t, Carver& cv) {
    CarveCellFwd<typename decltype(t)::type>(B, H, cv);
  });
}

int64_t GruCellBwdWorkspaceBytesGpu(int64_t B, int64_t I, int64_t H, int elem_bytes) {
  return CountedBytes(elem_bytes, [&](auto t, Carver& cv) {
    CarveCellBwd<typename decltype(t)::type>(B, I, H, cv);
  });
}

template <typename T>
GpuStatus GruCellForwardGpu(const GpuContext& g, const GruCellFwdArgs<T>& a, void* workspace,
                            int64_t workspace_bytes) {
  const I64 B = a.B, I = a.I, H = a.H, G = 3 * H;
  TFRNN_GPU_RETURN_IF_ERROR(CheckWorkspace("gru cell forward", workspace_bytes,
                                           GruCellFwdWorkspaceBytesGpu(B, I, H, sizeof(T)),
                                           workspace));
  if (B * H == 0) return GpuStatus::Ok();
  const RnnSpec s = GruBlockRnnSpec(B, I, H);
  Carver cv(workspace);
  CellFwdBufs<T> w = CarveCellFwd<T>(B, H, cv);
  TFRNN_GPU_RETURN_IF_ERROR(Copy(g, w.bw, a.b_ru, 2 * H));
  TFRNN_GPU_RETURN_IF_ERROR(Copy(g, w.bw + 2 * H, a.b_c, H));
  TFRNN_GPU_RETURN_IF_ERROR(Zero(g, w.br, G));
  // W·x = [x · w_ru[:I], x · w_c[:I]];  R·h of the r, u blocks = h_prev · w_ru[I:].
  TFRNN_GPU_RETURN_IF_ERROR(GemmLdT(g, false, false, B, 2 * H, I, a.x, I, a.w_ru, 2 * H, w.gx,
                                    G, false));
  TFRNN_GPU_RETURN_IF_ERROR(GemmLdT(g, false, false, B, H, I, a.x, I, a.w_c, H, w.gx + 2 * H,
                                    G, false));
  TFRNN_GPU_RETURN_IF_ERROR(GemmLdT(g, false, false, B, 2 * H, H, a.h_prev, H,
                                    a.w_ru + I * 2 * H, 2 * H, w.hr, G, false));
  FwdStep<T> p;
  SetCellSpec(s, &p);
  p.ly = CellLayer<T>(H, a.r, a.u, a.c);
  p.ly.gx = w.gx;
  p.ly.bW = w.bw;
  p.ly.bR = w.br;
  p.ly.aux = w.rh;
  p.hr = w.hr;
  p.h_cur = p.h_rec = a.h_prev;
  p.h_next = p.y = a.h;
  p.yst = H;
  p.c = nullptr;
  p.hh_step = w.rh;
  p.hrn = w.hrn;
  // kBeforeProduct: r, u and r ⊙ h_prev; the candidate's product R_c·(r ⊙ h_prev);
  // kAfterProduct: c, h.
  p.phase = StepPhase::kBeforeProduct;
  TFRNN_GPU_RETURN_IF_ERROR(FwdStepGpu<T>(g, p));
  TFRNN_GPU_RETURN_IF_ERROR(GemmT(g, false, false, B, H, H, static_cast<const T*>(w.rh),
                                  a.w_c + I * H, w.hrn, false));
  p.phase = StepPhase::kAfterProduct;
  return FwdStepGpu<T>(g, p);
}

template <typename T>
GpuStatus GruCellBackwardGpu(const GpuContext& g, const GruCellBwdArgs<T>& a, void* workspace,
                             int64_t workspace_bytes) {
  using A = AccOf<T>;
  const I64 B = a.B, I = a.I, H = a.H;
  TFRNN_GPU_RETURN_IF_ERROR(CheckWorkspace("gru cell backward", workspace_bytes,
                                           GruCellBwdWorkspaceBytesGpu(B, I, H, sizeof(T)),
                                           workspace));
  if (B * H == 0) return GpuStatus::Ok();
  const RnnSpec s = GruBlockRnnSpec(B, I, H);
  Carver cv(workspace);
  CellBwdBufs<T> w = CarveCellBwd<T>(B, I, H, cv);
  TFRNN_GPU_RETURN_IF_ERROR(Zero(g, w.dh, B * H));
  BwdStep<T> p;
  SetCellSpec(s, &p);
  p.D = 1;
  p.ly = CellLayer<T>(H, a.r, a.u, a.c);
  p.ly.hprev = const_cast<T*>(a.h_prev);
  p.c0 = nullptr;
  p.dy = a.d_h;
  p.yst = H;
  p.dgx = w.dgx;
  p.dhr = w.dhr;
  p.dhr_cur = w.dhr_cur;
  p.dh = w.dh;
  p.dc = nullptr;
  p.dhh = nullptr;
  p.dc_seq = nullptr;
  p.exact_clip = false;
  p.dact[0] = a.g_r;
  p.dact[1] = a.g_u;
  p.dact[2] = a.g_c;
  p.dact[3] = nullptr;
  p.dco = nullptr;
  p.reset_before = true;
  p.dpn = w.dpn;
  // d_u_bar, d_c_bar (= dpn) and h_prev's direct term; then d_hr = d_c_bar · w_c[I:]ᵀ, r's
  // gradient and h_prev's term through r ⊙ h_prev.
  TFRNN_GPU_RETURN_IF_ERROR(BwdStepGpu<T>(g, p));
  TFRNN_GPU_RETURN_IF_ERROR(GemmT(g, false, true, B, H, H, static_cast<const T*>(w.dpn),
                                  a.w_c + I * H, w.drh, false));
  TFRNN_GPU_RETURN_IF_ERROR(GruResetGpu<T>(g, p, nullptr, false, 0, 0, w.drh));
  TFRNN_LAUNCH(Blocks(B * 3 * H), kThreads, g.stream, SplitGatesKernel<T>)(w.dgx, B, H,
      a.d_r_bar_u_bar, a.d_c_bar);
  TFRNN_CUDA_CHECK_LAUNCH("SplitGatesKernel");
  const T* dcb = a.d_c_bar;
  const T* drb = a.d_r_bar_u_bar;
  // d_x = d_c_bar · w_c[:I]ᵀ + [d_r_bar, d_u_bar] · w_ru[:I]ᵀ (in Acc)
  TFRNN_GPU_RETURN_IF_ERROR(GemmT(g, false, true, B, I, H, dcb, a.w_c, w.dx, false));
  TFRNN_GPU_RETURN_IF_ERROR(GemmT(g, false, true, B, I, 2 * H, drb, a.w_ru, w.dx, true));
  TFRNN_GPU_RETURN_IF_ERROR(Convert(g, a.d_x, static_cast<const A*>(w.dx), B * I));
  // d_h_prev += [d_r_bar, d_u_bar] · w_ru[I:]ᵀ
  TFRNN_GPU_RETURN_IF_ERROR(GemmT(g, false, true, B, H, 2 * H, drb, a.w_ru + I * 2 * H, w.dh,
                                  true));
  return Convert(g, a.d_h_prev, static_cast<const A*>(w.dh), B * H);
}

#define TFRNN_INSTANTIATE_GRU_GPU(T)                                                          \
  template GpuStatus GruCellForwardGpu<T>(const GpuContext&, const GruCellFwdArgs<T>&, void*, \
                                          int64_t);                                           \
  template GpuStatus GruCellBackwardGpu<T>(const GpuContext&, const GruCellBwdArgs<T>&, void*, \
                                           int64_t);
TFRNN_INSTANTIATE_GRU_GPU(__half)
TFRNN_INSTANTIATE_GRU_GPU(__nv_bfloat16)
TFRNN_INSTANTIATE_GRU_GPU(float)
TFRNN_INSTANTIATE_GRU_GPU(double)
#undef TFRNN_INSTANTIATE_GRU_GPU

}  // namespace gpu
}  // namespace tfrnn
