// The recurrent product with the batch in the SIMD lanes (AVX-512, float).
//
// packed::Gemm computes a step's C[B, cols] = h[B, K] · R[K, cols] in register blocks of 8 rows
// of h times 48 columns of R, so every weight is read once per 8 rows: four times a step at
// B = 32, the first time from L3 when the thread's slice of R is larger than its core's L2.
// Here the same product runs transposed, Cᵀ[cols, B] = Rᵀ · hᵀ: a register block is MR units
// (rows of Rᵀ, broadcast) times the whole batch (NB packets of 16 lanes of hᵀ), so each weight
// is read exactly once per step, as one stream, and hᵀ (K · 16·NB floats) stays in L1 in chunks
// of K (bf16 pair words: in L2, ProductT). On the 2-core Ice Lake development machine a
// 32 × 512 × 1024 product streaming its 2 MiB slice from L3 ran at 131-144 GF/s a core this way
// against 113-120 (docs/PERFORMANCE_STEPS.md, "The batch in the lanes").
//
// Layouts:
//   weights: PackLanes stores the units of a product (rows of Rᵀ) in panels of MR units, each
//     panel k-major, [K][MR] (the last panel [K][rows left]); exactly K · cols elements, so a
//     product's packed weights sit where packed::PackRowMajor's would.
//   hᵀ: [K, Bp], Bp = 16 · NB lanes; lanes past B hold zeros.
//   The product's Cᵀ goes through a per-thread scratch [cols, Bp] and is transposed into C's
//   rows (TransposeInto, 16 × 16 tiles in registers), added to C or written over it; a
//   standard LSTM's inference keeps it transposed up to its pointwise pass (lanes_lstm.h).
// With bf16 products (bf16_gemm.h, where bf16::Available()) the same blocks multiply pair
// words, one vdpbf16ps adding two k's of 16 lanes: a panel is [K2][MR] words, K2 = ceil(K/2),
// word (q, c) the bf16 pair (B[2q, c], B[2q+1, c]) (B[K, c] = 0 for odd K; PackLanesPairs), and
// hᵀ is [K2, Bp] words, word (q, b) = (h[b, 2q], h[b, 2q+1]) (bf16::TransposePairsInto). On the 2-core
// AMD Zen 4 development machine a 32 × 512 × 1024 product ran at 220-224 GF/s a core this way
// against 193-198 for bf16::Micro<8, 2>.
#ifndef TF_RNN_OPS_CC_ENGINE_LANES_GEMM_H_
#define TF_RNN_OPS_CC_ENGINE_LANES_GEMM_H_

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include <cpuid.h>
#include <immintrin.h>

#include "cc/engine/bf16_gemm.h"
#include "cc/engine/types.h"

namespace tfrnn {
namespace lanes {

#ifdef __AVX512F__
constexpr bool kAvailable = true;
#else
constexpr bool kAvailable = false;
#endif

// Units per register block for NB packets of batch: MR · NB accumulators + NB packets of hᵀ +
// one broadcast within AVX-512's 32 registers.
constexpr int UnitsPerBlock(int nb) { return nb <= 2 ? 12 : nb == 3 ? 8 : 6; }

// Packs the product's weights B[k, c] (k < K, c < cols) = src[k · ldk + c · ldc] as panels of
// MR = UnitsPerBlock(nb) columns, each [K][width].
// Panel c0 / MR starts at out + c0 · K. B's rows contiguous (ldc = 1, the Keras layout): each
// row read once, in order, into every panel (a panel at a time read each row's few columns at
// a 4-8 KiB stride, the lines evicted before the next panels used them).
template <typename A>
void PackLanes(int nb, Index K, Index cols, const A* src, Index ldk, Index ldc, A* out) {
  const Index mr = UnitsPerBlock(nb);
#ifdef __AVX512F__
  if constexpr (std::is_same<A, float>::value) {
    if (ldc == 1) {  // a panel's row (at most 16 floats) in one masked load and store
      for (Index k = 0; k < K; ++k) {
        for (Index c0 = 0; c0 < cols; c0 += mr) {
          const Index w = std::min(mr, cols - c0);
          const __mmask16 m = static_cast<__mmask16>((1u << w) - 1);
          _mm512_mask_storeu_ps(out + c0 * K + k * w, m,
                                _mm512_maskz_loadu_ps(m, src + k * ldk + c0));
        }
      }
      return;
    }
  }
#endif
  for (Index c0 = 0; c0 < cols; c0 += mr) {
    const Index w = std::min(mr, cols - c0);
    for (Index k = 0; k < K; ++k) {
      for (Index c = 0; c < w; ++c) out[k * w + c] = src[k * ldk + (c0 + c) * ldc];
    }
    out += K * w;
  }
}

// The same panels holding bf16 pair words (word (q, c) of a panel at q · width + c, the
// panel K2 · width words long; the packed products keep the float offsets of PackLanes), each
// packed by bf16::PackPanel from floats or (S = uint16_t) a bfloat16 op's weights as they are.
// Float only (the lanes never run for double).
template <typename A, typename S = A>
void PackLanesPairs(int nb, Index K, Index cols, const S* src, Index ldk, Index ldc, A* out) {
  if constexpr (std::is_same<A, float>::value) {
    const Index mr = UnitsPerBlock(nb), K2 = bf16::Pairs(K);
    uint32_t* o = reinterpret_cast<uint32_t*>(out);
#if TFRNN_BF16_KERNELS
    if (ldc == 1) {  // as PackLanes: pair row q of every panel in turn (panel c0 at c0 · K2)
      for (Index q = 0; q < K2; ++q) {
        const S* lo = src + 2 * q * ldk;
        const S* hi = 2 * q + 1 < K ? lo + ldk : nullptr;
        for (Index c0 = 0; c0 < cols; c0 += mr) {
          const Index w = std::min(mr, cols - c0);
          bf16::PackPairRow(lo + c0, hi != nullptr ? hi + c0 : nullptr, w, o + c0 * K2 + q * w);
        }
      }
      return;
    }
#endif
    for (Index c0 = 0; c0 < cols; c0 += mr) {
      const Index w = std::min(mr, cols - c0);
      bf16::PackPanel(K, src + c0 * ldc, ldk, ldc, w, o);
      o += K2 * w;
    }
  } else {
    std::abort();
  }
}

#ifdef __AVX512F__

// Panel rows (k's, or pair rows) ahead of the current one whose weights the micro-kernels
// prefetch: the rest of this panel's chunk, then (where the chunk is the whole K, ProductT)
// the next panel's first rows, which follow it in memory.
constexpr Index kPrefetchRows = 64;

// acc[MR units][NB packets] over K rows of a panel (`ap`, [K][MR]) and of hᵀ (`b`, [K][16·NB]),
// written to (or, acc_in, added to) ct's MR rows of 16·NB lanes.
template <int MR, int NB>
inline __attribute__((always_inline)) void Micro(Index K, const float* ap, const float* b,
                                                float* ct, bool acc_in) {
  constexpr int BP = 16 * NB;
  __m512 acc[MR][NB];
  for (int r = 0; r < MR; ++r) {
    for (int p = 0; p < NB; ++p) {
      acc[r][p] = acc_in ? _mm512_loadu_ps(ct + r * BP + 16 * p) : _mm512_setzero_ps();
    }
  }
  for (Index k = 0; k < K; ++k) {
    _mm_prefetch(reinterpret_cast<const char*>(ap + (k + kPrefetchRows) * MR), _MM_HINT_T0);
    __m512 bv[NB];
    for (int p = 0; p < NB; ++p) bv[p] = _mm512_loadu_ps(b + k * BP + 16 * p);
    for (int r = 0; r < MR; ++r) {
      const __m512 a = _mm512_set1_ps(ap[k * MR + r]);
      for (int p = 0; p < NB; ++p) acc[r][p] = _mm512_fmadd_ps(a, bv[p], acc[r][p]);
    }
  }
  for (int r = 0; r < MR; ++r) {
    for (int p = 0; p < NB; ++p) _mm512_storeu_ps(ct + r * BP + 16 * p, acc[r][p]);
  }
}

// Micro on pair words: K2 pair rows of a panel (`ap`, [K2][MR]) and of hᵀ ([K2][16·NB]).
template <int MR, int NB>
TFRNN_BF16_TARGET inline __attribute__((always_inline)) void MicroPairs(
    Index K2, const uint32_t* ap, const uint32_t* b, float* ct, bool acc_in) {
  constexpr int BP = 16 * NB;
  __m512 acc[MR][NB];
  for (int r = 0; r < MR; ++r) {
    for (int p = 0; p < NB; ++p) {
      acc[r][p] = acc_in ? _mm512_loadu_ps(ct + r * BP + 16 * p) : _mm512_setzero_ps();
    }
  }
  for (Index q = 0; q < K2; ++q) {
    _mm_prefetch(reinterpret_cast<const char*>(ap + (q + kPrefetchRows) * MR), _MM_HINT_T0);
    __m512bh bv[NB];
    for (int p = 0; p < NB; ++p) {
      const __m512i x = _mm512_loadu_si512(b + q * BP + 16 * p);
      bv[p] = reinterpret_cast<const __m512bh&>(x);
    }
    for (int r = 0; r < MR; ++r) {
      const __m512i x = _mm512_set1_epi32(static_cast<int>(ap[q * MR + r]));
      const __m512bh a = reinterpret_cast<const __m512bh&>(x);
      for (int p = 0; p < NB; ++p) acc[r][p] = _mm512_dpbf16_ps(acc[r][p], a, bv[p]);
    }
  }
  for (int r = 0; r < MR; ++r) {
    for (int p = 0; p < NB; ++p) _mm512_storeu_ps(ct + r * BP + 16 * p, acc[r][p]);
  }
}

template <int MR, int NB, bool kPairs>
TFRNN_BF16_TARGET inline __attribute__((always_inline)) void MicroAny(
    Index K, const float* ap, const float* b, float* ct, bool acc_in) {
  if constexpr (kPairs) {
    MicroPairs<MR, NB>(K, reinterpret_cast<const uint32_t*>(ap),
                       reinterpret_cast<const uint32_t*>(b), ct, acc_in);
  } else {
    Micro<MR, NB>(K, ap, b, ct, acc_in);
  }
}

// ct[cols, 16·NB] (+)= Rᵀ · hᵀ over K panel rows (k's, or with kPairs pair rows of words), the
// weights packed by PackLanes (PackLanesPairs); K in chunks whose rows of hᵀ take at most
// 24 KiB of L1 (float) or 128 KiB of L2 (pair words). A pair row does twice a float row's
// work per load of hᵀ, so hᵀ's rows can come from L2; one chunk then reads the panels as one
// stream, which the micro-kernel prefetches ahead across the panels' ends (a 32 × 1024 × 512
// product streaming its weights from L3 on each of two cores, AMD Zen 5: 488-496 GF/s a core
// against 442-481 in chunks of 24 KiB without the prefetch; the sums are the same bits, since a
// chunk's accumulators continue from ct in the same order).
template <int NB, bool kPairs>
TFRNN_BF16_TARGET void ProductT(Index K, Index cols, const float* wp, const float* hT,
                                float* ct, bool acc) {
  constexpr int BP = 16 * NB, MR = UnitsPerBlock(NB);
  constexpr Index kc = std::max(32, ((kPairs ? 128 : 24) * 1024) / (BP * 4));
  for (Index k0 = 0; k0 < K; k0 += kc) {
    const Index kl = std::min(kc, K - k0);
    const float* panel = wp;
    for (Index c0 = 0; c0 < cols; c0 += MR) {
      const Index w = std::min<Index>(MR, cols - c0);
      const float* ap = panel + k0 * w;
      const float* b = hT + k0 * BP;
      float* c = ct + c0 * BP;
      if (w == MR) {
        MicroAny<MR, NB, kPairs>(kl, ap, b, c, acc || k0 > 0);
      } else {
        switch (w) {  // the last panel's units
#define TFRNN_LANES_TAIL(n) \
  case n:                   \
    if constexpr (n < MR) MicroAny<n, NB, kPairs>(kl, ap, b, c, acc || k0 > 0); \
    break;
          TFRNN_LANES_TAIL(1)
          TFRNN_LANES_TAIL(2)
          TFRNN_LANES_TAIL(3)
          TFRNN_LANES_TAIL(4)
          TFRNN_LANES_TAIL(5)
          TFRNN_LANES_TAIL(6)
          TFRNN_LANES_TAIL(7)
          TFRNN_LANES_TAIL(8)
          TFRNN_LANES_TAIL(9)
          TFRNN_LANES_TAIL(10)
          TFRNN_LANES_TAIL(11)
#undef TFRNN_LANES_TAIL
          default:
            break;
        }
      }
      panel += K * w;
    }
  }
}

// dst[j, i] (+)= src[i, j] for i < rows, j < cols; src rows lds apart, dst rows ldd apart.
// Source rows past `rows` and columns past `cols` are not read, nor destination ones written.
inline void TransposeInto(Index rows, Index cols, const float* src, Index lds, float* dst,
                          Index ldd, bool accumulate) {
  for (Index i0 = 0; i0 < rows; i0 += 16) {
    const Index ni = std::min<Index>(16, rows - i0);
    const __mmask16 mi = static_cast<__mmask16>((1u << ni) - 1);
    for (Index j0 = 0; j0 < cols; j0 += 16) {
      const Index nj = std::min<Index>(16, cols - j0);
      const __mmask16 mj = static_cast<__mmask16>((1u << nj) - 1);
      __m512 r[16];
      for (Index i = 0; i < 16; ++i) {
        r[i] = i < ni ? _mm512_maskz_loadu_ps(mj, src + (i0 + i) * lds + j0) : _mm512_setzero_ps();
      }
      bf16::Transpose16(r);
      for (Index j = 0; j < nj; ++j) {
        float* d = dst + (j0 + j) * ldd + i0;
        __m512 v = r[j];
        if (accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mi, d));
        _mm512_mask_storeu_ps(d, mi, v);
      }
    }
  }
}

// A thread's scratch `slot` (0: a product's Cᵀ, 1: xᵀ of a step): at least n floats, 64-byte
// aligned.
inline float* Scratch(Index n, int slot = 0) {
  thread_local std::vector<float> buf[2];
  std::vector<float>& b = buf[slot];
  if (b.size() < static_cast<size_t>(n + 16)) b.resize(n + 16);
  const uintptr_t p = reinterpret_cast<uintptr_t>(b.data());
  return reinterpret_cast<float*>((p + 63) & ~uintptr_t(63));
}

// xᵀ [K, bp] of B rows of x (row b at x + b · ldx) in the calling thread's scratch, the lanes
// past B zero: the operand of a step's input product (Gemm's kx rows).
// With `pairs`: [ceil(K/2), bp] pair words (bf16::TransposePairsInto), from floats or (only
// with pairs) bf16 words.
template <typename S>
const float* TransposedRows(Index B, Index K, const S* x, Index ldx, Index bp,
                            bool pairs = false) {
  const Index rows = pairs ? bf16::Pairs(K) : K;
  float* xT = Scratch(rows * bp, 1);
  if (bp > B) {
    for (Index k = 0; k < rows; ++k) std::memset(xT + k * bp + B, 0, (bp - B) * sizeof(float));
  }
  if (pairs) {
    bf16::TransposePairsInto(B, K, x, ldx, xT, bp);
  } else if constexpr (std::is_same<S, float>::value) {
    TransposeInto(B, K, x, ldx, xT, bp, false);
  } else {
    std::abort();
  }
  return xT;
}

// C[B, cols] (+)= h · R for the weights packed by PackLanes(nb, K, cols, ...) and hᵀ [K, 16·nb]
// (lanes past B zero); C's rows ldc apart. With kx > 0 the step's input product first: C =
// x · W + h · R, W packed by PackLanes(nb, kx, cols, ...) at wx and xᵀ [kx, 16·nb]. With
// `pairs` (bf16 products): the weights packed by PackLanesPairs, hᵀ and xᵀ pair words.
// The columns go in groups of kGroupUnits (a multiple of every MR), each group's Cᵀ (at most
// 48 KiB) transposed into C while it is in cache: a product of many columns (one unit block
// of all gates) would otherwise sweep a Cᵀ larger than L2 once per K chunk.
constexpr Index kGroupUnits = 192;
// ct[cols, 16·nb] (+)= the panels at wp times b over k rows of the product (pair rows with
// `pairs`): ProductT for the batch's packets.
inline void Product(int nb, bool pairs, Index k, Index cols, const float* wp, const float* b,
                    float* ct, bool acc) {
  const Index rows = pairs ? bf16::Pairs(k) : k;
  switch (nb * 2 + (pairs ? 1 : 0)) {
    case 4: ProductT<2, false>(rows, cols, wp, b, ct, acc); break;
    case 5: ProductT<2, true>(rows, cols, wp, b, ct, acc); break;
    case 6: ProductT<3, false>(rows, cols, wp, b, ct, acc); break;
    case 7: ProductT<3, true>(rows, cols, wp, b, ct, acc); break;
    case 8: ProductT<4, false>(rows, cols, wp, b, ct, acc); break;
    default: ProductT<4, true>(rows, cols, wp, b, ct, acc); break;
  }
}
inline void Gemm(int nb, Index B, Index K, Index cols, const float* wp, const float* hT,
                 float* c, Index ldc, bool accumulate, Index kx = 0,
                 const float* wx = nullptr, const float* xT = nullptr, bool pairs = false) {
  const Index bp = 16 * nb;
  float* ct = Scratch(std::min(cols, kGroupUnits) * bp);
  for (Index c0 = 0; c0 < cols; c0 += kGroupUnits) {
    const Index g = std::min(kGroupUnits, cols - c0);
    auto product = [&](Index k, const float* w, const float* b, bool acc) {
      Product(nb, pairs, k, g, w + c0 * (pairs ? bf16::Pairs(k) : k), b, ct, acc);
    };
    if (kx > 0) product(kx, wx, xT, false);
    product(K, wp, hT, kx > 0);
    TransposeInto(g, B, ct, bp, c + c0, ldc, accumulate);
  }
}

#else

inline void Gemm(int, Index, Index, Index, const float*, const float*, float*, Index, bool,
                 Index = 0, const float* = nullptr, const float* = nullptr, bool = false) {
  std::abort();
}
template <typename S>
const float* TransposedRows(Index, Index, const S*, Index, Index, bool = false) {
  std::abort();
}
inline void TransposeInto(Index, Index, const float*, Index, float*, Index, bool) { std::abort(); }
inline void Product(int, bool, Index, Index, const float*, const float*, float*, bool) {
  std::abort();
}
inline float* Scratch(Index, int = 0) { std::abort(); }

#endif  // __AVX512F__

}  // namespace lanes

// ---------------------------------------------------------------------------------------------
// The engine's use of the lanes (rnn_cpu.cc LayerForward, rnn_cpu_stack.cc ForwardBlocks).

// The batch in the lanes (above) on AVX-512, for float products, or bf16 products on pair words
// where a bf16 spec has them (bf16::Available(); a bf16 spec with float products keeps
// packed::Gemm but for the LSTM's road, below), where the layer's road is not the pipelined
// chain or the unpacked products (`other_road`), and a unit block of U units streams more than
// a minimum of R per step: float products over kLanesMinSliceBytes, where the slice stays in
// the core's L2 the register blocks of packed::Gemm read it as fast and the transposes cost
// more than the lanes gain (docs/PERFORMANCE_STEPS.md, "The batch in the lanes"); bf16 products
// at inference over kLanesMinSliceBytesBf16, since their lanes kernel is faster than
// bf16::Micro<8, 2> inside L2 as well (in training's forward they measured level or slower:
// docs/PERFORMANCE_BF16.md, "bf16 LSTM inference on AMD Zen 4"). A bf16 op with float products
// takes the lanes only on the LSTM's road below, where a float32 op would: the same sums, so
// that its results are the float32 op's rounded (tests/boundary_cast_checks.py).
// TF_RNN_OPS_CPU_LANES=1 drops the size and training conditions, 0 turns the lanes off.
//
// A standard LSTM's inference on a batch of whole packets (LanesLstmFor) keeps its gates in
// the lanes up to the pointwise pass (lanes_lstm.h), which is faster than the register blocks
// at 48 and 64 rows whatever the slice (float 100×64×256×256: 32.7 against 35.1 ms, 100×64×32×64
// 1.78 against 2.02), and on 32 rows in a block of all units (a batch block of 32 rows on its
// thread) or where the slice of [W; R] a unit block streams per step is over
// kLanesMinSliceBytes (100×32×256×320: 22.3 against 24.1 ms; below it, 100×32×128×256 took
// 14.0 against 13.6): docs/PERFORMANCE_STEPS.md, "The LSTM's gates in the lanes".
//
// On a core with full 512-bit datapaths (WideCore: AMD Zen 5, twice Zen 4's FMA and vdpbf16ps
// rate; Zen 4 splits a 512-bit operation in two) the products of the register blocks on a
// 16-row batch block fall further behind, and the LSTM's gates in the lanes pay from smaller
// slices of [W; R]: over kLanesLstmWideFloat and kLanesLstmWideBf16 (2 threads, 100×32×128×H,
// ms, fastest of 80 calls in two rounds: float H = 256 6.5-6.7 against 7.6-9.6, H = 200
// 6.4-6.8 against 5.1-5.8 (588 KiB, left out); bf16 H = 200 2.9-3.0 against 3.1-3.5, H = 256
// 4.4-4.8 against 5.0-5.6, H = 128 2.4-2.7 against 1.9-2.0 (131 KiB, left out);
// docs/PERFORMANCE_BF16.md, "AMD Zen 5").
constexpr double kLanesMinSliceBytes = 1024.0 * 1024.0;
constexpr double kLanesMinSliceBytesBf16 = 256.0 * 1024.0;
constexpr double kLanesLstmWideFloat = 640.0 * 1024.0;
constexpr double kLanesLstmWideBf16 = 192.0 * 1024.0;
// Whether the CPU is an AMD core of family 1Ah (Zen 5) or later.
inline bool WideCore() {
  static const bool wide = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(1, &a, &b, &c, &d) == 0) return false;
    const unsigned family = ((a >> 8) & 0xfu) + ((a >> 20) & 0xffu);
    __builtin_cpu_init();
    return __builtin_cpu_is("amd") != 0 && family >= 0x1a;
  }();
  return wide;
}
template <typename A>
bool LanesFor(const RnnSpec& s, bool other_road, Index U, bool lstm_layer_ok) {
  const LanesMode m = LanesSetting();
  const bool b16 = bf16::ProductsFor(s);
  const bool lstm = LanesLstmFor(s, lstm_layer_ok);
  // bf16 products on AMX tiles (amx_gemm.h) take the packed products: the lanes' kernels
  // multiply on vdpbf16ps, which runs at half the float FMA rate where the CPU has AMX.
  if (b16 && bf16::amx::Enabled()) return false;
  if (!std::is_same<A, float>::value || !lanes::kAvailable || other_road ||
      m == LanesMode::kOff || RnnLanesWidth(s) == 0 || (s.bf16 && !b16 && !lstm)) {
    return false;
  }
  if (m == LanesMode::kForce) return true;
  const double elem = b16 ? 2.0 : sizeof(A);
  const double slice = double(RnnK(s) * U) * double(RnnHs(s)) * elem;
  if (lstm) {
    const double with_w = double(RnnK(s) * U) * double(RnnHs(s) + RnnInWidth(s, 0)) * elem;
    const double min_w = !WideCore() ? kLanesMinSliceBytes
                         : b16       ? kLanesLstmWideBf16
                                     : kLanesLstmWideFloat;
    if (s.B >= 48 || U >= s.H || with_w > min_w) return true;
  }
  return b16 ? !s.training && slice > kLanesMinSliceBytesBf16 : slice > kLanesMinSliceBytes;
}
// lanes::Gemm, TransposedRows and TransposeInto (dst = srcᵀ; with `pairs` bf16 pair words,
// TransposePairsInto) for float; never called for double.
template <typename A>
void LanesGemm(Index bp, Index B, Index K, Index cols, const A* wp, const A* hT, A* c, Index ldc,
               bool accumulate, Index kx, const A* wx, const A* xT, bool pairs) {
  if constexpr (std::is_same<A, float>::value) {
    lanes::Gemm(int(bp / 16), B, K, cols, wp, hT, c, ldc, accumulate, kx, wx, xT, pairs);
  } else {
    std::abort();
  }
}
// (S: A, or with pairs a bfloat16 op's x as its bf16 words.)
template <typename A, typename S>
const A* LanesRows(Index B, Index K, const S* x, Index ldx, Index bp, bool pairs) {
  if constexpr (std::is_same<A, float>::value) {
    return lanes::TransposedRows(B, K, x, ldx, bp, pairs);
  } else {
    std::abort();
  }
}
template <typename A>
void LanesTranspose(Index rows, Index cols, const A* src, Index lds, A* dst, Index ldd,
                    bool pairs) {
  if constexpr (std::is_same<A, float>::value) {
    if (pairs) {
      bf16::TransposePairsInto(rows, cols, src, lds, dst, ldd);
    } else {
      lanes::TransposeInto(rows, cols, src, lds, dst, ldd, false);
    }
  } else {
    std::abort();
  }
}

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_ENGINE_LANES_GEMM_H_
