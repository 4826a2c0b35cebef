// How often a two-block StepLoop (cc/engine/pool_helpers.h) runs serially: the caller and one
// helper of an Eigen pool of two threads each claim one block of busy work, as the batch
// blocks of a short inference call do. Per process it prints the fastest and median call and
// in how many calls the helper ran on its caller's CPU or not at all; run it in many processes:
//   for i in $(seq 20); do bazel-bin/bench/placement_probe 100000; done
// A process whose median is near twice its fastest ran serially (docs/PERFORMANCE.md, "Zen 4
// again": HelperPlacement). No TensorFlow; any x86-64 CPU.
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "cc/engine/pool_helpers.h"
#include "unsupported/Eigen/CXX11/ThreadPool"

namespace {

using Clock = std::chrono::steady_clock;

double Micros(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

double Busy(long n) {
  volatile double x = 1;
  for (long i = 0; i < n; ++i) x = x * 1.0000001 + 1e-9;
  return x;
}

}  // namespace

int main(int argc, char** argv) {
  const long work = argc > 1 ? std::atol(argv[1]) : 100000;  // ~0.4 ms a block on Zen 4
  const int calls = argc > 2 ? std::atoi(argv[2]) : 40;
  if (work < 1 || calls < 1) {
    std::fprintf(stderr, "usage: placement_probe [work > 0] [calls > 0]\n");
    return 2;
  }
  Eigen::ThreadPool pool(2);
  Eigen::ThreadPoolDevice device(&pool, 2);
  std::vector<double> times;
  int same_cpu = 0, caller_both = 0;
  for (int c = 0; c < calls + 5; ++c) {  // five calls to warm up
    const int caller_cpu = sched_getcpu();
    std::atomic<int> helper_cpu{-1};
    const std::thread::id caller = std::this_thread::get_id();
    const auto t0 = Clock::now();
    tfrnn::StepLoop(device, 1, 2, 1e9, [&](tfrnn::Index, tfrnn::Index) {
      if (std::this_thread::get_id() != caller) helper_cpu = sched_getcpu();
      Busy(work);
    });
    const double t = Micros(t0, Clock::now());
    std::this_thread::sleep_for(std::chrono::microseconds(500));  // the pool goes idle
    if (c < 5) continue;
    times.push_back(t);
    if (helper_cpu.load() == caller_cpu) ++same_cpu;
    if (helper_cpu.load() < 0) ++caller_both;
  }
  std::sort(times.begin(), times.end());
  std::printf("fastest %.0f median %.0f us | of %d calls: the helper ran its block on the "
              "caller's CPU in %d, the caller ran both blocks in %d\n",
              times.front(), times[times.size() / 2], calls, same_cpu, caller_both);
  return 0;
}
