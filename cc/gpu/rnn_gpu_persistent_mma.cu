// The persistent forward and backward on tensor cores (half and bfloat16; by default where they
// measured faster, MmaFwdByDefault and MmaBwdByDefault; TFRNN_CUDA_MMA=1 everywhere they fit,
// =0 nowhere).
//
// The persistent forward (rnn_gpu_persistent.cu) spreads a layer's units over one block per
// multiprocessor (U = 2 units a block at H = 256 on an H200), because its CUDA-core dot
// products need many blocks; every step then ends at a barrier of 128 blocks. cuDNN's
// persistent fp16 kernel runs the same step on 16 blocks (docs/GPU_BENCHMARK.md). Here the
// step's product hr[B, K·U] = h[B, Hs] · R[K·U rows, Hs]ᵀ runs on the warp tensor-core product
// of mma.cuh (m16n8k16, float accumulators), so a block can own 8-16 times the units and the
// grid shrinks to about kMmaTargetBlocks blocks:
//   - block g keeps rows of R for its U units (every gate) in shared memory, rows padded to
//     Hs + kMmaPad elements (so the eight rows a fragment load reads fall in different banks);
//   - per step it copies h_{t-1} of the whole batch from L2 into shared memory (rows B..Bp-1,
//     Bp the batch rounded up to 16, stay zero), each warp takes (16 batch rows, 8 gate rows)
//     tiles in turn over all of Hs, and writes its sums to hr (float), then the block runs the
//     same pointwise code as the other kernels (FwdPoint) and waits at one grid barrier.
// For the layers the persistent forward takes (one product per step), without a recurrent mask
// (h ⊙ mask would be rounded to T before the product), Hs a multiple of 16, B <= 64, where R's
// rows and h fit in shared memory (B·Hs beyond the CUDA-core kernel's kPersistentMaxWork too).
// The backward (PersistentMmaBwdKernel) mirrors it as the persistent backward mirrors the
// forward: a block keeps R's columns of its units and adds dhr_{t+1} · R[:, its units] to their
// carries on mma.sync, for the layers the step-chain backward kernels take, K·H a multiple of
// 16, where Rᵀ's rows and dhr fit. No atomics: every run gives the same bits. Checked on an H200
// and on the emulation against the float64 reference and the CUDA-core kernels
// (tests/gpu/run_gpu_checks.py; tests/test_cuda_emulated.py, path "mma").
#include "cc/gpu/rnn_gpu_persistent.cuh"

#include <cooperative_groups.h>

#include "cc/gpu/mma_block.cuh"
#include "cc/gpu/rnn_gpu_persistent_kernels.cuh"

namespace tfrnn {
namespace gpu {
namespace {

constexpr I64 kMmaTargetBlocks = 16;   // blocks the plan aims at
constexpr I64 kMmaMaxBatch = 64;

// Rows [B, Bp) of a [Bp, ld] shared-memory operand of `cols` columns set to zero (the product
// reads whole 16-row tiles; rows past B must add nothing).
template <typename T>
__device__ __forceinline__ void ZeroBatchTail(T* dst, I64 ld, I64 B, I64 cols) {
  const T zero = ZeroOf<T>();
  const I64 n = (MmaBatchRows(B) - B) * cols;
  for (I64 i = threadIdx.x; i < n; i += blockDim.x) dst[(B + i / cols) * ld + i % cols] = zero;
}

// rows x cols elements of T from src (dense, rows cols apart, 16-byte aligned; written by other
// blocks: read from L2) into dst (rows ld apart, 16-byte aligned), 8 elements (16 bytes) per
// load; cols and ld multiples of 8.
template <typename T>
__device__ __forceinline__ void StageRows16(T* dst, I64 ld, const T* src, I64 rows, I64 cols) {
  const I64 per_row = cols / 8;
  for (I64 i = threadIdx.x; i < rows * per_row; i += blockDim.x) {
    const I64 r = i / per_row, c = (i % per_row) * 8;
#ifdef TFRNN_CUDA_EMULATE
    memcpy(dst + r * ld + c, src + r * cols + c, 16);
#else
    *reinterpret_cast<uint4*>(dst + r * ld + c) =
        __ldcg(reinterpret_cast<const uint4*>(src + r * cols + c));
#endif
  }
}

struct MmaArgs {
  const void* R;  // [K·H, Hs]
  I64 steps, units;
  void* h0;  // h entering step 0; h of the odd steps
  void* h1;  // h of the even steps
  void* hr;  // Acc [B, K·H]
};

template <typename T>
__global__ void __launch_bounds__(kPThreads) PersistentMmaFwdKernel(FwdStep<T> p, MmaArgs pa) {
  using A = AccOf<T>;
  unsigned char* smem = DynamicSmem();
  const I64 H = p.H, Hs = p.Hs, B = p.B, KH = p.K * p.H, U = pa.units, ld = Hs + kMmaPad;
  const I64 Bp = MmaBatchRows(B);
  const I64 j0 = blockIdx.x * U;
  const I64 un = H - j0 < U ? H - j0 : U;
  const I64 rows = p.K * un;  // gate rows of this block: gate (r / un), unit j0 + r % un
  T* rs = reinterpret_cast<T*>(smem);                                        // [K·U, ld]
  T* hs = reinterpret_cast<T*>(smem + Align16(sizeof(T) * p.K * U * ld));   // [Bp, ld]
  const T* R = static_cast<const T*>(pa.R);
  const T zero = ZeroOf<T>();
  for (I64 i = threadIdx.x; i < p.K * U * Hs; i += blockDim.x) {
    const I64 r = i / Hs, c = i % Hs;
    rs[r * ld + c] = r < rows ? R[((r / un) * H + j0 + r % un) * Hs + c] : zero;
  }
  ZeroBatchTail(hs, ld, B, Hs);
  A* hr = static_cast<A*>(pa.hr);
  cg::grid_group grid = cg::this_grid();
  for (I64 st = 0; st < pa.steps; ++st) {
    T* hc = static_cast<T*>((st & 1) ? pa.h1 : pa.h0);
    T* hn = static_cast<T*>((st & 1) ? pa.h0 : pa.h1);
    // (1) h_{t-1} of the whole batch, from L2 (written by every block at the last step).
    StageRows16(hs, ld, hc, B, Hs);
    __syncthreads();
    // (2) hr[b, k·H + j0 + u] = R[k·H + j0 + u, :] · h[b, :] for this block's gate rows.
    BlockProduct(hs, rs, ld, Bp, B, rows, Hs, [&](I64 b, I64 r, float v) {
      hr[b * KH + (r / un) * H + j0 + r % un] = v;
    });
    __syncthreads();  // hr of this block's units is complete (and visible to the block)
    // (3) the pointwise step of this block's units.
    FwdPointBlock(p, st, hc, hn, j0, un);
    // (4) every block's h of this step is written before any block reads it.
    grid.sync();
  }
}

struct MmaBwdArgs {
  const void* R;  // [K·H, Hs]
  I64 steps, units;
  void* d0;  // dhr of the latest step and every other step before it
  void* d1;  // dhr of the others
};

// The backward's mirror: block g keeps R's columns of its U units as rows of Rᵀ ([U, K·H],
// padded), and per step adds dhr_{t+1}[B, K·H] · R[:, its units] to its units' carries dL/dh
// (a (16 batch rows, 8 units) tile per warp at a time over all of K·H), then runs BwdPoint.
template <typename T>
__global__ void __launch_bounds__(kPThreads) PersistentMmaBwdKernel(BwdStep<T> p, MmaBwdArgs pa) {
  using A = AccOf<T>;
  unsigned char* smem = DynamicSmem();
  const I64 H = p.H, Hs = p.Hs, B = p.B, KH = p.K * p.H, U = pa.units, ld = KH + kMmaPad;
  const I64 Bp = MmaBatchRows(B);
  const I64 j0 = blockIdx.x * U;
  const I64 un = H - j0 < U ? H - j0 : U;
  T* rt = reinterpret_cast<T*>(smem);                                   // [U, ld]
  T* ds = reinterpret_cast<T*>(smem + Align16(sizeof(T) * U * ld));    // [Bp, ld]
  const T* R = static_cast<const T*>(pa.R);
  const T zero = ZeroOf<T>();
  for (I64 i = threadIdx.x; i < U * KH; i += blockDim.x) {
    const I64 u = i / KH, k = i % KH;
    rt[u * ld + k] = u < un ? R[k * Hs + j0 + u] : zero;
  }
  ZeroBatchTail(ds, ld, B, KH);
  cg::grid_group grid = cg::this_grid();
  for (I64 it = 0; it < pa.steps; ++it) {
    T* cur = static_cast<T*>((it & 1) ? pa.d1 : pa.d0);
    const T* prev = static_cast<const T*>((it & 1) ? pa.d0 : pa.d1);
    if (it > 0) {
      // (1) dh[b, j0 + u] += Σ_k dhr_later[b, k] · R[k, j0 + u]
      StageRows16(ds, ld, prev, B, KH);
      __syncthreads();
      BlockProduct(ds, rt, ld, Bp, B, un, KH, [&](I64 b, I64 u, float v) {
        p.dh[b * Hs + j0 + u] += A(v);
      });
      __syncthreads();  // the carries of this block's units are complete
    }
    // (2) the pointwise step of this block's units.
    BwdPointBlock(p, pa.steps, it, cur, j0, un);
    // (3) every block's dhr of this step is written before any block reads it.
    grid.sync();
  }
}

// U for a tensor-core plan: a multiple of 8 (whole 8-row tiles) near H / kMmaTargetBlocks, at
// least H / (multiprocessors) so that every block is resident, at most u_fit; 0 if none.
inline I64 MmaUnits(I64 H, int sms, I64 u_fit) {
  if (u_fit < 8) return 0;
  I64 U = ((H + kMmaTargetBlocks - 1) / kMmaTargetBlocks + 7) / 8 * 8;
  if (U > u_fit) U = u_fit;
  const I64 min_u = (H + sms - 1) / sms;
  if (U < min_u) U = (min_u + 7) / 8 * 8;
  return U > u_fit ? 0 : U;
}

// The defaults, from forward+backward times on an H200 (2026-12-04, T = 100, LSTM and GRU, half
// and bfloat16, B = 1 to 64, H = 256 and 512; docs/GPU_BENCHMARK.md): at H = 256 the forward
// on tensor cores won from B = 2 to 32 (within 2 % at B = 8) and the backward from B = 24 to
// 32; at B = 1, B = 64 and H = 512 the CUDA-core kernels and the per-step path won. H of 129 to
// 256 plan the same 16 blocks or fewer (MmaUnits); H <= 128 was not measured.
inline bool MmaFwdByDefault(const RnnSpec& s) {
  return s.H > 128 && s.H <= 256 && s.B >= 2 && s.B <= 32;
}
inline bool MmaBwdByDefault(const RnnSpec& s) { return MmaFwdByDefault(s) && s.B >= 17; }

// The plan of a tensor-core kernel fn: each block keeps rows_per_unit rows of ld elements of T
// per unit, and the batch (MmaBatchRows) of ld elements, in shared memory. Any failing CUDA
// query, or too little shared memory, means no plan.
template <typename T>
SequenceKernelPlan MmaPlan(const RnnSpec& s, I64 ld, I64 rows_per_unit, const void* fn) {
  SequenceKernelPlan pl;
  int dev = 0;
  const CoopDevice d = CurrentCoopDevice(&dev);
  if (!d.ok) return pl;
  const size_t batch_bytes = sizeof(T) * MmaBatchRows(s.B) * ld;
  const I64 U = MmaUnits(s.H, d.sms,
                         (static_cast<I64>(d.optin) - static_cast<I64>(batch_bytes) - 16) /
                             static_cast<I64>(sizeof(T) * rows_per_unit * ld) / 8 * 8);
  if (U == 0) return pl;
  const I64 blocks = (s.H + U - 1) / U;
  const size_t smem = Align16(sizeof(T) * rows_per_unit * U * ld) + batch_bytes;
  if (static_cast<I64>(ResidentBlocks(dev, fn, smem)) * d.sms < blocks) return pl;
  pl = MakePlan(blocks, U, 1, 1, smem);
  pl.mma = true;
  return pl;
}

}  // namespace

template <typename T>
SequenceKernelPlan PlanPersistentMmaFwd(const RnnSpec& s) {
  const I64 Hs = RnnHs(s);
  if (!OneProductPerStep(s) || s.has_mask || Hs % 16 != 0 || s.B < 1 || s.B > kMmaMaxBatch ||
      s.H < 1 || !MmaWanted(MmaFwdByDefault(s))) {
    return SequenceKernelPlan();
  }
  return MmaPlan<T>(s, Hs + kMmaPad, RnnK(s),
                    reinterpret_cast<const void*>(&PersistentMmaFwdKernel<T>));
}

template <typename T>
GpuStatus PersistentMmaFwd(const GpuContext& g, const SequenceKernelPlan& plan, FwdStep<T> p,
                           const T* R, I64 steps, T* h_cur, T* h_next, AccOf<T>* hr) {
  MmaArgs pa{R, steps, plan.units, h_cur, h_next, hr};
  return LaunchPersistent(g, plan, &PersistentMmaFwdKernel<T>, p, pa);
}

template <typename T>
SequenceKernelPlan PlanPersistentMmaBwd(const RnnSpec& s) {
  const I64 KH = RnnK(s) * s.H;
  if (!StepChainBwdShape(s) || KH % 16 != 0 || s.B < 1 || s.B > kMmaMaxBatch || s.H < 1 ||
      !MmaWanted(MmaBwdByDefault(s))) {
    return SequenceKernelPlan();
  }
  return MmaPlan<T>(s, KH + kMmaPad, 1,
                    reinterpret_cast<const void*>(&PersistentMmaBwdKernel<T>));
}

template <typename T>
GpuStatus PersistentMmaBwd(const GpuContext& g, const SequenceKernelPlan& plan, BwdStep<T> p,
                           const T* R, I64 steps, T* d0, T* d1) {
  MmaBwdArgs pa{R, steps, plan.units, d0, d1};
  return LaunchPersistent(g, plan, &PersistentMmaBwdKernel<T>, p, pa);
}

#define TFRNN_INSTANTIATE_MMA(T)                                                         \
  template SequenceKernelPlan PlanPersistentMmaFwd<T>(const RnnSpec&);                   \
  template GpuStatus PersistentMmaFwd<T>(const GpuContext&, const SequenceKernelPlan&,   \
                                         FwdStep<T>, const T*, I64, T*, T*, AccOf<T>*);  \
  template SequenceKernelPlan PlanPersistentMmaBwd<T>(const RnnSpec&);                   \
  template GpuStatus PersistentMmaBwd<T>(const GpuContext&, const SequenceKernelPlan&,   \
                                         BwdStep<T>, const T*, I64, T*, T*);
TFRNN_INSTANTIATE_MMA(__half)
TFRNN_INSTANTIATE_MMA(__nv_bfloat16)
#undef TFRNN_INSTANTIATE_MMA

}  // namespace gpu
}  // namespace tfrnn
