// Does Eigen's tensor contraction read outside its buffers? (issue #8, the AVX-512 ASan crash)
//
// Runs the contractions the engine runs (row-major, every transpose combination, small m, n, k,
// float and double) on a ThreadPoolDevice whose allocator, like the operands, places every
// buffer against a PROT_NONE guard page: at the start of its mapping (mode 0: a read before the
// buffer faults) or at its end (mode 1, 64-byte aligned: a read past the end faults).
//
//   INC=.venv/lib/python3.11/site-packages/tensorflow/include
//   ISA="-mavx512f -mavx512dq -mavx512bw -mavx512vl -mavx2 -mfma"
//   g++ -std=c++17 -O3 $ISA -pthread -I$INC tools/eigen_avx512_asan_repro.cc -o /tmp/r && /tmp/r
//       -> "mode 0 ok", "mode 1 ok" (also at -O1 and -O2)
//   g++ -std=c++17 -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer $ISA -pthread \
//       -I$INC tools/eigen_avx512_asan_repro.cc -o /tmp/r && ASAN_OPTIONS=detect_leaks=0 /tmp/r
//       -> SEGV at a guard page in gemm_class<double>::b_load (Eigen's AVX-512 GEMM kernel)
//   ... the same with -DEIGEN_USE_AVX512_GEMM_KERNELS=0 -> "mode 0 ok", "mode 1 ok"
// So the fault comes from GCC's sanitized build of Eigen's AVX-512 kernel, not from the
// engine and not from the optimised builds we ship; configure.sh's asan config therefore
// builds with -DEIGEN_USE_AVX512_GEMM_KERNELS=0. Each compile takes 2-10 minutes.
#define EIGEN_USE_THREADS
#include <sys/mman.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include "unsupported/Eigen/CXX11/Tensor"

static int g_mode = 0;
static std::mutex g_mu;
static std::map<void*, std::pair<void*, size_t>> g_maps;
static void* GuardedAlloc(size_t n) {
  const size_t pg = 4096, body = (n + pg - 1) / pg * pg, total = body + 2 * pg;
  char* base = (char*)mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  mprotect(base, pg, PROT_NONE);
  mprotect(base + pg + body, pg, PROT_NONE);
  char* p = g_mode == 0 ? base + pg : base + pg + body - ((n + 63) / 64 * 64);
  std::lock_guard<std::mutex> l(g_mu);
  g_maps[p] = {base, total};
  return p;
}
static void GuardedFree(void* p) {
  if (!p) return;
  std::lock_guard<std::mutex> l(g_mu);
  auto it = g_maps.find(p);
  munmap(it->second.first, it->second.second);
  g_maps.erase(it);
}
struct GuardAllocator : Eigen::Allocator {
  void* allocate(size_t n) const override { return GuardedAlloc(n); }
  void deallocate(void* p) const override { GuardedFree(p); }
};

template <typename A>
void Run(const Eigen::ThreadPoolDevice& d, long m, long n, long k, bool ta, bool tb) {
  A* a = (A*)GuardedAlloc(sizeof(A) * m * k);
  A* b = (A*)GuardedAlloc(sizeof(A) * n * k);
  A* c = (A*)GuardedAlloc(sizeof(A) * m * n);
  for (long i = 0; i < m * k; ++i) a[i] = A(i % 7);
  for (long i = 0; i < n * k; ++i) b[i] = A(i % 5);
  using CM = Eigen::TensorMap<Eigen::Tensor<const A, 2, Eigen::RowMajor, long>, Eigen::Unaligned>;
  using M = Eigen::TensorMap<Eigen::Tensor<A, 2, Eigen::RowMajor, long>, Eigen::Unaligned>;
  CM am(a, ta ? k : m, ta ? m : k), bm(b, tb ? n : k, tb ? k : n);
  M cm(c, m, n);
  Eigen::array<Eigen::IndexPair<long>, 1> dims = {Eigen::IndexPair<long>(ta ? 0 : 1, tb ? 1 : 0)};
  cm.device(d) = am.contract(bm, dims);
  GuardedFree(a); GuardedFree(b); GuardedFree(c);
}

int main(int argc, char** argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 1;
  Eigen::ThreadPool pool(threads);
  GuardAllocator alloc;
  Eigen::ThreadPoolDevice d(&pool, threads, &alloc);
  for (g_mode = 0; g_mode < 2; ++g_mode) {
    for (long m = 1; m <= 40; ++m)
      for (long n = 1; n <= 40; ++n)
        for (long k = 1; k <= 12; ++k)
          for (int t = 0; t < 4; ++t) {
            Run<double>(d, m, n, k, t & 1, t & 2);
            Run<float>(d, m, n, k, t & 1, t & 2);
          }
    std::fprintf(stderr, "mode %d ok\n", g_mode);
  }
  return 0;
}
