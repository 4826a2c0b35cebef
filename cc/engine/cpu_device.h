// CPU primitives of the engine: row-major GEMM, conversions and zeroing on the caller's
// Eigen thread pool. No TensorFlow includes: a kernel passes in
// ctx->eigen_device<Eigen::ThreadPoolDevice>() (TF's intra-op pool); the engine never
// starts threads of its own.
#ifndef TF_RNN_OPS_CC_ENGINE_CPU_DEVICE_H_
#define TF_RNN_OPS_CC_ENGINE_CPU_DEVICE_H_

#ifndef EIGEN_USE_THREADS
#define EIGEN_USE_THREADS
#endif
#include <cstdint>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <type_traits>

#include "unsupported/Eigen/CXX11/Tensor"

namespace tfrnn {

using CpuDevice = Eigen::ThreadPoolDevice;
static_assert(std::is_same<Eigen::Index, std::ptrdiff_t>::value, "Index");
using Index = Eigen::Index;

template <typename A>
using RowMajorMap = Eigen::TensorMap<Eigen::Tensor<A, 2, Eigen::RowMajor, Index>,
                                     Eigen::Unaligned>;
template <typename A>
using ConstRowMajorMap =
    Eigen::TensorMap<Eigen::Tensor<const A, 2, Eigen::RowMajor, Index>, Eigen::Unaligned>;
template <typename A>
using FlatMap = Eigen::TensorMap<Eigen::Tensor<A, 1, Eigen::RowMajor, Index>, Eigen::Unaligned>;
template <typename A>
using ConstFlatMap =
    Eigen::TensorMap<Eigen::Tensor<const A, 1, Eigen::RowMajor, Index>, Eigen::Unaligned>;

// Eigen views of raw buffers for the pointwise and per-block code.
template <typename A>
using Vec = Eigen::Map<Eigen::Array<A, Eigen::Dynamic, 1>>;
template <typename A>
using CVec = Eigen::Map<const Eigen::Array<A, Eigen::Dynamic, 1>>;
template <typename A>
using MatRM = Eigen::Matrix<A, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Fixed-width (W > 0) or dynamic (W = Eigen::Dynamic) views for Chunked().
template <typename A, int W>
using VecN = Eigen::Map<Eigen::Array<A, W, 1>>;
template <typename A, int W>
using CVecN = Eigen::Map<const Eigen::Array<A, W, 1>>;

// Calls fn(width_tag, c, n) over [0, len) in chunks of one SIMD packet, then a shorter tail:
// width_tag is std::integral_constant<int, W> with W the packet size, or Eigen::Dynamic for
// the tail. A dynamic-size Eigen map whose destination is not packet-aligned runs its first
// and last elements through the scalar path (libm expf/tanhf for logistic and tanh, several
// times slower); fixed one-packet maps always use unaligned packet loads and stores, and
// the result of an element does not depend on its address.
template <typename A, typename Fn>
EIGEN_ALWAYS_INLINE void Chunked(Index len, Fn&& fn) {
  constexpr int P = Eigen::internal::unpacket_traits<
      typename Eigen::internal::packet_traits<A>::type>::size;
  Index c = 0;
  for (; c + P <= len; c += P) fn(std::integral_constant<int, P>(), c, Index(P));
  if (c < len) fn(std::integral_constant<int, Eigen::Dynamic>(), c, len - c);
}
using OStride = Eigen::OuterStride<>;

// Fills n elements with zero: on the calling thread up to kInlineZero elements (a pool
// expression costs microseconds of set-up, more than zeroing a step's rows), else on the pool.
constexpr Index kInlineZero = Index(1) << 16;
template <typename A>
void Zero(const CpuDevice& d, A* p, Index n) {
  if (n <= 0) return;
  if (n <= kInlineZero) {
    std::fill_n(p, n, A(0));
    return;
  }
  FlatMap<A>(p, n).device(d) = FlatMap<A>(p, n).constant(A(0));
}

// Converts n elements (e.g. half -> float on input, float -> half on output).
template <typename From, typename To>
void Convert(const CpuDevice& d, const From* src, To* dst, Index n) {
  if (n <= 0) return;
  FlatMap<To>(dst, n).device(d) = ConstFlatMap<From>(src, n).template cast<To>();
}

// Row-major GEMM:  C[m,n] (+)= op(A) · op(B)
//   op(A) is [m,k]: A stored [m,k], or [k,m] when trans_a.
//   op(B) is [k,n]: B stored [k,n], or [n,k] when trans_b.
// All matrices are dense (leading dimension = row length).
template <typename A>
void Gemm(const CpuDevice& d, bool trans_a, bool trans_b, Index m, Index n, Index k,
          const A* a, const A* b, A* c, bool accumulate) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    if (!accumulate) Zero(d, c, m * n);
    return;
  }
  ConstRowMajorMap<A> am(a, trans_a ? k : m, trans_a ? m : k);
  ConstRowMajorMap<A> bm(b, trans_b ? n : k, trans_b ? k : n);
  RowMajorMap<A> cm(c, m, n);
  Eigen::array<Eigen::IndexPair<Index>, 1> dims = {
      Eigen::IndexPair<Index>(trans_a ? 0 : 1, trans_b ? 1 : 0)};
  if (accumulate) {
    cm.device(d) += am.contract(bm, dims);
  } else {
    cm.device(d) = am.contract(bm, dims);
  }
}

// Runs fn(begin, end) over [0, n) on the pool; cost_per_unit is in cycles per unit.
template <typename Fn>
void ParallelFor(const CpuDevice& d, Index n, double cost_per_unit, Fn&& fn) {
  if (n <= 0) return;
  d.parallelFor(n, Eigen::TensorOpCost(0, 0, cost_per_unit),
                [&fn](Index begin, Index end) { fn(begin, end); });
}

// Pointwise passes of a single step over `rows` rows of `width` elements: fn(r0, r1) on the
// calling thread up to kInlineElems elements (waking a pool thread costs more than a few
// thousand vectorised elements: a single-step op of N = 32, H = 256 spent most of its time on
// it), else split over the pool by rows.
constexpr Index kInlineElems = Index(1) << 15;
template <typename Fn>
void PointwiseRows(const CpuDevice& d, Index rows, Index width, double cost_per_elem,
                   Fn&& fn) {
  if (rows <= 0) return;
  if (rows * width <= kInlineElems || d.numThreads() <= 1) {
    fn(Index(0), rows);
    return;
  }
  ParallelFor(d, rows, cost_per_elem * width, fn);
}

// Runs fn(t, b) for every step t in [0, steps) and block b in [0, blocks): the blocks of a step
// in parallel, a step only after every block of the previous one has finished.
//
// A per-step ParallelFor wakes pool threads and waits on a barrier at every step; for the
// small steps of a recurrent loop (a 16-row GEMM slice) that costs as much as the work. Here
// the caller and up to blocks-1 helpers, scheduled once per call, claim work items
// i = t·blocks + b in order from an atomic counter and run them once every item of step t-1
// is done (short spin, then yield). An item is only claimed by a running thread, so the
// lowest unfinished item is always runnable by its owner: no deadlock, and the loop completes
// on the caller alone if the pool never runs a helper. Helpers that start after the last item
// was claimed exit at once; the shared state outlives them.
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

struct StepLoopState {
  std::atomic<Index> next{0};  // next item to claim
  std::atomic<Index> done{0};  // items finished
  Index total = 0, blocks = 1;
  const std::function<void(Index, Index)>* fn = nullptr;  // valid while items remain

  // Waits (short spin, then yield) until `n` items are done.
  void WaitDone(Index n) const {
    SpinUntil([&] { return done.load(std::memory_order_acquire) >= n; });
  }
  // Claims and runs items until none are left.
  void Work() {
    for (;;) {
      const Index i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= total) return;
      const Index t = i / blocks, need = t * blocks;
      WaitDone(need);
      (*fn)(t, i - need);
      done.fetch_add(1, std::memory_order_release);
    }
  }
};

template <typename Fn>
void StepLoop(const CpuDevice& d, Index steps, Index blocks, double cost_per_block, Fn&& fn) {
  if (steps <= 0 || blocks <= 0) return;
  const Index helpers = std::min<Index>(blocks, std::max(1, d.numThreads())) - 1;
  // Too little work per block to be worth another thread: run everything here.
  if (helpers == 0 || cost_per_block < 5000) {
    for (Index t = 0; t < steps; ++t)
      for (Index b = 0; b < blocks; ++b) fn(t, b);
    return;
  }
  const std::function<void(Index, Index)> body = [&fn](Index t, Index b) { fn(t, b); };
  auto state = std::make_shared<StepLoopState>();
  state->total = steps * blocks;
  state->blocks = blocks;
  state->fn = &body;
  for (Index h = 0; h < helpers; ++h) d.enqueueNoNotification([state] { state->Work(); });
  state->Work();
  state->WaitDone(state->total);  // every item is claimed; wait for the helpers' last ones
}

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
  for (int h = 0; h < helpers; ++h) d.enqueueNoNotification([state] { state->Work(); });
  for (Index s = 0; s < steps; ++s) {
    const Index f = feed(s);
    if (f >= 0 && f < tasks) state->Feed(f);
    chain(s);
    state->chain_done.store(s + 1, std::memory_order_release);
  }
  state->Work();
  SpinUntil([&] { return state->finished.load(std::memory_order_acquire) >= tasks; });
}

// The two uses of ChainWithSideWork, with side work in chunks of about 128 rows of `batch`
// rows per step (few enough tasks, and a short tail once the chain ends).
inline Index ChainChunkSteps(Index batch) { return std::max<Index>(1, 128 / batch); }

// Forward: chain(t) for t in [0, steps·phases) (step t / phases), each step after
// ahead(s0, s1) has run for the chunk of steps [s0, s1) that holds it.
template <typename Chain, typename Ahead>
void ChainWithChunksAhead(const CpuDevice& d, Index steps, Index phases, Index batch,
                          int helpers, Chain&& chain, Ahead&& ahead) {
  const Index C = ChainChunkSteps(batch), chunks = (steps + C - 1) / C;
  ChainWithSideWork(
      d, steps * phases, chunks, helpers, chain, [&](Index t) { return t / phases / C; },
      [](Index) { return Index(0); }, [](Index) { return Index(-1); },
      [&](Index k) { ahead(k * C, std::min(steps, (k + 1) * C)); });
}

// Backward: chain(i) for i in [0, steps] (i = steps: the step after the last one, e.g. the
// gradient of h0), the chain visiting steps in descending order, i -> steps - 1 - i. Per chunk
// of finished steps [s0, s1): panel(s0, s1, c0, c1, first) for each column panel [c0, c1) of
// `cols` columns, after the same panel of the previous chunk (first: the panel's first chunk;
// each panel's sum formed in a fixed order), and rows(s0, s1).
template <typename Chain, typename Panel, typename Rows>
void ChainWithChunkGrads(const CpuDevice& d, Index steps, Index batch, Index cols, int helpers,
                         Chain&& chain, Panel&& panel, Rows&& rows) {
  const Index C = ChainChunkSteps(batch), chunks = (steps + C - 1) / C;
  const Index width = ((cols + helpers) / (helpers + 1) + 15) / 16 * 16;  // whole packets
  const Index P = (cols + width - 1) / width;
  ChainWithSideWork(
      d, steps + 1, chunks * (P + 1), helpers, chain, [](Index) { return Index(-1); },
      [&](Index i) { return std::min(steps, (i / (P + 1) + 1) * C); },
      [&](Index i) { return i % (P + 1) < P && i >= P + 1 ? i - (P + 1) : Index(-1); },
      [&](Index i) {
        const Index k = i / (P + 1), j = i % (P + 1);
        const Index s0 = std::max<Index>(0, steps - (k + 1) * C), s1 = steps - k * C;
        if (j == P) {
          rows(s0, s1);
        } else {
          panel(s0, s1, j * width, std::min(cols, (j + 1) * width), k == 0);
        }
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

// The accumulator of the sums over T·B rows (bias and peephole gradients): double, so that a
// float32 sum of thousands of rows is rounded once, at the end (a float accumulator's error
// grows with the number of rows; stock's per-step batch reductions grow with T).
using SumAcc = Eigen::Array<double, Eigen::Dynamic, 1>;

// out[j] = Σ_r in[r, j] over a dense row-major [rows, cols] matrix. Columns are split into
// chunks across the pool; each chunk is summed row by row (contiguous, vectorised) into a
// SumAcc, so the result does not depend on the number of threads.
template <typename A>
void ColumnSum(const CpuDevice& d, const A* in, Index rows, Index cols, A* out) {
  constexpr Index kChunk = 256;
  const Index chunks = (cols + kChunk - 1) / kChunk;
  ParallelFor(d, chunks, static_cast<double>(rows) * kChunk, [&](Index c0, Index c1) {
    SumAcc acc(kChunk);
    for (Index c = c0; c < c1; ++c) {
      const Index j0 = c * kChunk, len = std::min(kChunk, cols - j0);
      auto a = acc.head(len);
      a.setZero();
      for (Index r = 0; r < rows; ++r) a += CVec<A>(in + r * cols + j0, len).template cast<double>();
      Vec<A>(out + j0, len) = a.template cast<A>();
    }
  });
}

// Width of the hidden-unit blocks a step is split into: one task owns all gate columns of its
// units, so its slice of the recurrent GEMM and its pointwise pass need no other task's
// results. A multiple of 16 (whole SIMD registers), one block per thread when possible.
inline Index UnitBlock(const CpuDevice& d, Index H) {
  const Index threads = std::max(1, d.numThreads());
  Index u = (H + threads - 1) / threads;
  u = (u + 15) / 16 * 16;
  return std::max<Index>(1, std::min(std::max<Index>(16, u), H));
}

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_ENGINE_CPU_DEVICE_H_
