// TensorFlow-free benchmark of the LSTM engine and of the GEMM shapes it runs, on an Eigen
// thread pool of the requested size. Shows where forward/backward time goes; the stacked-RNN
// engine's forward also at inference (no reserve, as the Keras layers' predict runs it).
//   bazel run -c opt //bench:engine_bench -- T B I H threads [quick]
// BENCH_BF16=1 in the environment: the engines' bf16 products (a bfloat16 op's).
// BENCH_MODE=gru: the stacked-RNN engine's lines time a GRU (cuDNN's form) instead of an LSTM.
// BENCH_INFER_REPS=N: only the stacked-RNN engine's inference forward, N calls (for profiling),
// printing the fastest, the median and the 90th percentile; with BENCH_TRAIN=1 its training
// forward (the reserve written) instead, with BENCH_TRAIN=2 its backward, with BENCH_TRAIN=3
// both in turn per call (a training step: the backward reads the reserve just written);
// BENCH_SEQ=1 also prints every call's time in call order (a machine's phases against a
// road's).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cc/engine/lstm.h"
#include "cc/engine/rnn.h"

namespace {

using tfrnn::Index;

// Buffers 64-byte aligned, as TensorFlow's tensors and the kernels' workspace (ScratchCache)
// are: glibc's large allocations are 16 bytes off a 64-byte boundary, and the unit blocks that
// two cores write at every step would then share a cache line at each block's edge, which
// slows the split step by a third (docs/PERFORMANCE.md, "The per-step split, continued").
template <typename T>
struct Aligned64 {
  using value_type = T;
  Aligned64() = default;
  template <typename U>
  Aligned64(const Aligned64<U>&) {}  // NOLINT
  T* allocate(size_t n) {
    void* p = std::aligned_alloc(64, std::max<size_t>(64, (n * sizeof(T) + 63) / 64 * 64));
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) { std::free(p); }
};
template <typename T, typename U>
bool operator==(const Aligned64<T>&, const Aligned64<U>&) { return true; }
template <typename T, typename U>
bool operator!=(const Aligned64<T>&, const Aligned64<U>&) { return false; }
using Buf = std::vector<float, Aligned64<float>>;

template <typename Fn>
double MedianMs(Fn&& fn, int reps = 7) {
  fn();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                    .count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const Index T = argc > 1 ? atol(argv[1]) : 100, B = argc > 2 ? atol(argv[2]) : 64,
              I = argc > 3 ? atol(argv[3]) : 256, H = argc > 4 ? atol(argv[4]) : 256;
  const int threads = argc > 5 ? atoi(argv[5]) : 2;
  Eigen::ThreadPool pool(threads);
  tfrnn::CpuDevice d(&pool, threads);
  std::mt19937 gen(0);
  std::normal_distribution<float> nd(0.f, 0.1f);
  auto vec = [&](Index n) {
    Buf v(n);
    for (auto& x : v) x = nd(gen);
    return v;
  };
  const Index G = 4 * H;
  auto x = vec(T * B * I), cs0 = vec(B * H), h0 = vec(B * H), w = vec((I + H) * G), p = vec(H),
       b = vec(G);
  Buf acts[7];
  for (auto& a : acts) a.resize(T * B * H);
  // BENCH_BF16=1: the products of a bfloat16 op (bf16_gemm.h, where the CPU has AVX512_BF16).
  const bool bf16 = std::getenv("BENCH_BF16") != nullptr && std::getenv("BENCH_BF16")[0] == '1';
  Buf ws(std::max(tfrnn::LstmBwdWorkspaceSize(T, B, I, H),
                  tfrnn::LstmFwdWorkspaceSize(T, B, I, H, bf16)));
  tfrnn::LstmCellSpec spec;
  spec.order = tfrnn::kIfco;
  spec.bf16 = bf16;
  tfrnn::LstmFwdArgs<float> fa;
  fa.T = T, fa.B = B, fa.I = I, fa.H = H, fa.seq_len_max = T;
  fa.x = x.data(), fa.cs_prev = cs0.data(), fa.h_prev = h0.data(), fa.w = w.data();
  fa.wci = fa.wcf = fa.wco = p.data();
  fa.b = b.data();
  fa.i = acts[0].data(), fa.cs = acts[1].data(), fa.f = acts[2].data(), fa.o = acts[3].data();
  fa.ci = acts[4].data(), fa.co = acts[5].data(), fa.h = acts[6].data();
  const bool infer_only = std::getenv("BENCH_INFER_REPS") != nullptr;
  const double fwd =
      infer_only ? 0 : MedianMs([&] { tfrnn::LstmForward<float>(d, spec, fa, ws.data()); });

  auto csg = vec(T * B * H), hg = vec(T * B * H);
  Buf xg(T * B * I), cpg(B * H), hpg(B * H), wg((I + H) * G), pg1(H), pg2(H),
      pg3(H), bg(G);
  tfrnn::LstmBwdArgs<float> ba;
  ba.T = T, ba.B = B, ba.I = I, ba.H = H, ba.seq_len_max = T;
  ba.x = x.data(), ba.cs_prev = cs0.data(), ba.h_prev = h0.data(), ba.w = w.data();
  ba.wci = ba.wcf = ba.wco = p.data();
  ba.i = fa.i, ba.cs = fa.cs, ba.f = fa.f, ba.o = fa.o, ba.ci = fa.ci, ba.co = fa.co, ba.h = fa.h;
  ba.cs_grad = csg.data(), ba.h_grad = hg.data();
  ba.x_grad = xg.data(), ba.cs_prev_grad = cpg.data(), ba.h_prev_grad = hpg.data();
  ba.w_grad = wg.data(), ba.wci_grad = pg1.data(), ba.wcf_grad = pg2.data();
  ba.wco_grad = pg3.data(), ba.b_grad = bg.data();
  const double bwd =
      infer_only ? 0 : MedianMs([&] { tfrnn::LstmBackward<float>(d, spec, ba, ws.data()); });

  // The same LSTM through the stacked-RNN engine (CudnnRNN's face): one layer, cuDNN layout.
  tfrnn::RnnSpec rs;
  const bool gru = std::getenv("BENCH_MODE") != nullptr &&
                   std::string(std::getenv("BENCH_MODE")) == "gru";
  rs.mode = gru ? tfrnn::RnnMode::kGru : tfrnn::RnnMode::kLstm;
  rs.T = T, rs.B = B, rs.I = I, rs.H = H;
  rs.bf16 = bf16;
  // The workspace for the training forward, the backward and the inference forward: the
  // spec's training flag changes the roads (batch blocks at inference) and so the size.
  tfrnn::RnnSpec infer_spec = rs;
  infer_spec.training = false;
  Buf params = vec(tfrnn::RnnParamsSize(rs)), reserve(tfrnn::RnnReserveSize(rs)),
      y(T * B * H), hn(B * H), cn(B * H),
      rws(std::max({tfrnn::RnnFwdWorkspaceSize(rs), tfrnn::RnnBwdWorkspaceSize(rs),
                    tfrnn::RnnFwdWorkspaceSize(infer_spec)}));
  tfrnn::RnnFwdArgs<float> rf;
  rf.x = x.data(), rf.h0 = h0.data(), rf.c0 = cs0.data(), rf.params = params.data();
  rf.y = y.data(), rf.hn = hn.data(), rf.cn = cn.data(), rf.reserve = reserve.data();
  if (gru) rf.c0 = nullptr, rf.cn = nullptr;
  Buf dparams(params.size()), dhn = vec(B * H), dcn = vec(B * H);
  tfrnn::RnnBwdArgs<float> rb;
  rb.x = x.data(), rb.h0 = h0.data(), rb.c0 = cs0.data(), rb.params = params.data();
  rb.reserve = reserve.data(), rb.dy = hg.data(), rb.dhn = dhn.data(), rb.dcn = dcn.data();
  rb.dx = xg.data(), rb.dh0 = hpg.data(), rb.dc0 = cpg.data(), rb.dparams = dparams.data();
  if (gru) rb.c0 = nullptr, rb.dcn = nullptr, rb.dc0 = nullptr;
  if (infer_only) {
    const char* train = std::getenv("BENCH_TRAIN");
    const bool backward = train != nullptr && train[0] == '2';
    const bool step = train != nullptr && train[0] == '3';  // forward, then backward
    rs.training = train != nullptr;
    if (backward) tfrnn::RnnForward<float>(d, rs, rf, rws.data());  // the reserve
    std::vector<double> ms, fwd_ms;
    const char* gap = std::getenv("BENCH_GAP_US");  // idle time before each call
    for (int r = 0; r < std::max(1, atoi(std::getenv("BENCH_INFER_REPS"))); ++r) {
      if (gap != nullptr) std::this_thread::sleep_for(std::chrono::microseconds(atol(gap)));
      const auto t0 = std::chrono::steady_clock::now();
      if (backward) {
        tfrnn::RnnBackward<float>(d, rs, rb, rws.data());
      } else {
        tfrnn::RnnForward<float>(d, rs, rf, rws.data());
      }
      if (step) {
        fwd_ms.push_back(std::chrono::duration<double, std::milli>(
                             std::chrono::steady_clock::now() - t0).count());
        tfrnn::RnnBackward<float>(d, rs, rb, rws.data());
      }
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                             t0).count());
    }
    if (step) {
      std::sort(fwd_ms.begin(), fwd_ms.end());
      std::printf("training fwd (of the steps) min %.3f median %.3f ms\n", fwd_ms.front(),
                  fwd_ms[fwd_ms.size() / 2]);
    }
    if (std::getenv("BENCH_SEQ") != nullptr) {
      for (double v : ms) std::printf("%.1f ", v);
      std::printf("\n");
    }
    std::sort(ms.begin(), ms.end());
    std::printf("T=%ld B=%ld I=%ld H=%ld threads=%d | rnn engine %s min %.3f median %.3f "
                "p90 %.3f ms (%zu calls)\n", T, B, I, H, threads,
                backward ? "backward" : step ? "training step (fwd + bwd)"
                                   : rs.training ? "training fwd" : "inference fwd",
                ms.front(), ms[ms.size() / 2], ms[ms.size() * 9 / 10], ms.size());
    return 0;
  }
  const double rfwd = MedianMs([&] { tfrnn::RnnForward<float>(d, rs, rf, rws.data()); });
  const double rbwd = MedianMs([&] { tfrnn::RnnBackward<float>(d, rs, rb, rws.data()); });
  rs.training = false;
  const double rinf = MedianMs([&] { tfrnn::RnnForward<float>(d, rs, rf, rws.data()); }, 15);
  std::printf("T=%ld B=%ld I=%ld H=%ld threads=%d | lstm engine fwd %.2f bwd %.2f ms | "
              "rnn engine fwd %.2f bwd %.2f ms | rnn engine inference fwd %.2f ms\n",
              T, B, I, H, threads, fwd, bwd, rfwd, rbwd, rinf);
  if (argc > 6) return 0;  // "quick": the engines only (for profiling)
  // The GEMM shapes inside, each timed alone as one multi-threaded GEMM (the engine runs the
  // recurrent ones as per-unit-block slices fused with the pointwise pass).
  Buf out(std::max(T * B * G, (I + H) * G));
  const double g_in = MedianMs([&] {
    tfrnn::Gemm<float>(d, false, false, T * B, G, I, x.data(), w.data(), out.data(), false);
  });
  const double g_rec = MedianMs([&] {
    for (Index t = 0; t < T; ++t)
      tfrnn::Gemm<float>(d, false, false, B, G, H, h0.data(), w.data() + I * G, out.data(), true);
  });
  const double g_rec_b = MedianMs([&] {
    for (Index t = 0; t < T; ++t)
      tfrnn::Gemm<float>(d, false, true, B, H, G, ws.data(), w.data() + I * G, out.data(), false);
  });
  const double g_xg = MedianMs([&] {
    tfrnn::Gemm<float>(d, false, true, T * B, I, G, ws.data(), w.data(), out.data(), false);
  });
  const double g_wg = MedianMs([&] {
    tfrnn::Gemm<float>(d, true, false, I, G, T * B, x.data(), ws.data(), out.data(), false);
    tfrnn::Gemm<float>(d, true, false, H, G, T * B, fa.h, ws.data(), out.data(), false);
  });
  const double red = MedianMs([&] {
    tfrnn::ColumnSum<float>(d, ws.data(), T * B, G, bg.data());
  });
  std::printf("b_grad column-sum reduction: %.2f ms\n", red);
  const double flops = 8.0 * T * B * H * (I + H);
  std::printf("T=%ld B=%ld I=%ld H=%ld threads=%d\n", T, B, I, H, threads);
  std::printf("forward  %8.2f ms %6.1f GF/s | input GEMM %6.2f ms, recurrent GEMMs %6.2f ms, "
              "rest (pointwise) %6.2f ms\n",
              fwd, flops / fwd / 1e6, g_in, g_rec, fwd - g_in - g_rec);
  std::printf("backward %8.2f ms %6.1f GF/s | recurrent GEMMs %6.2f ms, x_grad GEMM %6.2f ms, "
              "w_grad GEMMs %6.2f ms, rest %6.2f ms\n",
              bwd, 2 * flops / bwd / 1e6, g_rec_b, g_xg, g_wg, bwd - g_rec_b - g_xg - g_wg);
  Buf sq_a = vec(2048 * 2048), sq_c(2048 * 2048);
  const double big = MedianMs([&] {
    tfrnn::Gemm<float>(d, false, false, 2048, 2048, 2048, sq_a.data(), sq_a.data(), sq_c.data(),
                       false);
  }, 3);
  std::printf("reference GEMM 2048^3: %.1f GF/s\n", 2.0 * 2048 * 2048 * 2048 / big / 1e6);
  return 0;
}
