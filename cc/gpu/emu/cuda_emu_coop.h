// The CUDA emulation (cuda_emu.h) for kernels whose threads do communicate: a cooperative
// launch runs every thread of the grid as a fiber (ucontext) on the calling thread, switched
// only at barriers, so __syncthreads, grid-wide cooperative_groups::this_grid().sync(),
// warp shuffles and dynamic shared memory (one buffer per block) behave as on a GPU whose
// threads all wait at each barrier. A barrier that some threads of its scope never reach (a
// divergent __syncthreads, a shuffle outside a full warp, an early return before grid.sync)
// is a deadlock on a GPU; here it stops the process with a message.
//
// Deterministic: fibers run in a fixed order (block, then thread), each until its next
// barrier. Races between threads that a real GPU could expose are not.
#ifndef TF_RNN_OPS_CC_GPU_EMU_CUDA_EMU_COOP_H_
#define TF_RNN_OPS_CC_GPU_EMU_CUDA_EMU_COOP_H_

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

enum Scope { kNoBarrier = 0, kWarp = 1, kBlock = 2, kGrid = 3 };

struct Fiber {
  ucontext_t ctx;
  std::unique_ptr<char[]> stack;
  uint3 bid, tid;
  unsigned block = 0, linear = 0;  // block index, thread index within the block
  Scope waiting = kNoBarrier;
  bool done = false;
};

struct CoopRun {
  ucontext_t sched;
  std::vector<Fiber> fibers;
  dim3 grid, block;
  unsigned threads_per_block = 0;
  std::vector<std::vector<unsigned char>> smem;  // per block
  std::vector<uint64_t> slots;                   // one shuffle slot per thread
  std::function<void()> body;
  Fiber* cur = nullptr;
};
inline thread_local CoopRun* coop = nullptr;

inline void FiberMain() {
  CoopRun* run = coop;
  run->body();
  run->cur->done = true;
  swapcontext(&run->cur->ctx, &run->sched);
}

inline void Fail(const char* what) {
  std::fprintf(stderr, "CUDA emulation: %s\n", what);
  std::abort();
}

// Waits at a barrier of `scope` (from inside a cooperative launch).
inline void Barrier(Scope scope) {
  CoopRun* run = coop;
  if (run == nullptr) Fail("a barrier outside a cooperative launch (use one for this kernel)");
  run->cur->waiting = scope;
  swapcontext(&run->cur->ctx, &run->sched);
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
  release(0, static_cast<unsigned>(run.fibers.size()), kGrid);
  return released;
}

// Runs f(args...) on every thread of the grid as fibers; dynamic shared memory of smem_bytes
// per block.
template <typename F, typename... Args>
cudaError_t LaunchCooperative(F f, dim3 grid, dim3 block, size_t smem_bytes, Args... args) {
  const unsigned nb = grid.x * grid.y * grid.z, tpb = block.x * block.y * block.z;
  if (nb == 0 || tpb == 0 || tpb > 1024) return cudaErrorInvalidConfiguration;
  if (coop != nullptr) Fail("nested cooperative launch");
  constexpr size_t kStack = 256 * 1024;
  CoopRun run;
  run.grid = grid;
  run.block = block;
  run.threads_per_block = tpb;
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
      swapcontext(&run.sched, &fb.ctx);
      ran = true;
    }
    if (all_done) break;
    if (!ReleaseBarriers(run) && !ran) Fail("deadlock: threads wait at barriers never completed");
  }
  coop = nullptr;
  return cudaSuccess;
}

// This block's dynamic shared memory (16-byte aligned).
inline unsigned char* DynamicSmem() {
  if (coop == nullptr) Fail("dynamic shared memory outside a cooperative launch");
  unsigned char* p = coop->smem[coop->cur->block].data();
  return p + (16 - reinterpret_cast<uintptr_t>(p) % 16) % 16;
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
}  // namespace cooperative_groups

#endif  // TF_RNN_OPS_CC_GPU_EMU_CUDA_EMU_COOP_H_
