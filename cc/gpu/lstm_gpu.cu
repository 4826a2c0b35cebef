// The LSTM block ops' face of the CUDA stacked-RNN engine (see lstm_gpu.h; the CPU twin is
// cc/engine/lstm_cpu.cc, which this follows): BlockLSTM(V2), BlockLSTMGrad(V2), the exact
// gradient and LSTMBlockCellGrad's gate gradients run as one layer of rnn_gpu_{forward,
// backward}.cu (LstmBlockRnnSpec, types.h): w [I+H, 4H] is W = w[:I] and R = w[I:]
// (weights_xw), b the input bias and forget_bias the recurrent bias of f, the gate activations,
// c and tanh(c) the caller's [T, N, H] planes (act_ld = H), h the layer output, T =
// seq_len_max steps; the pre-activations W·x stay in Acc (gx).
#include <cstdint>
#include <string>

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
  AccOf<T>* gx;  // [L·N, 4H] W·x (no bias)
  T *peep, *br;  // [4H] the engine's peephole vector and recurrent bias
  T *hn, *cn;    // [N, H] final states (the block ops have none: cs and h hold them)
  FwdBufs<T> layer;
};
template <typename T>
BlockFwdBufs<T> CarveBlockFwd(const RnnSpec& s, Carver& cv) {
  const I64 G = 4 * s.N, NH = s.B * s.N;
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
  T* zeros;         // [2, N, H]: the final states' gradients
  BwdBufs<T> layer;
};
template <typename T>
BlockBwdBufs<T> CarveBlockBwd(const RnnSpec& s, Carver& cv) {
  const I64 G = 4 * s.N, NH = s.B * s.N;
  BlockBwdBufs<T> w;
  w.peep = cv.Take<T>(G);
  w.dpeep = cv.Take<T>(G);
  w.zeros = cv.Take<T>(2 * NH);
  w.layer = CarveBwd<T>(s, cv);
  return w;
}

// The engine's peephole vector [4H] in block order: wci, wcf, wco at i, f, o; zero at c'.
template <typename T>
GpuStatus PackPeephole(const GpuContext& g, const RnnSpec& s, const T* wci, const T* wcf,
                       const T* wco, T* p) {
  const I64 H = s.N;
  TFRNN_GPU_RETURN_IF_ERROR(Zero(g, p, 4 * H));
  TFRNN_GPU_RETURN_IF_ERROR(Copy(g, p + s.gate_pos[0] * H, wci, H));
  TFRNN_GPU_RETURN_IF_ERROR(Copy(g, p + s.gate_pos[1] * H, wcf, H));
  return Copy(g, p + s.gate_pos[3] * H, wco, H);
}

// The engine layer of a block op over the caller's planes (SetLstmBlockLayer, types.h).
template <typename T>
LayerPtrs<T> BlockLayer(const RnnSpec& s, const T* w, const T* b, const T* br, const T* i,
                        const T* f, const T* ci, const T* o, const T* cs, const T* co) {
  LayerPtrs<T> ly;
  SetLstmBlockLayer(s, w, b, br, i, f, ci, o, cs, co, &ly);
  return ly;
}

template <typename T>
GpuStatus ZeroPeepholeGrads(const GpuContext& g, const LstmBwdArgs<T>& a, I64 H) {
  TFRNN_GPU_RETURN_IF_ERROR(Zero(g, a.wci_grad, H));
  TFRNN_GPU_RETURN_IF_ERROR(Zero(g, a.wcf_grad, H));
  return Zero(g, a.wco_grad, H);
}

}  // namespace

int64_t LstmFwdWorkspaceBytesGpu(int64_t T_, int64_t N, int64_t I, int64_t H, int elem_bytes) {
  const RnnSpec s = LstmBlockRnnSpec(LstmCellSpec(), T_, N, I, H);
  return CountedBytes(elem_bytes, [&](auto t, Carver& cv) {
    CarveBlockFwd<typename decltype(t)::type>(s, cv);
  });
}

int64_t LstmBwdWorkspaceBytesGpu(int64_t T_, int64_t N, int64_t I, int64_t H, int elem_bytes) {
  const RnnSpec s = LstmBlockRnnSpec(LstmCellSpec(), T_, N, I, H);
  return CountedBytes(elem_bytes, [&](auto t, Carver& cv) {
    CarveBlockBwd<typename decltype(t)::type>(s, cv);
  });
}

template <typename T>
GpuStatus LstmForwardGpu(const GpuContext& g, const LstmCellSpec& c, const LstmFwdArgs<T>& a,
                         void* workspace, int64_t workspace_bytes) {
  const I64 T_ = a.T, N = a.N, I = a.I, H = a.H, L = a.seq_len_max, NH = N * H, G = 4 * H;
  TFRNN_GPU_RETURN_IF_ERROR(CheckWorkspace("lstm forward", workspace_bytes,
                                           LstmFwdWorkspaceBytesGpu(T_, N, I, H, sizeof(T)),
                                           workspace));
  if (L > 0 && N > 0) {
    const RnnSpec s = LstmBlockRnnSpec(c, L, N, I, H);
    Carver cv(workspace);
    BlockFwdBufs<T> w = CarveBlockFwd<T>(s, cv);
    TFRNN_GPU_RETURN_IF_ERROR(Zero(g, w.br, G));
    TFRNN_LAUNCH(Blocks(H), kThreads, g.stream, FillKernel<T>)(w.br + s.gate_pos[1] * H, H,
                                                               c.forget_bias);
    TFRNN_CUDA_CHECK_LAUNCH("FillKernel");
    if (c.use_peephole) {
      TFRNN_GPU_RETURN_IF_ERROR(PackPeephole<T>(g, s, a.wci, a.wcf, a.wco, w.peep));
    }
    LayerPtrs<T> ly = BlockLayer<T>(s, a.w, a.b, w.br, a.i, a.f, a.ci, a.o, a.cs, a.co);
    ly.gx = w.gx;
    RnnFwdArgs<T> ra;
    ra.x = a.x;
    ra.h0 = a.h_prev;
    ra.c0 = a.cs_prev;
    ra.y = a.h;
    ra.hn = w.hn;
    ra.cn = w.cn;
    ra.peephole = w.peep;
    TFRNN_GPU_RETURN_IF_ERROR(LayerForwardGpu<T>(g, s, 0, ly, a.x, ra, nullptr, L, a.h,
                                                 w.layer));
  }
  // Steps past seq_len_max (0 <= seq_len_max <= T, checked by the C API): all seven outputs
  // are zero.
  T* const outs[] = {a.i, a.cs, a.f, a.o, a.ci, a.co, a.h};
  for (T* out : outs) TFRNN_GPU_RETURN_IF_ERROR(Zero(g, out + L * NH, (T_ - L) * NH));
  return GpuStatus::Ok();
}

template <typename T>
GpuStatus LstmBackwardGpu(const GpuContext& g, const LstmCellSpec& c, const LstmBwdArgs<T>& a,
                          void* workspace, int64_t workspace_bytes, T* dgates_out) {
  const I64 T_ = a.T, N = a.N, I = a.I, H = a.H, L = a.seq_len_max, NH = N * H, G = 4 * H;
  TFRNN_GPU_RETURN_IF_ERROR(CheckWorkspace("lstm backward", workspace_bytes,
                                           LstmBwdWorkspaceBytesGpu(T_, N, I, H, sizeof(T)),
                                           workspace));
  // x_grad and the gate gradients are zero past seq_len_max.
  TFRNN_GPU_RETURN_IF_ERROR(Zero(g, a.x_grad + L * N * I, (T_ - L) * N * I));
  if (dgates_out != nullptr) {
    TFRNN_GPU_RETURN_IF_ERROR(Zero(g, dgates_out + L * N * G, (T_ - L) * N * G));
  }
  if (L == 0 || N == 0) {
    TFRNN_GPU_RETURN_IF_ERROR(Zero(g, a.cs_prev_grad, NH));
    TFRNN_GPU_RETURN_IF_ERROR(Zero(g, a.h_prev_grad, NH));
    TFRNN_GPU_RETURN_IF_ERROR(Zero(g, a.w_grad, (I + H) * G));
    TFRNN_GPU_RETURN_IF_ERROR(Zero(g, a.b_grad, G));
    return ZeroPeepholeGrads(g, a, H);
  }
  RnnSpec s = LstmBlockRnnSpec(c, L, N, I, H);
  s.exact_clip_grad = a.exact_clip_grad;
  Carver cv(workspace);
  BlockBwdBufs<T> w = CarveBlockBwd<T>(s, cv);
  TFRNN_GPU_RETURN_IF_ERROR(Zero(g, w.zeros, 2 * NH));
  if (c.use_peephole) {
    TFRNN_GPU_RETURN_IF_ERROR(PackPeephole<T>(g, s, a.wci, a.wcf, a.wco, w.peep));
  }
  LayerPtrs<T> ly = BlockLayer<T>(s, a.w, nullptr, nullptr, a.i, a.f, a.ci, a.o, a.cs, a.co);
  ly.hseq = a.h;  // h_prev of step t > 0 is h[t-1]
  ly.dW = a.w_grad;
  ly.dR = a.w_grad + I * G;
  ly.dbW = a.b_grad;
  RnnBwdArgs<T> ra;
  ra.x = a.x;
  ra.h0 = a.h_prev;
  ra.c0 = a.cs_prev;
  ra.dy = a.h_grad;
  ra.dhn = w.zeros;
  ra.dcn = w.zeros + NH;
  ra.dx = a.x_grad;
  ra.dh0 = a.h_prev_grad;
  ra.dc0 = a.cs_prev_grad;
  ra.peephole = w.peep;
  ra.dpeephole = w.dpeep;
  ra.dc_seq = a.cs_grad;
  ra.dact[0] = a.i_grad;
  ra.dact[1] = a.f_grad;
  ra.dact[2] = a.ci_grad;
  ra.dact[3] = a.o_grad;
  ra.dco = a.co_grad;
  TFRNN_GPU_RETURN_IF_ERROR(LayerBackwardGpu<T>(g, s, 0, ly, a.x, a.h_grad, ra, nullptr, L,
                                                a.x_grad, false, w.layer));
  if (dgates_out != nullptr) {  // LSTMBlockCellGrad's dicfo: the pre-activation gradients
    TFRNN_GPU_RETURN_IF_ERROR(Copy(g, dgates_out, static_cast<const T*>(w.layer.dgx),
                                   L * N * G));
  }
  if (!c.use_peephole) return ZeroPeepholeGrads(g, a, H);
  TFRNN_GPU_RETURN_IF_ERROR(Copy(g, a.wci_grad, w.dpeep + s.gate_pos[0] * H, H));
  TFRNN_GPU_RETURN_IF_ERROR(Copy(g, a.wcf_grad, w.dpeep + s.gate_pos[1] * H, H));
  return Copy(g, a.wco_grad, w.dpeep + s.gate_pos[3] * H, H);
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
