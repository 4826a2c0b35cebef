// The CUDA custom-call targets of the stacked-RNN XLA kernels (XLA FFI, platform "CUDA"): the
// same call encoding, operands and results as the CPU targets (rnn_call.h, rnn_ffi_cpu.cc),
// run by the CUDA engine (_tfrnn_engine_cuda.so, its C API cc/gpu/c_api.h) on the call's
// stream, the workspace from XLA's scratch allocator. The Keras op's weights go to the engine
// as they are (separate weights, weights_xw); the params-vector faces pass the params. The
// sequence lengths, a device operand, are copied to the host once per call (a synchronous
// copy: the engine needs the longest length and checks every value, so the targets are not
// command-buffer compatible).
//
// No TensorFlow: the file also builds on its own against another XLA's FFI headers (JAX's,
// tests/gpu/xla_ffi_checks.py), where it exports the handlers as C symbols; with
// TFRNN_XLA_FFI_EMULATED it adds host-memory variants for the CUDA engine's CPU emulation
// (the checks without a GPU). In the TensorFlow build (_tf_rnn_ops_xla.so, with CUDA) the
// handlers are registered with TensorFlow's XLA for the "CUDA" platform.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "cc/engine/rnn_spec_check.h"
#include "cc/gpu/c_api.h"
#include "cc/gpu/c_api_loader.h"
#include "cc/gpu/c_api_convert.h"
#include "cc/xla/rnn_call.h"
#include "cc/xla/rnn_call_buffers.h"
#include "xla/ffi/api/ffi.h"

namespace tfrnn {
namespace {

namespace ffi = ::xla::ffi;

// The engine: TF_RNN_OPS_CUDA_ENGINE, else _tfrnn_engine_cuda.so next to this library. Null
// with *why when it cannot be loaded.
const CudaEngineFns* LoadCudaFns(std::string* why) {
  static std::once_flag once;
  static CudaEngineFns* fns = nullptr;
  static std::string* failure = new std::string();
  std::call_once(once, [] {
    const char* env = std::getenv("TF_RNN_OPS_CUDA_ENGINE");
    const std::string here = LibraryDirOf(reinterpret_cast<const void*>(&LoadCudaFns));
    const std::string path =
        env != nullptr && *env ? std::string(env) : here + "/_tfrnn_engine_cuda.so";
    auto* f = new CudaEngineFns();
    *failure = OpenCudaEngine(path, f);
    if (failure->empty()) {
      fns = f;
    } else {
      delete f;
    }
  });
  *why = *failure;
  return fns;
}

// Device scratch of `bytes` bytes (256-byte aligned), or null when it cannot be had.
using Scratch = std::function<void*(int64_t bytes)>;

// One call: the engine, the stream, the op's name for messages, scratch.
struct GpuCall {
  const CudaEngineFns* eng;
  void* stream;
  const char* op;
  const Scratch& scratch;

  ffi::Error Invalid(const std::string& why) const {
    return ffi::Error::InvalidArgument(std::string(op) + " (XLA custom call): " + why);
  }
  // The engine's status as an FFI error (Ok: success).
  ffi::Error Check(int code) const {
    if (code == TFRNN_CUDA_OK) return ffi::Error::Success();
    const std::string msg = std::string(op) + ": CUDA engine: " + eng->last_error();
    return code == TFRNN_CUDA_INVALID_ARGUMENT ? ffi::Error::InvalidArgument(msg)
                                               : ffi::Error::Internal(msg);
  }
  void* Take(int64_t bytes, ffi::Error* error) const {
    void* p = scratch(std::max<int64_t>(bytes, 1));
    if (p == nullptr) {
      *error = ffi::Error(ffi::ErrorCode::kResourceExhausted,
                          std::string(op) + " (XLA custom call): no device scratch of " +
                              std::to_string(bytes) + " bytes");
    }
    return p;
  }
};

// The call's buffers (rnn_call_buffers.h) as the engine's C API arguments, both directions'
// common part (Args: TfRnnCudaFwdArgs or TfRnnCudaBwdArgs). The zero recurrent bias of
// Keras's one-row bias is taken from scratch and zeroed on the stream.
template <typename Args>
ffi::Error MapCommon(const GpuCall& g, const XlaRnnCall& call, const XlaRnnBuffers& b,
                     Args* a) {
  // One of the two weight forms is null (the engine takes separate weights when r is set).
  std::tie(a->x, a->h0, a->c0, a->params, a->w, a->r, a->bw, a->br, a->mask, a->peephole) =
      std::tie(b.x, b.h0, b.c0, b.params, b.kernel, b.recurrent_kernel, b.bias, b.bias_r,
               b.mask, b.peephole);
  a->mask_per_step = call.mask_per_step;
  if (const int64_t bytes = XlaRnnZeroBias(call) * (call.f64 ? 8 : 4); bytes > 0) {
    ffi::Error error = ffi::Error::Success();
    void* zeros = g.Take(bytes, &error);
    if (zeros == nullptr) return error;
    if (ffi::Error e = g.Check(g.eng->zero(zeros, bytes, g.stream)); e.failure()) return e;
    a->br = zeros;
  }
  return ffi::Error::Success();
}

// The lengths on the host (checked: each in [0, T]) into *host, and both copies into the args.
template <typename Args>
ffi::Error MapLengths(const GpuCall& g, const XlaRnnCall& call, const int32_t* len_dev,
                      std::vector<int32_t>* host, Args* a) {
  if (len_dev == nullptr) return ffi::Error::Success();
  host->resize(call.spec.B);
  const int64_t bytes = call.spec.B * static_cast<int64_t>(sizeof(int32_t));
  if (ffi::Error e = g.Check(g.eng->copy_to_host(host->data(), len_dev, bytes, g.stream));
      e.failure()) {
    return e;
  }
  bool shorter;
  const std::string why =
      SeqLengthsProblem(host->data(), call.spec.B, call.spec.T, "time", &shorter);
  if (!why.empty()) return g.Invalid(why);
  a->lengths = host->data();
  a->lengths_dev = len_dev;
  return ffi::Error::Success();
}

ffi::Error Forward(const GpuCall& g, const XlaRnnCall& call, const XlaRnnBuffers& b,
                   TfRnnCudaFwdArgs* a, const TfRnnCudaSpec& cs, int64_t n_reserve,
                   int64_t ws_bytes) {
  std::tie(a->y, a->hn, a->cn, a->reserve) = std::tie(b.y, b.hn, b.cn, b.reserve);
  ffi::Error error = ffi::Error::Success();
  if (!call.spec.training) {  // the reserve is scratch
    a->reserve = g.Take(n_reserve * (call.f64 ? 8 : 4), &error);
    if (a->reserve == nullptr) return error;
  }
  void* ws = g.Take(ws_bytes, &error);
  if (ws == nullptr) return error;
  return g.Check(g.eng->rnn_forward(&cs, a, ws, ws_bytes, g.stream));
}

ffi::Error Backward(const GpuCall& g, const XlaRnnCall& call, const XlaRnnBuffers& b,
                    TfRnnCudaBwdArgs* a, const TfRnnCudaSpec& cs, int64_t ws_bytes) {
  std::tie(a->dy, a->dhn, a->dcn, a->reserve, a->dc_seq) =
      std::tie(b.dy, b.dhn, b.dcn, b.reserve_in, b.dc_seq);
  // dparams, or the separate weights' gradients.
  std::tie(a->dx, a->dh0, a->dc0, a->dparams, a->dw, a->dr, a->dbw, a->dbr, a->dpeephole) =
      std::tie(b.dx, b.dh0, b.dc0, b.dparams, b.dkernel, b.drecurrent_kernel, b.dbias,
               b.dbias_r, b.dpeephole);
  ffi::Error error = ffi::Error::Success();
  void* ws = g.Take(ws_bytes, &error);
  if (ws == nullptr) return error;
  return g.Check(g.eng->rnn_backward(&cs, a, ws, ws_bytes, g.stream));
}

// A target: the call decoded and checked, then the engine on the call's buffers.
template <bool kBackward>
ffi::Error Run(void* stream, const Scratch& scratch, ffi::RemainingArgs args,
               ffi::RemainingRets rets, ffi::Span<const int64_t> enc) {
  XlaRnnCall call;
  const std::string bad = DecodeXlaRnnCall(enc.begin(), enc.size(), &call);
  const char* op = XlaFaceName(call.face);
  if (!bad.empty()) {
    return ffi::Error::InvalidArgument(std::string(op) + " (XLA custom call): " + bad);
  }
  if (call.batch_major) {  // the XLA kernels ask for it on the CPU only
    return ffi::Error::InvalidArgument(std::string(op) +
                                       " (XLA custom call): batch-major sequences are CPU only");
  }
  std::string why;
  const CudaEngineFns* eng = LoadCudaFns(&why);
  if (eng == nullptr) return ffi::Error::Internal(std::string(op) + ": " + why);
  const GpuCall g{eng, stream, op, scratch};
  const TfRnnCudaSpec cs = CudaSpecOf(call.spec, call.f64 ? TFRNN_CUDA_DOUBLE : TFRNN_CUDA_FLOAT);
  int64_t n_params = 0, n_reserve = 0, fws = 0, bws = 0;
  if (ffi::Error e = g.Check(eng->rnn_sizes(&cs, &n_params, &n_reserve, &fws, &bws));
      e.failure()) {
    return e;
  }
  Buffers buf(op, call.f64, args, rets);
  const XlaRnnBuffers b = BindXlaRnnBuffers(call, buf, kBackward);
  if (!buf.error().empty()) return ffi::Error::InvalidArgument(buf.error());
  std::conditional_t<kBackward, TfRnnCudaBwdArgs, TfRnnCudaFwdArgs> a{};
  if (ffi::Error e = MapCommon(g, call, b, &a); e.failure()) return e;
  std::vector<int32_t> lengths;
  if (ffi::Error e = MapLengths(g, call, b.lengths, &lengths, &a); e.failure()) return e;
  if constexpr (kBackward) {
    return Backward(g, call, b, &a, cs, bws);
  } else {
    return Forward(g, call, b, &a, cs, n_reserve, fws);
  }
}

// The CUDA platform: the call's stream and XLA's device scratch (freed after the call).
using CudaStream = struct CUstream_st*;
template <bool kBackward>
ffi::Error OnCuda(CudaStream stream, ffi::ScratchAllocator alloc, ffi::RemainingArgs args,
                  ffi::RemainingRets rets, ffi::Span<const int64_t> enc) {
  // XLA's scratch takes alignments up to 16 bytes only: ask for 255 more and align here.
  const Scratch scratch = [&alloc](int64_t bytes) -> void* {
    std::optional<void*> p = alloc.Allocate(static_cast<size_t>(bytes) + 255, 16);
    if (!p.has_value() || *p == nullptr) return nullptr;
    const uintptr_t at = reinterpret_cast<uintptr_t>(*p);
    return reinterpret_cast<void*>((at + 255) / 256 * 256);
  };
  return Run<kBackward>(stream, scratch, args, rets, enc);
}

#ifdef TFRNN_XLA_FFI_EMULATED
// The CUDA engine's CPU emulation (its device memory is host memory): no stream, scratch from
// the heap, freed after the call.
template <bool kBackward>
ffi::Error OnHost(ffi::RemainingArgs args, ffi::RemainingRets rets,
                  ffi::Span<const int64_t> enc) {
  std::vector<std::vector<char>> held;
  const Scratch scratch = [&held](int64_t bytes) -> void* {
    held.emplace_back(static_cast<size_t>(bytes) + 256);
    const uintptr_t p = reinterpret_cast<uintptr_t>(held.back().data());
    return reinterpret_cast<void*>((p + 255) / 256 * 256);
  };
  return Run<kBackward>(nullptr, scratch, args, rets, enc);
}
#endif

}  // namespace
}  // namespace tfrnn

#define TFRNN_CUDA_BINDING                                                 \
  ::xla::ffi::Ffi::Bind()                                                  \
      .Ctx<::xla::ffi::PlatformStream<::tfrnn::CudaStream>>()              \
      .Ctx<::xla::ffi::ScratchAllocator>()                                 \
      .RemainingArgs()                                                     \
      .RemainingRets()                                                     \
      .Attr<::xla::ffi::Span<const int64_t>>("call")
XLA_FFI_DEFINE_HANDLER_SYMBOL(tfrnn_rnn_forward_cuda, ::tfrnn::OnCuda<false>, TFRNN_CUDA_BINDING);
XLA_FFI_DEFINE_HANDLER_SYMBOL(tfrnn_rnn_backward_cuda, ::tfrnn::OnCuda<true>, TFRNN_CUDA_BINDING);
#undef TFRNN_CUDA_BINDING

#ifdef TFRNN_XLA_FFI_EMULATED
#define TFRNN_HOST_BINDING                                                 \
  ::xla::ffi::Ffi::Bind().RemainingArgs().RemainingRets().Attr<::xla::ffi::Span<const int64_t>>( \
      "call")
XLA_FFI_DEFINE_HANDLER_SYMBOL(tfrnn_rnn_forward_emulated, ::tfrnn::OnHost<false>,
                              TFRNN_HOST_BINDING);
XLA_FFI_DEFINE_HANDLER_SYMBOL(tfrnn_rnn_backward_emulated, ::tfrnn::OnHost<true>,
                              TFRNN_HOST_BINDING);
#undef TFRNN_HOST_BINDING
#endif

#ifndef TFRNN_XLA_FFI_STANDALONE
namespace xla::ffi {
const XLA_FFI_Api* GetXlaFfiApi();  // exported by libtensorflow_cc (xla/ffi/ffi_api.h)
}  // namespace xla::ffi
XLA_FFI_REGISTER_HANDLER(::xla::ffi::GetXlaFfiApi(), "tfrnn_rnn_forward", "CUDA",
                         tfrnn_rnn_forward_cuda);
XLA_FFI_REGISTER_HANDLER(::xla::ffi::GetXlaFfiApi(), "tfrnn_rnn_backward", "CUDA",
                         tfrnn_rnn_backward_cuda);
#endif
