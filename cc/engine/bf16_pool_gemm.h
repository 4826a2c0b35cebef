// The bf16 products of whole operands on the pool (bf16_gemm.h's kernels): GemmLarge, one
// product C (+)= op(A) · op(B) in slabs of either operand, and GemmLargeShared, several
// products of transposed A's that multiply one B (the LSTM's dW = xᵀ·dg and dR = hᵀ·dg in the
// Keras layout), packing each slab of B once for all of them.
#ifndef TF_RNN_OPS_CC_ENGINE_BF16_POOL_GEMM_H_
#define TF_RNN_OPS_CC_ENGINE_BF16_POOL_GEMM_H_

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <type_traits>

#include "cc/engine/bf16_gemm.h"
#include "cc/engine/cpu_device.h"
#include "cc/engine/types.h"

namespace tfrnn {
namespace bf16 {

// One of GemmLargeShared's products: C[m, n] (+)= Aᵀ · B for A [k, m] stored in up to two
// parts of consecutive rows (part p: rows[p] rows from a[p], row stride lda; the first part's
// rows even, so that no pair of k's straddles the parts).
struct SharedProduct {
  Index m = 0, lda = 0;
  const float* a[2] = {nullptr, nullptr};
  Index rows[2] = {0, 0};
  float* c = nullptr;
  bool accumulate = false;
};

#if TFRNN_BF16_KERNELS

// C[m, n] (+)= op(A) · op(B) as Gemm() of cpu_device.h (dense, ta: A stored [k, m], tb: B
// stored [n, k]), both operands rounded to bf16, on the pool, in slabs: per slab of A's rows,
// the rows converted to pair words (in parallel), then per slab of B's columns the columns
// packed (in parallel) and multiplied in tiles of kTileRows rows × kTileCols columns. S: float,
// or the bf16 words of a bfloat16 op's tensors (A then not transposed: ta is read only for
// floats), whose rows of an even k are already A's pair words (word q of a row: elements 2q
// and 2q + 1, little-endian).
//
// Why slabs: a whole operand's conversion can pass glibc's largest reused block (32 MB), and
// then comes from fresh pages at every call (a fault and a zeroed page each 4 KiB). A Keras
// bf16 LSTM at 20×128×512×1024 packs 42 MB of gate gradients for each weight gradient: 10,500
// page faults a training step, the step about 15 % slower. A slab of either operand takes at
// most kSlabBytes (at least one tile of rows or columns, and enough tiles for twice the
// threads); B is packed once where its columns are one slab, else again for each slab of
// rows. Each C element's sum is the same (the same K chunks, in the same order).
//
// a_sums (b_sums), nullable: a_sums[r] += op(A)'s row r summed over k (b_sums[c] += op(B)'s
// column c), each element added in double in k's order, as ColumnSum adds (the same bits):
// the bias gradients of the gate gradients that a weight gradient multiplies, summed while
// they are converted (ta) or packed (not tb) instead of in a pass over them of their own.
//
// b_packed (nullable): B as PackWhole packed it whole (the same tb, n and k), read instead of
// packing B (a layer's input projection on W kept packed between inference calls); then no
// b_sums.
constexpr Index kTileRows = 64, kTileCols = 8 * kWide;
constexpr Index kSlabBytes = Index(16) << 20;
// Slab length (rows or columns, in tiles of `tile` of them, capped at `len`) of an operand
// whose one row or column takes `line_bytes` of its buffer, beside `other_tiles` tiles the
// other way.
inline Index SlabLength(Index len, Index tile, Index line_bytes, Index other_tiles,
                        int threads) {
  const Index want = 2 * Index(std::max(1, threads));
  const Index tiles = std::max(kSlabBytes / std::max<Index>(1, tile * line_bytes),
                               (want + other_tiles - 1) / std::max<Index>(1, other_tiles));
  const Index l = std::max<Index>(1, tiles) * tile;
  return l < len ? l : len;
}
// GemmLarge's packing of B: columns [s0, s0 + sn) of op(B) (s0 a multiple of kTileCols)
// packed at out as a B of n - s0 columns from s0 (the same panels), in parallel; sums
// (nullable) their b_sums. With s0 = 0 and sn = n, the whole B (n · k floats at out) that
// GemmLarge reads as b_packed.
template <typename S>
void PackWhole(const CpuDevice& d, bool tb, Index n, Index k, const S* b, float* out,
               Index s0 = 0, Index sn = -1, double* sums = nullptr) {
  if (sn < 0) sn = n - s0;
  const Index sk = tb ? 1 : n, sc = tb ? k : 1;
  const S* bs = b + s0 * sc;
  const Index full = sn / kWide;  // full panels, packed in parallel; the rest on this thread
  ParallelFor(d, full, kWide * 2.0 * k, [&](Index p0, Index p1) {
    PackRange(k, n - s0, bs, sk, sc, out, 0, 0, p0 * kWide, p1 * kWide, sums);
  });
  PackRange(k, n - s0, bs, sk, sc, out, 0, 0, full * kWide, sn, sums);
}
template <typename S>
void GemmLarge(const CpuDevice& d, bool ta, bool tb, Index m, Index n, Index k, const S* a,
               const S* b, float* c, bool accumulate, double* a_sums = nullptr,
               double* b_sums = nullptr, const float* b_packed = nullptr) {
  constexpr bool kWords = std::is_same<S, uint16_t>::value;
  if (b_packed != nullptr && b_sums != nullptr) std::abort();  // (no engine asks for both)
  const Index K2 = Pairs(k);
  // Sums the conversions below do not take (never asked for by the engines): apart.
  if (a_sums != nullptr && (kWords || !ta)) {
    AddSums(ta, tb, m, n, k, a, b, a_sums, nullptr);
    a_sums = nullptr;
  }
  if (b_sums != nullptr && (kWords || tb)) {
    AddSums(ta, tb, m, n, k, a, b, nullptr, b_sums);
    b_sums = nullptr;
  }
  const int threads = d.numThreads();
  // A's rows are its pair words: used in place, unless the products run on AMX tiles and
  // those rows do not start on cache lines (then copied into abuf once per slab below, as an
  // odd k's are, rather than by GemmConverted once per tile).
  const bool words = kWords && !ta && k % 2 == 0 &&
                     (!amx::Enabled() || (reinterpret_cast<uintptr_t>(a) % 64 == 0 &&
                                          K2 % amx::kTilePairs == 0));
  // A row of abuf: ldw words; a column of bbuf: k floats (a panel at column c starts at c · k).
  const Index col_slab = b_packed != nullptr
                             ? n
                             : SlabLength(n, kTileCols, k * Index(sizeof(float)),
                                          (m + kTileRows - 1) / kTileRows, threads);
  const Index row_slab =
      words ? m
            : SlabLength(m, kTileRows, K2 * Index(sizeof(uint32_t)),
                         (col_slab + kTileCols - 1) / kTileCols, threads);
  // Uninitialised (every word is written before it is read): zeroing them cost as much as
  // packing B (10 MB a call at 20x128x512x1024).
  const Index ldw = words ? K2 : WordStride(k);  // A's row stride in words
  AlignedArray<uint32_t> abuf(words ? nullptr : NewAligned<uint32_t>(row_slab * ldw));
  AlignedArray<float> bbuf(b_packed != nullptr ? nullptr : NewAligned<float>(col_slab * k));
  const float* bp = b_packed != nullptr ? b_packed : bbuf.get();
  const double row_cost = 2.0 * k;
  // Columns [s0, s0 + sn) of B packed into bbuf; with_sums: their b_sums too.
  auto pack = [&](Index s0, Index sn, bool with_sums) {
    PackWhole(d, tb, n, k, b, bbuf.get(), s0, sn,
              with_sums && b_sums != nullptr ? b_sums + s0 : nullptr);
  };
  const bool packed_once = col_slab >= n;
  if (packed_once && b_packed == nullptr) pack(0, n, true);
  for (Index rs0 = 0; rs0 < m; rs0 += row_slab) {
    const Index rn = std::min(row_slab, m - rs0);
    // A's rows of the slab as pair words: its own words, or converted into abuf.
    const uint32_t* ap = words ? reinterpret_cast<const uint32_t*>(a) + rs0 * K2 : abuf.get();
    if (!words) {
      uint32_t* out = abuf.get();
      ParallelFor(d, (rn + 15) / 16, 16 * row_cost, [&](Index g0, Index g1) {
        const Index r0 = g0 * 16, r1 = std::min(rn, g1 * 16);
        if constexpr (kWords) {  // as pair words (an odd k: each row's last word 0)
          for (Index r = r0; r < r1; ++r) {
            const S* row = a + (rs0 + r) * k;
            for (Index q = 0; q < K2; ++q) {
              const uint32_t hi = 2 * q + 1 < k ? row[2 * q + 1] : 0;
              out[r * ldw + q] = uint32_t(row[2 * q]) | (hi << 16);
            }
          }
        } else if (ta) {
          ConvertColumns(r0, r1, k, a + rs0, m, out, a_sums != nullptr ? a_sums + rs0 : nullptr,
                         ldw);
        } else {
          ConvertRows(r0, r1, k, a + rs0 * k, k, out, ldw);
        }
      });
    }
    const Index tr = (rn + kTileRows - 1) / kTileRows;
    for (Index s0 = 0; s0 < n; s0 += col_slab) {
      const Index sn = std::min(col_slab, n - s0);
      if (!packed_once) pack(s0, sn, rs0 == 0);
      const Index tcn = (sn + kTileCols - 1) / kTileCols;
      ParallelFor(d, tr * tcn, double(kTileRows) * kTileCols * k / 16, [&](Index t0, Index t1) {
        for (Index t = t0; t < t1; ++t) {
          const Index r0 = (t / tcn) * kTileRows, c0 = (t % tcn) * kTileCols;
          const Index rows = std::min(kTileRows, rn - r0), c1 = std::min(sn, c0 + kTileCols);
          GemmConverted(rows, k, n - s0, c0, c1, ap + r0 * ldw, ldw, bp,
                        c + (rs0 + r0) * n + s0, n, accumulate);
        }
      });
    }
  }
}

// Whether GemmLargeShared takes these: k > 0, every A's words in one slab (at most kSlabBytes each,
// with up to 2 · kSlabBytes of them in all), parts as described.
inline bool SharedFits(Index k, const SharedProduct* p, int np) {
  if (k <= 0) return false;
  Index words = 0;
  for (int i = 0; i < np; ++i) {
    if (p[i].rows[0] + p[i].rows[1] != k || (p[i].rows[1] > 0 && p[i].rows[0] % 2 != 0)) {
      return false;
    }
    const Index w = p[i].m * Pairs(k) * Index(sizeof(uint32_t));
    if (w > kSlabBytes) return false;
    words += w;
  }
  return words <= 2 * kSlabBytes;
}
// The np products of `prods` (SharedFits), all multiplying B [k, n] (row-major): each A
// converted to pair words whole (ConvertColumns, in parallel), then per slab of B's columns
// (as GemmLarge's) the slab packed once (b_sums, nullable: its column sums, as GemmLarge's)
// and every product's tiles of it on the pool. Each C element is the sum GemmLarge forms for
// that product with the same A (the same K chunks of its tile rows, in the same order): B is
// packed once for all of them instead of once each.
inline void GemmLargeShared(const CpuDevice& d, Index n, Index k, const float* b,
                            const SharedProduct* prods, int np, double* b_sums = nullptr) {
  if (n <= 0 || np <= 0) return;
  const int threads = d.numThreads();
  const Index ldw = WordStride(k);  // the words' row stride
  std::unique_ptr<AlignedArray<uint32_t>[]> words(new AlignedArray<uint32_t>[np]);
  Index tr_all = 0;  // row tiles of all products
  for (int i = 0; i < np; ++i) {
    const SharedProduct& p = prods[i];
    words[i] = NewAligned<uint32_t>(p.m * ldw);
    uint32_t* out = words[i].get();
    ParallelFor(d, (p.m + 15) / 16, 16 * 2.0 * k, [&](Index g0, Index g1) {
      const Index r0 = g0 * 16, r1 = std::min(p.m, g1 * 16);
      Index q0 = 0;  // the part's first pair
      for (int part = 0; part < 2; ++part) {
        if (p.rows[part] > 0) {
          ConvertColumns(r0, r1, p.rows[part], p.a[part], p.lda, out + q0, nullptr, ldw);
        }
        q0 += Pairs(p.rows[part]);
      }
    });
    tr_all += (p.m + kTileRows - 1) / kTileRows;
  }
  const Index col_slab = SlabLength(n, kTileCols, k * Index(sizeof(float)), tr_all, threads);
  AlignedArray<float> bbuf = NewAligned<float>(col_slab * k);
  for (Index s0 = 0; s0 < n; s0 += col_slab) {
    const Index sn = std::min(col_slab, n - s0);
    PackWhole(d, false, n, k, b, bbuf.get(), s0, sn, b_sums != nullptr ? b_sums + s0 : nullptr);
    const Index tcn = (sn + kTileCols - 1) / kTileCols;
    ParallelFor(d, tr_all * tcn, double(kTileRows) * kTileCols * k / 16, [&](Index t0, Index t1) {
      for (Index t = t0; t < t1; ++t) {
        Index tr = t / tcn;
        int i = 0;
        for (; tr >= (prods[i].m + kTileRows - 1) / kTileRows; ++i) {
          tr -= (prods[i].m + kTileRows - 1) / kTileRows;
        }
        const SharedProduct& p = prods[i];
        const Index r0 = tr * kTileRows, c0 = (t % tcn) * kTileCols;
        const Index rows = std::min(kTileRows, p.m - r0), c1 = std::min(sn, c0 + kTileCols);
        GemmConverted(rows, k, n - s0, c0, c1, words[i].get() + r0 * ldw, ldw, bbuf.get(),
                      p.c + r0 * n + s0, n, p.accumulate);
      }
    });
  }
}

#else  // no bf16 kernels in this build: Available() is false and these are never called

template <typename S>
void PackWhole(const CpuDevice&, bool, Index, Index, const S*, float*, Index = 0, Index = -1,
               double* = nullptr) {
  std::abort();
}
template <typename S>
void GemmLarge(const CpuDevice&, bool, bool, Index, Index, Index, const S*, const S*, float*,
               bool, double* = nullptr, double* = nullptr, const float* = nullptr) {
  std::abort();
}
inline bool SharedFits(Index, const SharedProduct*, int) { return false; }
inline void GemmLargeShared(const CpuDevice&, Index, Index, const float*, const SharedProduct*,
                            int, double* = nullptr) {
  std::abort();
}
#endif  // TFRNN_BF16_KERNELS

}  // namespace bf16
}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_ENGINE_BF16_POOL_GEMM_H_
