// TensorFlow-free benchmark of the recurrent kernel alone (packed::Gemm, cc/engine/packed_gemm.h):
// GF/s of C[rows, cols] = A[rows, K] · B on one thread, B packed once, for the shapes a step's
// unit block runs (rows = the batch, K = H or I + H, cols = one gate's units of a block).
//   bazel run -c opt //bench:kernel_bench -- rows K cols [copies] [calls]
// copies: distinct packed copies of B used in turn, to choose where B comes from: 1 keeps it in
// L1/L2 when it fits, enough copies to exceed L2 (e.g. 16 of 512 KiB) make each call stream it
// from L3 or memory, as a step's slice of the weights does when it does not fit the core's L2.
// Prints the best of 5 timings of `calls` calls (default: about 2 G multiply-adds in all).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "cc/engine/packed_gemm.h"

int main(int argc, char** argv) {
  using tfrnn::Index;
  if (argc < 4) {
    std::fprintf(stderr, "usage: kernel_bench rows K cols [copies] [calls]\n");
    return 2;
  }
  const Index rows = atol(argv[1]), K = atol(argv[2]), cols = atol(argv[3]);
  const Index copies = argc > 4 ? std::max<long>(1, atol(argv[4])) : 1;
  const double macs = double(rows) * double(K) * double(cols);
  const long calls = argc > 5 ? atol(argv[5]) : std::max<long>(1, long(2e9 / std::max(macs, 1.0)));
  if (rows <= 0 || K <= 0 || cols <= 0) {
    std::fprintf(stderr, "kernel_bench: rows, K and cols must be positive\n");
    return 2;
  }
  std::mt19937 gen(1);
  std::normal_distribution<float> nd;
  std::vector<float> a(rows * K), b(K * cols), c(rows * cols);
  for (auto& v : a) v = nd(gen);
  for (auto& v : b) v = nd(gen);
  std::vector<std::vector<float>> packed(copies, std::vector<float>(K * cols));
  for (auto& p : packed) tfrnn::packed::PackRowMajor<float>(K, cols, b.data(), cols, p.data());
  auto run = [&](long n) {
    for (long r = 0; r < n; ++r) {
      tfrnn::packed::Gemm<float>(rows, K, cols, a.data(), K, packed[r % copies].data(), c.data(),
                                 cols, false);
    }
  };
  run(std::min<long>(calls, 50));
  double best = 1e30;
  for (int t = 0; t < 5; ++t) {
    const auto t0 = std::chrono::steady_clock::now();
    run(calls);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                              .count());
  }
  std::printf("rows %ld K %ld cols %ld, %ld copies of B (%.0f KiB each): %.1f GF/s\n", rows, K,
              cols, copies, K * cols * 4 / 1024.0, 2.0 * macs * calls / best / 1e9);
  return 0;
}
