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
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "cc/engine/rnn_spec_check.h"
#include "cc/gpu/c_api.h"
#include "cc/gpu/c_api_convert.h"
#include "cc/xla/ffi_buffers.h"
#include "cc/xla/rnn_call.h"
#include "xla/ffi/api/ffi.h"

namespace tfrnn {
namespace {

namespace ffi = ::xla::ffi;

// The CUDA engine's entry points these targets use.
struct CudaFns {
  const char* (*last_error)();
  int (*rnn_sizes)(const TfRnnCudaSpec*, int64_t*, int64_t*, int64_t*, int64_t*);
  int (*rnn_forward)(const TfRnnCudaSpec*, const TfRnnCudaFwdArgs*, void*, int64_t, void*);
  int (*rnn_backward)(const TfRnnCudaSpec*, const TfRnnCudaBwdArgs*, void*, int64_t, void*);
  int (*zero)(void*, int64_t, void*);
  int (*copy_to_host)(void*, const void*, int64_t, void*);
};

// The engine: TF_RNN_OPS_CUDA_ENGINE, else _tfrnn_engine_cuda.so next to this library. Null
// with *why when it cannot be loaded.
const CudaFns* LoadCudaFns(std::string* why) {
  static std::once_flag once;
  static CudaFns* fns = nullptr;
  static std::string* failure = new std::string();
  std::call_once(once, [] {
    std::string path;
    if (const char* env = std::getenv("TF_RNN_OPS_CUDA_ENGINE"); env != nullptr && *env) {
      path = env;
    } else {
      Dl_info info;
      if (dladdr(reinterpret_cast<const void*>(&LoadCudaFns), &info) != 0 && info.dli_fname) {
        path = info.dli_fname;
        path = path.substr(0, path.find_last_of('/') + 1);
      }
      path += "_tfrnn_engine_cuda.so";
    }
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      *failure = "cannot load the CUDA engine " + path + ": " + dlerror();
      return;
    }
    auto version = reinterpret_cast<int (*)()>(dlsym(h, "tfrnn_cuda_api_version"));
    if (version == nullptr || version() != TFRNN_CUDA_API_VERSION) {
      *failure = path + " does not have C API version " +
                 std::to_string(TFRNN_CUDA_API_VERSION) + "; rebuild it";
      return;
    }
    auto* f = new CudaFns();
    bool ok = true;
    auto sym = [&](const char* name, auto* fn) {
      *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(dlsym(h, name));
      ok = ok && *fn != nullptr;
    };
    sym("tfrnn_cuda_last_error", &f->last_error);
    sym("tfrnn_cuda_rnn_sizes", &f->rnn_sizes);
    sym("tfrnn_cuda_rnn_forward", &f->rnn_forward);
    sym("tfrnn_cuda_rnn_backward", &f->rnn_backward);
    sym("tfrnn_cuda_zero", &f->zero);
    sym("tfrnn_cuda_copy_to_host", &f->copy_to_host);
    if (!ok) {
      *failure = path + " lacks C API functions; rebuild it";
      delete f;
      return;
    }
    fns = f;
  });
  *why = *failure;
  return fns;
}

// Device scratch of `bytes` bytes (256-byte aligned), or null when it cannot be had.
using Scratch = std::function<void*(int64_t bytes)>;

// One call: the engine, the stream, the op's name for messages, scratch.
struct GpuCall {
  const CudaFns* eng;
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

// Operands 0..8 (lengths, x, h0, c0, w0, w1, w2, mask, peephole) into the engine's args (Args:
// TfRnnCudaFwdArgs or TfRnnCudaBwdArgs); the device lengths into *len_dev. The zero recurrent
// bias of Keras's one-row bias is taken from scratch and zeroed on the stream.
template <typename Args>
ffi::Error BindCommon(const GpuCall& g, const XlaRnnCall& call, Buffers& buf, Args* a,
                      const int32_t** len_dev) {
  const RnnSpec& s = call.spec;
  const bool lstm = s.mode == RnnMode::kLstm;
  const Index states = s.L * s.D * s.B, KN = RnnK(s) * s.H;
  const int64_t esize = call.f64 ? 8 : 4;
  *len_dev = static_cast<const int32_t*>(buf.In(0, call.has_lengths ? s.B : 0, "lengths", true));
  a->x = buf.In(1, s.T * s.B * s.I, "x");
  a->h0 = buf.In(2, states * RnnHs(s), "h0");
  a->c0 = lstm ? buf.In(3, states * s.H, "c0") : nullptr;
  if (call.weights == XlaWeights::kParamsVector) {
    a->params = buf.In(4, RnnParamsSize(s), "params");
  } else {
    a->w = buf.In(4, (s.preprojected ? 0 : s.I) * KN, "kernel");
    a->r = buf.In(5, s.H * KN, "recurrent_kernel");
    a->bw = buf.In(6, (call.two_biases ? 2 : 1) * KN, "bias");
    if (call.two_biases) {
      a->br = a->bw != nullptr ? static_cast<const char*>(a->bw) + KN * esize : nullptr;
    } else {
      ffi::Error error = ffi::Error::Success();
      void* zeros = g.Take(KN * esize, &error);
      if (zeros == nullptr) return error;
      if (ffi::Error e = g.Check(g.eng->zero(zeros, KN * esize, g.stream)); e.failure()) return e;
      a->br = zeros;
    }
  }
  a->mask = s.has_mask ? buf.In(7, XlaRnnMaskSize(call), "mask") : nullptr;
  a->mask_per_step = call.mask_per_step;
  a->peephole = s.peephole ? buf.In(8, XlaRnnPeepholeSize(call), "peephole") : nullptr;
  return ffi::Error::Success();
}

// The lengths on the host (checked: each in [0, T]) into *host, and both copies into the args.
template <typename Args>
ffi::Error BindLengths(const GpuCall& g, const XlaRnnCall& call, const int32_t* len_dev,
                       std::vector<int32_t>* host, Args* a) {
  if (!call.has_lengths) return ffi::Error::Success();
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

ffi::Error Forward(const GpuCall& g, const XlaRnnCall& call, Buffers& buf,
                   TfRnnCudaFwdArgs* a, const TfRnnCudaSpec& cs, int64_t n_reserve,
                   int64_t ws_bytes) {
  const RnnSpec& s = call.spec;
  const bool lstm = s.mode == RnnMode::kLstm;
  const Index states = s.L * s.D * s.B;
  a->y = buf.Out(0, s.T * s.B * s.D * RnnHs(s), "y");
  a->hn = buf.Out(1, states * RnnHs(s), "hn");
  a->cn = buf.Out(2, lstm ? states * s.H : 0, "cn");
  if (!lstm) a->cn = nullptr;
  a->reserve = buf.Out(3, XlaRnnReserveResult(call), "reserve");
  if (!buf.error().empty()) return ffi::Error::InvalidArgument(buf.error());
  ffi::Error error = ffi::Error::Success();
  if (!s.training) {  // the reserve is scratch
    a->reserve = g.Take(n_reserve * (call.f64 ? 8 : 4), &error);
    if (a->reserve == nullptr) return error;
  }
  void* ws = g.Take(ws_bytes, &error);
  if (ws == nullptr) return error;
  return g.Check(g.eng->rnn_forward(&cs, a, ws, ws_bytes, g.stream));
}

ffi::Error Backward(const GpuCall& g, const XlaRnnCall& call, Buffers& buf,
                    TfRnnCudaBwdArgs* a, const TfRnnCudaSpec& cs, int64_t ws_bytes) {
  const RnnSpec& s = call.spec;
  const bool lstm = s.mode == RnnMode::kLstm;
  const Index states = s.L * s.D * s.B, KN = RnnK(s) * s.H;
  const int64_t esize = call.f64 ? 8 : 4;
  a->dy = buf.In(9, s.T * s.B * s.D * RnnHs(s), "dy");
  a->dhn = buf.In(10, states * RnnHs(s), "dhn");
  a->dcn = lstm ? buf.In(11, states * s.H, "dcn") : nullptr;
  a->reserve = buf.In(12, RnnReserveSize(s), "reserve");
  const bool dc_seq = lstm && call.has_dc_seq;
  a->dc_seq = dc_seq ? buf.In(13, s.T * s.B * s.D * s.H, "dc_seq") : nullptr;
  a->dx = buf.Out(0, s.T * s.B * s.I, "dx");
  a->dh0 = buf.Out(1, states * RnnHs(s), "dh0");
  a->dc0 = buf.Out(2, lstm ? states * s.H : 0, "dc0");
  if (!lstm) a->dc0 = nullptr;
  if (call.weights == XlaWeights::kParamsVector) {
    a->dparams = buf.Out(3, RnnParamsSize(s), "dparams");
    buf.Out(4, 0, "dw1");
    buf.Out(5, 0, "dw2");
  } else {
    a->dw = buf.Out(3, (s.preprojected ? 0 : s.I) * KN, "dkernel");
    a->dr = buf.Out(4, s.H * KN, "drecurrent_kernel");
    a->dbw = buf.Out(5, (call.two_biases ? 2 : 1) * KN, "dbias");
    a->dbr = call.two_biases && a->dbw != nullptr ? static_cast<char*>(a->dbw) + KN * esize
                                                  : nullptr;
  }
  a->dpeephole = s.peephole ? buf.Out(6, XlaRnnPeepholeSize(call), "dpeephole") : nullptr;
  if (!buf.error().empty()) return ffi::Error::InvalidArgument(buf.error());
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
  std::string why;
  const CudaFns* eng = LoadCudaFns(&why);
  if (eng == nullptr) return ffi::Error::Internal(std::string(op) + ": " + why);
  const GpuCall g{eng, stream, op, scratch};
  const TfRnnCudaSpec cs = CudaSpecOf(call.spec, call.f64 ? TFRNN_CUDA_DOUBLE : TFRNN_CUDA_FLOAT);
  int64_t n_params = 0, n_reserve = 0, fws = 0, bws = 0;
  if (ffi::Error e = g.Check(eng->rnn_sizes(&cs, &n_params, &n_reserve, &fws, &bws));
      e.failure()) {
    return e;
  }
  Buffers buf(op, call.f64, args, rets);
  std::conditional_t<kBackward, TfRnnCudaBwdArgs, TfRnnCudaFwdArgs> a{};
  const int32_t* len_dev = nullptr;
  if (ffi::Error e = BindCommon(g, call, buf, &a, &len_dev); e.failure()) return e;
  if (!buf.error().empty()) return ffi::Error::InvalidArgument(buf.error());
  std::vector<int32_t> lengths;
  if (ffi::Error e = BindLengths(g, call, len_dev, &lengths, &a); e.failure()) return e;
  if constexpr (kBackward) {
    return Backward(g, call, buf, &a, cs, bws);
  } else {
    return Forward(g, call, buf, &a, cs, n_reserve, fws);
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
