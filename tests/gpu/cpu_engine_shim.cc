// TensorFlow-free C entry points to the CPU stacked-RNN engine, for CPU-vs-GPU parity checks
// on machines without TensorFlow (tests/gpu/cpu_parity.py). It dlopen()s one of the CPU engine
// objects tf_rnn_ops/_tfrnn_engine_{avx512,avx2,avx}.so, takes its tfrnn_engine_api() table
// (cc/engine/engine_api.h) and runs RnnForward / RnnBackward on host memory with a small
// thread pool of its own. The spec and argument structs are those of the CUDA engine's C API
// (cc/gpu/c_api.h), so Python can reuse the ctypes structs of tests/gpu/cuda_engine.py.
//
// Build (from the repository root; no Eigen, no TensorFlow, no CUDA needed):
//   g++ -O2 -std=c++17 -shared -fPIC -I. tests/gpu/cpu_engine_shim.cc -o build/cpu_engine_shim.so -ldl -lpthread
//
// Only dtype float (2) and double (3): the CPU engine's compute types. Pointers are host
// pointers; args.lengths is a host int32 [B] array or NULL (lengths_dev is ignored). Sizes are
// in elements of the dtype (the engine's workspaces hold the compute type). A NULL workspace
// makes the shim allocate one. Every function returns 0 or -1 with tfrnn_cpu_last_error().
// With any length < T pass a zeroed reserve (as the TF kernel does): the forward leaves rows
// past each sequence's end unwritten and the reset-before gru backward reads them.
#include <dlfcn.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cc/engine/engine_api.h"
#include "cc/engine/rnn_spec_check.h"
#include "cc/gpu/c_api.h"
#include "cc/gpu/c_api_convert.h"

#define SHIM_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using namespace tfrnn;  // NOLINT: a test shim

thread_local std::string g_error;
const EngineApi* g_api = nullptr;

int Fail(const std::string& m) {
  g_error = m;
  return -1;
}
bool Bad(const std::string& m) {
  g_error = m;
  return false;
}

// A fixed FIFO pool. The engine only waits on work it scheduled itself (Eigen's parallelFor
// barrier, or spin loops whose items the waiting thread can run itself), never from inside a
// task on work queued behind it, so a plain queue cannot deadlock.
class SimplePool final : public HostPool {
 public:
  explicit SimplePool(int n) {
    for (int i = 0; i < n; ++i) threads_.emplace_back([this, i] { Loop(i); });
  }
  void Schedule(std::function<void()> fn) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(fn));
    }
    cv_.notify_one();
  }
  int NumThreads() const override { return static_cast<int>(threads_.size()); }
  int CurrentThreadId() const override { return tid_; }

 private:
  void Loop(int id) {
    tid_ = id;
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return !queue_.empty(); });
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      fn();
    }
  }
  static thread_local int tid_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::vector<std::thread> threads_;
};
thread_local int SimplePool::tid_ = -1;

HostPool& Pool() {
  // Never destroyed: its threads idle until the process exits.
  static SimplePool* pool = new SimplePool(4);
  return *pool;
}

// TfRnnCudaSpec -> RnnSpec (RnnSpecOf, as the CUDA C API), with the spec checks
// the engine itself does not make (RnnSpecProblem; the TF kernels check before calling it).
bool ToSpec(const TfRnnCudaSpec* in, RnnSpec* s) {
  if (in == nullptr) return Bad("spec is NULL");
  if (in->dtype != TFRNN_CUDA_FLOAT && in->dtype != TFRNN_CUDA_DOUBLE) {
    return Bad("the CPU shim takes dtype 2 (float) or 3 (double), got " +
               std::to_string(in->dtype));
  }
  *s = RnnSpecOf(*in);
  const std::string m = RnnSpecProblem(*s);
  return m.empty() || Bad("invalid RNN spec: " + m);
}

// The engine's forward or backward (overloaded on the C args type).
template <typename A>
void Run(const RnnSpec& s, const TfRnnCudaFwdArgs* in, void* ws) {
  const RnnFwdArgs<A> a = RnnFwdArgsOf<A>(*in);
  std::vector<A> own(ws == nullptr ? RnnFwdWorkspaceSize(s) : 0);
  EngineFns<A>::RnnFwd(*g_api)(Pool(), s, a, ws == nullptr ? own.data() : static_cast<A*>(ws));
}

template <typename A>
void Run(const RnnSpec& s, const TfRnnCudaBwdArgs* in, void* ws) {
  const RnnBwdArgs<A> a = RnnBwdArgsOf<A>(*in);
  std::vector<A> own(ws == nullptr ? RnnBwdWorkspaceSize(s) : 0);
  EngineFns<A>::RnnBwd(*g_api)(Pool(), s, a, ws == nullptr ? own.data() : static_cast<A*>(ws));
}

// Bad(problem) unless the problem is "" (the checks of c_api_convert.h, as the CUDA C API).
bool NoProblem(const std::string& problem) { return problem.empty() || Bad(problem); }

// tfrnn_cpu_rnn_forward / tfrnn_cpu_rnn_backward (Args: their C args type; what: for messages).
template <typename Args>
int RnnEntry(const TfRnnCudaSpec* spec, const Args* a, void* workspace, const char* what) {
  RnnSpec s;
  if (g_api == nullptr) return Fail("call tfrnn_cpu_open first");
  if (a == nullptr) return Fail("args is NULL");
  if (!ToSpec(spec, &s) || !NoProblem(RnnArgsProblem(s, *a))) return -1;
  try {
    if (spec->dtype == TFRNN_CUDA_FLOAT) {
      Run<float>(s, a, workspace);
    } else {
      Run<double>(s, a, workspace);
    }
  } catch (const std::exception& e) {
    return Fail(std::string(what) + " threw: " + e.what());
  }
  return 0;
}

}  // namespace

SHIM_EXPORT const char* tfrnn_cpu_last_error(void) { return g_error.c_str(); }

SHIM_EXPORT int tfrnn_cpu_open(const char* engine_so_path) {
  if (engine_so_path == nullptr) return Fail("engine path is NULL");
  void* h = dlopen(engine_so_path, RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return Fail(std::string("dlopen failed: ") + dlerror());
  auto fn = reinterpret_cast<TfRnnEngineApiFn>(dlsym(h, "tfrnn_engine_api"));
  if (fn == nullptr) return Fail(std::string(engine_so_path) + " has no tfrnn_engine_api");
  const EngineApi* api = fn();
  if (api == nullptr || api->version != kEngineApiVersion) {
    return Fail(std::string(engine_so_path) + ": engine API version " +
                (api ? std::to_string(api->version) : "?") + ", this shim was built for " +
                std::to_string(kEngineApiVersion) + " (rebuild the engine or the shim)");
  }
  g_api = api;
  g_error.clear();
  return 0;
}

// The ISA of the opened engine ("avx", "avx2", "avx512"), or "" before tfrnn_cpu_open.
SHIM_EXPORT const char* tfrnn_cpu_isa(void) { return g_api ? g_api->isa : ""; }

SHIM_EXPORT int tfrnn_cpu_rnn_sizes(const TfRnnCudaSpec* spec, int64_t* params,
                                    int64_t* reserve, int64_t* fwd_ws_elems,
                                    int64_t* bwd_ws_elems) {
  RnnSpec s;
  if (!ToSpec(spec, &s)) return -1;
  if (params) *params = RnnParamsSize(s);
  if (reserve) *reserve = RnnReserveSize(s);
  if (fwd_ws_elems) *fwd_ws_elems = RnnFwdWorkspaceSize(s);
  if (bwd_ws_elems) *bwd_ws_elems = RnnBwdWorkspaceSize(s);
  return 0;
}

SHIM_EXPORT int tfrnn_cpu_rnn_forward(const TfRnnCudaSpec* spec, const TfRnnCudaFwdArgs* a,
                                      void* workspace) {
  return RnnEntry(spec, a, workspace, "forward");
}

SHIM_EXPORT int tfrnn_cpu_rnn_backward(const TfRnnCudaSpec* spec, const TfRnnCudaBwdArgs* a,
                                       void* workspace) {
  return RnnEntry(spec, a, workspace, "backward");
}
