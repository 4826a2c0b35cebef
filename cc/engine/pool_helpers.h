// How the engine's loops put work on the caller's pool: waiting (SpinUntil), the helpers'
// placement off their caller's CPU (HelperPlacement, OffCallersCpu, ScheduleHelpers), the step
// loop (StepLoop), the parallel loop over a range on it (PoolFor, behind cpu_device.h's
// ParallelFor) and Eigen's tasks spread over CPUs (SpreadPool). No TensorFlow includes; the
// engine never starts threads of its own.
#ifndef TF_RNN_OPS_CC_ENGINE_POOL_HELPERS_H_
#define TF_RNN_OPS_CC_ENGINE_POOL_HELPERS_H_

#ifndef EIGEN_USE_THREADS
#define EIGEN_USE_THREADS
#endif
#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

#include "unsupported/Eigen/CXX11/Tensor"

namespace tfrnn {

using CpuDevice = Eigen::ThreadPoolDevice;
static_assert(std::is_same<Eigen::Index, std::ptrdiff_t>::value, "Index");
using Index = Eigen::Index;

// Waits until ready() holds: a short spin, then yielding the core.
inline void PauseOnce() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}
template <typename Ready>
void SpinUntil(Ready&& ready) {
  for (int spin = 0; !ready(); ++spin) {
    if (spin < 4096) {
      PauseOnce();
    } else {
      std::this_thread::yield();
    }
  }
}

// Where a loop's helpers run. On some VMs the OS puts a woken pool thread on the CPU of the
// thread that woke it while the other CPU is idle (an idle vCPU can read as not available),
// and the helper then waits there until the caller's work is done: the whole call runs on one
// core, in whole processes at a time (a probe of two 0.4 ms halves on a 2-core VM: 4 processes
// in 10 took the serial time at nearly every call). So the caller, once it has scheduled its
// helpers, gives up its CPU once if none of them has started (a helper queued behind it then
// runs), and a helper that finds itself on the caller's CPU leaves that CPU for the time of its
// work (its affinity without that CPU, restored after). Both together removed the serial
// processes from the probe (40 processes; either alone did not). Placement only: what a helper
// computes does not change.
struct HelperPlacement {
  int caller_cpu = -1;  // set by ScheduleHelpers
  std::atomic<bool> started{false};
};

// A thread's affinity narrowed for a while: Leave(cpus) takes the CPUs for which cpus(c) holds
// out of this thread's affinity, where that leaves it another CPU and changes it; the
// destructor restores the affinity Leave found. Nothing on other systems.
class AffinityLease {
 public:
  AffinityLease() = default;
  ~AffinityLease() {
#if defined(__linux__)
    if (moved_) pthread_setaffinity_np(pthread_self(), sizeof(saved_), &saved_);
#endif
  }
  AffinityLease(const AffinityLease&) = delete;
  AffinityLease& operator=(const AffinityLease&) = delete;

  // Whether the thread moved (its affinity now without those CPUs).
  template <typename Cpus>
  bool Leave(Cpus&& cpus) {
#if defined(__linux__)
    if (moved_ || pthread_getaffinity_np(pthread_self(), sizeof(saved_), &saved_) != 0) {
      return false;
    }
    cpu_set_t others = saved_;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &others) && cpus(c)) CPU_CLR(c, &others);
    }
    if (CPU_COUNT(&others) == 0 || CPU_EQUAL(&others, &saved_)) return false;
    moved_ = pthread_setaffinity_np(pthread_self(), sizeof(others), &others) == 0;
#endif
    return moved_;
  }

 private:
#if defined(__linux__)
  cpu_set_t saved_;
#endif
  bool moved_ = false;
};

// A helper's stay off its caller's CPU: nothing where it started elsewhere or may run on that
// CPU alone (or the CPU is unknown).
class OffCallersCpu {
 public:
  explicit OffCallersCpu(HelperPlacement* where) {
    where->started.store(true, std::memory_order_release);
#if defined(__linux__)
    const int cpu = where->caller_cpu;
    if (cpu < 0 || sched_getcpu() != cpu) return;
    lease_.Leave([cpu](int c) { return c == cpu; });
#endif
  }

 private:
  AffinityLease lease_;
};

// Schedules `helpers` tasks work(*state, h), h in [0, helpers), on d's pool, each off the
// caller's CPU (OffCallersCpu; State has a HelperPlacement `where`), then gives up the
// caller's CPU once if none has started yet.
template <typename State, typename Work>
void ScheduleHelpers(const CpuDevice& d, Index helpers,
                     const std::shared_ptr<State>& state, Work work) {
  if (helpers <= 0) return;
#if defined(__linux__)
  state->where.caller_cpu = sched_getcpu();
#endif
  for (Index h = 0; h < helpers; ++h) {
    d.enqueueNoNotification([state, h, work] {
      OffCallersCpu off(&state->where);
      work(*state, h);
    });
  }
  if (!state->where.started.load(std::memory_order_acquire)) std::this_thread::yield();
}

// Eigen's own pool work (the tensor contractions behind cpu_device.h Gemm: the float products
// of all rows) schedules its tasks on the pool while the caller sleeps on a barrier, and the
// same VMs put two woken pool threads on one CPU: perf sched of a float32 training step at
// 20x128x512x1024 on 2 cores showed the two alternating in 4 ms slices on CPU 0 for 10-14 ms
// while CPU 1 idled, a few times a step. SpreadPool forwards every task to the pool and has it
// claim its CPU first: a task that finds its CPU held by another running task of the same
// product leaves the held CPUs for its run (its affinity without them, restored after), where
// its affinity has another CPU. Placement only: what a task computes does not change. CPUs
// numbered 64 and above are not tracked.
class SpreadPool final : public Eigen::ThreadPoolInterface {
 public:
  explicit SpreadPool(Eigen::ThreadPoolInterface* pool) : pool_(pool) {}
  void Schedule(std::function<void()> fn) override {
    pool_->Schedule(Wrap(std::move(fn)));
  }
  void ScheduleWithHint(std::function<void()> fn, int start, int limit) override {
    pool_->ScheduleWithHint(Wrap(std::move(fn)), start, limit);
  }
  void Cancel() override { pool_->Cancel(); }
  int NumThreads() const override { return pool_->NumThreads(); }
  int CurrentThreadId() const override { return pool_->CurrentThreadId(); }

 private:
  using Held = std::atomic<unsigned long long>;
  // A task's claim of its CPU (bit `mine_` of *held) for its run, and its move off CPUs other
  // tasks hold.
  class Claim {
   public:
    explicit Claim(Held* held) : held_(held) {
      if (TryHold()) return;
      const unsigned long long busy = held_->load(std::memory_order_relaxed);
      if (lease_.Leave([busy](int c) { return c < 64 && ((busy >> c) & 1ull) != 0; })) {
        TryHold();
      }
    }
    ~Claim() {
      if (mine_ >= 0) held_->fetch_and(~(1ull << mine_), std::memory_order_relaxed);
    }
    Claim(const Claim&) = delete;
    Claim& operator=(const Claim&) = delete;

   private:
    // Holds this thread's CPU where no other task does (or where it cannot be tracked).
    bool TryHold() {
#if defined(__linux__)
      const int cpu = sched_getcpu();
      if (cpu < 0 || cpu >= 64) return true;
      const unsigned long long bit = 1ull << cpu;
      if ((held_->fetch_or(bit, std::memory_order_relaxed) & bit) != 0) return false;
      mine_ = cpu;
#endif
      return true;
    }
    Held* held_;
    int mine_ = -1;
    AffinityLease lease_;  // destroyed after ~Claim has released the CPU
  };

  std::function<void()> Wrap(std::function<void()> fn) {
    std::call_once(made_, [this] { held_ = std::make_shared<Held>(0); });
    return [held = held_, fn = std::move(fn)] {
      Claim claim(held.get());
      fn();
    };
  }

  Eigen::ThreadPoolInterface* pool_;
  // The CPUs running tasks now, made at the first task (a product Eigen runs on the calling
  // thread alone schedules none, and costs no allocation); the tasks keep it alive.
  std::once_flag made_;
  std::shared_ptr<Held> held_;
};

// Runs fn(t, b) for every step t in [0, steps) and block b in [0, blocks): the blocks of a step
// in parallel, a step only after every block of the previous one has finished.
//
// A per-step ParallelFor wakes pool threads and waits on a barrier at every step; for the
// small steps of a recurrent loop (a 16-row GEMM slice) that costs as much as the work. Here
// the caller and up to blocks-1 helpers are scheduled once per call. Participant j (the caller
// is 0, helper h is h + 1) owns the blocks b with b % participants == j: at each step it first
// runs its own blocks, so a block's slice of the packed weights stays in the cache of the core
// that ran it at the previous step (CPU_PEERS: oneDNN keeps each thread's units for the whole
// sequence); then any block of the step nobody has claimed yet (its owner has not started, or
// owns more blocks than it has reached), so the loop never waits for a late thread. Items are
// claimed per block with a compare-and-swap of the block's next step, and a step starts once
// every item of the previous one is done (a short spin, then yield). Only running threads
// claim, so the caller alone completes the loop if the pool never runs a helper; helpers that
// start late join at the current step, and exit once the last step is claimed. Which thread
// runs an item never changes what it computes: results are the same bits either way.
struct StepLoopState {
  std::atomic<Index> done{0};  // items finished
  HelperPlacement where;
  std::unique_ptr<std::atomic<Index>[]> next_step;  // per block: its next unclaimed step
  Index steps = 0, blocks = 1, parts = 1;
  const std::function<void(Index, Index)>* fn = nullptr;  // valid while items remain

  // Waits (short spin, then yield) until `n` items are done.
  void WaitDone(Index n) const {
    SpinUntil([&] { return done.load(std::memory_order_acquire) >= n; });
  }
  // Runs block b's step t if nobody has claimed it yet.
  void TryRun(Index t, Index b) {
    Index want = t;
    if (next_step[b].load(std::memory_order_relaxed) != t ||
        !next_step[b].compare_exchange_strong(want, t + 1, std::memory_order_relaxed)) {
      return;
    }
    (*fn)(t, b);
    done.fetch_add(1, std::memory_order_release);
  }
  // Participant j's loop, from the step under way when it starts.
  void Work(Index j) {
    for (Index t = done.load(std::memory_order_acquire) / blocks; t < steps; ++t) {
      WaitDone(t * blocks);
      for (Index b = j; b < blocks; b += parts) TryRun(t, b);
      for (Index k = 1; k < blocks; ++k) TryRun(t, (j + k) % blocks);
    }
  }
};

// threads: at most this many threads run the loop (0: as many as the pool has).
template <typename Fn>
void StepLoop(const CpuDevice& d, Index steps, Index blocks,
              double cost_per_block, Fn&& fn, int threads = 0) {
  if (steps <= 0 || blocks <= 0) return;
  const int pool = std::max(1, d.numThreads());
  const int most = threads > 0 ? std::min(threads, pool) : pool;
  const Index helpers = std::min<Index>(blocks, most) - 1;
  // Too little work per block to be worth another thread: run everything here.
  if (helpers == 0 || cost_per_block < 5000) {
    for (Index t = 0; t < steps; ++t)
      for (Index b = 0; b < blocks; ++b) fn(t, b);
    return;
  }
  const std::function<void(Index, Index)> body = [&fn](Index t, Index b) { fn(t, b); };
  auto state = std::make_shared<StepLoopState>();
  state->steps = steps;
  state->blocks = blocks;
  state->parts = helpers + 1;
  state->next_step.reset(new std::atomic<Index>[blocks]);
  for (Index b = 0; b < blocks; ++b) state->next_step[b].store(0, std::memory_order_relaxed);
  state->fn = &body;
  ScheduleHelpers(d, helpers, state, [](StepLoopState& st, Index h) { st.Work(h + 1); });
  state->Work(0);
  state->WaitDone(steps * blocks);  // every item is claimed; wait for the helpers' last ones
}

// Runs fn(begin, end) over [0, n) in blocks on the caller and d's pool; cost_per_unit in
// cycles per unit. Eigen's parallelFor hands every block to the pool when there are more
// blocks than threads and its caller sleeps on a barrier; on a VM that puts both woken pool
// threads on one CPU, the other CPU stays idle for the whole loop (2 cores, the bf16 input
// projection of a 20x128x512x1024 LSTM: about one call in seven took 5-13 ms longer, perf sched
// showing the two pool threads alternating on CPU 0 while CPU 1 idled). Here the caller runs
// blocks itself beside the helpers: the blocks are one step of StepLoop, on as many threads
// as Eigen's cost model asks for, so a late helper never holds the loop up. The split into
// blocks depends on n, the cost and the number of threads only, with the same thresholds as
// Eigen's cost model: where it asks for one thread, fn(0, n) runs here.
template <typename Fn>
void PoolFor(const CpuDevice& d, Index n, double cost_per_unit, Fn&& fn) {
  if (n <= 0) return;
  // Eigen's TensorCostModel: 100000 cycles to start the loop and per extra thread, blocks of at
  // least 40000 cycles, at most four blocks per thread.
  constexpr double kStartup = 100000, kPerThread = 100000, kTaskSize = 40000;
  const int threads = std::max(1, d.numThreads());
  const double cost = std::max(cost_per_unit, 1e-6), total = double(n) * cost;
  const double by_total = std::max(1.0, (total - kStartup) / kPerThread + 0.9);
  const int want = static_cast<int>(std::min<double>(threads, by_total));
  if (n == 1 || want <= 1) {
    fn(Index(0), n);
    return;
  }
  const Index by_cost = static_cast<Index>(std::ceil(kTaskSize / cost));
  const Index block =
      std::min(n, std::max<Index>({1, (n + 4 * want - 1) / (4 * want), by_cost}));
  const Index blocks = (n + block - 1) / block;
  StepLoop(
      d, 1, blocks, double(block) * cost,
      [&](Index, Index i) { fn(i * block, std::min(n, (i + 1) * block)); }, want);
}

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_ENGINE_POOL_HELPERS_H_
