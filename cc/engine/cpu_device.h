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
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <type_traits>

#include "unsupported/Eigen/CXX11/Tensor"
#include "cc/engine/pool_helpers.h"

namespace tfrnn {

// CpuDevice and Index: pool_helpers.h.

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

// Calls fn(width_tag, c, n) over [0, len) in chunks of one SIMD packet, then at most one chunk
// of half a packet and one of a quarter (where those are at least 4 elements), then a shorter
// tail: width_tag is std::integral_constant<int, W> with W the chunk's width, or
// Eigen::Dynamic for the tail. A dynamic-size Eigen map whose destination is not packet-aligned
// runs its first and last elements through the scalar path (libm expf/tanhf for logistic and
// tanh, several times slower); fixed-width maps always use unaligned packet loads and stores
// (of a half or quarter packet for the narrower chunks: the same operations lane for lane), so
// a width that is a multiple of 4 has no scalar tail, and the result of an element does not
// depend on its address. fn should be an inlined lambda (TFRNN_INLINE_LAMBDA): a call per
// chunk reloads the lambda's captures and constants every 16 elements.
#define TFRNN_INLINE_LAMBDA __attribute__((always_inline))
template <typename A, typename Fn>
EIGEN_ALWAYS_INLINE void Chunked(Index len, Fn&& fn) {
  constexpr int P = Eigen::internal::unpacket_traits<
      typename Eigen::internal::packet_traits<A>::type>::size;
  Index c = 0;
  for (; c + P <= len; c += P) fn(std::integral_constant<int, P>(), c, Index(P));
  if constexpr (P / 2 >= 4) {
    if (c + P / 2 <= len) {
      fn(std::integral_constant<int, P / 2>(), c, Index(P / 2));
      c += P / 2;
    }
  }
  if constexpr (P / 4 >= 4) {
    if (c + P / 4 <= len) {
      fn(std::integral_constant<int, P / 4>(), c, Index(P / 4));
      c += P / 4;
    }
  }
  if (c < len) fn(std::integral_constant<int, Eigen::Dynamic>(), c, len - c);
}
using OStride = Eigen::OuterStride<>;

// Whether ParallelFor hands its blocks to Eigen's parallelFor instead of PoolFor
// (TF_RNN_OPS_CPU_PARALLEL_FOR=eigen, docs/ENVIRONMENT.md: for measurements); read once per
// process.
inline bool EigenParallelFor() {
  static const bool eigen = [] {
    const char* e = std::getenv("TF_RNN_OPS_CPU_PARALLEL_FOR");
    return e != nullptr && std::strcmp(e, "eigen") == 0;
  }();
  return eigen;
}

// Runs fn(begin, end) over [0, n) on the caller and the pool (pool_helpers.h PoolFor);
// cost_per_unit is in cycles per unit.
template <typename Fn>
void ParallelFor(const CpuDevice& d, Index n, double cost_per_unit, Fn&& fn) {
  if (EigenParallelFor()) {
    if (n <= 0) return;
    d.parallelFor(n, Eigen::TensorOpCost(0, 0, cost_per_unit),
                  [&fn](Index begin, Index end) { fn(begin, end); });
    return;
  }
  PoolFor(d, n, cost_per_unit, fn);
}

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
  ParallelFor(d, n, 1.0, [p](Index i0, Index i1) { std::fill(p + i0, p + i1, A(0)); });
}

// Converts n elements (e.g. half -> float on input, float -> half on output): on the calling
// thread up to kInlineConvert elements (a pool round costs tens of microseconds, more than
// converting them here), else on the pool.
constexpr Index kInlineConvert = Index(1) << 19;
template <typename From, typename To>
void Convert(const CpuDevice& d, const From* src, To* dst, Index n) {
  if (n <= 0) return;
  if (n <= kInlineConvert || d.numThreads() <= 1) {
    FlatMap<To>(dst, n) = ConstFlatMap<From>(src, n).template cast<To>();
    return;
  }
  ParallelFor(d, n, 2.0, [src, dst](Index i0, Index i1) {
    FlatMap<To>(dst + i0, i1 - i0) = ConstFlatMap<From>(src + i0, i1 - i0).template cast<To>();
  });
}

// out[i] = a[i] · b[i] for i in [0, n) (out may be a), on the pool.
template <typename A>
void MulInto(const CpuDevice& d, const A* a, const A* b, A* out, Index n) {
  ParallelFor(d, n, 2.0, [a, b, out](Index i0, Index i1) {
    Vec<A>(out + i0, i1 - i0) = CVec<A>(a + i0, i1 - i0) * CVec<A>(b + i0, i1 - i0);
  });
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
  // Eigen's tasks spread over CPUs (pool_helpers.h SpreadPool) unless the old loops are asked
  // for (EigenParallelFor).
  SpreadPool spread(d.getPool());
  const CpuDevice sd(&spread, d.numThreads(), d.allocator());
  const CpuDevice& dev = EigenParallelFor() ? d : sd;
  if (accumulate) {
    cm.device(dev) += am.contract(bm, dims);
  } else {
    cm.device(dev) = am.contract(bm, dims);
  }
}

// Pointwise passes of a single step over `rows` rows of `width` elements: fn(r0, r1) on the
// calling thread up to kInlineElems elements (waking a pool thread costs more than a few
// thousand vectorised elements: a single-step op of B = 32, H = 256 spent most of its time on
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

// The accumulator of the sums over T·B rows (bias and peephole gradients): double, so that a
// float32 sum of thousands of rows is rounded once, at the end (a float accumulator's error
// grows with the number of rows; stock's per-step batch reductions grow with T).
using SumAcc = Eigen::Array<double, Eigen::Dynamic, 1>;

// out[j] = Σ_r in[r, j] over a dense row-major [rows, cols] matrix. Columns are split into
// one chunk per thread (at least 256 columns); each chunk is summed row by row (contiguous,
// vectorised) into a SumAcc, so every column is the same sum in row order, and the result
// does not depend on the number of threads. Wide chunks read long runs of each row (one core,
// 2560 rows of 3112 columns: 4.9-6.1 ms in chunks of 256 columns, 2.7-2.8 ms in one chunk).
template <typename A>
void ColumnSum(const CpuDevice& d, const A* in, Index rows, Index cols, A* out) {
  const Index threads = std::max(1, d.numThreads());
  const Index chunk = std::max<Index>(256, ((cols + threads - 1) / threads + 15) / 16 * 16);
  const Index chunks = (cols + chunk - 1) / chunk;
  ParallelFor(d, chunks, static_cast<double>(rows) * chunk, [&](Index c0, Index c1) {
    SumAcc acc(chunk);
    for (Index c = c0; c < c1; ++c) {
      const Index j0 = c * chunk, len = std::min(chunk, cols - j0);
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

// A step's split of H units into n blocks: block b is [Start(b), Start(b) + Len(b)), every
// block U units but the last, which takes the rest (fewer or more). U is a multiple of 16
// (blocks start on whole registers and whole bf16 pair words). With one block per thread, a
// step lasts as long as its largest block: U = UnitBlock rounds H / threads up, which can leave
// the last block much shorter (H = 200 on 2 threads: 112 and 88 units, the first thread's step
// 27 % longer than the second's); rounding down to a multiple of 16 and giving the rest to the
// last block (96 and 104) is chosen where its largest block is smaller.
struct UnitBlocks {
  Index U = 1, n = 1, H = 0;
  Index Start(Index b) const { return b * U; }
  Index Len(Index b) const { return b + 1 < n ? U : H - b * U; }
};
inline UnitBlocks UnitBlocksOf(const CpuDevice& d, Index H, bool one_block = false) {
  if (one_block || H <= 0) return UnitBlocks{std::max<Index>(1, H), 1, H};
  const Index threads = std::max(1, d.numThreads());
  const Index up = UnitBlock(d, H), down = H / threads / 16 * 16;
  if (threads > 1 && down >= 16 && down < up && H - (threads - 1) * down < up) {
    return UnitBlocks{down, threads, H};
  }
  return UnitBlocks{up, (H + up - 1) / up, H};
}

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_ENGINE_CPU_DEVICE_H_
