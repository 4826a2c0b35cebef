// Device pieces shared by the persistent forward (rnn_gpu_persistent.cu) and backward
// (rnn_gpu_persistent_bwd.cu) kernels, the cluster kernels and the fused step kernel. Included
// only by their files, after <cooperative_groups.h>.
#ifndef TF_RNN_OPS_CC_GPU_RNN_GPU_PERSISTENT_KERNELS_CUH_
#define TF_RNN_OPS_CC_GPU_RNN_GPU_PERSISTENT_KERNELS_CUH_

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cc/gpu/rnn_gpu_persistent.cuh"

namespace tfrnn {
namespace gpu {
namespace {

namespace cg = cooperative_groups;

constexpr int kPThreads = 256;
constexpr int kWarps = kPThreads / 32;
constexpr int kLoads = 8;  // h loads in flight per thread

__host__ __device__ inline size_t Align16(size_t n) { return (n + 15) / 16 * 16; }

// L2 loads (ld.global.cg): h was written by other blocks in the previous step, and L1 is not
// coherent between multiprocessors.
__device__ __forceinline__ float LdCg(const float* p) { return __ldcg(p); }
__device__ __forceinline__ double LdCg(const double* p) { return __ldcg(p); }
__device__ __forceinline__ float LdCg(const __half* p) { return __half2float(__ldcg(p)); }
__device__ __forceinline__ float LdCg(const __nv_bfloat16* p) {
  return __bfloat162float(__ldcg(p));
}

// The block's dynamic shared memory (in the CUDA emulation: its per-block buffer).
#ifdef TFRNN_CUDA_EMULATE
__device__ __forceinline__ unsigned char* DynamicSmem() { return emu::DynamicSmem(); }
#else
__device__ __forceinline__ unsigned char* DynamicSmem() {
  extern __shared__ __align__(16) unsigned char smem[];
  return smem;
}
#endif

// dst[i] = load(i) for i < n, by the block's threads, kLoads loads in flight per thread (one
// at a time, each would wait out the L2 latency).
template <typename D, typename Load>
__device__ __forceinline__ void StageBatched(D* dst, I64 n, Load load) {
  for (I64 base = threadIdx.x; base < n; base += kLoads * static_cast<I64>(blockDim.x)) {
    D v[kLoads];
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const I64 i = base + u * static_cast<I64>(blockDim.x);
      v[u] = load(i < n ? i : base);  // base < n: a spare load, never past the end
    }
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const I64 i = base + u * static_cast<I64>(blockDim.x);
      if (i < n) dst[i] = v[u];
    }
  }
}

// h_rec[b, c] of step st, from h = h_prev[b, c]: h ⊙ the recurrent mask (as MaskRowsKernel
// reads it: rows of p.yst columns from p.ly.dcol), 0 for a row past its end; h itself without
// a mask.
template <typename T>
__device__ __forceinline__ AccOf<T> MaskedH(const FwdStep<T>& p, const T* mask, bool per_step,
                                            I64 st, I64 b, I64 c, AccOf<T> h) {
  if (mask == nullptr) return h;
  const I64 tau = p.sm.Tau(b, st);
  return tau < 0 ? AccOf<T>(0)
                 : h * Ld(mask + ((per_step ? tau * p.B : 0) + b) * p.yst + p.ly.dcol + c);
}

// The pointwise part of a persistent forward step st for the block's units [j0, j0 + un): h
// from hc (also h_rec: the recurrent mask, where there is one, was applied to the product's
// operand only) into hn.
template <typename T>
__device__ __forceinline__ void FwdPointBlock(FwdStep<T>& p, I64 st, T* hc, T* hn, I64 j0,
                                              I64 un) {
  p.step = st;
  p.h_cur = hc;
  p.h_rec = hc;
  p.h_next = hn;
  for (I64 i = threadIdx.x; i < p.B * un; i += blockDim.x) FwdPoint(p, i / un, j0 + i % un);
}

// The pointwise part of a persistent backward step (the it-th from the end) for the block's
// units [j0, j0 + un), writing dhr of that step to cur.
template <typename T>
__device__ __forceinline__ void BwdPointBlock(BwdStep<T>& p, I64 steps, I64 it, T* cur, I64 j0,
                                              I64 un) {
  p.step = steps - 1 - it;
  p.dhr_cur = cur;
  for (I64 i = threadIdx.x; i < p.B * un; i += blockDim.x) BwdPoint(p, i / un, j0 + i % un);
}

// emit(b, r, Σ_c rs[r·len + c] · vs[b·len + c]) for every r < rows, b < B (from one lane):
// each warp takes (RB rows, CB batch rows) tiles in turn, lanes stride over c (RB + CB
// shared-memory loads per RB·CB multiply-adds), then a warp reduction. vs holds T or Acc
// values.
template <typename T, int RB, int CB, typename V, typename Emit>
__device__ __forceinline__ void WarpDots(const T* rs, const V* vs, I64 rows, I64 len, I64 B,
                                         Emit emit) {
  using A = AccOf<T>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const I64 nbt = (B + CB - 1) / CB, tiles = (rows + RB - 1) / RB * nbt;
  for (I64 tile = warp; tile < tiles; tile += kWarps) {
    const I64 r0 = tile / nbt * RB, b0 = tile % nbt * CB;
    A acc[RB][CB];
#pragma unroll
    for (int a = 0; a < RB; ++a) {
#pragma unroll
      for (int q = 0; q < CB; ++q) acc[a][q] = A(0);
    }
    for (I64 c = lane; c < len; c += 32) {
      A w[RB], h[CB];
#pragma unroll
      for (int a = 0; a < RB; ++a) w[a] = r0 + a < rows ? Ld(rs + (r0 + a) * len + c) : A(0);
#pragma unroll
      for (int q = 0; q < CB; ++q) h[q] = b0 + q < B ? A(Ld(vs + (b0 + q) * len + c)) : A(0);
#pragma unroll
      for (int a = 0; a < RB; ++a) {
#pragma unroll
        for (int q = 0; q < CB; ++q) acc[a][q] += w[a] * h[q];
      }
    }
#pragma unroll
    for (int a = 0; a < RB; ++a) {
#pragma unroll
      for (int q = 0; q < CB; ++q) {
        A v = acc[a][q];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        const I64 r = r0 + a;
        if (lane == (a * CB + q) % 32 && r < rows && b0 + q < B) emit(b0 + q, r, v);
      }
    }
  }
}

// WarpDots' register tile for `rows` rows of R per block and `batch` rows of the batch: four
// rows per warp only when every warp gets four; a tile of 8 batch rows from four rows up (it
// would waste most of itself on one or two).
inline int RowsPerWarp(I64 rows) { return rows >= 4 * kWarps ? 4 : 1; }
inline int BatchTile(I64 batch) { return batch >= 4 ? 8 : 1; }

// make(RB, CB) for the tile (rb, cb), RB and CB as std::integral_constant: the kernel
// instantiation of a tile, e.g. [](auto r, auto c) { return &Kernel<T, r.value, c.value>; }.
template <typename Make>
auto ByTile(int rb, int cb, Make make) {
  using I1 = std::integral_constant<int, 1>;
  using I4 = std::integral_constant<int, 4>;
  using I8 = std::integral_constant<int, 8>;
  if (rb == 4) return cb == 8 ? make(I4(), I8()) : make(I4(), I1());
  return cb == 8 ? make(I1(), I8()) : make(I1(), I1());
}

inline bool EnvIs(const char* name, const char* value) {
  const char* e = std::getenv(name);
  return e != nullptr && std::strcmp(e, value) == 0;
}

// With TFRNN_CUDA_TRACE=1, one line on stderr per plan: which kernel runs a layer (the tests
// and the benchmark check which path ran).
inline SequenceKernelPlan Traced(const char* dir, const RnnSpec& s, const SequenceKernelPlan& p) {
  if (!EnvIs("TFRNN_CUDA_TRACE", "1")) return p;
  if (!p.ok) {
    std::fprintf(stderr, "tfrnn_cuda %s B=%lld H=%lld: per-step\n", dir,
                 static_cast<long long>(s.B), static_cast<long long>(s.H));
  } else {
    std::fprintf(stderr,
                 "tfrnn_cuda %s B=%lld H=%lld: %s blocks=%d cluster=%d group=%lld units=%lld "
                 "smem=%zu\n",
                 dir, static_cast<long long>(s.B), static_cast<long long>(s.H),
                 p.fused_step              ? "fused-step"
                 : p.cluster > 0 && p.mma ? "cluster-mma"
                 : p.cluster > 0          ? "cluster"
                 : p.mma                  ? "persistent-mma"
                                          : "persistent",
                 p.blocks,
                 p.cluster,
                 static_cast<long long>(p.group), static_cast<long long>(p.units), p.smem);
  }
  return p;
}

// Whether a layer's step is small enough for the persistent kernels: where the forward beats
// the per-step path on an H100 (bench/gpu_bench.py, docs/GPU_BENCHMARK.md), B·Hs up to
// 16·256, or one or two rows up to Hs = 1024. Beyond, the step's product is large enough for
// cuBLAS to beat the kernels' CUDA-core dot products.
inline bool PersistentSize(const RnnSpec& s) {
  const I64 Hs = RnnHs(s);
  if (s.B < 1 || s.H < 1) return false;
  return s.B * Hs <= kPersistentMaxWork || (s.B <= 2 && Hs <= 1024);
}

// The backward step-chain kernel a layer gets when no environment switch names one, by
// measurement on an H100 (bench/gpu_bench.py, docs/GPU.md "Defaults"): the persistent
// backward for one or two batch rows (1.4-2.2x the per-step backward at B = 1, H 256-1024),
// the cluster backward for 3 to kClusterBwdMaxB rows at Hs <= kClusterBwdMaxHs where its plan
// fits (1.2-2x at B = 4 and 16, H 256 and 512), the per-step path elsewhere (the cluster
// kernels lose from B = 64 on).
enum class BwdDefault { kPerStep, kPersistent, kCluster };
constexpr I64 kClusterBwdMaxB = 16, kClusterBwdMaxHs = 512;
inline BwdDefault DefaultBwd(const RnnSpec& s) {
  const I64 Hs = RnnHs(s);
  if (s.B <= 2 && PersistentSize(s)) return BwdDefault::kPersistent;
  if (s.B <= kClusterBwdMaxB && Hs <= kClusterBwdMaxHs) return BwdDefault::kCluster;
  return BwdDefault::kPerStep;
}

// Whether a layer asks for the tensor-core cluster kernels (rnn_gpu_cluster_mma.cu; half and
// bfloat16): only with TFRNN_CUDA_CLUSTER=1 and TFRNN_CUDA_MMA=1 together, never by default.
inline bool ClusterMmaWanted() {
  return EnvIs("TFRNN_CUDA_CLUSTER", "1") && EnvIs("TFRNN_CUDA_MMA", "1");
}

// Whether the forward's per-step path runs the fused step kernel (rnn_gpu_fused_step.cu):
// TF_RNN_OPS_CUDA_FUSED_STEP=1 turns it on, anything else leaves it off.
inline bool FusedStepWanted(const RnnSpec&) { return EnvIs("TF_RNN_OPS_CUDA_FUSED_STEP", "1"); }

// What the plans need of a device, queried once per device (the values never change).
struct CoopDevice {
  bool ok = false;  // every query succeeded and the device can run cooperative launches
  int sms = 0, optin = 0, major = 0;
};
inline std::mutex& PlanMutex() {
  static std::mutex* mu = new std::mutex();
  return *mu;
}
inline CoopDevice CoopDeviceProps(int dev) {
  static auto* cache = new std::map<int, CoopDevice>();
  std::lock_guard<std::mutex> lock(PlanMutex());
  auto it = cache->find(dev);
  if (it != cache->end()) return it->second;
  CoopDevice d;
  int coop = 0;
  if (cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess &&
      cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev) == cudaSuccess &&
      cudaDeviceGetAttribute(&d.optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) ==
          cudaSuccess &&
      cudaDeviceGetAttribute(&d.major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess) {
    d.ok = coop != 0 && d.sms >= 1;
  } else {
    (void)cudaGetLastError();
  }
  (*cache)[dev] = d;
  return d;
}

// The current device (into *dev) and its properties (not ok on any error).
inline CoopDevice CurrentCoopDevice(int* dev) {
  if (cudaGetDevice(dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return CoopDevice();
  }
  return CoopDeviceProps(*dev);
}

// Raises kernel fn's dynamic shared memory limit to smem (never lowers it, so every plan made
// so far stays launchable); false on an error. Call with PlanMutex() held.
inline bool RaiseSmemLimit(int dev, const void* fn, size_t smem) {
  static auto* limit = new std::map<std::pair<int, const void*>, size_t>();
  size_t& lim = (*limit)[{dev, fn}];
  if (smem <= lim) return true;
  if (cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(smem)) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  lim = smem;
  return true;
}

// Blocks of kernel fn resident per multiprocessor with smem bytes of dynamic shared memory
// (0 on any error), cached per device, kernel and size.
inline int ResidentBlocks(int dev, const void* fn, size_t smem) {
  static auto* resident = new std::map<std::tuple<int, const void*, size_t>, int>();
  std::lock_guard<std::mutex> lock(PlanMutex());
  const auto key = std::make_tuple(dev, fn, smem);
  auto it = resident->find(key);
  if (it != resident->end()) return it->second;
  int per_sm = 0;
  if (!RaiseSmemLimit(dev, fn, smem)) return 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, kPThreads, smem) !=
      cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  (*resident)[key] = per_sm;
  return per_sm;
}

// A launch configuration of kernel fn in clusters of `cluster` blocks (x) of kPThreads threads.
struct ClusterConfig {
  cudaLaunchAttribute attr[1];
  cudaLaunchConfig_t cfg;
  ClusterConfig(int blocks, int cluster, size_t smem, cudaStream_t stream) {
    std::memset(attr, 0, sizeof(attr));
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = static_cast<unsigned>(cluster);
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg = cudaLaunchConfig_t{};
    cfg.gridDim = dim3(static_cast<unsigned>(blocks));
    cfg.blockDim = dim3(kPThreads);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
};

// Clusters of `cluster` blocks of kernel fn (smem bytes each) resident at once on device dev
// (0 on any error or where clusters of that size cannot run), cached per device, kernel,
// cluster size and smem. Clusters of more than 8 blocks (non-portable; up to 16 on an H100)
// are allowed on the kernel first.
template <typename Fn>
int ActiveClusters(int dev, Fn* fn, int cluster, size_t smem) {
  static auto* active = new std::map<std::tuple<int, const void*, int, size_t>, int>();
  std::lock_guard<std::mutex> lock(PlanMutex());
  const void* key_fn = reinterpret_cast<const void*>(fn);
  const auto key = std::make_tuple(dev, key_fn, cluster, smem);
  auto it = active->find(key);
  if (it != active->end()) return it->second;
  int n = 0;
  if (!RaiseSmemLimit(dev, key_fn, smem)) return 0;
  if (cluster > 8 && cudaFuncSetAttribute(fn, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) !=
                         cudaSuccess) {
    (void)cudaGetLastError();
    (*active)[key] = 0;
    return 0;
  }
  ClusterConfig c(cluster, cluster, smem, nullptr);
  if (cudaOccupancyMaxActiveClusters(&n, fn, &c.cfg) != cudaSuccess) {
    (void)cudaGetLastError();
    n = 0;
  }
  (*active)[key] = n;
  return n;
}

// A plan that runs (cluster > 0: in clusters of `cluster` blocks, `group` batch rows each).
inline SequenceKernelPlan MakePlan(I64 blocks, I64 units, int rb, int cb, size_t smem,
                               int cluster = 0, I64 group = 0) {
  SequenceKernelPlan pl;
  pl.ok = true;
  pl.blocks = static_cast<int>(blocks);
  pl.threads = kPThreads;
  pl.units = units;
  pl.rows_per_warp = rb;
  pl.batch_tile = cb;
  pl.smem = smem;
  pl.cluster = cluster;
  pl.group = group;
  return pl;
}

// The plan of a persistent kernel on the current device: U units per block, so that every
// block is resident at once; each block keeps rows_per_unit·U rows of R (r_bytes_per_unit
// bytes per unit) and batch_bytes of the batch in shared memory; fn_of(rb, cb) is the kernel
// for rb rows per warp and a batch tile of cb. Any failing CUDA query means no plan. The
// device's properties and the kernels' occupancy are queried once (CoopDeviceProps,
// ResidentBlocks): a plan costs one cudaGetDevice after the first.
template <typename FnOf>
SequenceKernelPlan PlanOnDevice(const RnnSpec& s, I64 rows_per_unit, size_t r_bytes_per_unit,
                            size_t batch_bytes, FnOf fn_of) {
  SequenceKernelPlan pl;
  int dev = 0;
  const CoopDevice d = CurrentCoopDevice(&dev);
  if (!d.ok) return pl;
  const I64 U = (s.H + d.sms - 1) / d.sms;
  const I64 blocks = (s.H + U - 1) / U;
  const size_t smem = Align16(r_bytes_per_unit * U) + batch_bytes;
  if (smem > static_cast<size_t>(d.optin)) return pl;
  const int rb = RowsPerWarp(rows_per_unit * U), cb = BatchTile(s.B);
  const void* fn = reinterpret_cast<const void*>(fn_of(rb, cb));
  if (static_cast<I64>(ResidentBlocks(dev, fn, smem)) * d.sms < blocks) return pl;
  return MakePlan(blocks, U, rb, cb, smem);
}

// Launches kernel fn(p, pa) as planned (a cooperative launch: every block resident at once).
template <typename P, typename PA>
GpuStatus LaunchPersistent(const GpuContext& g, const SequenceKernelPlan& plan, void (*fn)(P, PA),
                           P p, PA pa) {
#ifdef TFRNN_CUDA_EMULATE
  (void)g;
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

// Launches kernel fn(p, pa) as planned in clusters of plan.cluster blocks.
template <typename P, typename PA>
GpuStatus LaunchClusters(const GpuContext& g, const SequenceKernelPlan& plan, void (*fn)(P, PA),
                         P p, PA pa) {
  ClusterConfig c(plan.blocks, plan.cluster, plan.smem, g.stream);
  TFRNN_CUDA_CHECK(cudaLaunchKernelEx(&c.cfg, fn, p, pa));
  return GpuStatus::Ok();
}

}  // namespace
}  // namespace gpu
}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_GPU_RNN_GPU_PERSISTENT_KERNELS_CUH_
