// The engine's pipelined chains on the caller's pool (ChainWithSideWork and its two uses: one
// core runs a short step chain, the others the work beside it); the step loop StepLoop is in
// pool_helpers.h. No TensorFlow includes; the engine never starts threads of its own.
#ifndef TF_RNN_OPS_CC_ENGINE_STEP_LOOPS_H_
#define TF_RNN_OPS_CC_ENGINE_STEP_LOOPS_H_

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "cc/engine/cpu_device.h"
#include "cc/engine/pool_helpers.h"

namespace tfrnn {

// Runs chain(s) for every s in [0, steps), in order, on the caller, and side(i) for every
// task i in [0, tasks) once need(i) <= steps chain steps are done and task dep(i) < i (or
// none: -1) has finished: on up to `helpers` pool threads while the chain runs, and on the
// caller too once the chain has ended. Chain step s in turn starts once task feed(s) (or
// none: -1) has finished; neither it nor any lower task may need chain steps past s-1.
//
// For a step chain too short per step to split across cores (each step would read rows the
// other core just wrote): one core runs the chain, the others the work beside it: the
// forward's input projection ahead of the steps that read it (feed), the backward's GEMMs
// over finished steps (need) instead of all of it after the chain. Tasks are claimed in index
// order by running threads only, depend on lower tasks and on chain steps only, and a chain
// step waiting for an unclaimed task runs it itself: the lowest unfinished task or chain step
// can always proceed, and the call completes on the caller alone when the pool runs no helper.
// A task that accumulates into the output of an earlier one names it as dep, so each sum is
// formed in a fixed order (deterministic results).
struct ChainSideState {
  std::atomic<Index> chain_done{0}, next{0}, finished{0};
  HelperPlacement where;
  std::unique_ptr<std::atomic<bool>[]> done;
  Index tasks = 0;
  const std::function<Index(Index)>* need = nullptr;  // valid while tasks remain unclaimed
  const std::function<Index(Index)>* dep = nullptr;
  const std::function<void(Index)>* side = nullptr;

  // Claims and runs the next task; false when none is left.
  bool RunOne() {
    const Index i = next.fetch_add(1, std::memory_order_relaxed);
    if (i >= tasks) return false;
    const Index n = (*need)(i), j = (*dep)(i);
    SpinUntil([&] { return chain_done.load(std::memory_order_acquire) >= n; });
    if (j >= 0) SpinUntil([&] { return done[j].load(std::memory_order_acquire); });
    (*side)(i);
    done[i].store(true, std::memory_order_release);
    finished.fetch_add(1, std::memory_order_release);
    return true;
  }
  void Work() {
    while (RunOne()) {
    }
  }
  // Before a chain step: until task i is done, run unclaimed tasks up to it here.
  void Feed(Index i) {
    for (int spin = 0; !done[i].load(std::memory_order_acquire); ++spin) {
      if (next.load(std::memory_order_relaxed) <= i) {
        RunOne();
      } else if (spin < 4096) {
        PauseOnce();
      } else {
        std::this_thread::yield();
      }
    }
  }
};

template <typename Chain, typename Feed, typename Need, typename Dep, typename Side>
void ChainWithSideWork(const CpuDevice& d, Index steps, Index tasks, int helpers, Chain&& chain,
                       Feed&& feed, Need&& need, Dep&& dep, Side&& side) {
  const std::function<Index(Index)> need_fn = [&need, steps](Index i) {
    return std::min<Index>(need(i), steps);
  };
  const std::function<Index(Index)> dep_fn = [&dep](Index i) {
    const Index j = dep(i);
    return j < i ? j : Index(-1);
  };
  const std::function<void(Index)> side_fn = [&side](Index i) { side(i); };
  auto state = std::make_shared<ChainSideState>();
  state->done.reset(new std::atomic<bool>[std::max<Index>(tasks, 1)]);
  for (Index i = 0; i < tasks; ++i) state->done[i].store(false, std::memory_order_relaxed);
  state->tasks = tasks;
  state->need = &need_fn;
  state->dep = &dep_fn;
  state->side = &side_fn;
  ScheduleHelpers(d, helpers, state, [](ChainSideState& st, Index) { st.Work(); });
  for (Index s = 0; s < steps; ++s) {
    const Index f = feed(s);
    if (f >= 0 && f < tasks) state->Feed(f);
    chain(s);
    state->chain_done.store(s + 1, std::memory_order_release);
  }
  state->Work();
  SpinUntil([&] { return state->finished.load(std::memory_order_acquire) >= tasks; });
}

// The two uses of ChainWithSideWork, with side work in chunks of up to about 128 rows of
// `batch` rows per step (few enough tasks, and a short tail once the chain ends).
inline Index ChainChunkSteps(Index batch) { return std::max<Index>(1, 128 / batch); }

// Chunk boundaries of `steps` steps growing 1, 2, 4, ... steps up to ChainChunkSteps: chunk k
// holds steps [ends[k], ends[k + 1]), so that the side work starts after one step. Forward,
// the chain waits for its first chunk's projection only: with one chunk of 128 / B steps the
// forward at 1-2 rows waited for the whole sequence's (100×1×128×128: 1.3x faster growing).
inline std::vector<Index> ChainChunkEnds(Index steps, Index batch) {
  const Index C = ChainChunkSteps(batch);
  std::vector<Index> ends{0};
  for (Index size = 1; ends.back() < steps; size = std::min(C, 2 * size)) {
    ends.push_back(std::min(steps, ends.back() + size));
  }
  return ends;
}

// Forward: chain(t) for t in [0, steps·phases) (step t / phases), each step after
// ahead(s0, s1) has run for the chunk of steps [s0, s1) that holds it.
template <typename Chain, typename Ahead>
void ChainWithChunksAhead(const CpuDevice& d, Index steps, Index phases, Index batch,
                          int helpers, Chain&& chain, Ahead&& ahead) {
  const std::vector<Index> ends = ChainChunkEnds(steps, batch);
  ChainWithSideWork(
      d, steps * phases, Index(ends.size()) - 1, helpers, chain,
      [&](Index t) {
        return Index(std::upper_bound(ends.begin(), ends.end(), t / phases) - ends.begin()) - 1;
      },
      [](Index) { return Index(0); }, [](Index) { return Index(-1); },
      [&](Index k) { ahead(ends[k], ends[k + 1]); });
}

// Backward: chain(i) for i in [0, steps] (i = steps: the step after the last one, e.g. the
// gradient of h0), the chain visiting steps in descending order, i -> steps - 1 - i; prep()
// beside its first step. Per chunk of finished steps [s0, s1): panel(s0, s1, c0, c1, first)
// for each column panel [c0, c1) of `cols` columns, after the same panel of the previous chunk
// (first: the panel's first chunk; each panel's sum formed in a fixed order), and rows(r0, r1)
// over `row_parts` runs of its steps, after prep.
template <typename Chain, typename Prep, typename Panel, typename Rows>
void ChainWithChunkGrads(const CpuDevice& d, Index steps, Index batch, Index cols, int helpers,
                         Index row_parts, Chain&& chain, Prep&& prep, Panel&& panel,
                         Rows&& rows) {
  // Growing chunks (ChainChunkEnds): the helpers start after the chain's first step, and each
  // chunk's work keeps them busy while the chain finishes the next (a first chunk of one
  // step, then C steps, left them waiting for C: 6-7 % of the backward at 30×8×512×512 and
  // 100×4×128×256).
  const std::vector<Index> ends = ChainChunkEnds(steps, batch);
  const Index chunks = Index(ends.size()) - 1;
  const Index width = ((cols + helpers) / (helpers + 1) + 15) / 16 * 16;  // whole packets
  const Index P = (cols + width - 1) / width, R = std::max<Index>(1, row_parts), N = P + R;
  // Task 0 is prep; task 1 + k·N + j chunk k's panel j (j < P) or its rows' part j - P.
  ChainWithSideWork(
      d, steps + 1, 1 + chunks * N, helpers, chain, [](Index) { return Index(-1); },
      [&](Index i) { return i == 0 ? Index(0) : ends[(i - 1) / N + 1]; },
      [&](Index i) {
        if (i == 0) return Index(-1);
        return (i - 1) % N >= P ? Index(0) : i > N ? i - N : Index(-1);
      },
      [&](Index i) {
        if (i == 0) return prep();
        const Index k = (i - 1) / N, j = (i - 1) % N;
        const Index s0 = steps - ends[k + 1], s1 = steps - ends[k];
        if (j < P) return panel(s0, s1, j * width, std::min(cols, (j + 1) * width), k == 0);
        const Index n = s1 - s0, r = j - P, r0 = s0 + n * r / R, r1 = s0 + n * (r + 1) / R;
        if (r1 > r0) rows(r0, r1);
      });
}

// Pool threads to run beside a pipelined step chain (ChainWithSideWork): about as many as the
// side work has chains' worth of work (`side_per_chain`: its size relative to the chain's),
// since more would only wait, and none for a call too small to repay waking one (`macs`, the
// call's multiply-adds, below about 10 µs of work).
inline int SideHelpers(const CpuDevice& d, double macs, double side_per_chain) {
  if (macs < double(1 << 20)) return 0;
  const int want = std::max(1, static_cast<int>(std::ceil(side_per_chain)));
  return std::min({d.numThreads() - 1, 7, want});
}

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_ENGINE_STEP_LOOPS_H_
