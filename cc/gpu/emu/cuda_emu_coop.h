// The CUDA emulation (cuda_emu.h) for kernels whose threads do communicate: a cooperative
// launch runs every thread of the grid as a fiber (ucontext) on the calling thread, switched
// only at barriers, so __syncthreads, grid-wide cooperative_groups::this_grid().sync(),
// warp shuffles and dynamic shared memory (one buffer per block) behave as on a GPU whose
// threads all wait at each barrier. A barrier that some threads of its scope never reach (a
// divergent __syncthreads, a shuffle outside a full warp, an early return before grid.sync)
// is a deadlock on a GPU; here it stops the process with a message.
//
// A launch with a cluster dimension (cudaLaunchKernelEx) runs the same way, with cluster
// barriers (cooperative_groups::this_cluster().sync()) and distributed shared memory
// (map_shared_rank: another block's buffer of the same cluster). The documented rules of
// distributed shared memory are checked: no access before the first cluster barrier (the
// other block may not have started), none to a block that has exited, none outside the
// dynamic shared memory; a grid barrier outside a cooperative launch fails too.
//
// Switching: a fiber starts with swapcontext and is switched with _setjmp/_longjmp afterwards
// (swapcontext saves and restores the signal mask, a system call per switch, and a warp
// shuffle is two switches of every thread). Under AddressSanitizer every switch is a
// swapcontext, which it follows.
//
// Deterministic: fibers run in a fixed order (block, then thread), each until its next
// barrier. Races between threads that a real GPU could expose are not.
#ifndef TF_RNN_OPS_CC_GPU_EMU_CUDA_EMU_COOP_H_
#define TF_RNN_OPS_CC_GPU_EMU_CUDA_EMU_COOP_H_

#include <setjmp.h>
#include <ucontext.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "cc/gpu/emu/cuda_emu.h"

namespace tfrnn {
namespace emu {

enum Scope { kNoBarrier = 0, kWarp = 1, kBlock = 2, kCluster = 3, kGrid = 4 };

#if defined(__SANITIZE_ADDRESS__)
#define TFRNN_EMU_SWAPCONTEXT_ONLY 1
#else
#define TFRNN_EMU_SWAPCONTEXT_ONLY 0
#endif

struct Fiber {
  ucontext_t ctx;
  jmp_buf jb;
  bool started = false;
  std::unique_ptr<char[]> stack;
  uint3 bid, tid;
  unsigned block = 0, linear = 0;  // block index, thread index within the block
  Scope waiting = kNoBarrier;
  bool done = false;
  unsigned cluster_syncs = 0;  // cluster barriers passed
};

struct CoopRun {
  ucontext_t sched;
  jmp_buf sched_jb;
  std::vector<Fiber> fibers;
  dim3 grid, block;
  unsigned threads_per_block = 0;
  unsigned cluster = 1;       // blocks per cluster
  bool cooperative = true;    // grid barriers allowed
  size_t smem_bytes = 0;
  std::vector<std::vector<unsigned char>> smem;  // per block
  std::vector<unsigned> live;                    // threads not yet exited, per block
  std::vector<uint64_t> slots;                   // one shuffle slot per thread
  std::function<void()> body;
  Fiber* cur = nullptr;
};
inline thread_local CoopRun* coop = nullptr;

// Scheduler to fiber fb, until it yields.
inline void Resume(CoopRun& run, Fiber& fb) {
  if (TFRNN_EMU_SWAPCONTEXT_ONLY) {
    swapcontext(&run.sched, &fb.ctx);
    return;
  }
  if (_setjmp(run.sched_jb) != 0) return;
  if (fb.started) _longjmp(fb.jb, 1);
  fb.started = true;
  swapcontext(&run.sched, &fb.ctx);
}

// The running fiber back to the scheduler (done: for good).
inline void Yield(CoopRun& run, bool done) {
  if (TFRNN_EMU_SWAPCONTEXT_ONLY) {
    swapcontext(&run.cur->ctx, &run.sched);
    return;
  }
  if (done) _longjmp(run.sched_jb, 1);
  if (_setjmp(run.cur->jb) == 0) _longjmp(run.sched_jb, 1);
}

inline void FiberMain() {
  CoopRun* run = coop;
  run->body();
  run->cur->done = true;
  --run->live[run->cur->block];
  Yield(*run, true);
}

inline void Fail(const char* what) {
  std::fprintf(stderr, "CUDA emulation: %s\n", what);
  std::abort();
}

// Waits at a barrier of `scope` (from inside a cooperative launch).
inline void Barrier(Scope scope) {
  CoopRun* run = coop;
  if (run == nullptr) Fail("a barrier outside a cooperative launch (use one for this kernel)");
  if (scope == kGrid && !run->cooperative) Fail("a grid barrier outside a cooperative launch");
  run->cur->waiting = scope;
  Yield(*run, false);
  if (scope == kCluster) ++run->cur->cluster_syncs;
}

// Releases the barriers every member of which has arrived; false if none could be.
inline bool ReleaseBarriers(CoopRun& run) {
  const unsigned tpb = run.threads_per_block, nb = static_cast<unsigned>(run.fibers.size()) / tpb;
  bool released = false;
  auto release = [&](unsigned first, unsigned count, Scope scope) {
    unsigned live = 0, at = 0;
    for (unsigned i = first; i < first + count; ++i) {
      if (run.fibers[i].done) continue;
      ++live;
      if (run.fibers[i].waiting == scope) ++at;
    }
    if (live == 0 || at != live) return;
    if (live != count) Fail("a barrier that some threads of its scope exited before");
    for (unsigned i = first; i < first + count; ++i) run.fibers[i].waiting = kNoBarrier;
    released = true;
  };
  for (unsigned b = 0; b < nb; ++b) {
    for (unsigned w = 0; w * 32 < tpb; ++w) {
      const unsigned n = tpb - w * 32 < 32 ? tpb - w * 32 : 32;
      release(b * tpb + w * 32, n, kWarp);
    }
    release(b * tpb, tpb, kBlock);
  }
  for (unsigned c = 0; c * run.cluster < nb; ++c) {
    release(c * run.cluster * tpb, run.cluster * tpb, kCluster);
  }
  release(0, static_cast<unsigned>(run.fibers.size()), kGrid);
  return released;
}

// The largest cluster the emulated device runs (its multiprocessor count).
constexpr unsigned kMaxCluster = 4;

// Runs f(args...) on every thread of the grid as fibers; dynamic shared memory of smem_bytes
// per block; clusters of `cluster` consecutive blocks (x only); grid barriers only when
// `cooperative`.
template <typename F, typename... Args>
cudaError_t LaunchFibers(F f, dim3 grid, dim3 block, size_t smem_bytes, unsigned cluster,
                         bool cooperative, Args... args) {
  const unsigned nb = grid.x * grid.y * grid.z, tpb = block.x * block.y * block.z;
  if (nb == 0 || tpb == 0 || tpb > 1024) return cudaErrorInvalidConfiguration;
  if (cluster == 0 || cluster > kMaxCluster || grid.y * grid.z != 1 || grid.x % cluster != 0) {
    return cudaErrorInvalidConfiguration;
  }
  if (smem_bytes > SmemOptin()) return cudaErrorInvalidValue;  // as a GPU refuses it
  if (coop != nullptr) Fail("nested cooperative launch");
  constexpr size_t kStack = 256 * 1024;
  CoopRun run;
  run.grid = grid;
  run.block = block;
  run.threads_per_block = tpb;
  run.cluster = cluster;
  run.cooperative = cooperative;
  run.smem_bytes = smem_bytes;
  run.live.assign(nb, tpb);
  run.smem.assign(nb, std::vector<unsigned char>(smem_bytes + 16));
  run.slots.assign(static_cast<size_t>(nb) * tpb, 0);
  run.fibers.resize(static_cast<size_t>(nb) * tpb);
  run.body = [&] { f(args...); };
  coop = &run;
  for (unsigned b = 0; b < nb; ++b) {
    for (unsigned t = 0; t < tpb; ++t) {
      Fiber& fb = run.fibers[static_cast<size_t>(b) * tpb + t];
      fb.block = b;
      fb.linear = t;
      fb.bid.x = b % grid.x, fb.bid.y = (b / grid.x) % grid.y, fb.bid.z = b / (grid.x * grid.y);
      fb.tid.x = t % block.x, fb.tid.y = (t / block.x) % block.y,
      fb.tid.z = t / (block.x * block.y);
      fb.stack.reset(new char[kStack]);
      getcontext(&fb.ctx);
      fb.ctx.uc_stack.ss_sp = fb.stack.get();
      fb.ctx.uc_stack.ss_size = kStack;
      fb.ctx.uc_link = nullptr;
      makecontext(&fb.ctx, &FiberMain, 0);
    }
  }
  gridDim = grid;
  blockDim = block;
  for (;;) {
    bool ran = false, all_done = true;
    for (Fiber& fb : run.fibers) {
      if (fb.done) continue;
      all_done = false;
      if (fb.waiting != kNoBarrier) continue;
      run.cur = &fb;
      blockIdx = fb.bid;
      threadIdx = fb.tid;
      Resume(run, fb);
      ran = true;
    }
    if (all_done) break;
    if (!ReleaseBarriers(run) && !ran) Fail("deadlock: threads wait at barriers never completed");
  }
  coop = nullptr;
  return cudaSuccess;
}

template <typename F, typename... Args>
cudaError_t LaunchCooperative(F f, dim3 grid, dim3 block, size_t smem_bytes, Args... args) {
  return LaunchFibers(f, grid, block, smem_bytes, 1, true, args...);
}

// Block `block`'s dynamic shared memory (16-byte aligned).
inline unsigned char* SmemOf(unsigned block) {
  unsigned char* p = coop->smem[block].data();
  return p + (16 - reinterpret_cast<uintptr_t>(p) % 16) % 16;
}

// This block's dynamic shared memory.
inline unsigned char* DynamicSmem() {
  if (coop == nullptr) Fail("dynamic shared memory outside a cooperative launch");
  return SmemOf(coop->cur->block);
}

// The address in block `rank` of this cluster that corresponds to `addr` in this block's
// dynamic shared memory.
inline void* MapSharedRank(const void* addr, unsigned rank) {
  CoopRun* run = coop;
  if (run == nullptr) Fail("distributed shared memory outside a launch with clusters");
  const unsigned char* mine = SmemOf(run->cur->block);
  const unsigned char* a = static_cast<const unsigned char*>(addr);
  if (a < mine || a >= mine + run->smem_bytes) {
    Fail("map_shared_rank of an address outside this block's dynamic shared memory");
  }
  if (rank >= run->cluster) Fail("map_shared_rank to a rank outside the cluster");
  if (run->cur->cluster_syncs == 0) {
    Fail("distributed shared memory before the first cluster barrier (the block may not have "
         "started)");
  }
  const unsigned target = run->cur->block / run->cluster * run->cluster + rank;
  if (run->live[target] == 0) Fail("distributed shared memory of a block that has exited");
  return SmemOf(target) + (a - mine);
}

}  // namespace emu
}  // namespace tfrnn

inline void __syncthreads() { tfrnn::emu::Barrier(tfrnn::emu::kBlock); }

// The value of `v` in lane (this lane ^ o) of the warp (every lane of the warp takes part).
template <typename T>
T __shfl_xor_sync(unsigned /*mask*/, T v, int o) {
  static_assert(sizeof(T) <= 8, "shuffles of up to 8 bytes");
  tfrnn::emu::CoopRun* run = tfrnn::emu::coop;
  if (run == nullptr) tfrnn::emu::Fail("a warp shuffle outside a cooperative launch");
  const size_t base = static_cast<size_t>(run->cur->block) * run->threads_per_block;
  const unsigned lane = run->cur->linear % 32, warp0 = run->cur->linear - lane;
  std::memcpy(&run->slots[base + run->cur->linear], &v, sizeof(T));
  tfrnn::emu::Barrier(tfrnn::emu::kWarp);
  T r;
  std::memcpy(&r, &run->slots[base + warp0 + (lane ^ static_cast<unsigned>(o))], sizeof(T));
  tfrnn::emu::Barrier(tfrnn::emu::kWarp);
  return r;
}

template <typename T>
T __ldcg(const T* p) {
  return *p;
}

namespace cooperative_groups {
struct grid_group {
  void sync() { tfrnn::emu::Barrier(tfrnn::emu::kGrid); }
};
inline grid_group this_grid() { return grid_group(); }
struct cluster_group {
  void sync() const { tfrnn::emu::Barrier(tfrnn::emu::kCluster); }
  unsigned num_blocks() const { return tfrnn::emu::coop->cluster; }
  unsigned block_rank() const {
    return tfrnn::emu::coop->cur->block % tfrnn::emu::coop->cluster;
  }
  template <typename T>
  T* map_shared_rank(T* addr, unsigned rank) const {
    return static_cast<T*>(tfrnn::emu::MapSharedRank(addr, rank));
  }
};
inline cluster_group this_cluster() { return cluster_group(); }
}  // namespace cooperative_groups

namespace tfrnn {
namespace emu {
// The blocks per cluster of a launch configuration (1 without the attribute; 0 for a cluster
// that is not along x only, which no launch accepts).
inline unsigned ClusterOf(const cudaLaunchConfig_t* cfg) {
  unsigned cluster = 1;
  for (unsigned i = 0; i < cfg->numAttrs; ++i) {
    if (cfg->attrs[i].id == cudaLaunchAttributeClusterDimension) {
      const auto& d = cfg->attrs[i].val.clusterDim;
      cluster = d.y == 1 && d.z == 1 ? d.x : 0;
    }
  }
  return cluster;
}
}  // namespace emu
}  // namespace tfrnn

// A launch with a configuration: clusters of the configured size.
template <typename... P, typename... Args>
cudaError_t cudaLaunchKernelEx(const cudaLaunchConfig_t* cfg, void (*f)(P...), Args&&... args) {
  return tfrnn::emu::LaunchFibers(f, cfg->gridDim, cfg->blockDim, cfg->dynamicSmemBytes,
                                  tfrnn::emu::ClusterOf(cfg), false, static_cast<P>(args)...);
}

// Clusters of the configured size resident at once: the emulated device's 4 multiprocessors,
// one block each.
template <typename F>
cudaError_t cudaOccupancyMaxActiveClusters(int* n, F, const cudaLaunchConfig_t* cfg) {
  const unsigned cluster = tfrnn::emu::ClusterOf(cfg);
  if (cluster == 0) return cudaErrorInvalidValue;
  *n = cfg->dynamicSmemBytes <= tfrnn::emu::SmemOptin() && cluster <= tfrnn::emu::kMaxCluster
           ? static_cast<int>(tfrnn::emu::kMaxCluster / cluster)
           : 0;
  return cudaSuccess;
}

#endif  // TF_RNN_OPS_CC_GPU_EMU_CUDA_EMU_COOP_H_
