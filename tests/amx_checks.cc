// The bf16 products on AMX tiles (cc/engine/amx_gemm.h) through bf16::GemmConverted, against a
// double reference of the same bf16 operands, over shapes around the tiles' edges: rows, pairs
// and columns below, at and past multiples of 16, both panel widths, a last panel of 1-15
// columns, odd K, accumulate or not, column ranges from a panel boundary, A's rows and B's
// panels on cache lines or off them (every other case; GemmConverted copies such rows of A).
// Columns outside the range must be left as they were. Built by tests/test_amx.py with
// TFRNN_AMX_EMULATE (the tile instructions emulated, any CPU with AVX512_BF16) and without it
// (the instructions themselves, on a CPU with AMX; also tools/gpu_session.sh's `amx_cpu`).
//   amx_checks            every case; exit 0 when all pass
//   TF_RNN_OPS_BF16_AMX=0 amx_checks   the same cases on the register blocks alone
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "cc/engine/bf16_gemm.h"

using tfrnn::Index;
namespace bf16 = tfrnn::bf16;

namespace {

float Bf16Value(float x) { return bf16::Widen(bf16::Round(x)); }  // as the products see x

struct Case {
  Index rows, K, cols, c0;
  bool accumulate;
  bool aligned;  // A's rows on cache lines (WordStride), else one word past a line, K2 apart
  bool streams;  // GemmConverted told B streams (its next pieces fetched ahead on tiles)
};

// Returns the case's largest error over its bound (pass: <= 1); -1 when a column outside the
// range changed.
double RunCase(const Case& cs, std::mt19937* g) {
  std::normal_distribution<float> nd(0.f, 1.f);
  const Index rows = cs.rows, K = cs.K, cols = cs.cols, c0 = cs.c0, c1 = cols;
  std::vector<float> a(rows * K), b(K * cols), c(rows * cols), c_in(rows * cols);
  for (auto& v : a) v = nd(*g);
  for (auto& v : b) v = nd(*g);
  for (auto& v : c_in) v = nd(*g);
  c = c_in;
  const Index K2 = bf16::Pairs(K), ld = cs.aligned ? bf16::WordStride(K) : K2;
  bf16::AlignedArray<uint32_t> buf = bf16::NewAligned<uint32_t>(rows * ld + 16);
  uint32_t* words = buf.get() + (cs.aligned ? 0 : 1);
  bf16::ConvertRows(0, rows, K, a.data(), K, words, ld);
  bf16::AlignedArray<float> bbuf = bf16::NewAligned<float>(K * cols + 64 + 16);
  float* bp = bbuf.get() + (cs.aligned ? 0 : 4);  // B's panels on cache lines, or 16 bytes past
  bf16::Pack<float>(K, cols, b.data(), cols, 1, bp);
#ifdef TFRNN_AMX_EMULATE
  const char* b_lo = reinterpret_cast<const char*>(bp);
  bf16::amx::EmuFetchBounds()[0] = b_lo;
  bf16::amx::EmuFetchBounds()[1] = b_lo + K * cols * Index(sizeof(float));
#endif
  bf16::GemmConverted(rows, K, cols, c0, c1, words, ld, bp, c.data(), cols,
                      cs.accumulate, cs.streams);
  double worst = 0.0;
  for (Index r = 0; r < rows; ++r) {
    for (Index j = 0; j < cols; ++j) {
      const float got = c[r * cols + j];
      if (j < c0 || j >= c1) {
        if (std::memcmp(&got, &c_in[r * cols + j], 4) != 0) return -1.0;
        continue;
      }
      double ref = cs.accumulate ? double(c_in[r * cols + j]) : 0.0;
      double mag = std::fabs(ref);
      for (Index k = 0; k < K; ++k) {
        const double p = double(Bf16Value(a[r * K + k])) * double(Bf16Value(b[k * cols + j]));
        ref += p;
        mag += std::fabs(p);
      }
      // Float sums of K + 1 terms: each addition rounds once.
      const double bound = double(K + 2) * std::ldexp(1.0, -23) * mag + 1e-30;
      worst = std::max(worst, std::fabs(double(got) - ref) / bound);
    }
  }
  return worst;
}

}  // namespace

int main() {
  setenv("TF_RNN_OPS_BF16_AMX", "1", 0);
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512bf16")) {
    std::printf("amx_checks: SKIP (no AVX512_BF16: the register blocks of the tails)\n");
    return 0;
  }
  const bool want = tfrnn::EnvChoice("TF_RNN_OPS_BF16_AMX", {"1"}) == 0;
  if (want && !bf16::amx::Enabled()) {
    std::printf("amx_checks: FAIL tiles unavailable (no AMX-TILE/AMX-BF16, or Linux refused "
                "the tile data state)\n");
    return 2;
  }
  std::mt19937 g(7);
  int cases = 0, failed = 0;
  double worst = 0.0;
  const Index rows_list[] = {1, 8, 15, 16, 17, 32, 33, 47, 64, 128};
  const Index k_list[] = {1, 2, 3, 31, 32, 33, 58, 64, 65, 100, 192, 321};
  const Index cols_list[] = {1, 15, 16, 17, 22, 31, 32, 33, 48, 50, 100};
  for (Index rows : rows_list) {
    for (Index K : k_list) {
      for (Index cols : cols_list) {
        for (int acc = 0; acc < 2; ++acc) {
          for (Index c0 : {Index(0), Index(32)}) {
            if (c0 >= cols) continue;
            const Case cs{rows, K, cols, c0, acc == 1, (cases % 2) == 0, (cases % 3) == 0};
            const double e = RunCase(cs, &g);
            ++cases;
            worst = std::max(worst, e);
            if (e < 0.0 || e > 1.0) {
              ++failed;
              if (failed <= 10) {
                std::printf("FAIL rows %ld K %ld cols %ld c0 %ld accumulate %d: %s %.3g\n",
                            long(rows), long(K), long(cols), long(c0), acc,
                            e < 0 ? "a column outside the range changed" : "error / bound", e);
              }
            }
          }
        }
      }
    }
  }
  // The long-K product of a step at 20x128x512x1024 (one thread's slice of columns).
  {
    const Case cs{128, 1024, 256, 0, true, true, true};
    const double e = RunCase(cs, &g);
    ++cases;
    worst = std::max(worst, e);
    if (e < 0.0 || e > 1.0) ++failed;
  }
  std::printf("amx_checks: %d cases, %d failed, tiles %s, largest error / bound %.3g\n", cases,
              failed, bf16::amx::Enabled() ? "on" : "off", worst);
#ifdef TFRNN_AMX_EMULATE
  std::printf("amx_checks: %lld emulated tile products, %lld of them on fewer than 16 rows, "
              "pairs or columns\n",
              static_cast<long long>(bf16::amx::EmuProducts()),
              static_cast<long long>(bf16::amx::EmuShortProducts()));
  if (bf16::amx::Enabled() && bf16::amx::EmuProducts() == 0) {
    std::printf("FAIL no case ran on the tiles\n");
    return 1;
  }
  std::printf("amx_checks: %lld lines of B fetched ahead, %lld of them outside B\n",
              static_cast<long long>(bf16::amx::EmuFetched()),
              static_cast<long long>(bf16::amx::EmuFetchedOutside()));
  if (bf16::amx::EmuFetchedOutside() != 0 ||
      (bf16::amx::Enabled() && bf16::amx::EmuFetched() == 0)) {
    std::printf("FAIL the fetches ahead of the streaming cases\n");
    return 1;
  }
#endif
  return failed == 0 ? 0 : 1;
}
