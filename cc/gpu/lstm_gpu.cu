// CUDA LSTM block engine (see lstm_gpu.h; the CPU twin is cc/engine/lstm_cpu.cc, whose
// structure and formulas this follows step for step).
#include <algorithm>
#include <cstdint>
#include <string>

#include "cc/gpu/lstm_gpu.h"
#include "cc/gpu/rnn_gpu_common.cuh"

namespace tfrnn {
namespace gpu {
namespace {

struct Order {
  int i, c, f, o;
};

template <typename T>
struct LstmFwdStep {
  using A = AccOf<T>;
  I64 N, H;
  Order ord;
  A forget_bias, clip;
  bool do_clip, peephole;
  const A* gates;  // [N, 4H] x·w[0:I] + h_{t-1}·w[I:] (no bias)
  const T *b, *cp, *wci, *wcf, *wco;
  T *i, *cs, *f, *o, *ci, *co, *h;  // [N, H] of this step
};

// One thread per (n, j): lstm.h's forward equations.
template <typename T>
__global__ void LstmFwdKernel(LstmFwdStep<T> p) {
  using A = AccOf<T>;
  const I64 H = p.H, G = 4 * H;
  TFRNN_GRID_STRIDE(idx, p.N * H) {
    const I64 n = idx / H, j = idx % H;
    const A* g = p.gates + n * G + j;
    const A gi = g[p.ord.i * H] + Ld(p.b + p.ord.i * H + j);
    const A gc = g[p.ord.c * H] + Ld(p.b + p.ord.c * H + j);
    const A gf = g[p.ord.f * H] + Ld(p.b + p.ord.f * H + j);
    const A go = g[p.ord.o * H] + Ld(p.b + p.ord.o * H + j);
    const A cp = Ld(p.cp + idx);
    A i, f;
    if (p.peephole) {
      i = Sigmoid(gi + cp * Ld(p.wci + j));
      f = Sigmoid(gf + p.forget_bias + cp * Ld(p.wcf + j));
    } else {
      i = Sigmoid(gi);
      f = Sigmoid(gf + p.forget_bias);
    }
    const A ci = tanh(gc);
    A cs = i * ci + f * cp;
    if (p.do_clip) cs = cs < -p.clip ? -p.clip : (cs > p.clip ? p.clip : cs);
    const A co = tanh(cs);
    const A o = p.peephole ? Sigmoid(go + cs * Ld(p.wco + j)) : Sigmoid(go);
    St(p.i + idx, i);
    St(p.cs + idx, cs);
    St(p.f + idx, f);
    St(p.o + idx, o);
    St(p.ci + idx, ci);
    St(p.co + idx, co);
    St(p.h + idx, o * co);
  }
}

template <typename T>
struct LstmBwdStep {
  using A = AccOf<T>;
  I64 N, H;
  Order ord;
  A clip;
  bool mask_clip, peephole;
  const T *cp, *i, *cs, *f, *o, *ci, *co, *cs_grad, *h_grad;  // [N, H]
  const T *gi, *gf, *go, *gci, *gco;                          // optional [N, H]
  const T *wci, *wcf, *wco;
  const A* dh;  // [N, H] dL/dh_t through step t+1
  A* dcs;       // [N, H] carry: in dL/dcs_t from t+1, out dL/dcs_{t-1}
  T* dgates;    // [N, 4H]
};

template <typename T>
__device__ __forceinline__ AccOf<T> Opt(const T* p, I64 idx) {
  return p != nullptr ? Ld(p + idx) : AccOf<T>(0);
}

// One thread per (n, j): BwdRows in lstm_cpu.cc.
template <typename T>
__global__ void LstmBwdKernel(LstmBwdStep<T> p) {
  using A = AccOf<T>;
  const I64 H = p.H, G = 4 * H;
  const A one(1);
  TFRNN_GRID_STRIDE(idx, p.N * H) {
    const I64 n = idx / H, j = idx % H;
    const A cp = Ld(p.cp + idx), i = Ld(p.i + idx), cs = Ld(p.cs + idx), f = Ld(p.f + idx),
            o = Ld(p.o + idx), ci = Ld(p.ci + idx), co = Ld(p.co + idx);
    const A dh = Ld(p.h_grad + idx) + p.dh[idx];
    A dcs = (one - co * co) * (dh * o + Opt(p.gco, idx)) + Ld(p.cs_grad + idx) + p.dcs[idx];
    const A dout = o * (one - o) * (dh * co + Opt(p.go, idx));
    if (p.peephole) dcs += dout * Ld(p.wco + j);
    if (p.mask_clip && !(fabs(cs) < p.clip)) dcs = A(0);
    const A dci = (one - ci * ci) * (dcs * i + Opt(p.gci, idx));
    const A df = f * (one - f) * (dcs * cp + Opt(p.gf, idx));
    const A di = i * (one - i) * (dcs * ci + Opt(p.gi, idx));
    p.dcs[idx] = p.peephole ? dcs * f + di * Ld(p.wci + j) + df * Ld(p.wcf + j) : dcs * f;
    T* dg = p.dgates + n * G + j;
    St(dg + p.ord.i * H, di);
    St(dg + p.ord.c * H, dci);
    St(dg + p.ord.f * H, df);
    St(dg + p.ord.o * H, dout);
  }
}

// out[col] = Σ_r in[r, col] over rows in order (one thread per column: deterministic).
template <typename T>
__global__ void ColumnSumKernel(const T* in, I64 rows, I64 cols, T* out) {
  TFRNN_GRID_STRIDE(col, cols) {
    AccOf<T> acc = 0;
    for (I64 r = 0; r < rows; ++r) acc += Ld(in + r * cols + col);
    St(out + col, acc);
  }
}

// Peephole gradients over rows r < rows of dgates [rows, 4H]: wci_grad = Σ di ⊙ cs_prev_row,
// wcf_grad = Σ df ⊙ cs_prev_row, wco_grad = Σ do ⊙ cs_row; cs_prev_row(r) = cp_first[r] for
// r < N, else cp_rest[r - N]. One thread per unit, rows in order.
template <typename T>
__global__ void PeepholeGradKernel(const T* dgates, I64 rows, I64 N, I64 H, Order ord,
                                   const T* cp_first, const T* cp_rest, const T* cs_rows,
                                   T* wci_grad, T* wcf_grad, T* wco_grad) {
  using A = AccOf<T>;
  TFRNN_GRID_STRIDE(j, H) {
    A gi = 0, gf = 0, go = 0;
    for (I64 r = 0; r < rows; ++r) {
      const T* dg = dgates + r * 4 * H;
      const A cp = r < N ? Ld(cp_first + r * H + j) : Ld(cp_rest + (r - N) * H + j);
      gi += Ld(dg + ord.i * H + j) * cp;
      gf += Ld(dg + ord.f * H + j) * cp;
      go += Ld(dg + ord.o * H + j) * Ld(cs_rows + r * H + j);
    }
    St(wci_grad + j, gi);
    St(wcf_grad + j, gf);
    St(wco_grad + j, go);
  }
}

template <typename T>
struct LstmFwdBufs {
  AccOf<T>* gates;  // [T, N, 4H]
};
template <typename T>
LstmFwdBufs<T> CarveLstmFwd(I64 T_, I64 N, I64 H, Carver& cv) {
  LstmFwdBufs<T> w;
  w.gates = cv.Take<AccOf<T>>(T_ * N * 4 * H);
  return w;
}

template <typename T>
struct LstmBwdBufs {
  T* dgates;        // [T, N, 4H]
  AccOf<T> *dh, *dcs;  // [N, H]
};
template <typename T>
LstmBwdBufs<T> CarveLstmBwd(I64 T_, I64 N, I64 H, Carver& cv) {
  LstmBwdBufs<T> w;
  w.dgates = cv.Take<T>(T_ * N * 4 * H);
  w.dh = cv.Take<AccOf<T>>(N * H);
  w.dcs = cv.Take<AccOf<T>>(N * H);
  return w;
}

Order ToOrder(const LstmCellSpec& s) { return Order{s.order.i, s.order.c, s.order.f, s.order.o}; }

template <typename T>
GpuStatus ZeroTail(const GpuContext& g, T* p, I64 start, I64 n) {
  return Zero(g, p + start, n);
}

}  // namespace

int64_t LstmFwdWorkspaceBytesGpu(int64_t T_, int64_t N, int64_t H, int elem_bytes) {
  Carver cv(nullptr);
  if (elem_bytes == 8) {
    CarveLstmFwd<double>(T_, N, H, cv);
  } else {
    CarveLstmFwd<float>(T_, N, H, cv);
  }
  return cv.bytes();
}

int64_t LstmBwdWorkspaceBytesGpu(int64_t T_, int64_t N, int64_t H, int elem_bytes) {
  Carver cv(nullptr);
  switch (elem_bytes) {
    case 2: CarveLstmBwd<__half>(T_, N, H, cv); break;
    case 8: CarveLstmBwd<double>(T_, N, H, cv); break;
    default: CarveLstmBwd<float>(T_, N, H, cv); break;
  }
  return cv.bytes();
}

template <typename T>
GpuStatus LstmForwardGpu(const GpuContext& g, const LstmCellSpec& s, const LstmFwdArgs<T>& a,
                         void* workspace, int64_t workspace_bytes) {
  using A = AccOf<T>;
  const I64 T_ = a.T, N = a.N, I = a.I, H = a.H, L = a.seq_len_max, NH = N * H, G = 4 * H;
  const int64_t need = LstmFwdWorkspaceBytesGpu(T_, N, H, sizeof(T));
  if (workspace_bytes < need || (need > 0 && workspace == nullptr)) {
    return InvalidArgument("lstm forward workspace has " + std::to_string(workspace_bytes) +
                           " bytes, needs " + std::to_string(need));
  }
  Carver cv(workspace);
  LstmFwdBufs<T> w = CarveLstmFwd<T>(T_, N, H, cv);
  // Input projection of all computed steps: [L·N, I] · w[0:I] -> [L·N, 4H] (Acc).
  TFRNN_GPU_RETURN_IF_ERROR(GemmT(g, false, false, L * N, G, I, a.x, a.w, w.gates, false));
  const T* w_h = a.w + I * G;
  LstmFwdStep<T> p;
  p.N = N;
  p.H = H;
  p.ord = ToOrder(s);
  p.forget_bias = static_cast<A>(s.forget_bias);
  p.clip = static_cast<A>(s.cell_clip);
  p.do_clip = s.cell_clip > 0.f;
  p.peephole = s.use_peephole;
  p.b = a.b;
  p.wci = a.wci;
  p.wcf = a.wcf;
  p.wco = a.wco;
  for (I64 t = 0; t < L; ++t) {
    const T* hp = t == 0 ? a.h_prev : a.h + (t - 1) * NH;
    A* gates = w.gates + t * N * G;
    // gates += h_{t-1} · w[I:]  ([N, H] · [H, 4H])
    TFRNN_GPU_RETURN_IF_ERROR(GemmT(g, false, false, N, G, H, hp, w_h, gates, true));
    const I64 off = t * NH;
    p.gates = gates;
    p.cp = t == 0 ? a.cs_prev : a.cs + (t - 1) * NH;
    p.i = a.i + off;
    p.cs = a.cs + off;
    p.f = a.f + off;
    p.o = a.o + off;
    p.ci = a.ci + off;
    p.co = a.co + off;
    p.h = a.h + off;
    if (NH > 0) {
      TFRNN_LAUNCH(Blocks(NH), kThreads, g.stream, LstmFwdKernel<T>)(p);
      TFRNN_CUDA_CHECK_LAUNCH("LstmFwdKernel");
    }
  }
  // Steps past seq_len_max: all seven outputs are zero.
  T* const outs[7] = {a.i, a.cs, a.f, a.o, a.ci, a.co, a.h};
  for (T* out : outs) {
    TFRNN_GPU_RETURN_IF_ERROR(ZeroTail(g, out, L * NH, (T_ - L) * NH));
  }
  return GpuStatus::Ok();
}

template <typename T>
GpuStatus LstmBackwardGpu(const GpuContext& g, const LstmCellSpec& s, const LstmBwdArgs<T>& a,
                          void* workspace, int64_t workspace_bytes, T* dgates_out) {
  using A = AccOf<T>;
  const I64 T_ = a.T, N = a.N, I = a.I, H = a.H, L = a.seq_len_max, NH = N * H, G = 4 * H;
  const int64_t need = LstmBwdWorkspaceBytesGpu(T_, N, H, sizeof(T));
  if (workspace_bytes < need || (need > 0 && workspace == nullptr)) {
    return InvalidArgument("lstm backward workspace has " + std::to_string(workspace_bytes) +
                           " bytes, needs " + std::to_string(need));
  }
  Carver cv(workspace);
  LstmBwdBufs<T> w = CarveLstmBwd<T>(T_, N, H, cv);
  TFRNN_GPU_RETURN_IF_ERROR(Zero(g, w.dh, NH));
  TFRNN_GPU_RETURN_IF_ERROR(Zero(g, w.dcs, NH));
  const T* w_h = a.w + I * G;
  LstmBwdStep<T> p;
  p.N = N;
  p.H = H;
  p.ord = ToOrder(s);
  p.clip = static_cast<A>(s.cell_clip);
  p.mask_clip = a.exact_clip_grad && s.cell_clip > 0.f;
  p.peephole = s.use_peephole;
  p.wci = a.wci;
  p.wcf = a.wcf;
  p.wco = a.wco;
  p.dh = w.dh;
  p.dcs = w.dcs;
  for (I64 t = L - 1; t >= 0; --t) {
    const I64 off = t * NH;
    // dL/dh_t (through h_t feeding step t+1) = dgates[t+1] · w[I:]ᵀ  ([N, 4H] · [4H, H]).
    if (t + 1 < L) {
      TFRNN_GPU_RETURN_IF_ERROR(GemmT(g, false, true, N, H, G,
                                      static_cast<const T*>(w.dgates + (t + 1) * N * G), w_h,
                                      w.dh, false));
    }
    p.cp = t == 0 ? a.cs_prev : a.cs + (t - 1) * NH;
    p.i = a.i + off;
    p.cs = a.cs + off;
    p.f = a.f + off;
    p.o = a.o + off;
    p.ci = a.ci + off;
    p.co = a.co + off;
    p.cs_grad = a.cs_grad + off;
    p.h_grad = a.h_grad + off;
    p.gi = a.i_grad != nullptr ? a.i_grad + off : nullptr;
    p.gf = a.f_grad != nullptr ? a.f_grad + off : nullptr;
    p.go = a.o_grad != nullptr ? a.o_grad + off : nullptr;
    p.gci = a.ci_grad != nullptr ? a.ci_grad + off : nullptr;
    p.gco = a.co_grad != nullptr ? a.co_grad + off : nullptr;
    p.dgates = w.dgates + t * N * G;
    if (NH > 0) {
      TFRNN_LAUNCH(Blocks(NH), kThreads, g.stream, LstmBwdKernel<T>)(p);
      TFRNN_CUDA_CHECK_LAUNCH("LstmBwdKernel");
    }
  }
  if (dgates_out != nullptr) {  // LSTMBlockCellGrad's dicfo
    TFRNN_GPU_RETURN_IF_ERROR(Copy(g, dgates_out, static_cast<const T*>(w.dgates), L * N * G));
    TFRNN_GPU_RETURN_IF_ERROR(ZeroTail(g, dgates_out, L * N * G, (T_ - L) * N * G));
  }
  // cs_prev_grad = the carry after step 0; h_prev_grad = dgates[0] · w[I:]ᵀ (zeros if L = 0).
  TFRNN_GPU_RETURN_IF_ERROR(Convert(g, a.cs_prev_grad, static_cast<const A*>(w.dcs), NH));
  if (L > 0) {
    TFRNN_GPU_RETURN_IF_ERROR(GemmT(g, false, true, N, H, G, static_cast<const T*>(w.dgates),
                                    w_h, a.h_prev_grad, false));
  } else {
    TFRNN_GPU_RETURN_IF_ERROR(Zero(g, a.h_prev_grad, NH));
  }
  // x_grad = dgates · w[0:I]ᵀ over all computed steps; zero past seq_len_max.
  TFRNN_GPU_RETURN_IF_ERROR(GemmT(g, false, true, L * N, I, G, static_cast<const T*>(w.dgates),
                                  a.w, a.x_grad, false));
  TFRNN_GPU_RETURN_IF_ERROR(ZeroTail(g, a.x_grad, L * N * I, (T_ - L) * N * I));
  if (L == 0) {
    TFRNN_GPU_RETURN_IF_ERROR(Zero(g, a.w_grad, (I + H) * G));
    TFRNN_GPU_RETURN_IF_ERROR(Zero(g, a.b_grad, G));
  } else {
    // w_grad[0:I] = xᵀ · dgates; w_grad[I:] = h_prevᵀ · dgates[0] + h[0:L-1]ᵀ · dgates[1:L].
    TFRNN_GPU_RETURN_IF_ERROR(GemmT(g, true, false, I, G, L * N, a.x,
                                    static_cast<const T*>(w.dgates), a.w_grad, false));
    T* wg_h = a.w_grad + I * G;
    TFRNN_GPU_RETURN_IF_ERROR(GemmT(g, true, false, H, G, N, a.h_prev,
                                    static_cast<const T*>(w.dgates), wg_h, false));
    if (L > 1) {
      TFRNN_GPU_RETURN_IF_ERROR(GemmT(g, true, false, H, G, (L - 1) * N, a.h,
                                      static_cast<const T*>(w.dgates + N * G), wg_h, true));
    }
    TFRNN_LAUNCH(Blocks(G), kThreads, g.stream, ColumnSumKernel<T>)(w.dgates, L * N, G, a.b_grad);
    TFRNN_CUDA_CHECK_LAUNCH("ColumnSumKernel");
  }
  if (!s.use_peephole || L == 0) {
    TFRNN_GPU_RETURN_IF_ERROR(Zero(g, a.wci_grad, H));
    TFRNN_GPU_RETURN_IF_ERROR(Zero(g, a.wcf_grad, H));
    TFRNN_GPU_RETURN_IF_ERROR(Zero(g, a.wco_grad, H));
  } else {
    TFRNN_LAUNCH(Blocks(H), kThreads, g.stream, PeepholeGradKernel<T>)(w.dgates, L * N, N, H,
        ToOrder(s), a.cs_prev, a.cs, a.cs, a.wci_grad, a.wcf_grad, a.wco_grad);
    TFRNN_CUDA_CHECK_LAUNCH("PeepholeGradKernel");
  }
  return GpuStatus::Ok();
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
