// Shared pieces of rnn_gpu_forward.cu and rnn_gpu_backward.cu: storage/compute type traits,
// activations, the per-sequence step map, small elementwise kernels, the layer pointers and the
// workspace carver. Included only by .cu files.
#ifndef TF_RNN_OPS_CC_GPU_RNN_GPU_COMMON_CUH_
#define TF_RNN_OPS_CC_GPU_RNN_GPU_COMMON_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "cc/engine/types.h"
#include "cc/gpu/cublas_loader.h"
#include "cc/gpu/gpu_status.h"
#include "cc/gpu/launch.h"
#include "cc/gpu/rnn_gpu.h"

namespace tfrnn {
namespace gpu {

using I64 = long long;

// ---- storage type T -> compute type Acc, conversions, cuBLAS data types ----------------------
template <typename T>
struct Traits {
  using Acc = float;
};
template <>
struct Traits<double> {
  using Acc = double;
};
template <typename T>
using AccOf = typename Traits<T>::Acc;

__device__ __forceinline__ float Ld(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ float Ld(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ float Ld(const float* p) { return *p; }
__device__ __forceinline__ double Ld(const double* p) { return *p; }
__device__ __forceinline__ void St(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void St(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void St(float* p, float v) { *p = v; }
__device__ __forceinline__ void St(double* p, double v) { *p = v; }

template <typename X>
constexpr cudaDataType DataType();
template <>
constexpr cudaDataType DataType<__half>() { return CUDA_R_16F; }
template <>
constexpr cudaDataType DataType<__nv_bfloat16>() { return CUDA_R_16BF; }
template <>
constexpr cudaDataType DataType<float>() { return CUDA_R_32F; }
template <>
constexpr cudaDataType DataType<double>() { return CUDA_R_64F; }

// Row-major GEMM C[m,n] (+)= op(A)·op(B) with A, B of type T and C of type CT (T or Acc).
template <typename T, typename CT>
GpuStatus GemmT(const GpuContext& g, bool ta, bool tb, I64 m, I64 n, I64 k, const T* A,
                const T* B, CT* C, bool accumulate) {
  return Gemm(g, ta, tb, m, n, k, A, B, C, DataType<T>(), DataType<CT>(), accumulate);
}
// With leading dimensions (row-major row distances of A, B, C as stored).
template <typename T, typename CT>
GpuStatus GemmLdT(const GpuContext& g, bool ta, bool tb, I64 m, I64 n, I64 k, const T* A,
                  I64 lda, const T* B, I64 ldb, CT* C, I64 ldc, bool accumulate) {
  return GemmLd(g, ta, tb, m, n, k, A, lda, B, ldb, C, ldc, DataType<T>(), DataType<CT>(),
                accumulate);
}

// `batch` of them: product i at A + i·sa, B + i·sb, C + i·sc (strides in elements).
template <typename T, typename CT>
GpuStatus GemmLdBatchedT(const GpuContext& g, bool ta, bool tb, I64 m, I64 n, I64 k, const T* A,
                         I64 lda, I64 sa, const T* B, I64 ldb, I64 sb, CT* C, I64 ldc, I64 sc,
                         I64 batch, bool accumulate) {
  return GemmLdBatched(g, ta, tb, m, n, k, A, lda, sa, B, ldb, sb, C, ldc, sc, batch,
                       DataType<T>(), DataType<CT>(), accumulate);
}

// ---- activations (RnnAct); derivatives are functions of the output y ------------------------
template <typename A>
__device__ __forceinline__ A Sigmoid(A v) {
  return A(1) / (A(1) + exp(-v));
}

template <typename A>
__device__ __forceinline__ A Act(int act, A v) {
  switch (act) {
    case static_cast<int>(RnnAct::kRelu):
      return v > A(0) ? v : A(0);
    case static_cast<int>(RnnAct::kTanh):
      return tanh(v);
    case static_cast<int>(RnnAct::kSigmoid):
      return Sigmoid(v);
    case static_cast<int>(RnnAct::kHardSigmoid): {
      const A h = v * A(0.2) + A(0.5);
      return h < A(0) ? A(0) : (h > A(1) ? A(1) : h);
    }
    case static_cast<int>(RnnAct::kKerasHardSigmoid): {
      const A h = v * A(1.0 / 6.0) + A(0.5);
      return h < A(0) ? A(0) : (h > A(1) ? A(1) : h);
    }
    default:
      return v;
  }
}

// d · act'(x) where y = act(x).
template <typename A>
__device__ __forceinline__ A ActGrad(int act, A y, A d) {
  switch (act) {
    case static_cast<int>(RnnAct::kRelu):
      return y > A(0) ? d : A(0);
    case static_cast<int>(RnnAct::kTanh):
      return d * (A(1) - y * y);
    case static_cast<int>(RnnAct::kSigmoid):
      return d * y * (A(1) - y);
    case static_cast<int>(RnnAct::kHardSigmoid):
      return (y > A(0) && y < A(1)) ? d * A(0.2) : A(0);
    case static_cast<int>(RnnAct::kKerasHardSigmoid):
      return (y > A(0) && y < A(1)) ? d * A(1.0 / 6.0) : A(0);
    default:
      return d;
  }
}

// ---- which time index sequence b visits at step `step` (-1: none) ---------------------------
struct StepMapDev {
  const int* lengths;  // device [B] or null
  I64 T;
  bool reverse;
  __device__ __forceinline__ I64 Len(I64 b) const { return lengths != nullptr ? lengths[b] : T; }
  __device__ __forceinline__ I64 Tau(I64 b, I64 step) const {
    const I64 n = Len(b);
    if (step >= n) return -1;
    return reverse ? n - 1 - step : step;
  }
  __device__ __forceinline__ I64 Prev(I64 tau) const { return reverse ? tau + 1 : tau - 1; }
};

// ---- launches ----------------------------------------------------------------------------
constexpr int kThreads = 256;
inline unsigned Blocks(I64 n) {
  I64 b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b > 65535 * 16 ? 65535 * 16 : b);  // grid-stride beyond this
}
#define TFRNN_GRID_STRIDE(i, n) \
  for (I64 i = blockIdx.x * static_cast<I64>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<I64>(blockDim.x) * gridDim.x)

// out[i] = in[i] with a type conversion.
template <typename To, typename From>
__global__ void ConvertKernel(To* out, const From* in, I64 n) {
  TFRNN_GRID_STRIDE(i, n) { St(out + i, Ld(in + i)); }
}
template <typename To, typename From>
GpuStatus Convert(const GpuContext& g, To* out, const From* in, I64 n) {
  if (n == 0) return GpuStatus::Ok();
  TFRNN_LAUNCH(Blocks(n), kThreads, g.stream, ConvertKernel<To, From>)(out, in, n);
  TFRNN_CUDA_CHECK_LAUNCH("ConvertKernel");
  return GpuStatus::Ok();
}

// a[i] *= m[i].
template <typename T>
__global__ void MulKernel(T* out, const T* a, const T* m, I64 n) {
  TFRNN_GRID_STRIDE(i, n) { St(out + i, Ld(a + i) * Ld(m + i)); }
}
template <typename T>
GpuStatus Mul(const GpuContext& g, T* out, const T* a, const T* m, I64 n) {
  if (n == 0) return GpuStatus::Ok();
  TFRNN_LAUNCH(Blocks(n), kThreads, g.stream, MulKernel<T>)(out, a, m, n);
  TFRNN_CUDA_CHECK_LAUNCH("MulKernel");
  return GpuStatus::Ok();
}

template <typename X>
GpuStatus Zero(const GpuContext& g, X* p, I64 n) {
  if (n == 0) return GpuStatus::Ok();
  TFRNN_CUDA_CHECK(cudaMemsetAsync(p, 0, n * sizeof(X), g.stream));
  return GpuStatus::Ok();
}

template <typename X>
GpuStatus Copy(const GpuContext& g, X* dst, const X* src, I64 n) {
  if (n == 0) return GpuStatus::Ok();
  TFRNN_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(X), cudaMemcpyDeviceToDevice, g.stream));
  return GpuStatus::Ok();
}

// h_masked[b, j] = h[b, j] · mask row of (b, step)[dcol + j] for rows with that step, else 0;
// with `gates` > 1 also the copies g = 1 .. gates-1 at out + g·B·Hs, masked by the columns
// gate_cols further on (per-gate masks: each gate block's h ⊙ mask_k).
template <typename T>
__global__ void MaskRowsKernel(StepMapDev sm, I64 step, I64 B, I64 Hs, I64 cols, I64 dcol,
                               const T* mask, bool per_step, const T* h, T* out, I64 gates,
                               I64 gate_cols) {
  const I64 BH = B * Hs;
  TFRNN_GRID_STRIDE(i, gates * BH) {
    const I64 gate = i / BH, r = i % BH;
    const I64 b = r / Hs, j = r % Hs;
    const I64 tau = sm.Tau(b, step);
    if (tau < 0) {
      St(out + i, AccOf<T>(0));
    } else {
      const T* mrow = mask + ((per_step ? tau * B : 0) + b) * cols + dcol + gate * gate_cols;
      St(out + i, Ld(h + r) * Ld(mrow + j));
    }
  }
}

// ---- pointers of one (layer, direction) ----------------------------------------------------
// MakeLayerPtrs points them into the params, reserve and dparams buffers; the LSTM block ops'
// face (lstm_gpu.cu) at their own tensors, as the CPU's Layer (rnn_cpu_common.h).
template <typename T>
struct LayerPtrs {
  I64 in = 0;       // width of the W matrices (0: skip input / preprojected)
  I64 in_cols = 0;  // columns of the layer's input tensor
  // W [K·H, in] and R [K·H, Hs], or with spec.weights_xw W [in, K·H] and R [Hs, K·H].
  const T *W = nullptr, *R = nullptr, *Pm = nullptr, *bW = nullptr, *bR = nullptr;
  // acts: [T·B, K·H] rows holding W·x on entry and the gate activations on exit (the reserve's
  // layout). The LSTM block face instead keeps W·x in gx (Acc, [T·B, K·H]) and has gate block
  // k's activations of row r at act[k] + r·act_ld (lstm only).
  T *acts = nullptr, *aux = nullptr, *hh = nullptr, *hprev = nullptr;
  AccOf<T>* gx = nullptr;
  T* act[4] = {nullptr, nullptr, nullptr, nullptr};
  I64 act_ld = 0;
  T* co = nullptr;          // lstm: cell_act(c) of each row [T·B, H], written if given
  const T* hseq = nullptr;  // backward without hprev: h_prev is h0 for the first step, else
                            // hseq's previous row (one direction, forward, no lengths)
  T *dW = nullptr, *dR = nullptr, *dP = nullptr, *dbW = nullptr, *dbR = nullptr;  // dbR: opt.
  I64 dcol = 0;  // column offset of this direction in the layer output
  bool reverse = false;
};

// Given weights.R (one layer and direction), the separate tensors of RnnWeights and their
// gradients in dweights instead of params / dparams (SetRnnLayer, as the CPU engine's layers).
template <typename T>
LayerPtrs<T> MakeLayerPtrs(const RnnSpec& s, I64 pseudo, const T* params, T* reserve,
                           T* dparams = nullptr, const RnnWeights<T>& weights = {},
                           const RnnWeightGrads<T>& dweights = {}) {
  LayerPtrs<T> ly;
  ly.acts = SetRnnLayer(s, pseudo, params, reserve, dparams, weights, dweights, &ly);
  ly.reverse = pseudo % s.D == 1 || (s.D == 1 && s.reverse);
  return ly;
}

// Gate block k of the layer's R, for GemmLdT: rows [k·H, +H) of R [K·H, Hs] (used transposed),
// or with weights_xw columns [k·H, +H) of R [Hs, K·H]; RGateLd is R's row distance.
template <typename T>
const T* RGate(const RnnSpec& s, const LayerPtrs<T>& ly, I64 k) {
  return s.weights_xw ? ly.R + k * s.H : ly.R + k * s.H * RnnHs(s);
}
inline I64 RGateLd(const RnnSpec& s) { return s.weights_xw ? RnnK(s) * s.H : RnnHs(s); }
// The distance between gate blocks k and k + 1 of R (elements), for GemmLdBatchedT.
inline I64 RGateStride(const RnnSpec& s) { return s.weights_xw ? s.H : s.H * RnnHs(s); }

// Whether a step's recurrent product is one product over every unit (the step-chain kernels:
// persistent, cluster, fused step): no projection and no reset-before gru, whose second product
// spans every unit again.
inline bool OneProductPerStep(const RnnSpec& s) {
  return s.P == 0 && !(s.mode == RnnMode::kGru && s.gru_reset_before);
}
// Whether a layer's backward can run a step-chain kernel (persistent, cluster, fused step):
// one product per step, no recurrent mask, not the block face's weights or peephole.
inline bool StepChainBwdShape(const RnnSpec& s) {
  return OneProductPerStep(s) && !s.has_mask && !s.weights_xw && !s.peephole_o_new;
}
// The runs of consecutive gate blocks whose recurrent products take h ⊙ mask_k with per-gate
// masks (each run one batched GEMM): every block, but a reset-before gru's candidate block pn
// (its product takes r ⊙ h_rec). Calls fn(first, count) for each non-empty run.
template <typename Fn>
GpuStatus ForGateRuns(const RnnSpec& s, Fn fn) {
  const I64 K = RnnK(s);
  const I64 pn = s.mode == RnnMode::kGru && s.gru_reset_before ? s.gate_pos[2] : K;
  if (pn > 0) TFRNN_GPU_RETURN_IF_ERROR(fn(I64{0}, pn));
  if (pn + 1 < K) TFRNN_GPU_RETURN_IF_ERROR(fn(pn + 1, K - pn - 1));
  return GpuStatus::Ok();
}

// Hands out 256-byte aligned pieces of a workspace; with a null base it only counts bytes
// (the size functions run the same carving as the engine).
class Carver {
 public:
  explicit Carver(void* base) : base_(static_cast<char*>(base)) {}
  template <typename X>
  X* Take(I64 n) {
    off_ = (off_ + 255) / 256 * 256;
    X* p = base_ != nullptr ? reinterpret_cast<X*>(base_ + off_) : nullptr;
    off_ += n * static_cast<I64>(sizeof(X));
    return p;
  }
  I64 bytes() const { return (off_ + 255) / 256 * 256; }

 private:
  char* base_;
  I64 off_ = 0;
};

// The bytes of a carve walk for elements of elem_bytes bytes (2: half or bfloat16, 4, 8):
// carve(TypeTag<T>(), cv) on a counting Carver.
template <typename F>
I64 CountedBytes(int elem_bytes, F carve) {
  Carver cv(nullptr);
  switch (elem_bytes) {
    case 2: carve(TypeTag<__half>(), cv); break;
    case 8: carve(TypeTag<double>(), cv); break;
    default: carve(TypeTag<float>(), cv); break;
  }
  return cv.bytes();
}

// InvalidArgument unless a workspace of `have` bytes at ws holds the `need` bytes of `what`.
inline GpuStatus CheckWorkspace(const char* what, int64_t have, int64_t need, const void* ws) {
  if (have < need || (need > 0 && ws == nullptr)) {
    return InvalidArgument(std::string(what) + " workspace has " + std::to_string(have) +
                           " bytes, needs " + std::to_string(need));
  }
  return GpuStatus::Ok();
}

// Largest length (host lengths, or T) and whether any sequence is shorter than T.
inline I64 MaxSteps(const RnnSpec& s, const int* lengths, bool* padded) {
  *padded = false;
  if (lengths == nullptr) return s.B > 0 ? s.T : 0;
  I64 m = 0;
  for (I64 b = 0; b < s.B; ++b) {
    m = lengths[b] > m ? lengths[b] : m;
    if (lengths[b] < s.T) *padded = true;
  }
  return m;
}

// Device copy of the lengths: the caller's, or copied into `slot` (from pageable host memory
// the copy is staged before cudaMemcpyAsync returns, so the host array may go right after).
// Returns null when every sequence has T steps (then nothing needs them).
inline GpuStatus DeviceLengths(const GpuContext& g, const RnnSpec& s, const int* host,
                               const int* dev, bool padded, int* slot, const int** out) {
  *out = nullptr;
  if (host == nullptr || !padded) return GpuStatus::Ok();
  if (dev != nullptr) {
    *out = dev;
    return GpuStatus::Ok();
  }
  TFRNN_CUDA_CHECK(cudaMemcpyAsync(slot, host, s.B * sizeof(int), cudaMemcpyHostToDevice,
                                   g.stream));
  *out = slot;
  return GpuStatus::Ok();
}

}  // namespace gpu
}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_GPU_RNN_GPU_COMMON_CUH_
