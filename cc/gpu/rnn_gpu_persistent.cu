// The persistent forward step kernel (rnn_gpu_persistent.cuh says what and when).
#include "cc/gpu/rnn_gpu_persistent.cuh"

#include <cooperative_groups.h>

#include "cc/gpu/rnn_gpu_persistent_kernels.cuh"

#include <cstdlib>
#include <cstring>

namespace tfrnn {
namespace gpu {
namespace {

struct PersistentArgs {
  const void* R;     // [K·N, Hs]
  const void* mask;  // recurrent mask or null
  bool mask_per_step;
  I64 steps, units;
  void* h0;          // h entering step 0; h of the odd steps
  void* h1;          // h of the even steps
  void* hr;          // Acc [B, K·N]
};

// RB rows of R (gate rows of this block's units) per warp at a time, against CB batch rows:
// RB + CB shared-memory loads per RB·CB multiply-adds.
template <typename T, int RB, int CB>
__global__ void __launch_bounds__(kPThreads) PersistentFwdKernel(FwdStep<T> p,
                                                                 PersistentArgs pa) {
  using A = AccOf<T>;
  unsigned char* smem = DynamicSmem();
  const I64 N = p.N, Hs = p.Hs, B = p.B, KN = p.K * p.N, U = pa.units;
  const I64 j0 = blockIdx.x * U;
  const I64 un = N - j0 < U ? N - j0 : U;
  const I64 rows = p.K * un;
  T* rs = reinterpret_cast<T*>(smem);                                         // [K·un, Hs]
  A* hs = reinterpret_cast<A*>(smem + Align16(sizeof(T) * p.K * U * Hs));    // [B, Hs]
  const T* R = static_cast<const T*>(pa.R);
  for (I64 i = threadIdx.x; i < rows * Hs; i += blockDim.x) {
    const I64 r = i / Hs, c = i % Hs;
    rs[i] = R[((r / un) * N + j0 + r % un) * Hs + c];
  }
  const T* mask = static_cast<const T*>(pa.mask);
  A* hr = static_cast<A*>(pa.hr);
  cg::grid_group grid = cg::this_grid();
  for (I64 st = 0; st < pa.steps; ++st) {
    T* hc = static_cast<T*>((st & 1) ? pa.h1 : pa.h0);
    T* hn = static_cast<T*>((st & 1) ? pa.h0 : pa.h1);
    // (1) h_rec = h_prev (⊙ mask) of the whole batch, from L2: kLoads loads in flight per
    // thread before the first use (one at a time, each waits out the L2 latency).
    const I64 nh = B * Hs;
    for (I64 base = threadIdx.x; base < nh; base += kLoads * blockDim.x) {
      A v[kLoads];
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        const I64 i = base + u * static_cast<I64>(blockDim.x);
        v[u] = i < nh ? LdCg(hc + i) : A(0);
      }
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        const I64 i = base + u * static_cast<I64>(blockDim.x);
        if (i >= nh) break;
        if (mask != nullptr) {
          const I64 b = i / Hs, tau = p.sm.Tau(b, st);
          v[u] = tau < 0 ? A(0)
                         : v[u] * Ld(mask + ((pa.mask_per_step ? tau * B : 0) + b) * p.yst +
                                     p.ly.dcol + i % Hs);
        }
        hs[i] = v[u];
      }
    }
    __syncthreads();
    // (2) hr[b, k·N + j0 + u] = R[k·N + j0 + u, :] · h_rec[b, :] for this block's rows.
    WarpDots<T, RB, CB>(rs, hs, rows, Hs, B, [&](I64 b, I64 r, A v) {
      hr[b * KN + (r / un) * N + j0 + r % un] = v;
    });
    __syncthreads();  // hr of this block's units is complete (and visible to the block)
    // (3) the pointwise step of this block's units.
    p.step = st;
    p.h_cur = hc;
    p.h_rec = hc;
    p.h_next = hn;
    for (I64 i = threadIdx.x; i < B * un; i += blockDim.x) FwdPoint(p, i / un, j0 + i % un);
    // (4) every block's h of this step is written before any block reads it.
    grid.sync();
  }
}

template <typename T>
using KernelFn = void (*)(FwdStep<T>, PersistentArgs);

template <typename T>
KernelFn<T> KernelOf(int rb, int cb) {
  if (rb == 4) return cb == 8 ? &PersistentFwdKernel<T, 4, 8> : &PersistentFwdKernel<T, 4, 1>;
  return cb == 8 ? &PersistentFwdKernel<T, 1, 8> : &PersistentFwdKernel<T, 1, 1>;
}

}  // namespace

template <typename T>
PersistentPlan PlanPersistentFwd(const RnnSpec& s) {
  using A = AccOf<T>;
  PersistentPlan pl;
  const char* env = std::getenv("TFRNN_CUDA_PERSISTENT");
  if (env != nullptr && std::strcmp(env, "0") == 0) return pl;
  if (s.P > 0 || (s.mode == RnnMode::kGru && s.gru_reset_before)) return pl;
  // Where it beat the per-step path on an H100 (session 14, bench/gpu_bench.py): B·Hs up to
  // 16·256, or one or two rows up to Hs = 1024. Beyond, the step's product is large enough
  // for cuBLAS to beat this kernel's CUDA-core dot products.
  const I64 Hs = RnnHs(s);
  if (s.B < 1 || s.N < 1) return pl;
  if (s.B * Hs > kPersistentMaxWork && !(s.B <= 2 && Hs <= 1024)) return pl;
  int dev = 0, sms = 0, coop = 0, optin = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) !=
          cudaSuccess) {
    (void)cudaGetLastError();
    return pl;
  }
  if (!coop || sms < 1) return pl;
  const I64 K = RnnK(s);
  const I64 U = (s.N + sms - 1) / sms;
  const I64 blocks = (s.N + U - 1) / U;
  const size_t smem = Align16(sizeof(T) * K * U * Hs) + sizeof(A) * s.B * Hs;
  if (smem > static_cast<size_t>(optin)) return pl;
  // Four rows per warp only when every warp gets four.
  const int rb = K * U >= 4 * kWarps ? 4 : 1;
  const int cb = s.B >= 4 ? 8 : 1;  // a tile of 8 batch rows wastes most of it on one or two
  const void* fn = reinterpret_cast<const void*>(KernelOf<T>(rb, cb));
  int per_sm = 0;
  if (cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(smem)) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, kPThreads, smem) !=
          cudaSuccess) {
    (void)cudaGetLastError();
    return pl;
  }
  if (static_cast<I64>(per_sm) * sms < blocks) return pl;
  pl.ok = true;
  pl.blocks = static_cast<int>(blocks);
  pl.threads = kPThreads;
  pl.units = U;
  pl.rows_per_warp = rb;
  pl.batch_tile = cb;
  pl.smem = smem;
  return pl;
}

template <typename T>
GpuStatus PersistentFwd(const GpuContext& g, const PersistentPlan& plan, FwdStep<T> p,
                        const T* R, const T* mask, bool mask_per_step, I64 steps, T* h_cur,
                        T* h_next, AccOf<T>* hr) {
  PersistentArgs pa{R, mask, mask_per_step, steps, plan.units, h_cur, h_next, hr};
  const KernelFn<T> fn = KernelOf<T>(plan.rows_per_warp, plan.batch_tile);
#ifdef TFRNN_CUDA_EMULATE
  TFRNN_CUDA_CHECK(emu::LaunchCooperative(fn, dim3(plan.blocks), dim3(plan.threads), plan.smem,
                                          p, pa));
#else
  void* args[] = {&p, &pa};
  TFRNN_CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(fn),
                                               dim3(plan.blocks), dim3(plan.threads), args,
                                               plan.smem, g.stream));
#endif
  return GpuStatus::Ok();
}

#define TFRNN_INSTANTIATE_PERSISTENT(T)                                                       \
  template PersistentPlan PlanPersistentFwd<T>(const RnnSpec&);                               \
  template GpuStatus PersistentFwd<T>(const GpuContext&, const PersistentPlan&, FwdStep<T>,   \
                                      const T*, const T*, bool, I64, T*, T*, AccOf<T>*);
TFRNN_INSTANTIATE_PERSISTENT(__half)
TFRNN_INSTANTIATE_PERSISTENT(__nv_bfloat16)
TFRNN_INSTANTIATE_PERSISTENT(float)
TFRNN_INSTANTIATE_PERSISTENT(double)
#undef TFRNN_INSTANTIATE_PERSISTENT

}  // namespace gpu
}  // namespace tfrnn
