// Shared helpers of the op kernels: named input validation and the dtype bridge that lets
// half and bfloat16 ops run the float engine (half/bfloat16 compute and accumulate in float).
#ifndef TF_RNN_OPS_CC_KERNELS_KERNEL_UTIL_H_
#define TF_RNN_OPS_CC_KERNELS_KERNEL_UTIL_H_

#ifndef EIGEN_USE_THREADS
#define EIGEN_USE_THREADS
#endif

#include <cstring>
#include <deque>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cc/engine/cpu_device.h"
#include "cc/engine/types.h"
#include "cc/kernels/engine_loader.h"
#include "cc/kernels/host_output_allocator.h"
#include "cc/kernels/scratch_cache.h"
#include "cc/kernels/tf_compat.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/types.h"

namespace tfrnn {

// The TensorFlow names every kernel file uses.
using ::tensorflow::DEVICE_CPU;
using ::tensorflow::DEVICE_GPU;
using ::tensorflow::OpInputList;
using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::OpOutputList;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;

// The value of `name` in a table of (attr value, value) pairs; false if it is not listed.
template <typename E, size_t N>
bool LookupName(const std::pair<const char*, E> (&table)[N], const std::string& name, E* out) {
  for (const auto& entry : table) {
    if (name == entry.first) {
      *out = entry.second;
      return true;
    }
  }
  return false;
}

inline std::string ShapeStr(const TensorShape& t) {
  std::vector<int64_t> dims;
  for (int k = 0; k < t.dims(); ++k) dims.push_back(t.dim_size(k));
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}
inline std::string ShapeStr(const Tensor& t) { return ShapeStr(t.shape()); }

// Looks up an input by its OpDef name.
inline absl::Status GetInput(OpKernelContext* ctx, const char* name, const Tensor** t) {
  return ctx->input(name, t);
}

// Looks up inputs by their OpDef names, in order.
inline absl::Status GetInputs(
    OpKernelContext* ctx, std::initializer_list<std::pair<const char*, const Tensor**>> inputs) {
  for (const auto& in : inputs) TF_RETURN_IF_ERROR(ctx->input(in.first, in.second));
  return absl::OkStatus();
}

// `name` must have rank `rank`; `layout` describes the expected dims, e.g.
// "[timelen, batch_size, input_size]".
inline absl::Status CheckRank(const std::string& op, const char* name, const TensorShape& t,
                              int rank, const char* layout) {
  if (t.dims() == rank) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", name, " must be rank ", rank, " ",
                                                 layout, ", got shape ", ShapeStr(t)));
}
inline absl::Status CheckRank(const std::string& op, const char* name, const Tensor& t, int rank,
                              const char* layout) {
  return CheckRank(op, name, t.shape(), rank, layout);
}

// `name` must have exactly the given dims (ranks are checked before this is called).
inline absl::Status CheckShape(const std::string& op, const char* name, const TensorShape& t,
                               std::initializer_list<int64_t> dims, const char* layout) {
  bool ok = t.dims() == static_cast<int>(dims.size());
  int k = 0;
  for (int64_t d : dims) {
    if (!ok) break;
    ok = t.dim_size(k++) == d;
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", name, " must have shape ", layout,
                                                 " = [", absl::StrJoin(dims, ", "), "], got ",
                                                 ShapeStr(t)));
}
inline absl::Status CheckShape(const std::string& op, const char* name, const Tensor& t,
                               std::initializer_list<int64_t> dims, const char* layout) {
  return CheckShape(op, name, t.shape(), dims, layout);
}

// An op kernel whose attrs A (absl::Status A::Read(OpKernelConstruction*)) are read when it is
// constructed.
template <typename A>
class AttrsOpKernel : public OpKernel {
 public:
  explicit AttrsOpKernel(OpKernelConstruction* c) : OpKernel(c) {
    OP_REQUIRES_OK(c, attrs_.Read(c));
  }

  const A& attrs() const { return attrs_; }

 protected:
  A attrs_;
};

// Buffers of at least this size come from ScratchCache (kept between calls), smaller ones
// from TF: ComputeBridge's temporaries and the CPU kernels' outputs. A fresh allocation of a
// few MB is fresh pages on many calls, and faulting them in cost as much as converting into
// them (a bf16 LSTM 50x32x128x512: R's 4 MB of floats 0.44-1.58 ms fresh, 0.24-0.31 ms warm).
constexpr size_t kCachedScratchBytes = size_t(256) << 10;

// ctx->allocate_output, except that on the CPU an output of kCachedScratchBytes or more comes
// from HostOutputAllocator (ScratchCache's kept blocks).
inline absl::Status AllocateOutput(OpKernelContext* ctx, int index, const TensorShape& shape,
                                   Tensor** out) {
  const tensorflow::DataType dtype = ctx->expected_output_dtype(index);
  const int64_t size = tensorflow::DataTypeSize(dtype), n = shape.num_elements();
  if (size > 0 && n >= static_cast<int64_t>(kCachedScratchBytes) / size &&
      n <= (int64_t{1} << 58) / size && tensorflow::DataTypeCanUseMemcpy(dtype) &&
      ctx->device()->device_type() == DEVICE_CPU) {
    Tensor t(HostOutputAllocator::Get(), dtype, shape);
    if (t.IsInitialized()) {
      ctx->set_output(index, std::move(t));
      *out = ctx->mutable_output(index);
      return absl::OkStatus();
    }
  }
  return ctx->allocate_output(index, shape, out);
}

// Allocates outputs 0, 1, ... with the given shapes into outs[0], outs[1], ...
inline absl::Status AllocateOutputs(OpKernelContext* ctx,
                                    std::initializer_list<TensorShape> shapes, Tensor** outs) {
  int k = 0;
  for (const TensorShape& shape : shapes) {
    TF_RETURN_IF_ERROR(AllocateOutput(ctx, k, shape, &outs[k]));
    ++k;
  }
  return absl::OkStatus();
}

// Zeros every element of the outputs (host memory): the result of a block op whose problem is
// empty (batch_size or cell_size 0), where no step computes anything.
template <typename T>
void SetZero(std::initializer_list<Tensor*> outs) {
  for (Tensor* t : outs) t->flat<T>().setZero();
}

// ---- Sizes: one overflow rule for every family ----------------------------------------------
// No dimension and no element count of any tensor, buffer or workspace that a kernel derives
// from its inputs may exceed kMaxElements (2^50). Counts are computed with Count, which
// saturates instead of overflowing, so no product of user-given sizes can wrap (in 32 or in 64
// bits); the engine indexes with 64-bit Index throughout. Each family's validation helper
// calls CheckCounts (or CheckRnnSizes) after the ranks and before comparing sizes, so that no
// shape arithmetic (I + H, 4 * H, ...) runs on unchecked dimensions.
constexpr int64_t kMaxElements = int64_t{1} << 50;

class Count {
 public:
  Count(int64_t v) : v_(v < 0 || v > kMaxElements ? kOver : v) {}  // NOLINT: implicit on purpose
  // min(true value, kMaxElements + 1): exact when fits().
  int64_t value() const { return v_; }
  bool fits() const { return v_ <= kMaxElements; }

  friend Count operator+(Count a, Count b) { return Count(a.v_ + b.v_); }  // <= 2^51 + 2
  friend Count operator*(Count a, Count b) {
    if (a.v_ == 0 || b.v_ == 0) return Count(0);
    if (a.v_ > kMaxElements / b.v_) return Count(kOver);
    return Count(a.v_ * b.v_);
  }
  friend Count Max(Count a, Count b) { return a.v_ >= b.v_ ? a : b; }

 private:
  static constexpr int64_t kOver = kMaxElements + 1;
  int64_t v_;
};

// InvalidArgument unless every count fits; `what` names the inputs (and shapes) the sizes came
// from.
inline absl::Status CheckCounts(const std::string& op, std::initializer_list<Count> counts,
                                const std::string& what) {
  for (const Count& c : counts) {
    if (!c.fits()) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": sizes too large (a dimension or the element count of a tensor or buffer "
              "would exceed 2^50): ",
          what));
    }
  }
  return absl::OkStatus();
}

// Exact size of the engine's params buffer of `s` (closed form of RnnParamsSize, which loops
// over the layers), saturating.
inline Count RnnParamsCount(const RnnSpec& s) {
  const Count K = RnnK(s), H = s.H, P = s.P, D = s.D;
  const Count Hs = s.P > 0 ? s.P : s.H;
  const Count in0 = s.skip_input || s.preprojected ? 0 : s.I;
  const Count tail = K * H * Hs + P * H + Count(2) * K * H;
  const Count first = D * (K * H * in0 + tail);
  if (s.L <= 1) return first;
  return first + Count(s.L - 1) * D * (K * H * (D * Hs) + tail);
}

// The RNN families' (CudnnRNN*, MPSGraph LSTM and GRU) size check: every dimension of the spec and
// upper bounds of the params, reserve and workspaces the engine derives from it.
inline absl::Status CheckRnnSizes(const std::string& op, const RnnSpec& s,
                                  const std::string& what) {
  const Count T = s.T, B = s.B, I = s.I, H = s.H, P = s.P, L = s.L, D = s.D, K = RnnK(s);
  const Count Hs = s.P > 0 ? s.P : s.H;
  const Count maxw = Max(Max(I, D * Hs), H);
  const Count TB = T * B;
  const Count reserve = L * D * TB * (K * H + Count(3) * H + Hs) + L * TB * D * Hs * Count(2);
  // (+ Hs + H: the masked h_prev and the reset-before gru gather of the backward)
  const Count work = TB * (Count(2) * K * H + Count(2) * D * Hs + maxw + P + Hs + H) +
                     B * (Count(2) * K * H + Count(3) * H + Count(3) * Hs);
  return CheckCounts(op, {T, B, I, H, P, L, D, K * H, RnnParamsCount(s), reserve, work,
                          TB * I, TB * D * Hs, L * D * B * H},
                     what);
}

// The engine's compute type: half and bfloat16 run in float.
template <typename T>
struct ComputeType {
  using type = T;
};
template <>
struct ComputeType<Eigen::half> {
  using type = float;
};
template <>
struct ComputeType<Eigen::bfloat16> {
  using type = float;
};

// The engine spec (LstmCellSpec or RnnSpec) for an op of type T: a bfloat16 op lets the
// engine round the operands of its products to bf16 (bf16_gemm.h, where the CPU has
// AVX512_BF16), as does a spec that asks for it (the Keras op's bf16_products); every other
// computes its products in the compute type.
template <typename T, typename Spec>
Spec SpecFor(Spec s) {
  s.bf16 = s.bf16 || std::is_same<T, Eigen::bfloat16>::value;
  return s;
}

// n elements between a 16-bit boundary type (Eigen::half, Eigen::bfloat16) and float, through
// the engine's conversions, compiled for this CPU's vector instructions (this library is
// compiled for the baseline ISA, where Eigen converts bfloat16 about five times slower);
// Convert (cpu_device.h) for every other pair, and where the engine cannot be had.
template <typename From, typename To>
void BoundaryConvert(OpKernelContext* ctx, const CpuDevice& dev, const From* src, To* dst,
                     int64_t n) {
  constexpr bool kToFloat = std::is_same<To, float>::value;
  using Word = typename std::conditional<kToFloat, From, To>::type;
  constexpr bool kHalf = std::is_same<Word, Eigen::half>::value;
  constexpr bool kBf16 = std::is_same<Word, Eigen::bfloat16>::value;
  if constexpr ((kHalf || kBf16) && (kToFloat || std::is_same<From, float>::value)) {
    const EngineApi* engine = nullptr;
    if (GetEngine(&engine).ok()) {
      TfHostPool pool(ctx);
      if constexpr (kToFloat) {
        (kHalf ? engine->half_to_f32 : engine->bf16_to_f32)(
            pool, reinterpret_cast<const uint16_t*>(src), dst, n);
      } else {
        (kHalf ? engine->f32_to_half : engine->f32_to_bf16)(
            pool, src, reinterpret_cast<uint16_t*>(dst), n);
      }
      return;
    }
  }
  Convert<From, To>(dev, src, dst, n);
}

// Hands out engine pointers of the compute type A for the op's tensors of type T. When T is
// A they are the tensors' own buffers; otherwise inputs are converted into temporaries
// (Scratch) and outputs are computed into temporaries that Finish() converts back.
template <typename T>
class ComputeBridge {
 public:
  using A = typename ComputeType<T>::type;
  static constexpr bool kConverts = !std::is_same<T, A>::value;

  explicit ComputeBridge(OpKernelContext* ctx)
      : ctx_(ctx), dev_(ctx->eigen_device<Eigen::ThreadPoolDevice>()) {}

  const absl::Status& status() const { return status_; }

  const A* In(const Tensor& t) {
    if constexpr (!kConverts) {
      return t.flat<T>().data();
    } else {
      A* tmp = Scratch(t.NumElements());
      if (tmp != nullptr) Boundary(t.flat<T>().data(), tmp, t.NumElements());
      return tmp;
    }
  }

  A* Out(Tensor* t) {
    if constexpr (!kConverts) {
      return t->flat<T>().data();
    } else {
      A* tmp = Scratch(t->NumElements());
      if (tmp != nullptr) pending_.push_back({tmp, t});
      return tmp;
    }
  }

  // Out(t) for the op's output `index`, t, where the graph consumes it
  // (OpKernelContext::output_required), else null: the engine then skips its computation, and
  // t is left unwritten.
  A* OutIfRequired(int index, Tensor* t) {
    return ctx_->output_required(index) ? Out(t) : nullptr;
  }
  // Whether the graph consumes any of the op's outputs [first, end) (a backprop's weight
  // gradients: none read, none computed).
  bool AnyRequired(int first, int end) const {
    for (int k = first; k < end; ++k) {
      if (ctx_->output_required(k)) return true;
    }
    return false;
  }

  // In() of each (operand, tensor) pair: *operand = In(*tensor).
  void BindIn(const std::vector<std::pair<const A**, const Tensor*>>& operands) {
    for (const auto& p : operands) *p.first = In(*p.second);
  }

  // Out() of each output in order: *dst[k] = Out(outs[k]).
  void BindOut(std::initializer_list<A**> dst, Tensor* const* outs) {
    for (A** d : dst) *d = Out(*outs++);
  }

  // Uninitialised scratch of n elements of A (n may be 0). Returns null after a failure.
  A* Scratch(int64_t n) {
    if (!status_.ok()) return nullptr;
    const size_t bytes = sizeof(A) * static_cast<size_t>(std::max<int64_t>(n, 1));
    if (bytes >= kCachedScratchBytes) {
      leases_.emplace_back(new ScratchCache::Lease(ScratchCache::Global().Take(bytes)));
      const std::string why = leases_.back()->Failure(ctx_->op_kernel().type_string());
      if (!why.empty()) status_ = absl::ResourceExhaustedError(why);
      return leases_.back()->template As<A>();
    }
    temps_.emplace_back();
    status_ = ctx_->allocate_temp(tensorflow::DataTypeToEnum<A>::value,
                                  TensorShape({std::max<int64_t>(n, 1)}), &temps_.back());
    if (!status_.ok()) return nullptr;
    return temps_.back().template flat<A>().data();
  }

  // Scratch for n elements of W (the words of a 16-bit sequence), in Scratch's elements.
  template <typename W>
  W* ScratchOf(int64_t n) {
    return reinterpret_cast<W*>(Scratch((n * sizeof(W) + sizeof(A) - 1) / sizeof(A)));
  }

  // Converts computed outputs back into the op's tensors.
  void Finish() {
    for (auto& p : pending_) {
      Boundary(p.first, p.second->template flat<T>().data(), p.second->NumElements());
    }
    pending_.clear();
  }

 private:
  // T <-> A for n elements.
  template <typename From, typename To>
  void Boundary(const From* src, To* dst, int64_t n) {
    BoundaryConvert<From, To>(ctx_, dev_, src, dst, n);
  }

  OpKernelContext* ctx_;
  const CpuDevice& dev_;
  absl::Status status_;
  std::deque<Tensor> temps_;
  std::vector<std::unique_ptr<ScratchCache::Lease>> leases_;
  std::vector<std::pair<A*, Tensor*>> pending_;
};

// dst[j, i, :] = src[i, j, :] for src [d0, d1, c] (batch-major <-> time-major), as whole rows
// of c elements: one index computation a row (Eigen's shuffle takes one an element, most of
// the swap's time where the rows are a few hundred elements and the tensors stay in cache).
template <typename A>
void SwapMajor(const CpuDevice& d, const A* src, A* dst, Index d0, Index d1, Index c) {
  if (d0 * d1 * c == 0) return;
  ParallelFor(d, d0 * d1, double(sizeof(A) * c) / 8, [&](Index r0, Index r1) {
    for (Index r = r0; r < r1; ++r) {  // dst's row r = (j, i)
      const Index j = r / d0, i = r - j * d0;
      std::memcpy(dst + r * c, src + (i * d1 + j) * c, sizeof(A) * c);
    }
  });
}

// After a kernel's bridge allocations: runs `run(engine, pool)` on the engine with the op's
// pool, then converts the computed outputs back (ComputeBridge::Finish).
template <typename T, typename Run>
absl::Status RunEngine(OpKernelContext* ctx, ComputeBridge<T>& br, Run run) {
  TF_RETURN_IF_ERROR(br.status());
  const EngineApi* engine;
  TF_RETURN_IF_ERROR(GetEngine(&engine));
  TfHostPool pool(ctx);
  run(*engine, pool);
  br.Finish();
  return absl::OkStatus();
}

// ResourceExhausted naming `op` when the engine's workspace (ScratchCache) could not be had.
inline absl::Status WorkspaceStatus(const std::string& op, const ScratchCache::Lease& lease) {
  const std::string why = lease.Failure(op);
  return why.empty() ? absl::OkStatus() : absl::ResourceExhaustedError(why);
}

// Elements of a T tensor that holds n_a elements of the compute type A (a reserve_space).
template <typename T, typename A>
int64_t ReserveElementsOfT(int64_t n_a) {
  return (n_a * static_cast<int64_t>(sizeof(A)) + static_cast<int64_t>(sizeof(T)) - 1) /
         static_cast<int64_t>(sizeof(T));
}

}  // namespace tfrnn

// Expands REG(T) for each dtype the kernels are registered for.
#define TFRNN_FOR_EACH_TYPE(REG) REG(Eigen::half) REG(Eigen::bfloat16) REG(float) REG(double)

#endif  // TF_RNN_OPS_CC_KERNELS_KERNEL_UTIL_H_
