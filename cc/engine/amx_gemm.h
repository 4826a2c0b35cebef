// AMX tiles for the bf16 products of bf16_gemm.h (GemmConverted's panels), on CPUs with
// AMX-TILE and AMX-BF16 (Intel Sapphire Rapids and later), by default.
//
// A panel of the packed B (bf16_gemm.h: ceil(K/2) pair rows of w 32-bit words, the word of
// (p, c) holding B[2p, c] and B[2p+1, c]) is exactly the layout `tdpbf16ps` reads for its B
// tile: 16 pair rows of 16 columns, 64 bytes a row, the panel's row stride. A's pair words (a
// row's word q: A[r, 2q] and A[r, 2q+1]) are its A tile: 16 rows of 16 pair words. So a panel
// of 32 columns is two B tiles, 32 rows of A two A tiles, and the four C tiles of 16 × 16 floats
// take the four products of each 16 pairs (the 8 tile registers: C00, C01, C10, C11, A0, A1,
// B0, B1). PanelTiles takes the rows in whole tiles of 16, TailTiles the 1-15 rows past them,
// each over the pairs in whole tiles of 16 or over the 1-15 pairs past them, and a last panel
// of 1-15 or 17-31 columns with its tiles narrowed to them: each part under its own tile
// configuration (FillConfig: the C and A tiles' rows, the A tiles' bytes a row, the B tiles'
// rows, the C and B tiles' columns), so that no product of a bf16 op runs on the AVX512_BF16
// register blocks (`vdpbf16ps`, about a tenth of the tiles' rate on a Xeon with AMX). A tile
// row that straddles two cache lines takes two loads: bf16_gemm.h keeps A's rows and the
// packed B on cache lines.
//
//   TF_RNN_OPS_BF16_AMX     unset (or anything but 0): the tiles wherever the CPU has them and
//                           Linux grants the tile data state (arch_prctl
//                           ARCH_REQ_XCOMP_PERM); this also turns the bf16 products on there
//                           (bf16::Available(), otherwise AMD-only). 0: never (the bf16 ops'
//                           products then run in float on Intel CPUs, as before the tiles).
//
// TFRNN_AMX_EMULATE (a test build, tests/amx_checks.cc): the tile operations in plain C++ with
// the instructions' arithmetic (per row and column, each pair's two products added in turn by
// fused multiply-adds), so that the blocking, the strides and the tails run on any AVX-512 CPU.
#ifndef TF_RNN_OPS_CC_ENGINE_AMX_GEMM_H_
#define TF_RNN_OPS_CC_ENGINE_AMX_GEMM_H_

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "cc/engine/bf16_bits.h"
#include "cc/engine/types.h"

#if defined(__AVX512F__) && defined(__GNUC__) && defined(__x86_64__)
#define TFRNN_AMX_KERNELS 1
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#define TFRNN_AMX_KERNELS 0
#endif

namespace tfrnn {
namespace bf16 {
namespace amx {

constexpr Index kTileRows = 16;   // rows of every tile (A, B: pair rows; C: rows of floats)
constexpr Index kTilePairs = 16;  // pair words in a row of an A tile (32 bf16 of K)
constexpr Index kTileCols = 16;   // columns of a B or C tile

// B's next piece fetched into L2 while the tiles multiply the piece before it (PanelTiles'
// pf, npf) for a product whose caller says B streams (bf16::GemmConverted's `streams`: a
// step's product whose thread reads more than kStreamBytes of packed weights at every step,
// more than a core's L2 on the Xeons with AMX; rnn_cpu_common.h RnnStreamsR), or whose own B
// passes bf16::kStreamedBytes (as for the register blocks). Where B stays in L2 the fetches
// cost 15-22 % (bf16 LSTM inference, 2 threads: 50×32×128×512, 100×64×256×256,
// 100×16×512×512, fetched from 64 or 256 KiB of B a call); where it streams they saved 7-8 %
// of the whole inference at 20×128×512×1024 (4 MiB of R a thread; docs/PERFORMANCE_AMX.md).
constexpr Index kStreamBytes = Index(2) << 20;

#if TFRNN_AMX_KERNELS

// Whether the CPU has AMX-TILE and AMX-BF16 (CPUID leaf 7: EDX bits 24 and 22) and Linux
// grants this process the tile data state (XFEATURE 18).
inline bool CpuHasTiles() {
#ifdef TFRNN_AMX_EMULATE
  return true;
#else
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
  if ((d & (1u << 24)) == 0 || (d & (1u << 22)) == 0) return false;
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#endif
}

// Whether the bf16 products run on tiles (read once per process; see the top of the file).
inline bool Enabled() {
  static const bool on = EnvChoice("TF_RNN_OPS_BF16_AMX", {"0"}) != 0 && CpuHasTiles();
  return on;
}

// A tile configuration (palette 1): blocks of `rows` rows (the C and A tiles 0-5: 16, or the
// 1-15 rows past a product's last whole tile of rows) over `pairs` pairs (the A tiles' bytes a
// row and the B tiles' rows: 16, or the 1-15 pairs past the last whole tile of them), the
// first tile of columns (C tiles 0 and 2, B tile 6) `cols0` columns and the second (C 1 and 3,
// B 7) `cols1` (16, or a last panel's 1-15 columns past its whole tiles of them).
struct alignas(64) TileConfig {
  uint8_t palette, start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};
inline void FillConfig(TileConfig* c, Index rows, Index pairs, Index cols0, Index cols1) {
  std::memset(c, 0, sizeof(*c));
  c->palette = 1;
  const Index cols[8] = {cols0, cols1, cols0, cols1, pairs, pairs, cols0, cols1};  // A: pairs
  for (int i = 0; i < 8; ++i) {
    c->colsb[i] = static_cast<uint16_t>(4 * (i == 4 || i == 5 ? pairs : cols[i]));
    c->rows[i] = static_cast<uint8_t>(i >= 6 ? pairs : rows);
  }
}

#ifdef TFRNN_AMX_EMULATE
// The tile registers of this thread, their configured rows and bytes a row, and the
// instructions on them.
struct EmuTiles {
  alignas(64) uint8_t t[8][kTileRows][64];
  Index rows[8] = {kTileRows, kTileRows, kTileRows, kTileRows,
                   kTileRows, kTileRows, kTileRows, kTileRows};
  Index colsb[8] = {64, 64, 64, 64, 64, 64, 64, 64};
};
inline EmuTiles& Tiles() {
  thread_local EmuTiles tiles;
  return tiles;
}
// A load fills the configured rows and bytes and zeroes the rest (as tileloadd does); a store
// writes the configured ones alone.
inline void EmuLoad(int t, const void* p, Index stride) {
  std::memset(Tiles().t[t], 0, sizeof(Tiles().t[t]));
  for (Index r = 0; r < Tiles().rows[t]; ++r) {
    std::memcpy(Tiles().t[t][r], static_cast<const uint8_t*>(p) + r * stride, Tiles().colsb[t]);
  }
}
inline void EmuStore(int t, void* p, Index stride) {
  for (Index r = 0; r < Tiles().rows[t]; ++r) {
    std::memcpy(static_cast<uint8_t*>(p) + r * stride, Tiles().t[t][r], Tiles().colsb[t]);
  }
}
inline void EmuZero(int t) { std::memset(Tiles().t[t], 0, sizeof(Tiles().t[t])); }
inline float EmuHalf(const uint8_t* row, Index i) {  // bf16 element i of a row, widened
  uint16_t h;
  std::memcpy(&h, row + 2 * i, 2);
  return Widen(h);
}
// Counts over all threads (the tests' evidence): the tile products run, those of them on
// fewer than 16 rows, pairs or columns, the lines of B fetched ahead (PanelTiles' pf) and
// those of them outside the bytes the test names as B's (EmuFetchBounds; none named: not
// checked).
enum EmuCounter { kEmuProducts, kEmuShortProducts, kEmuFetched, kEmuFetchedOutside };
inline std::atomic<int64_t>& EmuCount(EmuCounter i) {
  static std::atomic<int64_t> n[4] = {{0}, {0}, {0}, {0}};
  return n[i];
}
inline void EmuAdd(EmuCounter i) { EmuCount(i).fetch_add(1, std::memory_order_relaxed); }
inline int64_t EmuProducts() { return EmuCount(kEmuProducts).load(); }
inline int64_t EmuShortProducts() { return EmuCount(kEmuShortProducts).load(); }
inline int64_t EmuFetched() { return EmuCount(kEmuFetched).load(); }
inline int64_t EmuFetchedOutside() { return EmuCount(kEmuFetchedOutside).load(); }
inline void EmuDp(int c, int a, int b) {
  EmuAdd(kEmuProducts);
  EmuTiles& x = Tiles();
  const Index pairs = x.colsb[a] / 4, ncols = x.colsb[c] / 4;
  if (x.rows[c] < kTileRows || pairs < kTilePairs || ncols < kTileCols) {
    EmuAdd(kEmuShortProducts);
  }
  for (Index m = 0; m < x.rows[c]; ++m) {
    float acc[kTileCols];
    std::memcpy(acc, x.t[c][m], 64);
    for (Index k = 0; k < pairs; ++k) {
      for (Index n = 0; n < ncols; ++n) {
        acc[n] = std::fma(EmuHalf(x.t[a][m], 2 * k), EmuHalf(x.t[b][k], 2 * n), acc[n]);
        acc[n] = std::fma(EmuHalf(x.t[a][m], 2 * k + 1), EmuHalf(x.t[b][k], 2 * n + 1), acc[n]);
      }
    }
    std::memcpy(x.t[c][m], acc, 64);
  }
}
inline const char** EmuFetchBounds() {
  static const char* bounds[2] = {nullptr, nullptr};
  return bounds;
}
inline void EmuFetch(const char* p) {
  EmuAdd(kEmuFetched);
  const char** b = EmuFetchBounds();
  if (b[0] != nullptr && (p < b[0] || p >= b[1])) EmuAdd(kEmuFetchedOutside);
}
#define TFRNN_AMX_TARGET
#define TFRNN_TILE_FETCH(p) EmuFetch(p)
#define TFRNN_TILE_LOAD(t, p, s) EmuLoad(t, p, s)
#define TFRNN_TILE_STORE(t, p, s) EmuStore(t, p, s)
#define TFRNN_TILE_ZERO(t) EmuZero(t)
#define TFRNN_TILE_DP(c, a, b) EmuDp(c, a, b)
inline void ConfigureTiles(Index rows, Index pairs, Index cols0, Index cols1) {
  TileConfig c;
  FillConfig(&c, rows, pairs, cols0, cols1);
  for (int i = 0; i < 8; ++i) {
    Tiles().rows[i] = c.rows[i];
    Tiles().colsb[i] = c.colsb[i];
  }
}
inline void ReleaseTiles() {}
#else
#define TFRNN_AMX_TARGET __attribute__((target("amx-tile,amx-bf16")))
#define TFRNN_TILE_FETCH(p) _mm_prefetch(p, _MM_HINT_T1)
#define TFRNN_TILE_LOAD(t, p, s) _tile_loadd(t, p, s)
#define TFRNN_TILE_STORE(t, p, s) _tile_stored(t, p, s)
#define TFRNN_TILE_ZERO(t) _tile_zero(t)
#define TFRNN_TILE_DP(c, a, b) _tile_dpbf16ps(c, a, b)
// The configuration is this thread's object, whole in memory before ldtilecfg reads its 64
// bytes (GCC's intrinsic tells the compiler about 8 of them: hence the barrier).
TFRNN_AMX_TARGET inline void ConfigureTiles(Index rows, Index pairs, Index cols0,
                                            Index cols1) {
  thread_local TileConfig c;
  FillConfig(&c, rows, pairs, cols0, cols1);
  __asm__ __volatile__("" ::: "memory");
  _tile_loadconfig(&c);
}
TFRNN_AMX_TARGET inline void ReleaseTiles() { _tile_release(); }
#endif

// C (+)= A · B for one block: A's RT tiles of rows (pair words, row stride lda words) and the
// panel's CT tiles of columns (pair rows w words apart), over k2 pairs (a multiple of 16, or
// fewer than 16), each tile's rows, pairs and columns as configured (FillConfig). Tile
// registers: C 0-3 (C_ij at 2i + j), A 4-5, B 6-7.
// Fetch (nullable): `per` lines of the next operand piece fetched into L2 at each of the
// block's steps, from *fetch on, until *left lines are fetched (PanelTiles).
struct Fetch {
  const char* p = nullptr;
  Index left = 0, per = 0;
};
template <int RT, int CT>
TFRNN_AMX_TARGET inline void TileBlock(Index k2, const uint32_t* a, Index lda, const uint32_t* b,
                                      Index w, float* c, Index ldc, bool accumulate,
                                      Fetch* fetch = nullptr) {
  const Index sa = lda * 4, sb = w * 4, sc = ldc * 4;
  float* c10 = c + kTileRows * ldc;
  if (accumulate) {
    TFRNN_TILE_LOAD(0, c, sc);
    if (CT > 1) TFRNN_TILE_LOAD(1, c + kTileCols, sc);
    if (RT > 1) TFRNN_TILE_LOAD(2, c10, sc);
    if (RT > 1 && CT > 1) TFRNN_TILE_LOAD(3, c10 + kTileCols, sc);
  } else {
    TFRNN_TILE_ZERO(0);
    if (CT > 1) TFRNN_TILE_ZERO(1);
    if (RT > 1) TFRNN_TILE_ZERO(2);
    if (RT > 1 && CT > 1) TFRNN_TILE_ZERO(3);
  }
  for (Index q = 0; q < k2; q += kTilePairs) {
    if (fetch != nullptr) {
      for (Index e = std::min(fetch->per, fetch->left); e > 0; --e, --fetch->left) {
        TFRNN_TILE_FETCH(fetch->p);
        fetch->p += 64;
      }
    }
    TFRNN_TILE_LOAD(4, a + q, sa);
    if (RT > 1) TFRNN_TILE_LOAD(5, a + kTileRows * lda + q, sa);
    TFRNN_TILE_LOAD(6, b + q * w, sb);
    if (CT > 1) TFRNN_TILE_LOAD(7, b + q * w + kTileCols, sb);
    TFRNN_TILE_DP(0, 4, 6);
    if (CT > 1) TFRNN_TILE_DP(1, 4, 7);
    if (RT > 1) TFRNN_TILE_DP(2, 5, 6);
    if (RT > 1 && CT > 1) TFRNN_TILE_DP(3, 5, 7);
  }
  TFRNN_TILE_STORE(0, c, sc);
  if (CT > 1) TFRNN_TILE_STORE(1, c + kTileCols, sc);
  if (RT > 1) TFRNN_TILE_STORE(2, c10, sc);
  if (RT > 1 && CT > 1) TFRNN_TILE_STORE(3, c10 + kTileCols, sc);
}

// The tiles configured (Configure, as FillConfig) and released (End) around one product:
// another kernel on the thread between two products (TensorFlow's own oneDNN kernels) may
// configure them its own way. The tile instructions are asm statements that name no memory:
// the barriers keep the stores of A, B and C before them and later reads of C after them.
TFRNN_AMX_TARGET inline void Configure(Index rows, Index pairs, Index cols0 = kTileCols,
                                       Index cols1 = kTileCols) {
  __asm__ __volatile__("" ::: "memory");
  ConfigureTiles(rows, pairs, cols0, cols1);
  __asm__ __volatile__("" ::: "memory");
}
TFRNN_AMX_TARGET inline void End() {
  ReleaseTiles();
  __asm__ __volatile__("" ::: "memory");
}

// C[0:rows, 0:w] (+)= A · B of one panel of w columns (pair rows w words apart; CT = 2 for 17-32
// columns, 1 for 1-16) over k2 pairs, rows a multiple of 16: blocks of 32 rows, then one of
// 16. Configured for 16 rows, for 16 pairs (k2 a multiple of 16) or for k2 < 16 pairs, and
// for the panel's columns. pf, npf: npf lines from pf (B's next piece, bf16_gemm.h
// GemmConverted) fetched into L2 over the blocks' steps, as many at each.
template <int CT>
TFRNN_AMX_TARGET inline void PanelTiles(Index rows, Index k2, const uint32_t* a, Index lda,
                                       const uint32_t* b, Index w, float* c, Index ldc,
                                       bool accumulate, const char* pf = nullptr,
                                       Index npf = 0) {
  __asm__ __volatile__("" ::: "memory");
  const Index steps = (rows + 2 * kTileRows - 1) / (2 * kTileRows) *
                      ((k2 + kTilePairs - 1) / kTilePairs);
  Fetch f{pf, npf, (npf + steps - 1) / std::max<Index>(1, steps)};
  Fetch* fp = pf != nullptr && npf > 0 ? &f : nullptr;
  Index r = 0;
  for (; r + 2 * kTileRows <= rows; r += 2 * kTileRows) {
    TileBlock<2, CT>(k2, a + r * lda, lda, b, w, c + r * ldc, ldc, accumulate, fp);
  }
  if (r < rows) TileBlock<1, CT>(k2, a + r * lda, lda, b, w, c + r * ldc, ldc, accumulate, fp);
  __asm__ __volatile__("" ::: "memory");
}

// C[0:t, 0:w] (+)= A · B of one panel's t = 1-15 rows (the rows past a product's last whole
// tile of rows), configured for t rows (and pairs as PanelTiles).
template <int CT>
TFRNN_AMX_TARGET inline void TailTiles(Index k2, const uint32_t* a, Index lda, const uint32_t* b,
                                      Index w, float* c, Index ldc, bool accumulate) {
  __asm__ __volatile__("" ::: "memory");
  TileBlock<1, CT>(k2, a, lda, b, w, c, ldc, accumulate);
  __asm__ __volatile__("" ::: "memory");
}

#undef TFRNN_TILE_FETCH
#undef TFRNN_TILE_LOAD
#undef TFRNN_TILE_STORE
#undef TFRNN_TILE_ZERO
#undef TFRNN_TILE_DP

#else  // no AMX kernels in this build

inline bool Enabled() { return false; }
inline void Configure(Index, Index, Index = kTileCols, Index = kTileCols) {}
inline void End() {}
template <int CT>
void PanelTiles(Index, Index, const uint32_t*, Index, const uint32_t*, Index, float*, Index,
                bool, const char* = nullptr, Index = 0) {}
template <int CT>
void TailTiles(Index, const uint32_t*, Index, const uint32_t*, Index, float*, Index, bool) {}

#endif  // TFRNN_AMX_KERNELS

}  // namespace amx
}  // namespace bf16
}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_ENGINE_AMX_GEMM_H_
