// The backward's weight gradients from the gate gradients (rnn_cpu_backward.cc): dM = dgᵀ·X
// for a weight M [KH, m] of m-wide inputs X, or with weights_xw dM = Xᵀ·dg for M [m, KH], on
// the pool (WeightGrad, WeightGradCols, SharedWeightGrads) or a column panel on the calling
// thread (WeightGradPanel), and h_prev's rows in their parts (HprevParts).
#ifndef TF_RNN_OPS_CC_ENGINE_WEIGHT_GRADS_H_
#define TF_RNN_OPS_CC_ENGINE_WEIGHT_GRADS_H_

#include <algorithm>
#include <type_traits>

#include "cc/engine/bf16_pool_gemm.h"
#include "cc/engine/packed_gemm.h"
#include "cc/engine/rnn_cpu_common.h"

namespace tfrnn {
namespace rnn_cpu {

// Calls fn(h, r, n) for the parts of rows [r0, r0 + rows) of h_prev (at least one call): n
// rows from r0 + r on, stored contiguously from h (the reserve's copy, or with ly.hseq given
// h0's rows and then the layer's own outputs, one step earlier).
template <typename A, typename Fn>
void HprevParts(const RnnSpec& s, const Layer<A>& ly, const A* h0, Index r0, Index rows,
                Fn&& fn) {
  const Index B = s.B, Hs = RnnHs(s);
  if (ly.hseq == nullptr) {
    fn(static_cast<const A*>(ly.hprev + r0 * Hs), Index(0), rows);
    return;
  }
  const Index lead = r0 < B ? std::min(B - r0, rows) : 0;
  if (lead > 0 || rows == 0) fn(h0 + r0 * Hs, Index(0), lead);
  if (rows > lead) fn(ly.hseq + (r0 + lead - B) * Hs, lead, rows - lead);
}

// The gradient of one weight matrix M of m-wide inputs X from n rows of gate gradients dg
// (row stride KH): dM (+)= dgᵀ·X with M stored [KH, m], or with weights_xw dM (+)= Xᵀ·dg with M
// stored [m, KH]. WeightGradPanel: gate columns [c0, c0 + len) on the calling thread (dg points
// at column c0); WeightGrad: all KH columns on the pool.
// same_dg: dg is the panel of this thread's previous WeightGradPanel call (its packing or bf16
// conversion is reused). Without bf16 products the panels run on the packed kernels
// (packed::GemmTN), faster than Eigen's product (2 threads, the pipelined backward: AVX2 Zen 3
// 3-7 % at 50x32x128x512; AVX-512 Zen 5 2-4 % at 50x32x128x512, 200x16x64x128 and
// 100x64x256x256, level at H = 300, 500 and 600; docs/PERFORMANCE_AVX2.md,
// bench/results/cpu_history_2.md).
template <typename A>
void WeightGradPanel(const RnnSpec& s, bool b16, Index m, Index len, Index n, const A* dg,
                     const A* X, A* dM, Index c0, bool acc, bool same_dg = false) {
  const Index KH = RnnK(s) * s.H;
  // dM [m, KH] = Xᵀ · dg (weights_xw) or dM [KH, m] = dgᵀ · X: either C = Aᵀ · B over n rows.
  const bf16::Reuse reuse =
      !same_dg ? bf16::kReuseNone : s.weights_xw ? bf16::kReuseB : bf16::kReuseA;
  auto product = [&](Index rows, Index cols, const A* a, Index lda, const A* b, Index ldb,
                     A* out, Index ldc) {
    if (!b16) {
      packed::GemmTN<A>(rows, cols, n, a, lda, b, ldb, out, ldc, acc, reuse);
    } else {
      GemmB16Serial<A>(b16, true, false, rows, cols, n, a, lda, b, ldb, out, ldc, acc, reuse);
    }
  };
  if (s.weights_xw) {
    product(m, len, X, m, dg, KH, dM + c0, KH);
  } else {
    product(len, m, dg, KH, X, m, dM + c0 * m, m);
  }
}
// dW = xᵀ·dg and dR = h_prevᵀ·dg (weights_xw, no masks) as bf16 products that pack dg once
// for both (bf16::GemmLargeShared; dg_sums as WeightGrad's), where they fit: false, and
// nothing computed, where not (then WeightGrad for each).
template <typename A>
bool SharedWeightGrads(const CpuDevice& d, const RnnSpec& s, const Layer<A>& ly, const A* h0,
                       Index TB, const A* x, const A* dg, double* dg_sums) {
  if constexpr (std::is_same<A, float>::value) {
    bf16::SharedProduct p[2];
    p[0].m = p[0].lda = ly.in;
    p[0].a[0] = x;
    p[0].rows[0] = TB;
    p[0].c = ly.dW;
    p[1].m = p[1].lda = RnnHs(s);
    p[1].c = ly.dR;
    int parts = 0;
    HprevParts(s, ly, h0, 0, TB, [&](const A* hp, Index, Index n) {
      if (parts < 2) {
        p[1].a[parts] = hp;
        p[1].rows[parts] = n;
      }
      ++parts;
    });
    if (parts > 2 || !bf16::SharedFits(TB, p, 2)) return false;
    bf16::GemmLargeShared(d, RnnK(s) * s.H, TB, dg, p, 2, dg_sums);
    return true;
  }
  return false;
}
// dg_sums (nullable, bf16 products only): dg's column sums added (GemmB16's sums).
template <typename A>
void WeightGrad(const CpuDevice& d, const RnnSpec& s, bool b16, Index m, Index n, const A* dg,
                const A* X, A* dM, bool acc, double* dg_sums = nullptr) {
  const Index KH = RnnK(s) * s.H;
  if (s.weights_xw) {
    GemmB16<A>(d, b16, true, false, m, KH, n, X, dg, dM, acc, nullptr, dg_sums);
  } else {
    GemmB16<A>(d, b16, true, false, KH, m, n, dg, X, dM, acc, dg_sums, nullptr);
  }
}

// weights_xw: the gradient of the columns [c0, c0 + len) of M [m, KH] alone (one gate's
// block), dM[:, c0:c0+len] = Xᵀ·dg with dg at column c0 of rows of stride KH, in column
// panels on the pool.
template <typename A>
void WeightGradCols(const CpuDevice& d, const RnnSpec& s, bool b16, Index m, Index n,
                    const A* dg, const A* X, A* dM, Index c0, Index len) {
  constexpr Index kCols = 64;
  const Index panels = (len + kCols - 1) / kCols;
  ParallelFor(d, panels, 2.0 * m * n * kCols, [&](Index p0, Index p1) {
    for (Index p = p0; p < p1; ++p) {
      const Index a = p * kCols, w = std::min(kCols, len - a);
      WeightGradPanel<A>(s, b16, m, w, n, dg + a, X, dM, c0 + a, false);
    }
  });
}

}  // namespace rnn_cpu
}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_ENGINE_WEIGHT_GRADS_H_
