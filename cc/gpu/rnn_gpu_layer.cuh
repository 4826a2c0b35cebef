// One (layer, direction) of the CUDA stacked-RNN engine, for the engine's own drivers
// (RnnForwardGpu / RnnBackwardGpu) and for the faces that run one layer on their own tensors
// (the LSTM block ops, lstm_gpu.cu), as the CPU's LayerForward / LayerBackward
// (rnn_cpu_common.h): the workspace pieces, and the two layer functions.
#ifndef TF_RNN_OPS_CC_GPU_RNN_GPU_LAYER_CUH_
#define TF_RNN_OPS_CC_GPU_RNN_GPU_LAYER_CUH_

#include <algorithm>

#include "cc/gpu/rnn_gpu_common.cuh"
#include "cc/gpu/rnn_gpu_bwd_point.cuh"
#include "cc/gpu/rnn_gpu_fwd_point.cuh"

namespace tfrnn {
namespace gpu {

template <typename T>
struct FwdBufs {
  using A = AccOf<T>;
  int* lengths;
  T *h_cur, *h_next, *hh_step;
  T* h_masked;  // [B, Hs] (mask), [K, B, Hs] with per-gate masks
  A *c, *hr;
  A* hrn;  // [B, H] R_n·(r ⊙ h_rec) (reset-before gru)
};

template <typename T>
FwdBufs<T> CarveFwd(const RnnSpec& s, Carver& cv) {
  const I64 B = s.B, H = s.H, Hs = RnnHs(s), KH = RnnK(s) * H;
  FwdBufs<T> w;
  w.lengths = cv.Take<int>(B);
  w.h_cur = cv.Take<T>(B * Hs);
  w.h_next = cv.Take<T>(B * Hs);
  w.h_masked = cv.Take<T>((RnnGateMasks(s) ? RnnK(s) : 1) * B * Hs);  // h ⊙ mask_k per gate
  w.hh_step = cv.Take<T>(B * H);
  w.c = cv.Take<AccOf<T>>(B * H);
  w.hr = cv.Take<AccOf<T>>(B * KH);
  w.hrn = cv.Take<AccOf<T>>(s.mode == RnnMode::kGru && s.gru_reset_before ? B * H : 0);
  return w;
}

template <typename T>
struct BwdBufs {
  using A = AccOf<T>;
  int* lengths;
  T *dgx, *dhr;            // [TB, KH] pre-activation gradients (dhr == dgx except for gru)
  T *dhr_prev, *dhr_cur;   // [B, KH] dL/d(R·h) of the later / current step
  A *dh, *dc;              // [B, Hs], [B, H] carries
  T* dhtot;                // [TB, P] dL/dh (projected) of every row (projection)
  A* dhh;                  // [B, H] dL/d(unprojected h) (projection)
  T* dtot;                 // [B, Hs] (projection)
  A* dhm;                  // [B, Hs] (mask), [K, B, Hs] with per-gate masks
  T *dy_buf, *din_buf;     // [TB, D·Hs]
  T* x_masked;             // [TB, I]
  A* partial;              // [chunks, KH] column-sum partials
  I64 chunks;
  T* hrec;                 // [TB, Hs] h_prev ⊙ mask of every row (mask)
  T* dpn;                  // [B, H] dL/d(candidate pre-activation) of a step (reset-before gru)
  T* gather;               // [TB, H] the candidate block of dhr (reset-before gru)
  T* rt;                   // [Hs, KH] Rᵀ (the fused backward step; StepChainBwdShape)
};

constexpr I64 kMaxChunks = 128;

template <typename T>
BwdBufs<T> CarveBwd(const RnnSpec& s, Carver& cv) {
  using A = AccOf<T>;
  const I64 TB = s.T * s.B, B = s.B, H = s.H, Hs = RnnHs(s), KH = RnnK(s) * H;
  const I64 ycols = s.D * Hs;
  BwdBufs<T> w;
  w.lengths = cv.Take<int>(B);
  w.dgx = cv.Take<T>(TB * KH);
  w.dhr = s.mode == RnnMode::kGru ? cv.Take<T>(TB * KH) : w.dgx;
  w.dhr_prev = cv.Take<T>(B * KH);
  w.dhr_cur = cv.Take<T>(B * KH);
  w.dh = cv.Take<A>(B * Hs);
  w.dc = cv.Take<A>(B * H);
  w.dhtot = cv.Take<T>(TB * s.P);
  w.dhh = cv.Take<A>(B * H);
  w.dtot = cv.Take<T>(B * Hs);
  w.dhm = cv.Take<A>((RnnGateMasks(s) ? RnnK(s) : 1) * B * Hs);
  w.dy_buf = cv.Take<T>(TB * ycols);
  w.din_buf = cv.Take<T>(TB * ycols);
  w.x_masked = cv.Take<T>(TB * s.I);
  w.chunks = std::max<I64>(1, std::min<I64>(kMaxChunks, (TB + 255) / 256));
  w.partial = cv.Take<A>(w.chunks * KH);
  const bool reset_before = s.mode == RnnMode::kGru && s.gru_reset_before;
  w.hrec = cv.Take<T>(s.has_mask ? TB * Hs : 0);
  w.dpn = cv.Take<T>(reset_before ? B * H : 0);
  w.gather = cv.Take<T>(reset_before ? TB * H : 0);
  w.rt = cv.Take<T>(StepChainBwdShape(s) ? KH * Hs : 0);
  return w;
}


// One step's pointwise backward (the forward's is FwdStepGpu), and the second half of a
// reset-before gru step's (drh = dL/d(r ⊙ h_rec) = dpn · R_n): r's gradient, h_prev's share
// (h_rec = h_prev ⊙ the candidate's mask: column mask_col of mask rows mask_cols wide).
template <typename T>
GpuStatus BwdStepGpu(const GpuContext& g, const BwdStep<T>& p);
template <typename T>
GpuStatus GruResetGpu(const GpuContext& g, const BwdStep<T>& p, const T* mask,
                      bool mask_per_step, I64 mask_cols, I64 mask_col, const AccOf<T>* drh);

// One step's fused pointwise forward (phase as FwdStep::phase).
template <typename T>
GpuStatus FwdStepGpu(const GpuContext& g, const FwdStep<T>& p);

// Forward of one (layer, direction): `steps` steps (the longest sequence), the layer output
// into ylayer [T, B, D·Hs] at column ly.dcol, final states into a.hn / a.cn at `pseudo`.
template <typename T>
GpuStatus LayerForwardGpu(const GpuContext& g, const RnnSpec& s, I64 pseudo,
                          const LayerPtrs<T>& ly, const T* xin, const RnnFwdArgs<T>& a,
                          const int* lengths_dev, I64 steps, T* ylayer, FwdBufs<T> w);

// Backward of one (layer, direction): dyl is dL/d(layer output); the weight and bias
// gradients go to ly.dW, dR, dP, dbW (dbR when not null), dL/d(layer input) into din
// (added when accumulate_din), the initial states' gradients into a.dh0 / a.dc0 at `pseudo`.
template <typename T>
GpuStatus LayerBackwardGpu(const GpuContext& g, const RnnSpec& s, I64 pseudo,
                           const LayerPtrs<T>& ly, const T* xin, const T* dyl,
                           const RnnBwdArgs<T>& a, const int* lengths_dev, I64 steps, T* din,
                           bool accumulate_din, BwdBufs<T> w);

}  // namespace gpu
}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_GPU_RNN_GPU_LAYER_CUH_
