// How the engine's loops put work on the caller's pool: waiting (SpinUntil), the helpers'
// placement off their caller's CPU (HelperPlacement, OffCallersCpu, ScheduleHelpers), Eigen's
// tasks spread over CPUs (SpreadPool) and PoolFor, the parallel loop over a range behind
// cpu_device.h's ParallelFor. No TensorFlow includes; the engine never starts threads of its
// own.
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
#include <thread>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

#include "unsupported/Eigen/CXX11/Tensor"

namespace tfrnn {

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
void ScheduleHelpers(const Eigen::ThreadPoolDevice& d, Eigen::Index helpers,
                     const std::shared_ptr<State>& state, Work work) {
  if (helpers <= 0) return;
#if defined(__linux__)
  state->where.caller_cpu = sched_getcpu();
#endif
  for (Eigen::Index h = 0; h < helpers; ++h) {
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
  explicit SpreadPool(Eigen::ThreadPoolInterface* pool)
      : pool_(pool), held_(std::make_shared<std::atomic<unsigned long long>>(0)) {}
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

  std::function<void()> Wrap(std::function<void()> fn) const {
    return [held = held_, fn = std::move(fn)] {
      Claim claim(held.get());
      fn();
    };
  }

  Eigen::ThreadPoolInterface* pool_;
  std::shared_ptr<Held> held_;  // the CPUs running tasks now; tasks keep it alive
};

// Runs fn(begin, end) over [0, n) in blocks on the caller and d's pool; cost_per_unit in
// cycles per unit. Eigen's parallelFor hands every block to the pool when there are more
// blocks than threads and its caller sleeps on a barrier; on a VM that puts both woken pool
// threads on one CPU, the other CPU stays idle for the whole loop (2 cores, the bf16 input
// projection of a 20x128x512x1024 LSTM: about one call in seven took 5-13 ms longer, perf sched
// showing the two pool threads alternating on CPU 0 while CPU 1 idled). Here the caller runs
// blocks itself beside at most threads - 1 helpers, each off the caller's CPU
// (ScheduleHelpers), and blocks are claimed in order by running threads only, so a late
// helper never holds the loop up. The split into blocks depends on n, the cost and the number
// of threads only, the same thresholds as Eigen's cost model: where it asks for one thread,
// fn(0, n) runs here.
struct PoolForState {
  std::atomic<Eigen::Index> next{0}, done{0};
  HelperPlacement where;
  Eigen::Index n = 0, block = 1, blocks = 0;
  // Valid while blocks remain unclaimed.
  const std::function<void(Eigen::Index, Eigen::Index)>* fn = nullptr;
  void Work() {
    for (Eigen::Index i = next.fetch_add(1, std::memory_order_relaxed); i < blocks;
         i = next.fetch_add(1, std::memory_order_relaxed)) {
      (*fn)(i * block, std::min(n, (i + 1) * block));
      done.fetch_add(1, std::memory_order_release);
    }
  }
};

template <typename Fn>
void PoolFor(const Eigen::ThreadPoolDevice& d, Eigen::Index n, double cost_per_unit, Fn&& fn) {
  if (n <= 0) return;
  // Eigen's TensorCostModel: 100000 cycles to start the loop and per extra thread, blocks of at
  // least 40000 cycles, at most four blocks per thread.
  constexpr double kStartup = 100000, kPerThread = 100000, kTaskSize = 40000;
  const int threads = std::max(1, d.numThreads());
  const double cost = std::max(cost_per_unit, 1e-6), total = double(n) * cost;
  const double by_total = std::max(1.0, (total - kStartup) / kPerThread + 0.9);
  const int want = static_cast<int>(std::min<double>(threads, by_total));
  if (n == 1 || want <= 1) {
    fn(Eigen::Index(0), n);
    return;
  }
  const Eigen::Index by_cost = static_cast<Eigen::Index>(std::ceil(kTaskSize / cost));
  const Eigen::Index block =
      std::min(n, std::max<Eigen::Index>({1, (n + 4 * want - 1) / (4 * want), by_cost}));
  const Eigen::Index blocks = (n + block - 1) / block;
  if (blocks <= 1) {
    fn(Eigen::Index(0), n);
    return;
  }
  const std::function<void(Eigen::Index, Eigen::Index)> body =
      [&fn](Eigen::Index b, Eigen::Index e) { fn(b, e); };
  auto state = std::make_shared<PoolForState>();
  state->n = n;
  state->block = block;
  state->blocks = blocks;
  state->fn = &body;
  ScheduleHelpers(d, std::min<Eigen::Index>(want, blocks) - 1, state,
                  [](PoolForState& st, Eigen::Index) { st.Work(); });
  state->Work();
  SpinUntil([&] { return state->done.load(std::memory_order_acquire) >= blocks; });
}

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_ENGINE_POOL_HELPERS_H_
