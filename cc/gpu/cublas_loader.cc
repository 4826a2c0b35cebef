#include "cc/gpu/cublas_loader.h"

#ifdef TFRNN_CUDA_EMULATE
#include "cc/gpu/emu/cublas_emu.h"
#endif

#include <dlfcn.h>

#include <climits>
#include <map>
#include <mutex>
#include <type_traits>
#include <string>
#include <utility>
#include <vector>

namespace tfrnn {
namespace gpu {
namespace {

struct Loaded {
  CublasApi api;
  GpuStatus status;
};

#ifdef TFRNN_CUDA_EMULATE
// The emulation build (cc/gpu/emu/): host stand-ins instead of the library.
Loaded* DoLoad() {
  Loaded* out = new Loaded();
  CublasApi& a = out->api;
  a.soname = "cuBLAS emulation (cc/gpu/emu/cublas_emu.h)";
  a.create = [](CublasHandle* h) {
    *h = reinterpret_cast<CublasHandle>(new emu::FakeCublasContext());
    return 0;
  };
  a.destroy = [](CublasHandle h) {
    delete reinterpret_cast<emu::FakeCublasContext*>(h);
    return 0;
  };
  a.set_stream = [](CublasHandle h, cudaStream_t s) {
    reinterpret_cast<emu::FakeCublasContext*>(h)->stream = s;
    return 0;
  };
  a.gemm_ex = &emu::GemmEx<CublasHandle>;
  a.gemm_strided_batched_ex = &emu::GemmStridedBatchedEx<CublasHandle>;
  return out;
}
#else
Loaded* DoLoad() {
  Loaded* out = new Loaded();  // kept for the life of the process
  const char* names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"};
  std::string tried;
  void* lib = nullptr;
  for (const char* name : names) {
    lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) {
      out->api.soname = name;
      break;
    }
    const char* err = dlerror();
    tried += std::string("\n  ") + name + ": " + (err != nullptr ? err : "not found");
  }
  if (lib == nullptr) {
    out->status = GpuStatus(kCublasUnavailable, "cannot load cuBLAS; tried:" + tried);
    return out;
  }
  auto sym = [&](const char* name, auto* fn) {
    *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(dlsym(lib, name));
    return *fn != nullptr;
  };
  CublasApi& a = out->api;
  std::string missing;
  if (!sym("cublasCreate_v2", &a.create)) missing += " cublasCreate_v2";
  if (!sym("cublasDestroy_v2", &a.destroy)) missing += " cublasDestroy_v2";
  if (!sym("cublasSetStream_v2", &a.set_stream)) missing += " cublasSetStream_v2";
  if (!sym("cublasGemmEx", &a.gemm_ex)) missing += " cublasGemmEx";
  if (!sym("cublasGemmStridedBatchedEx", &a.gemm_strided_batched_ex)) {
    missing += " cublasGemmStridedBatchedEx";
  }
  sym("cublasGetStatusString", &a.status_string);  // optional (cuBLAS >= 11.4)
  if (!missing.empty()) {
    out->status = GpuStatus(kCublasUnavailable, std::string(a.soname) + " lacks" + missing);
  }
  return out;
}
#endif  // TFRNN_CUDA_EMULATE

// Free handles of one (device, stream).
struct Pool {
  std::mutex mu;
  std::vector<CublasHandle> free;
};

std::mutex& PoolsMutex() {
  static std::mutex* mu = new std::mutex();
  return *mu;
}

std::map<std::pair<int, cudaStream_t>, Pool*>& Pools() {
  static auto* pools = new std::map<std::pair<int, cudaStream_t>, Pool*>();
  return *pools;
}

}  // namespace

GpuStatus LoadCublas(const CublasApi** api) {
  static Loaded* loaded = DoLoad();  // thread-safe one-time initialisation
  if (!loaded->status.ok()) return loaded->status;
  *api = &loaded->api;
  return GpuStatus::Ok();
}

const char* CublasStatusName(const CublasApi* api, int status) {
  if (api != nullptr && api->status_string != nullptr) return api->status_string(status);
  switch (status) {
    case 0: return "CUBLAS_STATUS_SUCCESS";
    case 1: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case 3: return "CUBLAS_STATUS_ALLOC_FAILED";
    case 7: return "CUBLAS_STATUS_INVALID_VALUE";
    case 8: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case 11: return "CUBLAS_STATUS_MAPPING_ERROR";
    case 13: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case 14: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case 15: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_UNKNOWN";
  }
}

static GpuStatus CublasError(const CublasApi* api, int st, const char* what) {
  return GpuStatus(kCublasError, std::string(what) + " failed: " + CublasStatusName(api, st) +
                                     " (" + std::to_string(st) + ")");
}

CublasLease::~CublasLease() {
  if (handle_ != nullptr) {
    Pool* pool = static_cast<Pool*>(pool_);
    std::lock_guard<std::mutex> lock(pool->mu);
    pool->free.push_back(handle_);
  }
}

GpuStatus CublasLease::Acquire(cudaStream_t stream) {
  if (handle_ != nullptr) return GpuStatus(kInternal, "CublasLease acquired twice");
  TFRNN_GPU_RETURN_IF_ERROR(LoadCublas(&api_));
  int device = -1;
  TFRNN_CUDA_CHECK(cudaGetDevice(&device));
  Pool* pool;
  {
    std::lock_guard<std::mutex> lock(PoolsMutex());
    Pool*& p = Pools()[{device, stream}];
    if (p == nullptr) p = new Pool();
    pool = p;
  }
  CublasHandle h = nullptr;
  {
    std::lock_guard<std::mutex> lock(pool->mu);
    if (!pool->free.empty()) {
      h = pool->free.back();
      pool->free.pop_back();
    }
  }
  if (h == nullptr) {
    const int st = api_->create(&h);
    if (st != 0) return CublasError(api_, st, "cublasCreate");
    const int st2 = api_->set_stream(h, stream);
    if (st2 != 0) {
      api_->destroy(h);
      return CublasError(api_, st2, "cublasSetStream");
    }
  }
  handle_ = h;
  pool_ = pool;
  return GpuStatus::Ok();
}

GpuStatus Gemm(const GpuContext& g, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
               const void* A, const void* B, void* C, cudaDataType ab, cudaDataType c,
               bool accumulate) {
  return GemmLd(g, trans_a, trans_b, m, n, k, A, trans_a ? m : k, B, trans_b ? k : n, C, n, ab,
                c, accumulate);
}

GpuStatus GemmLd(const GpuContext& g, bool trans_a, bool trans_b, int64_t m, int64_t n,
                 int64_t k, const void* A, int64_t lda, const void* B, int64_t ldb, void* C,
                 int64_t ldc, cudaDataType ab, cudaDataType c, bool accumulate) {
  return GemmLdBatched(g, trans_a, trans_b, m, n, k, A, lda, 0, B, ldb, 0, C, ldc, 0, 1, ab, c,
                       accumulate);
}

GpuStatus GemmLdBatched(const GpuContext& g, bool trans_a, bool trans_b, int64_t m, int64_t n,
                        int64_t k, const void* A, int64_t lda64, int64_t stride_a, const void* B,
                        int64_t ldb64, int64_t stride_b, void* C, int64_t ldc64,
                        int64_t stride_c, int64_t batch, cudaDataType ab, cudaDataType c,
                        bool accumulate) {
  if (m == 0 || n == 0 || batch == 0) return GpuStatus::Ok();
  const int64_t c_bytes = DataTypeBytes(c);
  if (k == 0) {
    if (accumulate) return GpuStatus::Ok();
    for (int64_t i = 0; i < batch; ++i) {
      char* Ci = static_cast<char*>(C) + i * stride_c * c_bytes;
      if (ldc64 == n) {
        TFRNN_CUDA_CHECK(cudaMemsetAsync(Ci, 0, m * n * c_bytes, g.stream));
        continue;
      }
      for (int64_t r = 0; r < m; ++r) {  // rows of a column block
        TFRNN_CUDA_CHECK(cudaMemsetAsync(Ci + r * ldc64 * c_bytes, 0, n * c_bytes, g.stream));
      }
    }
    return GpuStatus::Ok();
  }
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX || lda64 > INT_MAX || ldb64 > INT_MAX ||
      ldc64 > INT_MAX || batch > INT_MAX) {
    return InvalidArgument("GEMM dimension exceeds 2^31-1: " + std::to_string(m) + "x" +
                           std::to_string(n) + "x" + std::to_string(k) + " (batch " +
                           std::to_string(batch) + ")");
  }
  // Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: swap the operands. A
  // row-major [r, c] matrix is a column-major [c, r] one with leading dimension c.
  const int lda = static_cast<int>(lda64);
  const int ldb = static_cast<int>(ldb64);
  const int ldc = static_cast<int>(ldc64);
  const bool f64 = ab == CUDA_R_64F;
  const double alpha64 = 1.0, beta64 = accumulate ? 1.0 : 0.0;
  const float alpha32 = 1.f, beta32 = accumulate ? 1.f : 0.f;
  const void* alpha = f64 ? static_cast<const void*>(&alpha64) : &alpha32;
  const void* beta = f64 ? static_cast<const void*>(&beta64) : &beta32;
  const int opa = trans_b ? kCublasOpT : kCublasOpN, opb = trans_a ? kCublasOpT : kCublasOpN;
  const int compute = f64 ? kCublasCompute64F : kCublasCompute32F;
  if (batch == 1) {
    const int st = g.api->gemm_ex(g.blas, opa, opb, static_cast<int>(n), static_cast<int>(m),
                                  static_cast<int>(k), alpha, B, ab, ldb, A, ab, lda, beta, C, c,
                                  ldc, compute, kCublasGemmDefault);
    if (st != 0) return CublasError(g.api, st, "cublasGemmEx");
    return GpuStatus::Ok();
  }
  const int st = g.api->gemm_strided_batched_ex(
      g.blas, opa, opb, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), alpha, B,
      ab, ldb, stride_b, A, ab, lda, stride_a, beta, C, c, ldc, stride_c,
      static_cast<int>(batch), compute, kCublasGemmDefault);
  if (st != 0) return CublasError(g.api, st, "cublasGemmStridedBatchedEx");
  return GpuStatus::Ok();
}

}  // namespace gpu
}  // namespace tfrnn
