// CUDA GRU block cell (see gru_gpu.h; the CPU twin is cc/engine/gru_cpu.cc, whose structure
// this follows: the same GEMM splits and pointwise passes).
#include <cstdint>
#include <string>

#include "cc/gpu/gru_gpu.h"
#include "cc/gpu/rnn_gpu_common.cuh"

namespace tfrnn {
namespace gpu {
namespace {

// r = σ(r_bar + b_r), u = σ(u_bar + b_u), hr = h_prev ⊙ r.
template <typename T>
__global__ void GruRuKernel(I64 N, I64 H, const AccOf<T>* ru_bar, const T* b_ru,
                            const T* h_prev, T* r, T* u, T* hr) {
  using A = AccOf<T>;
  TFRNN_GRID_STRIDE(idx, N * H) {
    const I64 n = idx / H, j = idx % H;
    const A rv = Sigmoid(ru_bar[n * 2 * H + j] + Ld(b_ru + j));
    const A uv = Sigmoid(ru_bar[n * 2 * H + H + j] + Ld(b_ru + H + j));
    St(r + idx, rv);
    St(u + idx, uv);
    St(hr + idx, Ld(h_prev + idx) * rv);
  }
}

// c = tanh(c_bar + b_c), h = u ⊙ (h_prev - c) + c.
template <typename T>
__global__ void GruCKernel(I64 N, I64 H, const AccOf<T>* c_bar, const T* b_c, const T* u,
                           const T* h_prev, T* c, T* h) {
  using A = AccOf<T>;
  TFRNN_GRID_STRIDE(idx, N * H) {
    const I64 j = idx % H;
    const A cv = tanh(c_bar[idx] + Ld(b_c + j));
    St(c + idx, cv);
    St(h + idx, Ld(u + idx) * (Ld(h_prev + idx) - cv) + cv);
  }
}

template <typename T>
__device__ __forceinline__ AccOf<T> OptG(const T* p, I64 idx) {
  return p != nullptr ? Ld(p + idx) : AccOf<T>(0);
}

// d_c_bar = (d_h ⊙ (1-u) + g_c) ⊙ (1-c²);  d_u_bar = (d_h ⊙ (h_prev-c) + g_u) ⊙ u(1-u).
template <typename T>
__global__ void GruBwd1Kernel(I64 N, I64 H, const T* u, const T* c, const T* h_prev,
                              const T* d_h, const T* g_c, const T* g_u, T* d_c_bar, T* d_rbub) {
  using A = AccOf<T>;
  const A one(1);
  TFRNN_GRID_STRIDE(idx, N * H) {
    const I64 n = idx / H, j = idx % H;
    const A uv = Ld(u + idx), cv = Ld(c + idx), hp = Ld(h_prev + idx), dh = Ld(d_h + idx);
    St(d_c_bar + idx, (dh * (one - uv) + OptG(g_c, idx)) * (one - cv * cv));
    St(d_rbub + n * 2 * H + H + j, (dh * (hp - cv) + OptG(g_u, idx)) * uv * (one - uv));
  }
}

// d_r_bar = (d_hr ⊙ h_prev + g_r) ⊙ r(1-r).
template <typename T>
__global__ void GruBwd2Kernel(I64 N, I64 H, const T* r, const T* h_prev,
                              const AccOf<T>* d_hr, const T* g_r, T* d_rbub) {
  using A = AccOf<T>;
  TFRNN_GRID_STRIDE(idx, N * H) {
    const I64 n = idx / H, j = idx % H;
    const A rv = Ld(r + idx);
    St(d_rbub + n * 2 * H + j,
       (d_hr[idx] * Ld(h_prev + idx) + OptG(g_r, idx)) * rv * (A(1) - rv));
  }
}

// d_h_prev = acc + d_hr ⊙ r + d_h ⊙ u.
template <typename T>
__global__ void GruBwd3Kernel(I64 n, const AccOf<T>* acc, const AccOf<T>* d_hr, const T* r,
                              const T* d_h, const T* u, T* d_h_prev) {
  TFRNN_GRID_STRIDE(idx, n) {
    St(d_h_prev + idx, acc[idx] + d_hr[idx] * Ld(r + idx) + Ld(d_h + idx) * Ld(u + idx));
  }
}

template <typename T>
struct GruFwdBufs {
  AccOf<T> *ru_bar, *c_bar;
  T* hr;
};
template <typename T>
GruFwdBufs<T> CarveGruFwd(I64 N, I64 H, Carver& cv) {
  GruFwdBufs<T> w;
  w.ru_bar = cv.Take<AccOf<T>>(N * 2 * H);
  w.c_bar = cv.Take<AccOf<T>>(N * H);
  w.hr = cv.Take<T>(N * H);
  return w;
}

template <typename T>
struct GruBwdBufs {
  AccOf<T> *d_hr, *d_x, *d_hp;
};
template <typename T>
GruBwdBufs<T> CarveGruBwd(I64 N, I64 I, I64 H, Carver& cv) {
  GruBwdBufs<T> w;
  w.d_hr = cv.Take<AccOf<T>>(N * H);
  w.d_x = cv.Take<AccOf<T>>(N * I);
  w.d_hp = cv.Take<AccOf<T>>(N * H);
  return w;
}

GpuStatus CheckWorkspace(const char* what, int64_t have, int64_t need, const void* ws) {
  if (have < need || (need > 0 && ws == nullptr)) {
    return InvalidArgument(std::string(what) + " workspace has " + std::to_string(have) +
                           " bytes, needs " + std::to_string(need));
  }
  return GpuStatus::Ok();
}

}  // namespace

int64_t GruCellFwdWorkspaceBytesGpu(int64_t N, int64_t I, int64_t H, int elem_bytes) {
  (void)I;
  Carver cv(nullptr);
  switch (elem_bytes) {
    case 2: CarveGruFwd<__half>(N, H, cv); break;
    case 8: CarveGruFwd<double>(N, H, cv); break;
    default: CarveGruFwd<float>(N, H, cv); break;
  }
  return cv.bytes();
}

int64_t GruCellBwdWorkspaceBytesGpu(int64_t N, int64_t I, int64_t H, int elem_bytes) {
  Carver cv(nullptr);
  if (elem_bytes == 8) {
    CarveGruBwd<double>(N, I, H, cv);
  } else {
    CarveGruBwd<float>(N, I, H, cv);
  }
  return cv.bytes();
}

template <typename T>
GpuStatus GruCellForwardGpu(const GpuContext& g, const GruCellFwdArgs<T>& a, void* workspace,
                            int64_t workspace_bytes) {
  const I64 N = a.N, I = a.I, H = a.H;
  TFRNN_GPU_RETURN_IF_ERROR(CheckWorkspace("gru cell forward", workspace_bytes,
                                           GruCellFwdWorkspaceBytesGpu(N, I, H, sizeof(T)),
                                           workspace));
  Carver cv(workspace);
  GruFwdBufs<T> w = CarveGruFwd<T>(N, H, cv);
  // [r_bar, u_bar] = x · w_ru[:I] + h_prev · w_ru[I:]
  TFRNN_GPU_RETURN_IF_ERROR(GemmT(g, false, false, N, 2 * H, I, a.x, a.w_ru, w.ru_bar, false));
  TFRNN_GPU_RETURN_IF_ERROR(GemmT(g, false, false, N, 2 * H, H, a.h_prev, a.w_ru + I * 2 * H,
                                  w.ru_bar, true));
  if (N * H > 0) {
    TFRNN_LAUNCH(Blocks(N * H), kThreads, g.stream, GruRuKernel<T>)(N, H, w.ru_bar, a.b_ru,
        a.h_prev, a.r, a.u, w.hr);
    TFRNN_CUDA_CHECK_LAUNCH("GruRuKernel");
  }
  // c_bar = x · w_c[:I] + (h_prev ⊙ r) · w_c[I:]
  TFRNN_GPU_RETURN_IF_ERROR(GemmT(g, false, false, N, H, I, a.x, a.w_c, w.c_bar, false));
  TFRNN_GPU_RETURN_IF_ERROR(GemmT(g, false, false, N, H, H, static_cast<const T*>(w.hr),
                                  a.w_c + I * H, w.c_bar, true));
  if (N * H > 0) {
    TFRNN_LAUNCH(Blocks(N * H), kThreads, g.stream, GruCKernel<T>)(N, H, w.c_bar, a.b_c, a.u,
        a.h_prev, a.c, a.h);
    TFRNN_CUDA_CHECK_LAUNCH("GruCKernel");
  }
  return GpuStatus::Ok();
}

template <typename T>
GpuStatus GruCellBackwardGpu(const GpuContext& g, const GruCellBwdArgs<T>& a, void* workspace,
                             int64_t workspace_bytes) {
  using A = AccOf<T>;
  const I64 N = a.N, I = a.I, H = a.H, NH = N * H;
  TFRNN_GPU_RETURN_IF_ERROR(CheckWorkspace("gru cell backward", workspace_bytes,
                                           GruCellBwdWorkspaceBytesGpu(N, I, H, sizeof(T)),
                                           workspace));
  Carver cv(workspace);
  GruBwdBufs<T> w = CarveGruBwd<T>(N, I, H, cv);
  if (NH > 0) {
    TFRNN_LAUNCH(Blocks(NH), kThreads, g.stream, GruBwd1Kernel<T>)(N, H, a.u, a.c, a.h_prev, a.d_h,
        a.g_c, a.g_u, a.d_c_bar, a.d_r_bar_u_bar);
    TFRNN_CUDA_CHECK_LAUNCH("GruBwd1Kernel");
  }
  const T* dcb = a.d_c_bar;
  const T* drb = a.d_r_bar_u_bar;
  // d_x = d_c_bar · w_c[:I]ᵀ ; d_hr = d_c_bar · w_c[I:]ᵀ  (in Acc)
  TFRNN_GPU_RETURN_IF_ERROR(GemmT(g, false, true, N, I, H, dcb, a.w_c, w.d_x, false));
  TFRNN_GPU_RETURN_IF_ERROR(GemmT(g, false, true, N, H, H, dcb, a.w_c + I * H, w.d_hr, false));
  if (NH > 0) {
    TFRNN_LAUNCH(Blocks(NH), kThreads, g.stream, GruBwd2Kernel<T>)(N, H, a.r, a.h_prev, w.d_hr,
        a.g_r, a.d_r_bar_u_bar);
    TFRNN_CUDA_CHECK_LAUNCH("GruBwd2Kernel");
  }
  // d_x += [d_r_bar, d_u_bar] · w_ru[:I]ᵀ ; d_h_prev = [d_r_bar, d_u_bar] · w_ru[I:]ᵀ + ...
  TFRNN_GPU_RETURN_IF_ERROR(GemmT(g, false, true, N, I, 2 * H, drb, a.w_ru, w.d_x, true));
  TFRNN_GPU_RETURN_IF_ERROR(GemmT(g, false, true, N, H, 2 * H, drb, a.w_ru + I * 2 * H, w.d_hp,
                                  false));
  TFRNN_GPU_RETURN_IF_ERROR(Convert(g, a.d_x, static_cast<const A*>(w.d_x), N * I));
  if (NH > 0) {
    TFRNN_LAUNCH(Blocks(NH), kThreads, g.stream, GruBwd3Kernel<T>)(NH, w.d_hp, w.d_hr, a.r, a.d_h,
        a.u, a.d_h_prev);
    TFRNN_CUDA_CHECK_LAUNCH("GruBwd3Kernel");
  }
  return GpuStatus::Ok();
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
