// The GRU block cell's CUDA adapter of the stacked-RNN engine (see gru_gpu.h):
// cc/engine/gru_cell_mapping.h maps the cell onto one reset-before gru step for both devices;
// this file gives it the workspace (products and pointwise maths in Acc), cuBLAS, the memory
// operations on the op's stream and the step kernels (FwdStepGpu in its two phases,
// BwdStepGpu and GruResetGpu).
#include <algorithm>
#include <cstdint>
#include <string>

#include "cc/engine/gru_cell_mapping.h"
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
  I64 hrn_ld;               // H
  bool hr_acc, hrn_acc;     // false: the products are written, not added
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
  w.hrn_ld = H;
  w.hr_acc = w.hrn_acc = false;
  return w;
}

template <typename T>
struct CellBwdBufs {
  T *dgx, *dhr, *dhr_cur;  // [B, 3H] gate gradients, the engine's recurrent-product gradients
  T* dpn;                  // [B, H] d_c_bar
  AccOf<T> *dh, *drh;      // [B, H] dL/dh_prev, dL/d(r ⊙ h_prev)
  AccOf<T>* dx;            // [B, I]
  I64 dpn_ld;              // H
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
  w.dpn_ld = H;
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

namespace {

// The CUDA engine under gru_cell_mapping.h, on the op's stream; carves the op's workspace.
template <typename T>
struct GpuGruCell {
  using Status = GpuStatus;
  const GpuContext& g;
  void* workspace;

  template <typename P>
  GpuStatus Zero(P* p, I64 n) const { return gpu::Zero(g, p, n); }
  GpuStatus Copy(T* dst, const T* src, I64 n) const { return gpu::Copy(g, dst, src, n); }
  template <typename C>
  GpuStatus Gemm(bool ta, bool tb, I64 m, I64 n, I64 k, const T* a, I64 lda, const T* b, I64 ldb,
                 C* c, I64 ldc, bool accumulate) const {
    return GemmLdT(g, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, accumulate);
  }

  CellFwdBufs<T> CarveFwd(I64 B, I64 I, I64 H) const {
    (void)I;
    Carver cv(workspace);
    return CarveCellFwd<T>(B, H, cv);
  }
  GpuStatus StepForward(const GruCellFwdArgs<T>& a, const CellFwdBufs<T>& w,
                        StepPhase phase) const {
    FwdStep<T> p;
    SetCellSpec(GruBlockRnnSpec(a.B, a.I, a.H), &p);
    p.ly = CellLayer<T>(a.H, a.r, a.u, a.c);
    p.ly.gx = w.gx;
    p.ly.bW = w.bw;
    p.ly.bR = w.br;
    p.ly.aux = w.rh;
    p.hr = w.hr;
    p.h_cur = p.h_rec = a.h_prev;
    p.h_next = p.y = a.h;
    p.yst = a.H;
    p.c = nullptr;
    p.hh_step = w.rh;
    p.hrn = w.hrn;
    p.phase = phase;
    return FwdStepGpu<T>(g, p);
  }

  CellBwdBufs<T> CarveBwd(I64 B, I64 I, I64 H, const GruCellBwdArgs<T>&) const {
    Carver cv(workspace);
    return CarveCellBwd<T>(B, I, H, cv);
  }
  BwdStep<T> BwdStepOf(const GruCellBwdArgs<T>& a, const CellBwdBufs<T>& w) const {
    BwdStep<T> p;
    SetCellSpec(GruBlockRnnSpec(a.B, a.I, a.H), &p);
    p.D = 1;
    p.ly = CellLayer<T>(a.H, a.r, a.u, a.c);
    p.ly.hprev = const_cast<T*>(a.h_prev);
    p.dy = a.d_h;
    p.yst = a.H;
    p.dgx = w.dgx;
    p.dhr = w.dhr;
    p.dhr_cur = w.dhr_cur;
    p.dh = w.dh;
    const T* gate_grads[3] = {a.g_r, a.g_u, a.g_c};  // of the r, u, c outputs, or null
    std::copy_n(gate_grads, 3, p.dact);
    p.reset_before = true;
    p.dpn = w.dpn;
    return p;
  }
  // kBeforeProduct: the per-step backward kernel (d_c_bar into dpn); kAfterProduct: r's
  // gradient and h_prev's term through r ⊙ h_prev, from drh.
  GpuStatus StepBackward(const GruCellBwdArgs<T>& a, const CellBwdBufs<T>& w,
                         StepPhase phase) const {
    const BwdStep<T> p = BwdStepOf(a, w);
    if (phase == StepPhase::kAfterProduct) {
      return GruResetGpu<T>(g, p, nullptr, false, 0, 0, w.drh);
    }
    return BwdStepGpu<T>(g, p);
  }
  GpuStatus SplitGates(const CellBwdBufs<T>& w, const GruCellBwdArgs<T>& a) const {
    TFRNN_LAUNCH(Blocks(a.B * 3 * a.H), kThreads, g.stream, SplitGatesKernel<T>)(w.dgx, a.B, a.H,
        a.d_r_bar_u_bar, a.d_c_bar);
    TFRNN_CUDA_CHECK_LAUNCH("SplitGatesKernel");
    return GpuStatus::Ok();
  }
  // d_x and d_h_prev from their Acc buffers.
  GpuStatus FinishBackward(const GruCellBwdArgs<T>& a, const CellBwdBufs<T>& w) const {
    using A = AccOf<T>;
    TFRNN_GPU_RETURN_IF_ERROR(Convert(g, a.d_x, static_cast<const A*>(w.dx), a.B * a.I));
    return Convert(g, a.d_h_prev, static_cast<const A*>(w.dh), a.B * a.H);
  }
};

// Checks the caller's workspace (want bytes), then run(dev) on the CUDA engine's adapter.
template <typename T, typename Run>
GpuStatus RunCell(const GpuContext& g, const char* what, int64_t want, void* workspace,
                  int64_t workspace_bytes, Run run) {
  TFRNN_GPU_RETURN_IF_ERROR(CheckWorkspace(what, workspace_bytes, want, workspace));
  GpuGruCell<T> dev{g, workspace};
  return run(dev);
}

}  // namespace

template <typename T>
GpuStatus GruCellForwardGpu(const GpuContext& g, const GruCellFwdArgs<T>& a, void* workspace,
                            int64_t workspace_bytes) {
  return RunCell<T>(g, "gru cell forward", GruCellFwdWorkspaceBytesGpu(a.B, a.I, a.H, sizeof(T)),
                    workspace, workspace_bytes,
                    [&](GpuGruCell<T>& dev) { return GruCellForwardOn(dev, a); });
}

template <typename T>
GpuStatus GruCellBackwardGpu(const GpuContext& g, const GruCellBwdArgs<T>& a, void* workspace,
                             int64_t workspace_bytes) {
  return RunCell<T>(g, "gru cell backward", GruCellBwdWorkspaceBytesGpu(a.B, a.I, a.H, sizeof(T)),
                    workspace, workspace_bytes,
                    [&](GpuGruCell<T>& dev) { return GruCellBackwardOn(dev, a); });
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
