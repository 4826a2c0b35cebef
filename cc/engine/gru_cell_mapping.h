// The GRU block cell (GRUBlockCell, GRUBlockCellGrad; equations in types.h at GruCellFwdArgs)
// mapped onto one step of the stacked-RNN engine, written once for both devices: a reset-before
// gru step (GruBlockRnnSpec), gates r, u, c in blocks 0, 1, 2 of 3H columns. w_ru and w_c are
// two tensors, so the face runs the products itself (into column blocks of the pre-activation
// rows) and the engine's step passes (phases kBeforeProduct and kAfterProduct, StepPhase) run
// the pointwise work between them.
//
// The device comes in as an adapter `Dev` (gru_cpu.cc for the CPU engine, cc/gpu/gru_gpu.cu
// for the CUDA engine) with
//   Status                             the engine's status type (AlwaysOk on the CPU);
//   Copy(dst, src, n), Zero(p, n)      on the device's memory;
//   Gemm(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, accumulate): c (+)= op(a) · op(b), row-major;
//   FwdBufs (gx, hr, hr_acc, hrn, hrn_ld, hrn_acc, rh, bw, br) from CarveFwd(B, I, H), and
//   StepForward(a, w, phase): the engine's pointwise pass; hr [B, 3H] (ld 3H) receives
//     h_prev · w_ru[I:] in its r, u blocks and hrn (ld hrn_ld) (r ⊙ h_prev) · w_c[I:], each
//     added to what is there when its *_acc is set (the CPU engine adds them into gx);
//   BwdBufs (dgx, dpn, dpn_ld, drh, dx, dh) from CarveBwd(B, I, H, a), StepBackward(a, w,
//     phase), SplitGates(w, a): dgx [B, 3H] into d_r_bar_u_bar and d_c_bar, and
//     FinishBackward(a, w): dx and dh into d_x and d_h_prev where they are separate buffers.
// No device headers: this compiles under g++ and nvcc alike.
#ifndef TF_RNN_OPS_CC_ENGINE_GRU_CELL_MAPPING_H_
#define TF_RNN_OPS_CC_ENGINE_GRU_CELL_MAPPING_H_

#include "cc/engine/lstm_block_mapping.h"  // AlwaysOk, TFRNN_MAPPING_TRY
#include "cc/engine/types.h"

namespace tfrnn {

template <typename Dev, typename T>
typename Dev::Status GruCellForwardOn(Dev& dev, const GruCellFwdArgs<T>& a) {
  const Index B = a.B, I = a.I, H = a.H, G = 3 * H;
  if (B * H == 0) return Dev::Status::Ok();
  auto w = dev.CarveFwd(B, I, H);
  TFRNN_MAPPING_TRY(dev.Copy(w.bw, a.b_ru, 2 * H));
  TFRNN_MAPPING_TRY(dev.Copy(w.bw + 2 * H, a.b_c, H));
  TFRNN_MAPPING_TRY(dev.Zero(w.br, G));
  // W·x = [x · w_ru[:I], x · w_c[:I]]; R·h of the r, u blocks = h_prev · w_ru[I:].
  TFRNN_MAPPING_TRY(dev.Gemm(false, false, B, 2 * H, I, a.x, I, a.w_ru, 2 * H, w.gx, G, false));
  TFRNN_MAPPING_TRY(
      dev.Gemm(false, false, B, H, I, a.x, I, a.w_c, H, w.gx + 2 * H, G, false));
  TFRNN_MAPPING_TRY(dev.Gemm(false, false, B, 2 * H, H, a.h_prev, H, a.w_ru + I * 2 * H, 2 * H,
                             w.hr, G, w.hr_acc));
  // kBeforeProduct: r, u and r ⊙ h_prev; the candidate's product (r ⊙ h_prev) · w_c[I:];
  // kAfterProduct: c, h.
  TFRNN_MAPPING_TRY(dev.StepForward(a, w, StepPhase::kBeforeProduct));
  TFRNN_MAPPING_TRY(dev.Gemm(false, false, B, H, H, w.rh, H, a.w_c + I * H, H, w.hrn, w.hrn_ld,
                             w.hrn_acc));
  return dev.StepForward(a, w, StepPhase::kAfterProduct);
}

template <typename Dev, typename T>
typename Dev::Status GruCellBackwardOn(Dev& dev, const GruCellBwdArgs<T>& a) {
  const Index B = a.B, I = a.I, H = a.H;
  if (B * H == 0) return Dev::Status::Ok();
  auto w = dev.CarveBwd(B, I, H, a);
  TFRNN_MAPPING_TRY(dev.Zero(w.dh, B * H));
  // d_u_bar, d_c_bar and h_prev's direct term; then d_hr = d_c_bar · w_c[I:]ᵀ, r's gradient and
  // h_prev's term through r ⊙ h_prev.
  TFRNN_MAPPING_TRY(dev.StepBackward(a, w, StepPhase::kBeforeProduct));
  TFRNN_MAPPING_TRY(dev.Gemm(false, true, B, H, H, w.dpn, w.dpn_ld, a.w_c + I * H, H, w.drh, H,
                             false));
  TFRNN_MAPPING_TRY(dev.StepBackward(a, w, StepPhase::kAfterProduct));
  TFRNN_MAPPING_TRY(dev.SplitGates(w, a));
  const T* dcb = a.d_c_bar;
  const T* drb = a.d_r_bar_u_bar;
  // d_x = d_c_bar · w_c[:I]ᵀ + [d_r_bar, d_u_bar] · w_ru[:I]ᵀ
  TFRNN_MAPPING_TRY(dev.Gemm(false, true, B, I, H, dcb, H, a.w_c, H, w.dx, I, false));
  TFRNN_MAPPING_TRY(dev.Gemm(false, true, B, I, 2 * H, drb, 2 * H, a.w_ru, 2 * H, w.dx, I, true));
  // d_h_prev += [d_r_bar, d_u_bar] · w_ru[I:]ᵀ
  TFRNN_MAPPING_TRY(dev.Gemm(false, true, B, H, 2 * H, drb, 2 * H, a.w_ru + I * 2 * H, 2 * H,
                             w.dh, H, true));
  return dev.FinishBackward(a, w);
}

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_ENGINE_GRU_CELL_MAPPING_H_
