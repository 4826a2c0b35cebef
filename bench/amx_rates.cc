// The rates of the bf16 products on AMX tiles (cc/engine/amx_gemm.h, bf16_gemm.h), one thread,
// by where their operands come from: the kernel's 2 × 2 block of tiles (amx::TileBlock) with
// everything in L1, then with B streaming through spans from L1 to memory, then whole
// products (bf16::GemmConverted) at the engine's shapes with B and C in cache or cold (C
// accumulated into, as a step's product adds into its precomputed input gates).
//
//   bazel build //bench:amx_rates && bazel-bin/bench/amx_rates [reps-scale]
//   AMX_RATES_OFFSET=16 ...   A's and B's buffers 16 bytes past a cache line (a tile row then
//                             spans two lines)
//
// Needs a CPU with AMX (Linux granting the tile state); elsewhere it says so and exits 0.
// GF/s counts 2 flops per multiply-add; the best and the median of the repetitions.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cc/engine/bf16_gemm.h"

namespace {

using tfrnn::Index;
namespace amx = tfrnn::bf16::amx;
namespace bf16 = tfrnn::bf16;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// 64-byte aligned storage, `offset` bytes past the line.
template <typename T>
T* Buffer(Index n, Index offset) {
  char* p = static_cast<char*>(std::aligned_alloc(64, ((n * sizeof(T) + offset) / 64 + 1) * 64));
  return reinterpret_cast<T*>(p + offset);
}

struct Rate {
  double best = 0, median = 0;
};
// fn() `reps` times (after one warm-up), each doing `flops`.
template <typename Fn>
Rate Time(int reps, double flops, Fn&& fn) {
  fn();
  std::vector<double> s;
  for (int r = 0; r < reps; ++r) {
    const double t0 = Now();
    fn();
    s.push_back(Now() - t0);
  }
  std::sort(s.begin(), s.end());
  return {flops / s.front() / 1e9, flops / s[s.size() / 2] / 1e9};
}

#if TFRNN_AMX_KERNELS
// The 2 × 2 block over k2 pairs per call, A (32 rows) fixed, B's panels of 32 columns taken in
// turn from a span of `span` bytes, C accumulated in place (loaded and stored per call).
TFRNN_AMX_TARGET Rate BlockRate(int reps, Index k2, const uint32_t* a, const uint32_t* b,
                                Index span, float* c) {
  const Index panel_words = k2 * 32, panels = std::max<Index>(1, span / (panel_words * 4));
  const Index calls = std::max<Index>(panels, 4096);
  amx::Configure(amx::kTileRows, amx::kTilePairs);
  const Rate r = Time(reps, 2.0 * 32 * 32 * 2 * k2 * calls, [&] {
    for (Index i = 0; i < calls; ++i) {
      amx::TileBlock<2, 2>(k2, a, k2, b + (i % panels) * panel_words, 32, c, 32, true);
    }
  });
  amx::End();
  return r;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  const int scale = argc > 1 ? std::max(1, std::atoi(argv[1])) : 1;
  const Index offset = std::getenv("AMX_RATES_OFFSET") ? std::atol(std::getenv("AMX_RATES_OFFSET"))
                                                       : 0;
#if TFRNN_AMX_KERNELS
  if (!amx::Enabled()) {
    std::printf("amx_rates: no AMX tiles on this CPU (or TF_RNN_OPS_BF16_AMX=0)\n");
    return 0;
  }
  std::printf("amx_rates: one thread, A and B %ld bytes past a cache line\n", long(offset));
  // 1. The block, operands in L1 (A: 32 rows x 128 pairs, 16 KiB; B: 128 pairs x 32, 16 KiB).
  // 2. B streaming through larger spans (A in L1).
  {
    const Index k2 = 128, max_span = Index(64) << 20;
    uint32_t* a = Buffer<uint32_t>(32 * k2, offset);
    uint32_t* b = Buffer<uint32_t>(max_span / 4, offset);
    float* c = Buffer<float>(32 * 32, 0);
    std::fill(a, a + 32 * k2, 0x3f803f80u);  // bf16 pairs of 1.0
    std::fill(b, b + max_span / 4, 0x3c003c00u);
    std::fill(c, c + 32 * 32, 0.f);
    for (Index span : {Index(16) << 10, Index(256) << 10, Index(1) << 20, Index(4) << 20,
                       Index(16) << 20, max_span}) {
      const Rate r = BlockRate(5 * scale, k2, a, b, span, c);
      std::printf("2x2 block, k2 %ld, B through %6ld KiB: best %6.0f median %6.0f GF/s\n",
                  long(k2), long(span >> 10), r.best, r.median);
    }
  }
  // 3. Whole products at the engine's shapes: rows x K x cols (a core's share of a step or a
  // GemmLarge tile), B and C each in cache (one copy) or cold (copies past L2 and L3 turns).
  struct Shape {
    Index rows, K, cols;
    const char* what;
  };
  const Shape shapes[] = {{128, 1024, 2048, "20x128x512x1024 step, a core's half"},
                          {32, 512, 1024, "50x32x128x512 step, a core's half"},
                          {64, 512, 256, "a GemmLarge tile (K = 512)"}};
  for (const Shape& s : shapes) {
    const Index ld = bf16::WordStride(s.K);
    std::vector<float> af(s.rows * s.K, 0.5f), bf(s.K * s.cols, 0.25f);
    uint32_t* a = Buffer<uint32_t>(s.rows * ld, offset);
    bf16::ConvertRows(0, s.rows, s.K, af.data(), s.K, a, ld);
    const Index b_bytes = s.K * s.cols * 4, c_bytes = s.rows * s.cols * 4;
    const int nb = int(std::max<Index>(2, (Index(32) << 20) / b_bytes));
    const int nc = int(std::max<Index>(2, (Index(32) << 20) / c_bytes));
    std::vector<float*> bs, cs;
    for (int i = 0; i < nb; ++i) {
      bs.push_back(Buffer<float>(s.K * s.cols, offset));
      bf16::Pack<float>(s.K, s.cols, bf.data(), s.cols, 1, bs.back());
    }
    for (int i = 0; i < nc; ++i) {
      cs.push_back(Buffer<float>(s.rows * s.cols, 0));
      std::fill(cs.back(), cs.back() + s.rows * s.cols, 0.f);
    }
    for (int cold_b = 0; cold_b < 2; ++cold_b) {
      for (int cold_c = 0; cold_c < 2; ++cold_c) {
        int i = 0;
        const int reps = int(std::max<Index>(20, (Index(1) << 31) / (2 * s.rows * s.K * s.cols)));
        const Rate r = Time(reps * scale, 2.0 * s.rows * s.K * s.cols, [&] {
          ++i;
          bf16::GemmConverted(s.rows, s.K, s.cols, 0, s.cols, a, ld, bs[cold_b ? i % nb : 0],
                              cs[cold_c ? i % nc : 0], s.cols, true);
        });
        std::printf("GemmConverted %4ldx%4ldx%4ld, B %-4s C %-4s: best %6.0f median %6.0f GF/s"
                    "  (%s)\n",
                    long(s.rows), long(s.K), long(s.cols), cold_b ? "cold" : "hot",
                    cold_c ? "cold" : "hot", r.best, r.median, s.what);
      }
    }
  }
  return 0;
#else
  (void)scale, (void)offset;
  std::printf("amx_rates: built without the AMX kernels (an AVX-512 build on x86-64)\n");
  return 0;
#endif
}
