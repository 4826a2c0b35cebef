// A small-GEMM kernel for the per-step recurrent products of the engines.
//
// Per step an RNN multiplies a few rows (the batch) by the same recurrent weights. A general
// GEMM packs both operands on every call; for a batch of 16 that packing and the call overhead
// cost more than the arithmetic. Here the weight operand B[K, cols] is packed once per op call
// into column panels, and each step runs a register-blocked kernel that streams a panel from
// cache and broadcasts the few rows of A:
//
//   C[r, c] (+)= Σ_k A[r, k] · B[k, c]     r < rows (rows of A and C strided by lda/ldc)
//
// Packed layout of B: column panels of the widths PanelWidth gives (kNP SIMD packets, or two
// panels of two packets where four are left on AVX-512, then one panel of the columns left,
// fewer than kNP packets); each panel is stored k-major, [K][width], contiguously after the
// previous one. Exactly K·cols elements: no padding. The kernel reads and writes the last
// panel's partial packet with masked loads and stores (LoadN, StoreN), so a width that is not
// a multiple of the packet runs at the rate of whole packets instead of column by column.
//
// Uses Eigen's packet primitives, for the masked partial packet the AVX-512 or AVX
// intrinsics (a copy through a buffer elsewhere) and _mm_prefetch for B, so the same source
// compiles to AVX-512, AVX2+FMA or SSE in each ISA build of the engine (each its own shared
// object: no ODR sharing between them).
#ifndef TF_RNN_OPS_CC_ENGINE_PACKED_GEMM_H_
#define TF_RNN_OPS_CC_ENGINE_PACKED_GEMM_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include <immintrin.h>

#include "cc/engine/bf16_gemm.h"
#include "cc/engine/bf16_pool_gemm.h"
#include "cc/engine/cpu_device.h"
#include "cc/engine/step_loops.h"

namespace tfrnn {
namespace packed {

template <typename A>
using Packet = typename Eigen::internal::packet_traits<A>::type;
template <typename A>
constexpr Index kP = Eigen::internal::unpacket_traits<Packet<A>>::size;

// Rows of A per register block and packets per panel: accumulators (kRows x kNP packets) +
// kNP B packets + 1 broadcast fit the 32 vector registers of AVX-512 (8 x 3: 24 + 3 + 1) or
// the 16 of AVX/SSE (6 x 2: 12 + 2 + 1). Three packets per broadcast on AVX-512 take the
// load ports off the critical path: 11 loads per 24 multiply-adds instead of 10 per 16, and
// a row of A is read from cache a third fewer times (docs/PERFORMANCE.md, "Register blocks
// of three packets").
#ifdef __AVX512F__
constexpr int kRows = 8;
constexpr int kNP = 3;
#else
constexpr int kRows = 6;
constexpr int kNP = 2;
#endif
template <typename A>
constexpr Index kPanel = kNP * kP<A>;

// Width of the next column panel with `left` columns still to pack: a full panel of kNP
// packets, except that with 4 packets left on AVX-512 (64 float columns) two panels of 2
// instead of 3 + 1 (a one-packet panel runs at 8 multiply-adds per 9 loads); the last panel,
// fewer than kNP packets, takes all that is left. The packing and the kernel walk B's panels
// with the same widths.
template <typename A>
constexpr Index PanelWidth(Index left) {
  if (kNP == 3 && left == 4 * kP<A>) return 2 * kP<A>;
  return left >= kPanel<A> ? kPanel<A> : left;
}

// The first n (0 < n <= kP) elements of a packet at p, zeros in the rest; nothing past p + n
// is read (the masked lanes of vmaskmov / AVX-512 masked loads do not fault). StoreN writes
// the first n lanes of v to p and nothing else.
#if defined(__AVX512F__)
template <typename A>
EIGEN_ALWAYS_INLINE Packet<A> LoadN(const A* p, Index n) {
  if constexpr (std::is_same<A, float>::value) {
    return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1), p);
  } else {
    return _mm512_maskz_loadu_pd(static_cast<__mmask8>((1u << n) - 1), p);
  }
}
template <typename A>
EIGEN_ALWAYS_INLINE void StoreN(A* p, const Packet<A>& v, Index n) {
  if constexpr (std::is_same<A, float>::value) {
    _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1), v);
  } else {
    _mm512_mask_storeu_pd(p, static_cast<__mmask8>((1u << n) - 1), v);
  }
}
#elif defined(__AVX__)
// Lane masks for vmaskmov: n set lanes are the 8 (float) or 4 (double) words from
// kLaneMask + kP - n.
alignas(64) inline constexpr int32_t kLaneMask32[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                          0,  0,  0,  0,  0,  0,  0,  0};
alignas(64) inline constexpr int64_t kLaneMask64[8] = {-1, -1, -1, -1, 0, 0, 0, 0};
template <typename A>
EIGEN_ALWAYS_INLINE __m256i LaneMask(Index n) {
  if constexpr (std::is_same<A, float>::value) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kLaneMask32 + 8 - n));
  } else {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kLaneMask64 + 4 - n));
  }
}
template <typename A>
EIGEN_ALWAYS_INLINE Packet<A> LoadN(const A* p, Index n) {
  if constexpr (std::is_same<A, float>::value) {
    return _mm256_maskload_ps(p, LaneMask<A>(n));
  } else {
    return _mm256_maskload_pd(p, LaneMask<A>(n));
  }
}
template <typename A>
EIGEN_ALWAYS_INLINE void StoreN(A* p, const Packet<A>& v, Index n) {
  if constexpr (std::is_same<A, float>::value) {
    _mm256_maskstore_ps(p, LaneMask<A>(n), v);
  } else {
    _mm256_maskstore_pd(p, LaneMask<A>(n), v);
  }
}
#else
template <typename A>
EIGEN_ALWAYS_INLINE Packet<A> LoadN(const A* p, Index n) {
  alignas(64) A buf[kP<A>] = {};
  std::memcpy(buf, p, n * sizeof(A));
  return Eigen::internal::pload<Packet<A>>(buf);
}
template <typename A>
EIGEN_ALWAYS_INLINE void StoreN(A* p, const Packet<A>& v, Index n) {
  alignas(64) A buf[kP<A>];
  Eigen::internal::pstore(buf, v);
  std::memcpy(p, buf, n * sizeof(A));
}
#endif

// Packs columns [c0, c1) of B[K, cols] where element (k, c) is src[k * ld + c] (columns
// contiguous) into their places in the whole packing at out; c0 and c1 start panels of the
// whole (PackPart's runs), or are cols. Rows [zero_k0, zero_k1) are packed as zeros (a
// product that must leave out part of K).
template <typename A>
void PackRowMajorRun(Index K, Index cols, const A* src, Index ld, A* out, Index zero_k0,
                     Index zero_k1, Index c0, Index c1) {
  // Row by row across the panels (the panel starting at column c at out + K·c): each row of
  // src is read once, in order (a panel at a time would read a few columns of every row, rows
  // ld apart, a stride the hardware prefetchers do not follow from memory).
  for (Index k = 0; k < K; ++k) {
    const bool zero = k >= zero_k0 && k < zero_k1;
    for (Index c = c0, w; c < c1; c += w) {
      w = PanelWidth<A>(cols - c);
      A* dst = out + K * c + k * w;
      const A* row = src + k * ld + c;
      Index j = 0;
      for (; j + kP<A> <= w; j += kP<A>) {
        Eigen::internal::pstoreu(dst + j, zero ? Eigen::internal::pset1<Packet<A>>(A(0))
                                               : Eigen::internal::ploadu<Packet<A>>(row + j));
      }
      if (j < w) {
        StoreN(dst + j, zero ? Eigen::internal::pset1<Packet<A>>(A(0)) : LoadN(row + j, w - j),
               w - j);
      }
    }
  }
}

// Packs B[K, cols] where element (k, c) is src[k * ld + c] (columns contiguous). Rows
// [zero_k0, zero_k1) are packed as zeros (a product that must leave out part of K).
// With bf16 (float only): the pair panels of bf16_gemm.h for packed::Gemm(..., bf16 = true).
template <typename A>
void PackRowMajor(Index K, Index cols, const A* src, Index ld, A* out, Index zero_k0 = 0,
                  Index zero_k1 = 0, bool use_bf16 = false) {
  if constexpr (std::is_same<A, float>::value) {
    if (use_bf16) return bf16::Pack(K, cols, src, ld, 1, out, zero_k0, zero_k1);
  }
  PackRowMajorRun<A>(K, cols, src, ld, out, zero_k0, zero_k1, 0, cols);
}

// PackRowMajorRun for a B[K, cols] where element (k, c) is src[c * ld + k] (B is a transposed
// row-major block).
template <typename A>
void PackColMajorRun(Index K, Index cols, const A* src, Index ld, A* out, Index c0, Index c1) {
  for (Index c = c0, w; c < c1; c += w) {
    w = PanelWidth<A>(cols - c);
    A* dst = out + K * c;
    for (Index j = 0; j < w; ++j) {
      const A* s = src + (c + j) * ld;
      for (Index k = 0; k < K; ++k) dst[k * w + j] = s[k];
    }
  }
}

// Packs B[K, cols] where element (k, c) is src[c * ld + k] (B is a transposed row-major block).
template <typename A>
void PackColMajor(Index K, Index cols, const A* src, Index ld, A* out, bool use_bf16 = false) {
  if constexpr (std::is_same<A, float>::value) {
    if (use_bf16) return bf16::Pack(K, cols, src, 1, ld, out);
  }
  PackColMajorRun<A>(K, cols, src, ld, out, 0, cols);
}

// Part `part` of `parts` of a packing of B[K, cols] (PackRowMajor's, or with col_major
// PackColMajor's, without zero rows): a run of whole panels, the runs near equal in panels, so
// that one packing too large for one core's time (a pipelined chain's weights, packed before
// its first step) runs on several threads.
template <typename A>
void PackPart(Index K, Index cols, const A* src, Index ld, bool col_major, A* out,
              bool use_bf16, Index part, Index parts) {
  const bool b16 = std::is_same<A, float>::value && use_bf16;
  auto width = [&](Index c) {
    return b16 ? bf16::PanelWidth(c, cols) : PanelWidth<A>(cols - c);
  };
  Index panels = 0;
  for (Index c = 0; c < cols; c += width(c)) ++panels;
  const Index p0 = panels * part / parts, p1 = panels * (part + 1) / parts;
  Index c0 = 0, c1 = 0;
  for (Index p = 0, c = 0; c < cols; c += width(c), ++p) {
    if (p == p0) c0 = c;
    if (p == p1) c1 = c;
  }
  if (p1 == panels) c1 = cols;
  if (c1 <= c0) return;
  if constexpr (std::is_same<A, float>::value) {
    if (b16) {
      return col_major ? bf16::PackRange(K, cols, src, 1, ld, out, 0, 0, c0, c1)
                       : bf16::PackRange(K, cols, src, ld, 1, out, 0, 0, c0, c1);
    }
  }
  if (col_major) {
    PackColMajorRun<A>(K, cols, src, ld, out, c0, c1);
  } else {
    PackRowMajorRun<A>(K, cols, src, ld, out, 0, 0, c0, c1);
  }
}

// Rows of B ahead of the one in use that a panel's first register block prefetches: the
// panel streams from L2 or L3 (a step's slice of the weights rarely fits in L1, often not in
// L2), and the blocks after the first find it in L1.
constexpr Index kPrefetchRows = 32;

// One register block: R rows of A times one panel of NP packets, whose row k starts at
// b + k · bs (bs = the panel width when packed, B's leading dimension when not). kTail: the
// last packet holds only `tail` (1 <= tail <= kP) columns, read and written masked. kPf:
// prefetch B kPrefetchRows rows ahead (past the panel's end: the next panel, or nothing that
// faults, prefetches never do). kAK: A is k-major, A[r, k] at a[k · lda + r] (PackTN's groups)
// instead of a[r · lda + k].
template <typename A, int R, int NP, bool kTail = false, bool kPf = false, bool kAK = false>
EIGEN_ALWAYS_INLINE void Micro(Index K, const A* a, Index lda, const A* b, Index bs, A* c,
                               Index ldc, bool accumulate, Index tail = 0) {
  using P = Packet<A>;
  auto load = [&](const A* p, int j) {
    if constexpr (kTail) {
      if (j == NP - 1) return LoadN<A>(p, tail);
    }
    return Eigen::internal::ploadu<P>(p);
  };
  // B's packets of a k held in registers for all R rows: for 2-3 rows GCC otherwise folds
  // each packet's load into every row's FMA, R loads of it a k, and on AVX-512 (one 64-byte
  // load a cycle on Zen 4) such a block ran at half the FMA rate (K = 384 on a 512-column
  // panel from L2, one thread: 2 rows 55 → 89 GF/s, 3 rows 57 → 109, 4 rows 113 either way).
  // Only where the accumulators, B's packets and A's broadcast fit in the 32 registers.
#ifdef __AVX512F__
  constexpr bool kHoldB = R > 1 && R < 4 && (R + 1) * NP + 1 <= 32;
#else
  constexpr bool kHoldB = false;
#endif
  P acc[R][NP];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < NP; ++j) acc[r][j] = Eigen::internal::pset1<P>(A(0));
  for (Index k = 0; k < K; ++k) {
    if constexpr (kPf) {
      for (int j = 0; j < NP; ++j) {
        _mm_prefetch(reinterpret_cast<const char*>(b + (k + kPrefetchRows) * bs + j * kP<A>),
                     _MM_HINT_T0);
      }
    }
    P bv[NP];
    for (int j = 0; j < NP; ++j) {
      P v = load(b + k * bs + j * kP<A>, j);
      if constexpr (kHoldB) asm("" : "+v"(v));  // a register GCC cannot fold into an FMA
      bv[j] = v;
    }
    for (int r = 0; r < R; ++r) {
      const P av = Eigen::internal::pset1<P>(kAK ? a[k * lda + r] : a[r * lda + k]);
      for (int j = 0; j < NP; ++j) acc[r][j] = Eigen::internal::pmadd(av, bv[j], acc[r][j]);
    }
  }
  // Unrolled whole, for every R and NP (up to 16 packets: WideRows): GCC's own limit leaves
  // the masked version's loops rolled, and a pragma's count below NP unrolls them in part; acc
  // then lives on the stack, with stores of the accumulators inside the k loop.
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int j = 0; j < NP; ++j) {
      A* dst = c + r * ldc + j * kP<A>;
      P v = acc[r][j];
      if (accumulate) v = Eigen::internal::padd(v, load(dst, j));
      if (kTail && j == NP - 1) {
        StoreN<A>(dst, v, tail);
      } else {
        Eigen::internal::pstoreu(dst, v);
      }
    }
  }
}

// fn(std::integral_constant<int, r>()) for r rows of a tail, 0 < r < kRows, as a compile-time
// row count (r = 0: nothing).
template <typename Fn>
EIGEN_ALWAYS_INLINE void WithTailRows(Index r, Fn&& fn) {
  switch (r) {
    case 7: if constexpr (7 < kRows) fn(std::integral_constant<int, 7>()); break;
    case 6: if constexpr (6 < kRows) fn(std::integral_constant<int, 6>()); break;
    case 5: fn(std::integral_constant<int, 5>()); break;
    case 4: fn(std::integral_constant<int, 4>()); break;
    case 3: fn(std::integral_constant<int, 3>()); break;
    case 2: fn(std::integral_constant<int, 2>()); break;
    case 1: fn(std::integral_constant<int, 1>()); break;
    default: break;
  }
}

// Depth of a K chunk: on AVX-512 ChunkDepthFor (bf16_gemm.h) from kKc, one chunk of a full
// panel (kKc · kPanel elements) in 20 KiB of L1; elsewhere kKc (AVX and AVX2 CPUs may have
// 256 KiB of L2).
template <typename A>
constexpr Index kKc = std::max<Index>(32, (20 * 1024) / (kPanel<A> * Index(sizeof(A))));
template <typename A>
inline Index ChunkDepth(Index rows) {
#ifdef __AVX512F__
  return ChunkDepthFor(rows, Index(sizeof(A)), kKc<A>);
#else
  (void)rows;
  return kKc<A>;
#endif
}

// Rows a register block keeps at the least where the rows allow: a block of r rows holds
// NP·r independent sums, and a block of 1 or 2 rows leaves the FMA units waiting on their
// latency, so the last full block and such a tail run as two blocks of 3 or more rows instead
// (8 rows of AVX2's 6-row blocks: 4 + 4, not 6 + 2; 7: 4 + 3; AVX-512's 8-row blocks: 10 rows
// 5 + 5, 9: 5 + 4). Every sum adds the same products in the same order either way (same
// bits). Kernel alone, one thread: AVX2 Zen 1, K = 128-256, 8 rows 35.5-36.7 GF/s against
// 34.8-35.1, 7 rows 37 against 31.5 (a tail of 3 rows stays 6 + 3: as 5 + 4 it read no
// faster); AVX-512 Zen 5 (bench/results/cpu_history_2.md), K = 192-640: 9 rows 211-243 against
// 191-208, 10 rows 225-240 against 177-188, 18 rows 225-248 against 199-217, 50 rows 245-250
// against 230-232.
constexpr int kMinTailRows = 3;
static_assert(kMinTailRows < kRows, "a balanced pair of blocks stays within kRows");

// A panel of NP packets times `rows` rows of A; row k of the panel starts at b + k · bs.
// kTail: the last packet holds `tail` columns (Micro).
template <typename A, int NP, bool kTail = false>
void PanelRows(Index rows, Index K, const A* a, Index lda, const A* b, Index bs, A* c,
               Index ldc, bool accumulate, Index tail = 0) {
  const Index kc = ChunkDepth<A>(rows);
  if (K > kc) {  // K in chunks; the panel's chunk k0.. starts at b + k0 · bs
    for (Index k0 = 0; k0 < K; k0 += kc) {
      PanelRows<A, NP, kTail>(rows, std::min(kc, K - k0), a + k0, lda, b + k0 * bs, bs, c, ldc,
                              accumulate || k0 > 0, tail);
    }
    return;
  }
  // Full blocks up to `full`, then the rows left (fewer than kRows, or a balanced pair).
  Index full = rows / kRows * kRows;
  if (full > 0 && rows - full > 0 && rows - full < kMinTailRows) full -= kRows;
  Index r = 0;
  if (full > 0) {  // the first block prefetches the panel for the others
    Micro<A, kRows, NP, kTail, true>(K, a, lda, b, bs, c, ldc, accumulate, tail);
    r = kRows;
  }
  for (; r < full; r += kRows)
    Micro<A, kRows, NP, kTail>(K, a + r * lda, lda, b, bs, c + r * ldc, ldc, accumulate, tail);
  // The rest in one block, or in two of (left + 1) / 2 and left / 2 rows, each fully unrolled;
  // the first block of the call prefetches.
  auto block = [&](Index r0, Index n, bool first) {
    WithTailRows(n, [&](auto rt) {
      constexpr int RT = decltype(rt)::value;
      if (first) {
        Micro<A, RT, NP, kTail, true>(K, a + r0 * lda, lda, b, bs, c + r0 * ldc, ldc,
                                      accumulate, tail);
      } else {
        Micro<A, RT, NP, kTail>(K, a + r0 * lda, lda, b, bs, c + r0 * ldc, ldc, accumulate,
                                tail);
      }
    });
  };
  const Index left = rows - full;
  if (left >= kRows) {
    block(full, (left + 1) / 2, full == 0);
    block(full + (left + 1) / 2, left / 2, false);
  } else {
    block(full, left, full == 0);
  }
}

// C[rows, cols] (+)= A[rows, K] · B, one walk over B's column panels for both layouts:
//   packed (PackRowMajor/PackColMajor with the same K and cols): panel of width w is stored
//     k-major right after the previous one, row k at k · w;
//   unpacked (row-major, leading dimension ldb): the panel at column col starts at b + col,
//     row k at k · ldb.
// Walks the column panels of B's `cols` columns in PanelWidth's widths: fn(col, w, tail, npc,
// tc) per panel at column col of width w, npc its packets as a std::integral_constant<int>
// (1, 2 or kNP), tc std::true_type where the last packet holds only `tail` (< kP) columns
// (read and written masked), else std::false_type (tail = kP). The packed layouts put the
// panel at column col at K · col.
template <typename A, typename Fn>
void ForEachPanel(Index cols, Fn&& fn) {
  for (Index col = 0; col < cols;) {
    const Index w = PanelWidth<A>(cols - col);
    const Index np = (w + kP<A> - 1) / kP<A>, tail = w - (np - 1) * kP<A>;
    auto with_tail = [&](auto npc) {
      if (tail == kP<A>) {
        fn(col, w, tail, npc, std::false_type());
      } else {
        fn(col, w, tail, npc, std::true_type());
      }
    };
    if (np == 1) {
      with_tail(std::integral_constant<int, 1>());
    } else if (np == 2) {
      with_tail(std::integral_constant<int, 2>());
    } else {
      with_tail(std::integral_constant<int, kNP>());  // np == 3 == kNP (AVX-512)
    }
    col += w;
  }
}

template <typename A>
void GemmPanels(Index rows, Index K, Index cols, const A* a, Index lda, const A* b, bool packed,
                Index ldb, A* c, Index ldc, bool accumulate) {
  if (rows <= 0 || cols <= 0) return;
  ForEachPanel<A>(cols, [&](Index col, Index w, Index tail, auto npc, auto tc) {
    PanelRows<A, decltype(npc)::value, decltype(tc)::value>(
        rows, K, a, lda, packed ? b + K * col : b + col, packed ? w : ldb, c + col, ldc,
        accumulate, tail);
  });
}

// Accumulator registers WideRows gives a block of fewer than kRows rows: 2 · kRows (16 of
// AVX-512's 32 vector registers, 12 of AVX/SSE's 16).
constexpr int kAccRegs = 2 * kRows;

// C[R, cols] (+)= A[R, K] · B for B unpacked (row k at b + k · ldb) and fewer than kRows rows:
// panels of NP packets over the whole K, then the rest of the columns in panels of NP/2, NP/4
// .. 1 packet, then the last columns as one masked packet. With so few rows nothing reuses a
// panel of B, and what counts is how B streams: a two-packet panel reads 128 bytes of each
// row of B, at B's row stride (a new 4 KiB page per k for 1024 float columns), which the
// prefetchers do not follow; a 16-packet panel reads a kilobyte per row, and one row streams B
// about 5x as fast (docs/PERFORMANCE.md, "The one-row products").
template <typename A, int R, int NP>
void WideRows(Index K, Index cols, const A* a, Index lda, const A* b, Index ldb, A* c,
              Index ldc, bool accumulate) {
  constexpr Index w = NP * kP<A>;
  Index col = 0;
  for (; col + w <= cols; col += w)
    Micro<A, R, NP>(K, a, lda, b + col, ldb, c + col, ldc, accumulate);
  if constexpr (NP > 1) {
    WideRows<A, R, NP / 2>(K, cols - col, a, lda, b + col, ldb, c + col, ldc, accumulate);
  } else {
    GemmPanels<A>(R, K, cols - col, a, lda, b + col, /*packed=*/false, ldb, c + col, ldc,
                  accumulate);  // fewer than one packet of columns: GemmPanels' masked tail
  }
}

template <typename A, int R>
void WideRows(Index K, Index cols, const A* a, Index lda, const A* b, Index ldb, A* c,
              Index ldc, bool accumulate) {
  WideRows<A, R, std::max(1, kAccRegs / R)>(K, cols, a, lda, b, ldb, c, ldc, accumulate);
}

// C[rows, cols] (+)= A[rows, K] · B, B packed by PackRowMajor/PackColMajor with the same K,
// cols and bf16 (then A is rounded to bf16 as well). Single-threaded: the engines
// parallelise over column (unit) blocks.
template <typename A>
void Gemm(Index rows, Index K, Index cols, const A* a, Index lda, const A* bp, A* c, Index ldc,
          bool accumulate, bool use_bf16 = false) {
  if constexpr (std::is_same<A, float>::value) {
    if (use_bf16) return bf16::GemmPacked(rows, K, cols, a, lda, bp, c, ldc, accumulate);
  }
  GemmPanels<A>(rows, K, cols, a, lda, bp, /*packed=*/true, 0, c, ldc, accumulate);
}

// Packs Aᵀ for GemmTN from A [K, m] (row stride lda): the columns of A (rows of Aᵀ) in groups
// of kRows, group g k-major at out + g · K · kRows (element (r, k) of the group at k · kRows +
// r; the last group's missing columns are left unwritten and never read). Each k copies kRows
// contiguous elements of a row of A: no transposition.
template <typename A>
void PackTN(Index K, Index m, const A* a, Index lda, A* out) {
  for (Index r0 = 0; r0 < m; r0 += kRows) {
    const Index w = std::min<Index>(kRows, m - r0);
    A* o = out + r0 * K;
    if (w == kRows) {  // a fixed-size copy the compiler unrolls (copy_n of w calls memmove)
      for (Index k = 0; k < K; ++k) {
        const A* src = a + k * lda + r0;
        for (int r = 0; r < kRows; ++r) o[k * kRows + r] = src[r];
      }
    } else {
      for (Index k = 0; k < K; ++k) {
        for (Index r = 0; r < w; ++r) o[k * kRows + r] = a[k * lda + r0 + r];
      }
    }
  }
}

// C[m, n] (+)= Aᵀ · B for A [K, m] and B [K, n] (row strides lda, ldb; C row stride ldc) on
// the calling thread: the weight gradients' panels beside the backward's step chain (K: a
// chunk of the chain's rows), where Eigen's product, which packs both operands per call, read
// 72-88 GF/s a core against 79-91 here (AVX2 Zen 3; docs/PERFORMANCE_AVX2.md). Aᵀ is packed
// by PackTN and B by PackRowMajor into this thread's buffers; `reuse` kReuseA (kReuseB) keeps
// A's (B's) packing from this thread's previous GemmTN call, for the same operand with the
// same shape (dW and dR of one gate panel multiply the same gate gradients). Every element of
// C is one sum in k order over chunks of ChunkDepth: the same bits whichever thread runs it.
// The buffers hold at most kTNSlabElems elements (or one K chunk's): a longer K runs in slabs
// of whole K chunks, each packed on its own (the same sums in the same order); a reuse asked
// of such a call, or of the call after it, packs the operand again.
constexpr Index kTNSlabElems = Index(1) << 18;
template <typename A>
void GemmTN(Index m, Index n, Index K, const A* a, Index lda, const A* b, Index ldb, A* c,
            Index ldc, bool accumulate, bf16::Reuse reuse = bf16::kReuseNone) {
  if (m <= 0 || n <= 0) return;
  if (K <= 0) {
    if (!accumulate) {
      for (Index r = 0; r < m; ++r) std::fill_n(c + r * ldc, n, A(0));
    }
    return;
  }
  const Index groups = (m + kRows - 1) / kRows, kc = ChunkDepth<A>(m);
  const Index slab = std::max(kc, kTNSlabElems / (groups * kRows + n) / kc * kc);
  thread_local std::vector<A> abuf, bbuf;
  // Whether abuf / bbuf hold the whole packing of this thread's previous call: after a call in
  // slabs they hold its last slab's only, and a reuse packs again (a product of another m can
  // take slabs where the call before it did not, or the other way round).
  thread_local bool a_whole = false, b_whole = false;
  if (K > slab) {
    for (Index k0 = 0; k0 < K; k0 += slab) {
      GemmTN<A>(m, n, std::min(slab, K - k0), a + k0 * lda, lda, b + k0 * ldb, ldb, c, ldc,
                accumulate || k0 > 0);
    }
    a_whole = b_whole = false;
    return;
  }
  if (reuse != bf16::kReuseA || !a_whole) {
    if (abuf.size() < static_cast<size_t>(groups * kRows * K)) abuf.resize(groups * kRows * K);
    PackTN<A>(K, m, a, lda, abuf.data());
  }
  if (reuse != bf16::kReuseB || !b_whole) {
    if (bbuf.size() < static_cast<size_t>(K * n)) bbuf.resize(K * n);
    PackRowMajor<A>(K, n, b, ldb, bbuf.data());
  }
  a_whole = b_whole = true;
  // Per panel, every group of kRows rows over one K chunk of it, the chunk in L1 for all.
  ForEachPanel<A>(n, [&](Index col, Index w, Index tail, auto npc, auto tc) {
    constexpr int NP = decltype(npc)::value;
    constexpr bool kT = decltype(tc)::value;
    const A* bp = bbuf.data() + K * col;
    for (Index k0 = 0; k0 < K; k0 += kc) {
      const Index kk = std::min(kc, K - k0);
      const bool acc = accumulate || k0 > 0;
      for (Index r0 = 0; r0 < m; r0 += kRows) {
        const A* ag = abuf.data() + r0 * K + k0 * kRows;
        A* cg = c + r0 * ldc + col;
        const A* bg = bp + k0 * w;
        // The next group's tile of C into L1 while this one multiplies: C (a weight gradient's
        // panel, accumulated chunk after chunk) is often past L2, and each tile is read once
        // per K chunk.
        if (acc && r0 + kRows < m) {
          for (int r = 0; r < kRows; ++r) {
            for (Index q = 0; q < w; q += kP<A>) {
              _mm_prefetch(reinterpret_cast<const char*>(cg + (kRows + r) * ldc + q),
                           _MM_HINT_T0);
            }
          }
        }
        if (m - r0 >= kRows) {
          if (r0 == 0) {
            Micro<A, kRows, NP, kT, true, true>(kk, ag, kRows, bg, w, cg, ldc, acc, tail);
          } else {
            Micro<A, kRows, NP, kT, false, true>(kk, ag, kRows, bg, w, cg, ldc, acc, tail);
          }
        } else {
          WithTailRows(m - r0, [&](auto rt) {
            constexpr int RT = decltype(rt)::value;
            Micro<A, RT, NP, kT, false, true>(kk, ag, kRows, bg, w, cg, ldc, acc, tail);
          });
        }
      }
    }
  });
}

// The A operand of several packed::Gemm products (the gate blocks of one work item of a step):
// with bf16 (float only) its rows converted to pair words once (bf16::ConvertOnce, into the
// calling thread's buffer `slot`) instead of once per product, or (WordRows) a bfloat16 op's
// rows as they are.
template <typename A>
struct Rows {
  const A* a = nullptr;
  Index lda = 0;
  bool b16 = false;
  const uint32_t* words = nullptr;
  Index wld = 0;  // words' row stride (0: Pairs(K), ConvertOnce's)
  bool streams = false;  // the products' B streams from past L2 (bf16::GemmConverted)
};
// Rows of an even number of bf16 words, lda16 words apart (even): each row its pair words.
template <typename A>
Rows<A> WordRows(const uint16_t* rows16, Index lda16) {
  Rows<A> r;
  r.b16 = true;
  r.words = reinterpret_cast<const uint32_t*>(rows16);
  r.wld = lda16 / 2;
  return r;
}
template <typename A>
Rows<A> PrepareRows(Index rows, Index K, const A* a, Index lda, bool use_bf16, int slot) {
  Rows<A> r;
  r.a = a;
  r.lda = lda;
  r.b16 = use_bf16;
  if constexpr (std::is_same<A, float>::value) {
    if (use_bf16 && rows > 0 && K > 0) r.words = bf16::ConvertOnce(rows, K, a, lda, slot);
  }
  return r;
}
template <typename A>
void Gemm(Index rows, Index K, Index cols, const Rows<A>& a, const A* bp, A* c, Index ldc,
          bool accumulate) {
  if constexpr (std::is_same<A, float>::value) {
    if (a.words != nullptr) {
      return bf16::GemmWords(rows, K, cols, a.words, bp, c, ldc, accumulate, a.wld, a.streams);
    }
  }
  Gemm<A>(rows, K, cols, a.a, a.lda, bp, c, ldc, accumulate, a.b16);
}

// C[rows, cols] (+)= A[rows, K] · B[K, cols] with B unpacked, row-major, leading dimension
// ldb: the same register blocks streaming B's rows in place. For a product used once (a
// single step of a few rows), packing B would cost as much as the product. Single-threaded.
template <typename A>
void GemmUnpacked(Index rows, Index K, Index cols, const A* a, Index lda, const A* b, Index ldb,
                  A* c, Index ldc, bool accumulate) {
  // Whole register blocks on full panels in K chunks (GemmPanels), then the rows left
  // (fewer than a block) on wide panels.
  const Index full = rows / kRows * kRows;
  GemmPanels<A>(full, K, cols, a, lda, b, /*packed=*/false, ldb, c, ldc, accumulate);
  WithTailRows(rows - full, [&](auto tail) {
    WideRows<A, decltype(tail)::value>(K, cols, a + full * lda, lda, b, ldb, c + full * ldc, ldc,
                                       accumulate);
  });
}

}  // namespace packed

// Gemm() of cpu_device.h; with bf16 (a bfloat16 op, on a CPU with AVX512_BF16: the engines
// pass bf16::ProductsFor(spec)) and float, the bf16 products on the pool.
// a_sums, b_sums (nullable; bf16 products only): bf16::GemmLarge's sums of op(A)'s rows and
// op(B)'s columns.
template <typename A>
void GemmB16(const CpuDevice& d, bool use_bf16, bool ta, bool tb, Index m, Index n, Index k,
             const A* a, const A* b, A* c, bool accumulate, double* a_sums = nullptr,
             double* b_sums = nullptr) {
  if constexpr (std::is_same<A, float>::value) {
    if (use_bf16 && m > 0 && n > 0 && k > 0)
      return bf16::GemmLarge(d, ta, tb, m, n, k, a, b, c, accumulate, a_sums, b_sums);
    bf16::AddSums<float>(ta, tb, m, n, k, a, b, a_sums, b_sums);  // the sums apart, if any
  } else if (a_sums != nullptr || b_sums != nullptr) {
    std::abort();  // (float operands only)
  }
  Gemm<A>(d, ta, tb, m, n, k, a, b, c, accumulate);
}

// C[m, n] (+)= op(A) · op(B) on the calling thread (the products beside a step chain), with
// leading dimensions: Eigen's matrix product, or with bf16 (as above) bf16::GemmSerial.
template <typename A>
void GemmB16Serial(bool use_bf16, bool ta, bool tb, Index m, Index n, Index k, const A* a,
                   Index lda, const A* b, Index ldb, A* c, Index ldc, bool accumulate,
                   bf16::Reuse reuse = bf16::kReuseNone) {
  if (m <= 0 || n <= 0) return;
  if constexpr (std::is_same<A, float>::value) {
    if (use_bf16 && k > 0) {
      return bf16::GemmSerial(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, accumulate, reuse);
    }
  }
  using CMap = Eigen::Map<const MatRM<A>, 0, OStride>;
  Eigen::Map<MatRM<A>, 0, OStride> out(c, m, n, OStride(ldc));
  if (k <= 0) {
    if (!accumulate) out.setZero();
    return;
  }
  CMap am(a, ta ? k : m, ta ? m : k, OStride(lda));
  CMap bm(b, tb ? n : k, tb ? k : n, OStride(ldb));
  auto product = [&](const auto& lhs, const auto& rhs) {
    if (accumulate) {
      out.noalias() += lhs * rhs;
    } else {
      out.noalias() = lhs * rhs;
    }
  };
  if (ta && tb) {
    product(am.transpose(), bm.transpose());
  } else if (ta) {
    product(am.transpose(), bm);
  } else if (tb) {
    product(am, bm.transpose());
  } else {
    product(am, bm);
  }
}

// C[m, n] (+)= op(A) · op(B) with leading dimensions lda, ldb, ldc (op(A) = A [m, k] or, with
// ta, Aᵀ of A stored [k, m]; op(B) = B [k, n] or, with tb, Bᵀ of B stored [n, k]), for the
// products of a single step: the tensor contraction of Gemm() (cpu_device.h) costs more in
// set-up and packing than the arithmetic of a few rows (docs/PERFORMANCE.md, "Single-step
// ops"). Up to kSmallRows rows of A times an untransposed B run the register blocks
// above on B in place (packed::GemmUnpacked); the rest Eigen's matrix product (GemmB16Serial
// without bf16; a single row: its matrix-vector kernel). On the calling thread below
// kSmallGemmMacs units of work per thread, else split into column blocks (multiples of 16)
// that the caller and the pool threads claim in turn.
constexpr double kSmallGemmMacs = double(1 << 20);
// Up to 32 rows the register blocks on B in place beat Eigen's product, which packs both
// operands; at 64 rows the two are equal (docs/PERFORMANCE.md, "The one-row products").
constexpr Index kSmallRows = 32;
template <typename A>
void SmallGemm(const CpuDevice& d, bool ta, bool tb, Index m, Index n, Index k, const A* a,
               Index lda, const A* b, Index ldb, A* c, Index ldc, bool accumulate) {
  if (m <= 0 || n <= 0) return;
  auto block = [&](Index c0, Index c1) {
    if (!ta && !tb && m <= kSmallRows && k > 0) {
      packed::GemmUnpacked<A>(m, k, c1 - c0, a, lda, b + c0, ldb, c + c0, ldc, accumulate);
      return;
    }
    GemmB16Serial<A>(false, ta, tb, m, c1 - c0, k, a, lda, tb ? b + c0 * ldb : b + c0, ldb,
                     c + c0, ldc, accumulate);
  };
  // Work: the multiply-adds plus B's stream, three multiply-adds per element of B (a product
  // of a few rows is bound by reading B: WideRows streams it at about 17 G floats/s, the
  // register blocks multiply-add at about 50 G/s per core).
  const double macs = double(m) * double(n) * double(k);
  const double work = macs + 3.0 * double(n) * double(k);
  const Index parts = std::min<Index>(
      std::min<Index>(d.numThreads(), static_cast<Index>(work / kSmallGemmMacs)), n / 16);
  if (parts <= 1) {
    block(0, n);
    return;
  }
  // Two column blocks per part, claimed in turn by the caller and the pool threads as they
  // start (StepLoop): a helper that wakes late leaves its blocks to the caller instead of
  // holding it at a barrier. An eager call finds the pool asleep, and waking it costs tens of
  // µs, more than splitting a one-row product saves (docs/PERFORMANCE.md, "Waking the pool").
  const Index blocks = 2 * parts, width = ((n + blocks - 1) / blocks + 15) / 16 * 16;
  StepLoop(d, 1, (n + width - 1) / width, work / blocks,
           [&](Index, Index p) { block(p * width, std::min(n, (p + 1) * width)); });
}

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_ENGINE_PACKED_GEMM_H_
