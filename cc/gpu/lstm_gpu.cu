// The LSTM block ops' CUDA adapter of the stacked-RNN engine (see lstm_gpu.h):
// cc/engine/lstm_block_mapping.h maps BlockLSTM(V2), BlockLSTMGrad(V2), the exact gradient and
// LSTMBlockCellGrad's gate gradients onto one layer of rnn_gpu_{forward,backward}.cu for both
// devices; this file gives it the workspace (the pre-activations W·x stay in Acc, gx), the
// memory operations on the op's stream and the layer passes.
#include <cstdint>
#include <string>

#include "cc/engine/lstm_block_mapping.h"
#include "cc/gpu/lstm_gpu.h"
#include "cc/gpu/rnn_gpu_layer.cuh"

namespace tfrnn {
namespace gpu {
namespace {

template <typename T>
__global__ void FillKernel(T* p, I64 n, float v) {
  TFRNN_GRID_STRIDE(i, n) St(p + i, AccOf<T>(v));
}

// What the face adds to the layer's workspace.
template <typename T>
struct BlockFwdBufs {
  AccOf<T>* gx;  // [T·B, 4H] W·x (no bias)
  T *peep, *br;  // [4H] the engine's peephole vector and recurrent bias
  T *hn, *cn;    // [B, H] final states (the block ops have none: cs and h hold them)
  FwdBufs<T> layer;
};
template <typename T>
BlockFwdBufs<T> CarveBlockFwd(const RnnSpec& s, Carver& cv) {
  const I64 G = 4 * s.H, NH = s.B * s.H;
  BlockFwdBufs<T> w;
  w.gx = cv.Take<AccOf<T>>(s.T * s.B * G);
  w.peep = cv.Take<T>(G);
  w.br = cv.Take<T>(G);
  w.hn = cv.Take<T>(NH);
  w.cn = cv.Take<T>(NH);
  w.layer = CarveFwd<T>(s, cv);
  return w;
}

template <typename T>
struct BlockBwdBufs {
  T *peep, *dpeep;  // [4H]
  T* zeros;         // [2, B, H]: the final states' gradients
  BwdBufs<T> layer;
};
template <typename T>
BlockBwdBufs<T> CarveBlockBwd(const RnnSpec& s, Carver& cv) {
  const I64 G = 4 * s.H, NH = s.B * s.H;
  BlockBwdBufs<T> w;
  w.peep = cv.Take<T>(G);
  w.dpeep = cv.Take<T>(G);
  w.zeros = cv.Take<T>(2 * NH);
  w.layer = CarveBwd<T>(s, cv);
  return w;
}

// The CUDA engine under lstm_block_mapping.h, on the op's stream; carves the op's workspace.
// dgates_out, when given, receives the backward's pre-activation gradients (LSTMBlockCellGrad's
// dicfo).
template <typename T>
struct GpuLstmBlock {
  using Status = GpuStatus;
  using Layer = LayerPtrs<T>;
  const GpuContext& g;
  void* workspace;
  T* dgates_out;

  GpuStatus Zero(T* p, I64 n) const { return gpu::Zero(g, p, n); }
  GpuStatus Copy(T* dst, const T* src, I64 n) const { return gpu::Copy(g, dst, src, n); }
  GpuStatus Fill(T* p, I64 n, float v) const {
    TFRNN_LAUNCH(Blocks(n), kThreads, g.stream, FillKernel<T>)(p, n, v);
    TFRNN_CUDA_CHECK_LAUNCH("FillKernel");
    return GpuStatus::Ok();
  }
  BlockFwdBufs<T> CarveFwd(const RnnSpec& s) const {
    Carver cv(workspace);
    return CarveBlockFwd<T>(s, cv);
  }
  BlockBwdBufs<T> CarveBwd(const RnnSpec& s) const {
    Carver cv(workspace);
    return CarveBlockBwd<T>(s, cv);
  }
  GpuStatus LayerForward(const RnnSpec& s, const Layer& ly, const RnnFwdArgs<T>& ra,
                         const BlockFwdBufs<T>& w, const LstmFwdArgs<T>& a) const {
    return LayerForwardGpu<T>(g, s, 0, ly, a.x, ra, nullptr, s.T, a.h, w.layer);
  }
  GpuStatus LayerBackward(const RnnSpec& s, const Layer& ly, const RnnBwdArgs<T>& ra,
                          const BlockBwdBufs<T>& w, const LstmBwdArgs<T>& a) const {
    TFRNN_GPU_RETURN_IF_ERROR(LayerBackwardGpu<T>(g, s, 0, ly, a.x, a.h_grad, ra, nullptr, s.T,
                                                  a.x_grad, false, w.layer));
    if (dgates_out == nullptr) return GpuStatus::Ok();
    return Copy(dgates_out, static_cast<const T*>(w.layer.dgx), s.T * s.B * 4 * s.H);
  }
};

}  // namespace

int64_t LstmFwdWorkspaceBytesGpu(int64_t T_, int64_t B, int64_t I, int64_t H, int elem_bytes) {
  const RnnSpec s = LstmBlockRnnSpec(LstmCellSpec(), T_, B, I, H);
  return CountedBytes(elem_bytes, [&](auto t, Carver& cv) {
    CarveBlockFwd<typename decltype(t)::type>(s, cv);
  });
}

int64_t LstmBwdWorkspaceBytesGpu(int64_t T_, int64_t B, int64_t I, int64_t H, int elem_bytes) {
  const RnnSpec s = LstmBlockRnnSpec(LstmCellSpec(), T_, B, I, H);
  return CountedBytes(elem_bytes, [&](auto t, Carver& cv) {
    CarveBlockBwd<typename decltype(t)::type>(s, cv);
  });
}

template <typename T>
GpuStatus LstmForwardGpu(const GpuContext& g, const LstmCellSpec& c, const LstmFwdArgs<T>& a,
                         void* workspace, int64_t workspace_bytes) {
  TFRNN_GPU_RETURN_IF_ERROR(CheckWorkspace(
      "lstm forward", workspace_bytes,
      LstmFwdWorkspaceBytesGpu(a.T, a.B, a.I, a.H, sizeof(T)), workspace));
  GpuLstmBlock<T> dev{g, workspace, nullptr};
  return LstmBlockForward(dev, c, a);
}

template <typename T>
GpuStatus LstmBackwardGpu(const GpuContext& g, const LstmCellSpec& c, const LstmBwdArgs<T>& a,
                          void* workspace, int64_t workspace_bytes, T* dgates_out) {
  TFRNN_GPU_RETURN_IF_ERROR(CheckWorkspace(
      "lstm backward", workspace_bytes,
      LstmBwdWorkspaceBytesGpu(a.T, a.B, a.I, a.H, sizeof(T)), workspace));
  if (dgates_out != nullptr) {  // zero past seq_len_max, like x_grad
    const I64 steps = a.seq_len_max, rows = a.B * 4 * a.H;
    TFRNN_GPU_RETURN_IF_ERROR(Zero(g, dgates_out + steps * rows, (a.T - steps) * rows));
  }
  GpuLstmBlock<T> dev{g, workspace, dgates_out};
  return LstmBlockBackward(dev, c, a);
}

#define TFRNN_INSTANTIATE_LSTM_GPU(T)                                                       \
  template GpuStatus LstmForwardGpu<T>(const GpuContext&, const LstmCellSpec&,              \
                                       const LstmFwdArgs<T>&, void*, int64_t);              \
  template GpuStatus LstmBackwardGpu<T>(const GpuContext&, const LstmCellSpec&,             \
                                        const LstmBwdArgs<T>&, void*, int64_t, T*);
TFRNN_INSTANTIATE_LSTM_GPU(__half)
TFRNN_INSTANTIATE_LSTM_GPU(__nv_bfloat16)
TFRNN_INSTANTIATE_LSTM_GPU(float)
TFRNN_INSTANTIATE_LSTM_GPU(double)
#undef TFRNN_INSTANTIATE_LSTM_GPU

}  // namespace gpu
}  // namespace tfrnn
