// GEMMs of bfloat16 operands with float accumulation (AVX512_BF16's vdpbf16ps), for the engine
// running a bfloat16 op: its tensors arrive as float holding bf16 values, and the products
// multiply them at twice the float FMA rate. Only the products change; the pointwise maths
// stays in float.
//
//   C[r, c] (+)= Σ_k bf16(A[r, k]) · bf16(B[k, c])      (products exact, sums in float)
//
// A bf16 op's inputs and weights are bf16 values already; what gets rounded is what the
// engine computed in float: h_{t-1} entering the recurrent product, and the gate gradients
// entering the backward products (the same operands a bf16 GEMM of PyTorch or oneDNN sees).
//
// Packed B: panels of 32, then 16 columns, then the last 1-15 columns as one panel (the panel
// at column c starting at float slot c · K), each holding ceil(K/2) pair rows of w 32-bit
// words, the word of (p, c) being (B[2p, c], B[2p+1, c]) (low half first; B[K, c] = 0 for odd
// K). One 512-bit load is a pair row of 16 columns, one vdpbf16ps adds two k's of 16 columns.
//
// Compiled into the avx512 engine only, the kernels with a function-level target, and run
// only where the CPU reports AVX512_BF16 and the default or the environment wants them
// (Available()).
#ifndef TF_RNN_OPS_CC_ENGINE_BF16_GEMM_H_
#define TF_RNN_OPS_CC_ENGINE_BF16_GEMM_H_

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <vector>

#include "cc/engine/amx_gemm.h"
#include "cc/engine/bf16_bits.h"
#include "cc/engine/cpu_device.h"
#include "cc/engine/types.h"

#if defined(__AVX512F__) && defined(__GNUC__)
#include <immintrin.h>
#define TFRNN_BF16_KERNELS 1
#define TFRNN_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#else
#define TFRNN_BF16_KERNELS 0
#define TFRNN_BF16_TARGET
#endif

namespace tfrnn {

// Depth of a K chunk in the packed products (packed::PanelRows, bf16::GemmConverted). C is
// loaded and stored once per chunk, and every row block passes over the panel's chunk of B,
// so A's chunk of all `rows` rows (elements of `elem_bytes`) is read once per panel: chunks
// as deep as keep that within kChunkABytes of L2 (CPUs with AVX-512 have 1 MiB or more), from
// `lo` (a full panel's chunk in 20 KiB of L1) to kMaxChunkDepth. At 20×128×512×1024 (K =
// 1024, 128 rows) C went through L2 ten times a step in float and four times in bf16; with
// these chunks the LSTM's inference took 156 instead of 165 ms (float) and 83 instead of 91
// ms (bf16) on 2 cores, bf16 training 282 instead of 305 ms (CHANGELOG, session 44).
constexpr Index kChunkABytes = Index(512) << 10;
constexpr Index kMaxChunkDepth = 1024;
inline Index ChunkDepthFor(Index rows, Index elem_bytes, Index lo) {
  const Index fit = kChunkABytes / (std::max<Index>(rows, 1) * elem_bytes);
  return std::min(kMaxChunkDepth, std::max(lo, fit));
}

namespace bf16 {

// Whether the bf16 products run: the avx512 engine, a CPU with AVX512_BF16, and the
// environment variable TF_RNN_OPS_BF16_GEMM: "0" never, "1" wherever the CPU has the
// instruction, unset (or anything else) on AMD CPUs, and where the products run on AMX tiles
// (amx_gemm.h; TF_RNN_OPS_BF16_AMX=0 turns them off) (read once per process). By measurement
// (docs/PERFORMANCE.md "bfloat16"): on AMD Zen 4 the bf16 products made bf16 LSTM/GRU
// training 1.2-1.7x as fast as float products; on Intel Xeons `vdpbf16ps` runs at half the
// float FMA rate or less (1.3-1.75x slower training), the AMX tiles at 8-15 times it
// (docs/PERFORMANCE_AMX.md).
inline bool Available() {
#if TFRNN_BF16_KERNELS
  static const bool on = [] {
    const int e = EnvChoice("TF_RNN_OPS_BF16_GEMM", {"0", "1"});
    if (e == 0) return false;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512bf16") == 0) return false;
    if (e == 1) return true;
    return __builtin_cpu_is("amd") != 0 || amx::Enabled();
  }();
  return on;
#else
  return false;
#endif
}

// Whether a spec's products run in bf16: a bfloat16 op's spec (RnnSpec or LstmCellSpec with
// `bf16` set) where the products are Available().
template <typename Spec>
inline bool ProductsFor(const Spec& s) {
  return s.bf16 && Available();
}

constexpr Index kLanes = 16;          // floats per 512-bit register
constexpr Index kWide = 2 * kLanes;   // columns of a full panel
constexpr int kRowsPerBlock = 8;      // rows of A per register block (16 accumulators)
// Pair rows per K chunk of a product of `rows` rows (ChunkDepthFor; at least 160 pair rows,
// 20 KiB of a full panel).
constexpr Index kMinChunk = 160;
inline Index ChunkPairs(Index rows) {
  return ChunkDepthFor(rows, Index(sizeof(uint32_t)), kMinChunk);
}

inline Index Pairs(Index K) { return (K + 1) / 2; }

// Buffers of the products' operands that start on a cache line (64 bytes), and the row stride
// of A's pair words in them: an AMX tile row that straddles two lines takes two loads, and
// the products on tiles ran 1.3-2.3x as fast with A's rows aligned (amx_gemm.h).
inline Index WordStride(Index K) {
  const Index K2 = Pairs(K);
  return amx::Enabled() ? (K2 + amx::kTilePairs - 1) / amx::kTilePairs * amx::kTilePairs : K2;
}
struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
template <typename T>
using AlignedArray = std::unique_ptr<T[], FreeDeleter>;
template <typename T>
AlignedArray<T> NewAligned(Index n) {
  const size_t bytes = (size_t(std::max<Index>(n, 1)) * sizeof(T) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, bytes);
  if (p == nullptr) throw std::bad_alloc();
  return AlignedArray<T>(static_cast<T*>(p));
}
// A thread's buffer, grown (its contents dropped) as calls need.
template <typename T>
struct AlignedScratch {
  AlignedArray<T> p;
  Index cap = 0;
  T* Get(Index n) {
    if (n > cap || p == nullptr) {
      p = NewAligned<T>(n);
      cap = n;
    }
    return p.get();
  }
};

// Width of the panel that starts at column c of a B with `cols` columns: 32, then the last
// 1-31 columns as one panel (a last register of 1-15 columns read and written masked: a column
// count off the grid runs at the rate of its neighbours). Every multiple of 32 below cols
// starts a panel (GemmLarge's tiles and slabs split B's columns there).
inline Index PanelWidth(Index c, Index cols) {
  return c + kWide <= cols ? kWide : cols - c;
}

// Whether row k of a packed B of K rows is packed as zeros (past K, or in [zk0, zk1)).
inline bool PackedZero(Index k, Index K, Index zk0, Index zk1) {
  return k >= K || (k >= zk0 && k < zk1);
}

#if TFRNN_BF16_KERNELS
// _mm512_permutexvar_epi16 indices taking _mm512_cvtne2ps_pbh(hi, lo) (lo's 16 bf16 values,
// then hi's) to 16 pair words (lo_j, hi_j).
alignas(64) inline constexpr uint16_t kPairInterleave[32] = {
    0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23,
    8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};

// The 16 pair words (bf16(lo_j), bf16(hi_j)) of two packets of floats.
TFRNN_BF16_TARGET inline __m512i PairWords(__m512 lo, __m512 hi) {
  const __m512bh v = _mm512_cvtne2ps_pbh(hi, lo);
  return _mm512_permutexvar_epi16(_mm512_load_si512(kPairInterleave),
                                  reinterpret_cast<const __m512i&>(v));
}

// A packet of floats from 16 elements of a source (masked: zeros past m): floats, or bf16
// words (a bfloat16 op's operands read as they are, widened exactly).
TFRNN_BF16_TARGET inline __m512 LoadSource(const float* p, __mmask16 m) {
  return _mm512_maskz_loadu_ps(m, p);
}
TFRNN_BF16_TARGET inline __m512 LoadSource(const uint16_t* p, __mmask16 m) {
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}

// Lanes 0-7 (WidenLow) and 8-15 (WidenHigh) of v as doubles (exact).
TFRNN_BF16_TARGET inline __m512d WidenLow(__m512 v) {
  return _mm512_cvtps_pd(_mm512_castps512_ps256(v));
}
TFRNN_BF16_TARGET inline __m512d WidenHigh(__m512 v) {
  return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

// Pair row q of a panel of w columns of a row-major B (sc = 1): rows 2q and 2q+1 (nullptr:
// zeros) converted and interleaved, 16 columns per 512-bit store; a last partial packet is read
// and written masked (nothing past column w). S: float or bf16 words (LoadSource), the words
// interleaved as they are: a normal value's bits as its widening and rounding give them (a
// denormal one stays, where rounding would flush it: vdpbf16ps reads it as zero either way).
template <typename S>
TFRNN_BF16_TARGET inline void PackPairRow(const S* lo, const S* hi, Index w, uint32_t* out) {
  // Word j of the result = bf16 of column j of lo (low half) and of hi (high half).
  for (Index j = 0; j < w; j += kLanes) {
    const __mmask16 m =
        w - j >= kLanes ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (w - j)) - 1);
    if constexpr (std::is_same<S, uint16_t>::value) {
      const __m512i l = lo ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, lo + j))
                           : _mm512_setzero_si512();
      const __m512i h = hi ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, hi + j))
                           : _mm512_setzero_si512();
      _mm512_mask_storeu_epi32(out + j, m, _mm512_or_si512(l, _mm512_slli_epi32(h, 16)));
      continue;
    }
    const __m512 l = lo ? LoadSource(lo + j, m) : _mm512_setzero_ps();
    const __m512 h = hi ? LoadSource(hi + j, m) : _mm512_setzero_ps();
    _mm512_mask_storeu_epi32(out + j, m, PairWords(l, h));
  }
}

// Pair rows [q0, q1) of one panel of w columns of a row-major B (sc = 1; row k at src + k·sk
// from the panel's first column; rows PackedZero(k, K, zk0, zk1) as zeros) at p + q·w, as
// PackPairRow packs each. sums (floats only; nullable): each column's elements added in double
// in row order (ColumnSum's order), held in registers over the pair rows: the same additions
// as one row at a time through memory. Per 16-column packet all pair rows of the range, so a
// panel's words of the range are one contiguous run (packed pair row by pair row across all
// the panels, each store of a row's 128 bytes landed a panel, K·w floats, past the last).
template <typename S>
TFRNN_BF16_TARGET inline void PackPanelRows(const S* src, Index sk, Index K, Index zk0,
                                            Index zk1, Index q0, Index q1, Index w, uint32_t* p,
                                            double* sums) {
  for (Index j = 0; j < w; j += kLanes) {
    const Index n = std::min<Index>(kLanes, w - j);
    const __mmask16 m = n == kLanes ? __mmask16(0xffff) : static_cast<__mmask16>((1u << n) - 1);
    const __mmask8 ml = static_cast<__mmask8>(n >= 8 ? 0xff : (1u << n) - 1);
    const __mmask8 mh = static_cast<__mmask8>(n >= 16 ? 0xff : n <= 8 ? 0 : (1u << (n - 8)) - 1);
    __m512d s_lo = _mm512_setzero_pd(), s_hi = _mm512_setzero_pd();
    if (sums != nullptr) {
      s_lo = _mm512_maskz_loadu_pd(ml, sums + j);
      s_hi = _mm512_maskz_loadu_pd(mh, sums + j + 8);
    }
    for (Index q = q0; q < q1; ++q) {
      const S* lo = PackedZero(2 * q, K, zk0, zk1) ? nullptr : src + 2 * q * sk + j;
      const S* hi = PackedZero(2 * q + 1, K, zk0, zk1) ? nullptr : src + (2 * q + 1) * sk + j;
      if constexpr (std::is_same<S, uint16_t>::value) {
        PackPairRow(lo, hi, n, p + q * w + j);
        continue;
      }
      const __m512 l = lo ? LoadSource(lo, m) : _mm512_setzero_ps();
      const __m512 h = hi ? LoadSource(hi, m) : _mm512_setzero_ps();
      if (sums != nullptr) {
        if (lo != nullptr) {
          s_lo = _mm512_add_pd(s_lo, WidenLow(l));
          s_hi = _mm512_add_pd(s_hi, WidenHigh(l));
        }
        if (hi != nullptr) {
          s_lo = _mm512_add_pd(s_lo, WidenLow(h));
          s_hi = _mm512_add_pd(s_hi, WidenHigh(h));
        }
      }
      _mm512_mask_storeu_epi32(p + q * w + j, m, PairWords(l, h));
    }
    if (sums != nullptr) {
      _mm512_mask_storeu_pd(sums + j, ml, s_lo);
      _mm512_mask_storeu_pd(sums + j + 8, mh, s_hi);
    }
  }
}

// Rows [r0, r1) of A[rows, K] (element (r, k) at a[r · lda + k]) as pair words, K2 per row.
TFRNN_BF16_TARGET inline void ConvertRows(Index r0, Index r1, Index K, const float* a,
                                          Index lda, uint32_t* out, Index ldo = 0) {
  const Index K2 = Pairs(K), ostride = ldo > 0 ? ldo : K2;  // out's row stride
  for (Index r = r0; r < r1; ++r) {
    const float* s = a + r * lda;
    uint32_t* o = out + r * ostride;
    // 32 elements (16 pair words) a conversion, the last 1-32 masked (zero past K).
    for (Index k = 0; k < K; k += 2 * kLanes) {
      const Index n = std::min(K - k, 2 * kLanes), words = (n + 1) / 2;
      const __mmask16 m_lo = __mmask16((1u << std::min(n, kLanes)) - 1);
      const __mmask16 m_hi = __mmask16((1u << std::max<Index>(n - kLanes, 0)) - 1);
      const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(m_hi, s + k + kLanes),
                                             _mm512_maskz_loadu_ps(m_lo, s + k));
      _mm512_mask_storeu_epi32(o + k / 2, __mmask16((1u << words) - 1),
                               reinterpret_cast<const __m512i&>(v));
    }
  }
}

// 16 × 16 transpose in registers: on exit r[i] holds column i of the rows r[0..15] on entry
// (also lanes_gemm.h's float transposes).
inline __attribute__((always_inline)) void Transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    const int a = 4 * i;
    u[a] = _mm512_shuffle_ps(t[a], t[a + 2], 0x44);
    u[a + 1] = _mm512_shuffle_ps(t[a], t[a + 2], 0xEE);
    u[a + 2] = _mm512_shuffle_ps(t[a + 1], t[a + 3], 0x44);
    u[a + 3] = _mm512_shuffle_ps(t[a + 1], t[a + 3], 0xEE);
  }
  // u[4i + j]: lane block q holds rows 4i..4i+3 of column 4q + j.
  for (int j = 0; j < 4; ++j) {
    t[j] = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88);       // blocks 0, 2 of rows 0-7
    t[4 + j] = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xDD);   // blocks 1, 3 of rows 0-7
    t[8 + j] = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88);
    t[12 + j] = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xDD);
  }
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0x88);           // column j
    r[8 + j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0xDD);       // column 8 + j
    r[4 + j] = _mm512_shuffle_f32x4(t[4 + j], t[12 + j], 0x88);  // column 4 + j
    r[12 + j] = _mm512_shuffle_f32x4(t[4 + j], t[12 + j], 0xDD); // column 12 + j
  }
}

// dst word (q, i) = the bf16 pair (src[i, 2q], src[i, 2q + 1]) for i < rows, 2q < cols (the
// pair's second element 0 past cols); src rows lds apart, dst's pair rows ldd words apart
// (dst: words in float slots). Per 16 rows and 32 columns: two 16 × 16 transposes in
// registers, then per pair of columns one conversion and interleave (bf16::PairWords).
// S: float or bf16 words (LoadSource).
template <typename S>
TFRNN_BF16_TARGET inline void TransposePairsInto(Index rows, Index cols, const S* src, Index lds,
                                                 float* dst, Index ldd) {
  uint32_t* out = reinterpret_cast<uint32_t*>(dst);
  for (Index i0 = 0; i0 < rows; i0 += 16) {
    const Index ni = std::min<Index>(16, rows - i0);
    const __mmask16 mi = static_cast<__mmask16>((1u << ni) - 1);
    for (Index j0 = 0; j0 < cols; j0 += 32) {
      const Index na = std::min<Index>(16, cols - j0);
      const Index nb = std::max<Index>(0, std::min<Index>(16, cols - j0 - 16));
      const __mmask16 ma = static_cast<__mmask16>((1u << na) - 1);
      const __mmask16 mb = static_cast<__mmask16>((1u << nb) - 1);
      __m512 ra[16], rb[16];
      for (Index i = 0; i < 16; ++i) {
        const S* row = src + (i0 + i) * lds + j0;
        ra[i] = i < ni ? LoadSource(row, ma) : _mm512_setzero_ps();
        rb[i] = i < ni && nb > 0 ? LoadSource(row + 16, mb) : _mm512_setzero_ps();
      }
      Transpose16(ra);
      Transpose16(rb);
      const Index np = (na + nb + 1) / 2;
      for (Index p = 0; p < np; ++p) {
        const __m512 lo = p < 8 ? ra[2 * p] : rb[2 * p - 16];
        const __m512 hi = p < 8 ? ra[2 * p + 1] : rb[2 * p - 15];
        _mm512_mask_storeu_epi32(out + (j0 / 2 + p) * ldd + i0, mi, bf16::PairWords(lo, hi));
      }
    }
  }
}

#endif

// One panel of w columns of B (element (k, c) at src[k · sk + c · sc], c < w) as ceil(K/2)
// pair rows of w words, word (q, c) at p[q · w + c]; rows [zk0, zk1) as zeros. Vectorised
// where B's k's are contiguous (sk = 1: the columns' pair words transposed by
// TransposePairsInto). The panels of PackRange below and of lanes_gemm.h's PackLanesPairs,
// which pack a B of contiguous columns (sc = 1) themselves: in blocks of pair rows panel by
// panel (PackPanelRows), and pair row by pair row across the panels (PackPairRow). S: float
// or bf16 words.
inline float SourceValue(float v) { return v; }
inline float SourceValue(uint16_t v) { return Widen(v); }
template <typename S>
void PackPanel(Index K, const S* src, Index sk, Index sc, Index w, uint32_t* p, Index zk0 = 0,
               Index zk1 = 0) {
  const Index K2 = Pairs(K);
  auto zero = [&](Index k) { return PackedZero(k, K, zk0, zk1); };
#if TFRNN_BF16_KERNELS
  if (sk == 1 && zk0 >= zk1) {
    TransposePairsInto(w, K, src, sc, reinterpret_cast<float*>(p), w);
    return;
  }
#endif
  auto at = [&](Index k, Index c) { return zero(k) ? 0.f : SourceValue(src[k * sk + c * sc]); };
  for (Index j = 0; j < w; ++j) {
    for (Index q = 0; q < K2; ++q) p[q * w + j] = Pair(at(2 * q, j), at(2 * q + 1, j));
  }
}

// Packs B[K, cols], element (k, c) at src[k · sk + c · sc], into the layout above; rows
// [zk0, zk1) packed as zeros. Columns [c0, c1) only (c0, c1 on panel boundaries). S: float or
// bf16 words. sums (nullable; float B with sc = 1 and no zero rows only): sums[c] += the
// column's elements in row order, in double.
constexpr Index kPackPairs = 32;  // pair rows per block of PackRange's row-major path
template <typename S>
void PackRange(Index K, Index cols, const S* src, Index sk, Index sc, float* out, Index zk0,
               Index zk1, Index c0, Index c1, double* sums = nullptr) {
#if TFRNN_BF16_KERNELS
  if (sc == 1) {  // per block of kPackPairs pair rows (src's rows in L2), panel by panel
    uint32_t* o = reinterpret_cast<uint32_t*>(out);
    const Index K2 = Pairs(K);
    for (Index q0 = 0; q0 < K2; q0 += kPackPairs) {
      const Index q1 = std::min(K2, q0 + kPackPairs);
      for (Index c = c0, w; c < c1; c += w) {
        w = PanelWidth(c, cols);
        PackPanelRows(src + c, sk, K, zk0, zk1, q0, q1, w, o + c * K,
                      sums != nullptr ? sums + c : nullptr);
      }
    }
    return;
  }
#endif
  if (sums != nullptr) std::abort();  // (GemmLarge sums such a B apart)
  for (Index c = c0; c < c1;) {
    const Index w = PanelWidth(c, cols);
    PackPanel(K, src + c * sc, sk, sc, w, reinterpret_cast<uint32_t*>(out + c * K), zk0, zk1);
    c += w;
  }
}
template <typename S>
void Pack(Index K, Index cols, const S* src, Index sk, Index sc, float* out, Index zk0 = 0,
          Index zk1 = 0) {
  PackRange(K, cols, src, sk, sc, out, zk0, zk1, 0, cols);
}

// a_sums[r] += op(A)'s row r over k, b_sums[c] += op(B)'s column c over k (op as GemmLarge's;
// nullable), each element added in double in k's order: GemmLarge's sums where its conversions
// do not take them, one element at a time.
template <typename S>
void AddSums(bool ta, bool tb, Index m, Index n, Index k, const S* a, const S* b,
             double* a_sums, double* b_sums) {
  for (Index q = 0; q < k; ++q) {
    if (a_sums != nullptr) {
      for (Index r = 0; r < m; ++r) {
        a_sums[r] += double(SourceValue(ta ? a[q * m + r] : a[r * k + q]));
      }
    }
    if (b_sums != nullptr) {
      for (Index j = 0; j < n; ++j) {
        b_sums[j] += double(SourceValue(tb ? b[j * k + q] : b[q * n + j]));
      }
    }
  }
}

#if TFRNN_BF16_KERNELS

// One register block: R rows of A (pair words, row stride lda) times NP registers of a
// panel's pair rows (row q at b + q · w), over K2 pairs. kTail: a last panel whose last
// register holds fewer than 16 columns (w = 16 · (NP - 1) + 1 .. 16 · NP - 1), that register's
// part of the pair rows and of C's columns read and written under a mask.
// pf, npf: npf lines of B's next piece (GemmConverted) to fetch, one every K2 / npf pairs.
template <int R, int NP, bool kTail = false>
TFRNN_BF16_TARGET inline void Micro(Index K2, const uint32_t* a, Index lda, const uint32_t* b,
                                    Index w, float* c, Index ldc, bool accumulate,
                                    const char* pf = nullptr, Index npf = 0) {
  static_assert(NP <= 2, "the store loop's unroll pragma below covers NP <= 2");
  // The last register's columns (all 16 unless kTail).
  const __mmask16 m =
      kTail ? static_cast<__mmask16>((1u << (w - (NP - 1) * kLanes)) - 1) : __mmask16(0xffff);
  __m512 acc[R][NP];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < NP; ++j) acc[r][j] = _mm512_setzero_ps();
  // C's lines (rows ldc apart, which the hardware prefetchers do not follow; a step's gx rows
  // come from memory) are fetched while the K loop runs: 2-4 % of a bf16 LSTM inference.
  // (Prefetching this panel's own pair rows ahead made it slower; B's next piece is fetched
  // through pf only when B streams from L3: GemmConverted.)
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < NP; ++j) {
      _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + j * kLanes), _MM_HINT_T0);
    }
  }
  const Index every = npf > 0 ? std::max<Index>(1, K2 / npf) : K2;
  Index q = 0, fetched = 0;
  while (q < K2) {
    if (fetched < npf) _mm_prefetch(pf + 64 * fetched++, _MM_HINT_T0);
    for (const Index qe = std::min(K2, q + every); q < qe; ++q) {
      __m512bh bv[NP];
      for (int j = 0; j < NP; ++j) {
        // (The last register's mask; all ones for the others.)
        const __m512i x =
            kTail ? _mm512_maskz_loadu_epi32(j == NP - 1 ? m : __mmask16(0xffff),
                                             b + q * w + j * kLanes)
                  : _mm512_loadu_si512(b + q * w + j * kLanes);
        bv[j] = reinterpret_cast<const __m512bh&>(x);
      }
      for (int r = 0; r < R; ++r) {
        const __m512i x = _mm512_set1_epi32(static_cast<int>(a[r * lda + q]));
        const __m512bh av = reinterpret_cast<const __m512bh&>(x);
        for (int j = 0; j < NP; ++j) acc[r][j] = _mm512_dpbf16_ps(acc[r][j], av, bv[j]);
      }
    }
  }
  while (fetched < npf) _mm_prefetch(pf + 64 * fetched++, _MM_HINT_T0);
  // Unrolled whole (GCC's own limit leaves the masked version's loops rolled, and acc then
  // lives on the stack: a store of every accumulator at every pair).
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
    for (int j = 0; j < NP; ++j) {
      float* dst = c + r * ldc + j * kLanes;
      __m512 v = acc[r][j];
      if constexpr (kTail) {
        const __mmask16 mj = j == NP - 1 ? m : __mmask16(0xffff);
        if (accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mj, dst));
        _mm512_mask_storeu_ps(dst, mj, v);
      } else {
        if (accumulate) v = _mm512_add_ps(v, _mm512_loadu_ps(dst));
        _mm512_storeu_ps(dst, v);
      }
    }
  }
}

// The register blocks of `rows` rows over one panel's K2 pairs; the lines [pf, pf + 64·npf)
// (B's next piece: GemmConverted) fetched in equal parts by the blocks.
template <int NP, bool kTail = false>
TFRNN_BF16_TARGET inline void PanelRows(Index rows, Index K2, const uint32_t* a, Index lda,
                                        const uint32_t* b, Index w, float* c, Index ldc,
                                        bool accumulate, const char* pf = nullptr,
                                        Index npf = 0) {
  const Index blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  const Index per = blocks > 0 ? (npf + blocks - 1) / blocks : 0;
  Index r = 0, done = 0;
  // The next block's share of the lines: from `done`, at most `per`.
  auto share = [&](Index* n) {
    *n = std::min(per, npf - done);
    const char* p = pf + 64 * done;
    done += *n;
    return p;
  };
  Index n = 0;
  for (; r + kRowsPerBlock <= rows; r += kRowsPerBlock) {
    const char* p = share(&n);
    Micro<kRowsPerBlock, NP, kTail>(K2, a + r * lda, lda, b, w, c + r * ldc, ldc, accumulate,
                                    p, n);
  }
  const uint32_t* ar = a + r * lda;
  float* cr = c + r * ldc;
  const char* p = share(&n);
  switch (rows - r) {
    case 7: Micro<7, NP, kTail>(K2, ar, lda, b, w, cr, ldc, accumulate, p, n); break;
    case 6: Micro<6, NP, kTail>(K2, ar, lda, b, w, cr, ldc, accumulate, p, n); break;
    case 5: Micro<5, NP, kTail>(K2, ar, lda, b, w, cr, ldc, accumulate, p, n); break;
    case 4: Micro<4, NP, kTail>(K2, ar, lda, b, w, cr, ldc, accumulate, p, n); break;
    case 3: Micro<3, NP, kTail>(K2, ar, lda, b, w, cr, ldc, accumulate, p, n); break;
    case 2: Micro<2, NP, kTail>(K2, ar, lda, b, w, cr, ldc, accumulate, p, n); break;
    case 1: Micro<1, NP, kTail>(K2, ar, lda, b, w, cr, ldc, accumulate, p, n); break;
    default: break;
  }
}

// Packed B of a product from this many bytes on streams from L3 (or memory) at every call, on
// any CPU the engine targets (L2 of at most 2 MiB a core): GemmConverted then fetches each
// piece of B while the row blocks of the piece before it run (a piece is a panel's chunk,
// read from L1 or L2 by the later row blocks; fetched lines are spread over the blocks, one every
// K2 / lines pairs). At 128 x 1024 x 4096 (8 MiB of B) 200-210 -> 209-212 GF/s a core; at
// 2 MiB and less, level, so smaller products do without.
constexpr Index kStreamedBytes = Index(4) << 20;

// C[rows, c0:c1] (+)= A · B over the panels of columns [c0, c1) (panel boundaries), A as
// pair words (K2 = ceil(K/2) per row, stride lda), B packed by Pack with the same K and cols.
// K in chunks (ChunkPairs). streams: B's next piece fetched on tiles too (amx::kStreamBytes).
TFRNN_BF16_TARGET inline void GemmConverted(Index rows, Index K, Index cols, Index c0,
                                            Index c1, const uint32_t* a, Index lda,
                                            const float* bp, float* c, Index ldc,
                                            bool accumulate, bool streams = false) {
  const Index K2 = Pairs(K);
  const bool tiles = amx::Enabled();
  const bool fetch =
      (c1 - c0) * K2 * Index(sizeof(uint32_t)) >= kStreamedBytes || (tiles && streams);
  // A's rows copied to cache lines where they do not start on them (the buffers above do).
  if (tiles && (reinterpret_cast<uintptr_t>(a) % 64 != 0 || lda % amx::kTilePairs != 0)) {
    thread_local AlignedScratch<uint32_t> copy;
    const Index ld = WordStride(K);
    uint32_t* t = copy.Get(rows * ld);
    for (Index r = 0; r < rows; ++r) std::memcpy(t + r * ld, a + r * lda, K2 * sizeof(uint32_t));
    a = t;
    lda = ld;
  }
  const Index chunk = tiles ? std::max(amx::kTilePairs, ChunkPairs(rows) / amx::kTilePairs *
                                                            amx::kTilePairs)
                            : ChunkPairs(rows);
  // The piece of B after the panel at col (w columns) of the chunk of kq pairs from q0 (the
  // next panel's chunk, else the first panel's next chunk), to fetch while that panel's row
  // blocks run: *pf its bytes, *npf its cache lines (none where B does not stream, or at the
  // last piece).
  auto next_piece = [&](Index col, Index w, Index q0, Index kq, const char** pf, Index* npf) {
    *pf = nullptr;
    *npf = 0;
    if (!fetch) return;
    Index ncol = col + w, nq = q0, pairs = kq;
    if (ncol >= c1) {
      if (q0 + kq >= K2) return;
      ncol = c0;
      nq = q0 + kq;
      pairs = std::min(chunk, K2 - nq);
    }
    const Index nw = PanelWidth(ncol, cols);
    *pf = reinterpret_cast<const char*>(reinterpret_cast<const uint32_t*>(bp + ncol * K) +
                                        nq * nw);
    *npf = (pairs * nw * Index(sizeof(uint32_t)) + 63) / 64;
  };
  // On tiles, per chunk: the whole tiles of rows over the whole tiles of pairs, then over the
  // pairs past them, then the rows past the whole tiles of rows the same two ways; each part
  // over the panels of 16 or 32 columns, then the last panel of other widths, each under its
  // own tile configuration (amx::FillConfig).
  const Index rt = rows / amx::kTileRows * amx::kTileRows;
  Index cfg[4] = {0, 0, 0, 0};  // the tiles' configuration: rows, pairs, columns (0: none yet)
  for (Index q0 = 0; q0 < K2; q0 += chunk) {
    const Index kq = std::min(chunk, K2 - q0);
    const bool acc = accumulate || q0 > 0;
    if (tiles) {
      const Index kt = kq / amx::kTilePairs * amx::kTilePairs;
      for (int part = 0; part < 4; ++part) {
        const bool tail_rows = part >= 2, tail_pairs = part % 2 == 1;
        const Index r0 = tail_rows ? rt : 0, r1 = tail_rows ? rows : rt;
        const Index k0 = tail_pairs ? kt : 0, k1 = tail_pairs ? kq : kt;
        if (r1 <= r0 || k1 <= k0) continue;
        const bool pacc = acc || k0 > 0;  // the pairs past the whole tiles add into C
        for (int last = 0; last < 2; ++last) {
          for (Index col = c0; col < c1;) {
            const Index w = PanelWidth(col, cols);
            if ((w == kWide || w == kLanes) == (last == 1)) {
              col += w;
              continue;
            }
            const Index want[4] = {tail_rows ? r1 - r0 : amx::kTileRows,
                                   tail_pairs ? k1 - k0 : amx::kTilePairs,
                                   w > kLanes ? kLanes : w, w > kLanes ? w - kLanes : kLanes};
            if (!std::equal(want, want + 4, cfg)) {
              amx::Configure(want[0], want[1], want[2], want[3]);
              std::copy(want, want + 4, cfg);
            }
            const uint32_t* b = reinterpret_cast<const uint32_t*>(bp + col * K) + (q0 + k0) * w;
            const uint32_t* ar = a + r0 * lda + q0 + k0;
            float* cr = c + r0 * ldc + col;
            // B's next piece fetched by the whole tiles' part (as the register blocks below).
            const char* pf = nullptr;
            Index npf = 0;
            if (part == 0) next_piece(col, w, q0, kq, &pf, &npf);
            if (tail_rows) {
              (w > kLanes ? amx::TailTiles<2> : amx::TailTiles<1>)(k1 - k0, ar, lda, b, w, cr,
                                                                   ldc, pacc);
            } else {
              (w > kLanes ? amx::PanelTiles<2> : amx::PanelTiles<1>)(
                  r1 - r0, k1 - k0, ar, lda, b, w, cr, ldc, pacc, pf, npf);
            }
            col += w;
          }
        }
      }
      continue;
    }
    for (Index col = c0; col < c1;) {
      const Index w = PanelWidth(col, cols);
      const uint32_t* b = reinterpret_cast<const uint32_t*>(bp + col * K) + q0 * w;
      const char* pf;
      Index npf;
      next_piece(col, w, q0, kq, &pf, &npf);
      if (w == kWide) {
        PanelRows<2>(rows, kq, a + q0, lda, b, w, c + col, ldc, acc, pf, npf);
      } else if (w > kLanes) {  // the last 17-31 columns
        PanelRows<2, true>(rows, kq, a + q0, lda, b, w, c + col, ldc, acc, pf, npf);
      } else if (w == kLanes) {
        PanelRows<1>(rows, kq, a + q0, lda, b, w, c + col, ldc, acc, pf, npf);
      } else {  // the last 1-15 columns
        PanelRows<1, true>(rows, kq, a + q0, lda, b, w, c + col, ldc, acc, pf, npf);
      }
      col += w;
    }
  }
  if (cfg[0] > 0) amx::End();
}

// The per-step product C[rows, cols] (+)= bf16(A[rows, K]) · B, B packed by Pack, in two
// parts, for products that share their A (the gate blocks of one work item of a step): A's
// rows converted into the calling thread's buffer `slot` (0 or 1 for the caller's operands, 2
// for GemmPacked's; valid until that slot's next conversion on this thread), then each product
// on those words. Single-threaded (the engines split steps into column blocks).
TFRNN_BF16_TARGET inline const uint32_t* ConvertOnce(Index rows, Index K, const float* a,
                                                     Index lda, int slot) {
  thread_local AlignedScratch<uint32_t> buf[3];
  const Index ld = WordStride(K);
  uint32_t* b = buf[slot].Get(rows * ld);
  ConvertRows(0, rows, K, a, lda, b, ld);
  return b;
}
// A's pair words row r at words + r · lda (0: WordStride(K), ConvertOnce's); streams as
// GemmConverted's.
TFRNN_BF16_TARGET inline void GemmWords(Index rows, Index K, Index cols, const uint32_t* words,
                                        const float* bp, float* c, Index ldc, bool accumulate,
                                        Index lda = 0, bool streams = false) {
  if (rows <= 0 || cols <= 0) return;
  GemmConverted(rows, K, cols, 0, cols, words, lda > 0 ? lda : WordStride(K), bp, c, ldc,
                accumulate, streams);
}
TFRNN_BF16_TARGET inline void GemmPacked(Index rows, Index K, Index cols, const float* a,
                                         Index lda, const float* bp, float* c, Index ldc,
                                         bool accumulate) {
  if (rows <= 0 || cols <= 0) return;
  GemmWords(rows, K, cols, ConvertOnce(rows, K, a, lda, 2), bp, c, ldc, accumulate);
}

// Rows [r0, r1) of op(A) = Aᵀ, A stored [K, m] with leading dimension lda, as pair words.
// Per block of 16 pairs (A's rows 2q0 .. 2q0 + 31, read along their length) and group of 16
// output rows: per pair q, A's rows 2q and 2q+1 as 16 contiguous floats each converted into
// the 16 rows' words for q (PairWords), then the 16 x 16 block of words transposed in
// registers (Transpose16) and stored, row r's words for the block's pairs contiguous.
// (Groups outermost would read each of A's rows in 64-byte pieces at the row stride, which
// the prefetchers do not follow: 0.8 ns per element at 4 KiB strides.)
// sums (nullable): sums[r] += op(A)'s row r over K, each element added in double in K's
// order, as ColumnSum adds A's columns (the same bits): the bias gradients beside a weight
// gradient's conversion of the gate gradients, without a pass of their own over them.
// ldo: out's row stride in words (0: Pairs(K); more: the rows' first Pairs(K) words of a
// longer product whose K comes in parts, bf16_pool_gemm.h GemmLargeShared).
TFRNN_BF16_TARGET inline void ConvertColumns(Index r0, Index r1, Index K, const float* a,
                                             Index lda, uint32_t* out, double* sums = nullptr,
                                             Index ldo = 0) {
  const Index K2 = Pairs(K), ostride = ldo > 0 ? ldo : K2;  // out's row stride
  const Index full_end = r0 + (r1 - r0) / kLanes * kLanes;  // groups of 16 rows end here
  for (Index q0 = 0; q0 < K2; q0 += kLanes) {
    const Index nq = std::min<Index>(kLanes, K2 - q0);
    const __mmask16 mq = static_cast<__mmask16>((1u << nq) - 1);
    for (Index g = r0; g < full_end; g += kLanes) {
      __m512 blk[kLanes];  // [pair q - q0] on entry to Transpose16, [row r - g] after
      __m512d s_lo = _mm512_setzero_pd(), s_hi = _mm512_setzero_pd();
      if (sums != nullptr) {
        s_lo = _mm512_loadu_pd(sums + g);
        s_hi = _mm512_loadu_pd(sums + g + 8);
      }
      for (Index i = 0; i < kLanes; ++i) {
        if (i >= nq) {
          blk[i] = _mm512_setzero_ps();
          continue;
        }
        const float* lo = a + 2 * (q0 + i) * lda + g;
        const bool has_hi = 2 * (q0 + i) + 1 < K;
        const __m512 l = _mm512_loadu_ps(lo);
        const __m512 h = has_hi ? _mm512_loadu_ps(lo + lda) : _mm512_setzero_ps();
        if (sums != nullptr) {
          s_lo = _mm512_add_pd(s_lo, WidenLow(l));
          s_hi = _mm512_add_pd(s_hi, WidenHigh(l));
          if (has_hi) {
            s_lo = _mm512_add_pd(s_lo, WidenLow(h));
            s_hi = _mm512_add_pd(s_hi, WidenHigh(h));
          }
        }
        const __m512i w = PairWords(l, h);
        blk[i] = reinterpret_cast<const __m512&>(w);
      }
      if (sums != nullptr) {
        _mm512_storeu_pd(sums + g, s_lo);
        _mm512_storeu_pd(sums + g + 8, s_hi);
      }
      Transpose16(blk);
      for (Index r = 0; r < kLanes; ++r) {
        _mm512_mask_storeu_epi32(out + (g + r) * ostride + q0, mq,
                                 reinterpret_cast<const __m512i&>(blk[r]));
      }
    }
    for (Index q = q0; q < q0 + nq; ++q) {  // a last group of fewer than 16 rows
      const float* lo = a + 2 * q * lda;
      const float* hi = 2 * q + 1 < K ? lo + lda : nullptr;
      for (Index r = full_end; r < r1; ++r) {
        out[r * ostride + q] = Pair(lo[r], hi ? hi[r] : 0.f);
        if (sums != nullptr) {
          sums[r] += double(lo[r]);
          if (hi != nullptr) sums[r] += double(hi[r]);
        }
      }
    }
  }
}

// C[m, n] (+)= op(A) · op(B), leading dimensions lda, ldb, ldc (op(A) = A [m, K], or with ta
// Aᵀ of A stored [K, m]; op(B) = B [K, n], or with tb Bᵀ of B stored [n, K]), on the calling
// thread: the products beside a step chain. Operands converted into per-thread buffers;
// `reuse` kReuseA (kReuseB) skips A's (B's) conversion when it is the same operand, with the
// same shape and contents, as in this thread's previous GemmSerial call (the LSTM's weight
// gradients of one gate panel: dW and dR multiply the same gate gradients).
enum Reuse { kReuseNone = 0, kReuseA = 1, kReuseB = 2 };
inline void GemmSerial(bool ta, bool tb, Index m, Index n, Index K, const float* a, Index lda,
                       const float* b, Index ldb, float* c, Index ldc, bool accumulate,
                       Reuse reuse = kReuseNone) {
  if (m <= 0 || n <= 0) return;
  thread_local AlignedScratch<uint32_t> abuf;
  thread_local AlignedScratch<float> bbuf;
  const Index ld = WordStride(K);
  // (a reused operand has the same shape: Get keeps the buffer)
  uint32_t* aw = abuf.Get(m * ld);
  float* bw = bbuf.Get(n * K);
  if (reuse != kReuseA) {
    if (ta) {
      ConvertColumns(0, m, K, a, lda, aw, nullptr, ld);
    } else {
      ConvertRows(0, m, K, a, lda, aw, ld);
    }
  }
  if (reuse != kReuseB) Pack(K, n, b, tb ? 1 : ldb, tb ? ldb : 1, bw);
  GemmConverted(m, K, n, 0, n, aw, ld, bw, c, ldc, accumulate);
}

#else  // no bf16 kernels in this build: Available() is false and these are never called

inline void GemmPacked(Index, Index, Index, const float*, Index, const float*, float*, Index,
                       bool) {
  std::abort();
}
inline const uint32_t* ConvertOnce(Index, Index, const float*, Index, int) { std::abort(); }
template <typename S>
void TransposePairsInto(Index, Index, const S*, Index, float*, Index) {
  std::abort();
}
inline void GemmWords(Index, Index, Index, const uint32_t*, const float*, float*, Index, bool,
                      Index = 0, bool = false) {
  std::abort();
}
enum Reuse { kReuseNone = 0, kReuseA = 1, kReuseB = 2 };
inline void GemmSerial(bool, bool, Index, Index, Index, const float*, Index, const float*, Index,
                       float*, Index, bool, Reuse = kReuseNone) {
  std::abort();
}

#endif  // TFRNN_BF16_KERNELS

}  // namespace bf16
}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_ENGINE_BF16_GEMM_H_
