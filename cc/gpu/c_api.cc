// The C API of c_api.h over the engine of rnn_gpu.h.
#include "cc/gpu/c_api.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <exception>
#include <string>

#include "cc/engine/types.h"
#include "cc/gpu/c_api_convert.h"
#include "cc/gpu/cublas_loader.h"
#include "cc/gpu/gpu_status.h"
#include "cc/gpu/gru_gpu.h"
#include "cc/gpu/lstm_gpu.h"
#include "cc/gpu/rnn_gpu.h"

#define TFRNN_EXPORT __attribute__((visibility("default")))

namespace tfrnn {
namespace gpu {
namespace {

thread_local std::string g_last_error;

int Fail(const GpuStatus& st) {
  g_last_error = st.message();
  return st.code();
}

int Finish(const GpuStatus& st) {
  if (st.ok()) return TFRNN_CUDA_OK;
  return Fail(st);
}

int ElemBytes(int dtype) { return dtype == TFRNN_CUDA_DOUBLE ? 8 : dtype == TFRNN_CUDA_FLOAT ? 4 : 2; }

GpuStatus ToSpec(const TfRnnCudaSpec* in, RnnSpec* s) {
  if (in == nullptr) return InvalidArgument("spec is NULL");
  if (in->dtype < TFRNN_CUDA_HALF || in->dtype > TFRNN_CUDA_DOUBLE) {
    return InvalidArgument("dtype must be 0 (half), 1 (bfloat16), 2 (float) or 3 (double), got " +
                           std::to_string(in->dtype));
  }
  *s = RnnSpecOf(*in);
  return ValidateRnnSpec(*s);
}

GpuStatus Need(const void* p, int64_t n, const char* name) {
  if (n > 0 && p == nullptr) return InvalidArgument(std::string(name) + " is NULL");
  return GpuStatus::Ok();
}

// The current device exists and a cuBLAS handle for (device, stream) is leased.
GpuStatus Prepare(void* stream, CublasLease* lease, GpuContext* g) {
  int device = -1;
  TFRNN_CUDA_CHECK(cudaGetDevice(&device));
  g->stream = static_cast<cudaStream_t>(stream);
  TFRNN_GPU_RETURN_IF_ERROR(lease->Acquire(g->stream));
  g->api = lease->api();
  g->blas = lease->handle();
  return GpuStatus::Ok();
}

// The stacked engine's forward or backward (overloaded on the C args type).
template <typename T>
GpuStatus Run(const GpuContext& g, const RnnSpec& s, const TfRnnCudaFwdArgs* in, void* ws,
              int64_t ws_bytes) {
  const RnnFwdArgs<T> a = RnnFwdArgsOf<T>(*in);
  return RnnForwardGpu<T>(g, s, a, in->lengths_dev, ws, ws_bytes);
}

template <typename T>
GpuStatus Run(const GpuContext& g, const RnnSpec& s, const TfRnnCudaBwdArgs* in, void* ws,
              int64_t ws_bytes) {
  const RnnBwdArgs<T> a = RnnBwdArgsOf<T>(*in);
  return RnnBackwardGpu<T>(g, s, a, in->lengths_dev, ws, ws_bytes);
}

// InvalidArgument with the message, or Ok when it is empty.
GpuStatus ProblemStatus(const std::string& problem) {
  return problem.empty() ? GpuStatus::Ok() : InvalidArgument(problem);
}

// Args: TfRnnCudaFwdArgs or TfRnnCudaBwdArgs.
template <typename Args>
GpuStatus CheckArgs(const RnnSpec& s, const Args* a) {
  if (a == nullptr) return InvalidArgument("args is NULL");
  return ProblemStatus(RnnArgsProblem(s, *a));
}

GpuStatus ToLstmSpec(const TfRnnCudaLstmSpec* in, LstmCellSpec* s) {
  if (in == nullptr) return InvalidArgument("spec is NULL");
  if (in->dtype < TFRNN_CUDA_HALF || in->dtype > TFRNN_CUDA_DOUBLE) {
    return InvalidArgument("dtype must be 0 (half), 1 (bfloat16), 2 (float) or 3 (double), got " +
                           std::to_string(in->dtype));
  }
  if (in->T < 0 || in->B < 0 || in->I < 0 || in->H < 0) {
    return InvalidArgument("invalid LSTM spec: need T, B, I, H >= 0");
  }
  if (in->seq_len_max < 0 || in->seq_len_max > in->T) {
    return InvalidArgument("invalid LSTM spec: seq_len_max = " +
                           std::to_string(in->seq_len_max) + " is outside [0, " +
                           std::to_string(in->T) + "]");
  }
  if (in->gate_order != 0 && in->gate_order != 1) {
    return InvalidArgument("invalid LSTM spec: gate_order must be 0 (icfo) or 1 (ifco)");
  }
  s->order = in->gate_order == 0 ? kIcfo : kIfco;
  s->forget_bias = in->forget_bias;
  s->cell_clip = in->cell_clip;
  s->use_peephole = in->use_peephole != 0;
  return GpuStatus::Ok();
}

// The engine's typed args (types.h) from the C API's void* args, member by member of
// block_arg_fields.h.
#define TFRNN_FROM_C_IN(name, shape) a->name = static_cast<const T*>(in.name);
#define TFRNN_FROM_C_OUT(name, shape) a->name = static_cast<T*>(in.name);
#define TFRNN_FILL_ENGINE_ARGS(C_ARGS, ENGINE_ARGS, LIST) \
  template <typename T>                                   \
  void FillEngineArgs(const C_ARGS& in, ENGINE_ARGS<T>* a) { LIST(TFRNN_FROM_C_IN, TFRNN_FROM_C_OUT) }
TFRNN_FILL_ENGINE_ARGS(TfRnnCudaLstmFwdArgs, LstmFwdArgs, TFRNN_LSTM_FWD_ARGS)
TFRNN_FILL_ENGINE_ARGS(TfRnnCudaLstmBwdArgs, LstmBwdArgs, TFRNN_LSTM_BWD_ARGS)
TFRNN_FILL_ENGINE_ARGS(TfRnnCudaGruCellFwdArgs, GruCellFwdArgs, TFRNN_GRU_CELL_FWD_ARGS)
TFRNN_FILL_ENGINE_ARGS(TfRnnCudaGruCellBwdArgs, GruCellBwdArgs, TFRNN_GRU_CELL_BWD_ARGS)
#undef TFRNN_FILL_ENGINE_ARGS
#undef TFRNN_FROM_C_OUT
#undef TFRNN_FROM_C_IN

// The sizes of a block call's engine args from its C spec.
template <typename EngineArgs>
void SetSizes(const TfRnnCudaLstmSpec& c, EngineArgs* a) {
  a->T = c.T;
  a->B = c.B;
  a->I = c.I;
  a->H = c.H;
  a->seq_len_max = c.seq_len_max;
}
template <typename EngineArgs>
void SetSizes(const TfRnnCudaGruCellSpec& c, EngineArgs* a) {
  a->B = c.B;
  a->I = c.I;
  a->H = c.H;
}

// The engine args (types.h) of a block call from its C spec and args.
template <typename EngineArgs, typename CSpec, typename CArgs>
EngineArgs EngineArgsOf(const CSpec& c, const CArgs& in) {
  EngineArgs a;
  SetSizes(c, &a);
  FillEngineArgs(in, &a);
  return a;
}

template <typename T>
GpuStatus LstmFwd(const GpuContext& g, const LstmCellSpec& s, const TfRnnCudaLstmSpec* c,
                  const TfRnnCudaLstmFwdArgs* in, void* ws, int64_t ws_bytes) {
  return LstmForwardGpu<T>(g, s, EngineArgsOf<LstmFwdArgs<T>>(*c, *in), ws, ws_bytes);
}

template <typename T>
GpuStatus LstmBwd(const GpuContext& g, const LstmCellSpec& s, const TfRnnCudaLstmSpec* c,
                  const TfRnnCudaLstmBwdArgs* in, void* ws, int64_t ws_bytes) {
  LstmBwdArgs<T> a = EngineArgsOf<LstmBwdArgs<T>>(*c, *in);
  a.exact_clip_grad = c->exact_clip_grad != 0;
  return LstmBackwardGpu<T>(g, s, a, ws, ws_bytes, static_cast<T*>(in->dgates));
}

// The inputs BlockLSTM and BlockLSTMGrad both read.
template <typename Args>
GpuStatus CheckLstmInputs(const TfRnnCudaLstmSpec* c, const LstmCellSpec& s, const Args* a) {
  const int64_t BH = c->B * c->H, G = 4 * c->H;
  const int64_t ph = s.use_peephole ? c->H : 0;
  TFRNN_GPU_RETURN_IF_ERROR(Need(a->x, c->T * c->B * c->I, "x"));
  TFRNN_GPU_RETURN_IF_ERROR(Need(a->cs_prev, BH, "cs_prev"));
  TFRNN_GPU_RETURN_IF_ERROR(Need(a->h_prev, BH, "h_prev"));
  TFRNN_GPU_RETURN_IF_ERROR(Need(a->w, (c->I + c->H) * G, "w"));
  TFRNN_GPU_RETURN_IF_ERROR(Need(a->wci, ph, "wci"));
  TFRNN_GPU_RETURN_IF_ERROR(Need(a->wcf, ph, "wcf"));
  return Need(a->wco, ph, "wco");
}

GpuStatus CheckLstmFwdArgs(const TfRnnCudaLstmSpec* c, const LstmCellSpec& s,
                           const TfRnnCudaLstmFwdArgs* a) {
  if (a == nullptr) return InvalidArgument("args is NULL");
  TFRNN_GPU_RETURN_IF_ERROR(CheckLstmInputs(c, s, a));
  TFRNN_GPU_RETURN_IF_ERROR(Need(a->b, 4 * c->H, "b"));
  const void* outs[7] = {a->i, a->cs, a->f, a->o, a->ci, a->co, a->h};
  for (const void* p : outs) TFRNN_GPU_RETURN_IF_ERROR(Need(p, c->T * c->B * c->H, "an output"));
  return GpuStatus::Ok();
}

GpuStatus CheckLstmBwdArgs(const TfRnnCudaLstmSpec* c, const LstmCellSpec& s,
                           const TfRnnCudaLstmBwdArgs* a) {
  if (a == nullptr) return InvalidArgument("args is NULL");
  TFRNN_GPU_RETURN_IF_ERROR(CheckLstmInputs(c, s, a));
  const int64_t BH = c->B * c->H, TBH = c->T * BH, G = 4 * c->H;
  const void* ins[9] = {a->i, a->cs, a->f, a->o, a->ci, a->co, a->h, a->cs_grad, a->h_grad};
  for (const void* p : ins) TFRNN_GPU_RETURN_IF_ERROR(Need(p, TBH, "an activation or gradient"));
  TFRNN_GPU_RETURN_IF_ERROR(Need(a->x_grad, c->T * c->B * c->I, "x_grad"));
  TFRNN_GPU_RETURN_IF_ERROR(Need(a->cs_prev_grad, BH, "cs_prev_grad"));
  TFRNN_GPU_RETURN_IF_ERROR(Need(a->h_prev_grad, BH, "h_prev_grad"));
  TFRNN_GPU_RETURN_IF_ERROR(Need(a->w_grad, (c->I + c->H) * G, "w_grad"));
  TFRNN_GPU_RETURN_IF_ERROR(Need(a->b_grad, G, "b_grad"));
  TFRNN_GPU_RETURN_IF_ERROR(Need(a->wci_grad, c->H, "wci_grad"));
  TFRNN_GPU_RETURN_IF_ERROR(Need(a->wcf_grad, c->H, "wcf_grad"));
  TFRNN_GPU_RETURN_IF_ERROR(Need(a->wco_grad, c->H, "wco_grad"));
  return GpuStatus::Ok();
}

GpuStatus CheckGruCellSpec(const TfRnnCudaGruCellSpec* c) {
  if (c == nullptr) return InvalidArgument("spec is NULL");
  if (c->dtype < TFRNN_CUDA_HALF || c->dtype > TFRNN_CUDA_DOUBLE) {
    return InvalidArgument("dtype must be 0 (half), 1 (bfloat16), 2 (float) or 3 (double), got " +
                           std::to_string(c->dtype));
  }
  if (c->B < 0 || c->I < 0 || c->H < 0) {
    return InvalidArgument("invalid GRU cell spec: need B, I, H >= 0");
  }
  return GpuStatus::Ok();
}

GpuStatus CheckGruCellFwdArgs(const TfRnnCudaGruCellSpec* c, const TfRnnCudaGruCellFwdArgs* a) {
  if (a == nullptr) return InvalidArgument("args is NULL");
  const int64_t BH = c->B * c->H, IH = c->I + c->H;
  TFRNN_GPU_RETURN_IF_ERROR(Need(a->x, c->B * c->I, "x"));
  TFRNN_GPU_RETURN_IF_ERROR(Need(a->h_prev, BH, "h_prev"));
  TFRNN_GPU_RETURN_IF_ERROR(Need(a->w_ru, IH * 2 * c->H, "w_ru"));
  TFRNN_GPU_RETURN_IF_ERROR(Need(a->w_c, IH * c->H, "w_c"));
  TFRNN_GPU_RETURN_IF_ERROR(Need(a->b_ru, 2 * c->H, "b_ru"));
  TFRNN_GPU_RETURN_IF_ERROR(Need(a->b_c, c->H, "b_c"));
  const void* outs[4] = {a->r, a->u, a->c, a->h};
  for (const void* p : outs) TFRNN_GPU_RETURN_IF_ERROR(Need(p, BH, "an output"));
  return GpuStatus::Ok();
}

GpuStatus CheckGruCellBwdArgs(const TfRnnCudaGruCellSpec* c, const TfRnnCudaGruCellBwdArgs* a) {
  if (a == nullptr) return InvalidArgument("args is NULL");
  const int64_t BH = c->B * c->H, IH = c->I + c->H;
  TFRNN_GPU_RETURN_IF_ERROR(Need(a->x, c->B * c->I, "x"));
  TFRNN_GPU_RETURN_IF_ERROR(Need(a->w_ru, IH * 2 * c->H, "w_ru"));
  TFRNN_GPU_RETURN_IF_ERROR(Need(a->w_c, IH * c->H, "w_c"));
  const void* ins[5] = {a->h_prev, a->r, a->u, a->c, a->d_h};
  for (const void* p : ins) TFRNN_GPU_RETURN_IF_ERROR(Need(p, BH, "an input"));
  TFRNN_GPU_RETURN_IF_ERROR(Need(a->d_x, c->B * c->I, "d_x"));
  TFRNN_GPU_RETURN_IF_ERROR(Need(a->d_h_prev, BH, "d_h_prev"));
  TFRNN_GPU_RETURN_IF_ERROR(Need(a->d_c_bar, BH, "d_c_bar"));
  TFRNN_GPU_RETURN_IF_ERROR(Need(a->d_r_bar_u_bar, 2 * BH, "d_r_bar_u_bar"));
  return GpuStatus::Ok();
}

template <typename T>
GpuStatus GruCellFwd(const GpuContext& g, const TfRnnCudaGruCellSpec* c,
                     const TfRnnCudaGruCellFwdArgs* in, void* ws, int64_t ws_bytes) {
  return GruCellForwardGpu<T>(g, EngineArgsOf<GruCellFwdArgs<T>>(*c, *in), ws, ws_bytes);
}

template <typename T>
GpuStatus GruCellBwd(const GpuContext& g, const TfRnnCudaGruCellSpec* c,
                     const TfRnnCudaGruCellBwdArgs* in, void* ws, int64_t ws_bytes) {
  return GruCellBackwardGpu<T>(g, EngineArgsOf<GruCellBwdArgs<T>>(*c, *in), ws, ws_bytes);
}

// Runs an entry point's body, turning a C++ exception into an error code.
template <typename Body>
int Guarded(Body&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    return Fail(GpuStatus(TFRNN_CUDA_INTERNAL, std::string("exception: ") + e.what()));
  } catch (...) {
    return Fail(GpuStatus(TFRNN_CUDA_INTERNAL, "unknown exception"));
  }
}

// run(TypeTag<T>{}) for the CUDA element type T of a checked dtype.
template <typename Run>
GpuStatus ByDtype(int dtype, Run&& run) {
  switch (dtype) {
    case TFRNN_CUDA_HALF:
      return run(TypeTag<__half>{});
    case TFRNN_CUDA_BFLOAT16:
      return run(TypeTag<__nv_bfloat16>{});
    case TFRNN_CUDA_FLOAT:
      return run(TypeTag<float>{});
    default:
      return run(TypeTag<double>{});
  }
}

// What every compute entry point does: its checks (`check`, which validates the spec and so
// its dtype), a cuBLAS handle leased for the stream, then run(g, TypeTag<T>{}) for the spec's
// element type.
template <typename Spec, typename Check, typename Run>
int Launch(const Spec* spec, void* stream, Check&& check, Run&& run) {
  GpuStatus st = check();
  if (!st.ok()) return Fail(st);
  CublasLease lease;
  GpuContext g;
  st = Prepare(stream, &lease, &g);
  if (!st.ok()) return Fail(st);
  return Finish(ByDtype(spec->dtype, [&](auto tag) { return run(g, tag); }));
}

// tfrnn_cuda_rnn_forward / tfrnn_cuda_rnn_backward (Args: their C args type).
template <typename Args>
int RnnEntry(const TfRnnCudaSpec* spec, const Args* args, void* ws, int64_t ws_bytes,
             void* stream) {
  return Guarded([&]() -> int {
    RnnSpec s;
    return Launch(
        spec, stream,
        [&] {
          GpuStatus st = ToSpec(spec, &s);
          return st.ok() ? CheckArgs(s, args) : st;
        },
        [&](const GpuContext& g, auto t) {
          return Run<typename decltype(t)::type>(g, s, args, ws, ws_bytes);
        });
  });
}

}  // namespace
}  // namespace gpu
}  // namespace tfrnn

using tfrnn::gpu::Fail;
using tfrnn::gpu::Finish;
using tfrnn::gpu::GpuStatus;
using tfrnn::gpu::Guarded;
using tfrnn::gpu::Launch;

extern "C" {

TFRNN_EXPORT int tfrnn_cuda_api_version(void) { return TFRNN_CUDA_API_VERSION; }

TFRNN_EXPORT const char* tfrnn_cuda_last_error(void) {
  return tfrnn::gpu::g_last_error.c_str();
}

TFRNN_EXPORT int tfrnn_cuda_device_count(int32_t* count) {
  return Guarded([&]() -> int {
    if (count == nullptr) return Fail(tfrnn::gpu::InvalidArgument("count is NULL"));
    *count = 0;
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      cudaGetLastError();  // clear it
      return Fail(tfrnn::gpu::CudaStatus(e, "cudaGetDeviceCount", __FILE__, __LINE__));
    }
    *count = n;
    return TFRNN_CUDA_OK;
  });
}

TFRNN_EXPORT int tfrnn_cuda_cublas_library(const char** soname) {
  return Guarded([&]() -> int {
    const tfrnn::gpu::CublasApi* api = nullptr;
    GpuStatus st = tfrnn::gpu::LoadCublas(&api);
    if (!st.ok()) return Fail(st);
    if (soname != nullptr) *soname = api->soname;
    return TFRNN_CUDA_OK;
  });
}

TFRNN_EXPORT int tfrnn_cuda_rnn_sizes(const TfRnnCudaSpec* spec, int64_t* params_elems,
                                      int64_t* reserve_elems, int64_t* fwd_workspace_bytes,
                                      int64_t* bwd_workspace_bytes) {
  return Guarded([&]() -> int {
    tfrnn::RnnSpec s;
    GpuStatus st = tfrnn::gpu::ToSpec(spec, &s);
    if (!st.ok()) return Fail(st);
    const int eb = tfrnn::gpu::ElemBytes(spec->dtype);
    if (params_elems != nullptr) *params_elems = tfrnn::RnnParamsSize(s);
    if (reserve_elems != nullptr) *reserve_elems = tfrnn::RnnReserveSize(s);
    if (fwd_workspace_bytes != nullptr) {
      *fwd_workspace_bytes = tfrnn::gpu::RnnFwdWorkspaceBytesGpu(s, eb);
    }
    if (bwd_workspace_bytes != nullptr) {
      *bwd_workspace_bytes = tfrnn::gpu::RnnBwdWorkspaceBytesGpu(s, eb);
    }
    return TFRNN_CUDA_OK;
  });
}

TFRNN_EXPORT int tfrnn_cuda_rnn_param_offsets(const TfRnnCudaSpec* spec, int64_t pseudo,
                                              int64_t out[6]) {
  return Guarded([&]() -> int {
    tfrnn::RnnSpec s;
    GpuStatus st = tfrnn::gpu::ToSpec(spec, &s);
    if (!st.ok()) return Fail(st);
    if (out == nullptr) return Fail(tfrnn::gpu::InvalidArgument("out is NULL"));
    if (pseudo < 0 || pseudo >= s.L * s.D) {
      return Fail(tfrnn::gpu::InvalidArgument("pseudo-layer " + std::to_string(pseudo) +
                                              " is outside [0, L*D)"));
    }
    const tfrnn::RnnParamOffsets o = tfrnn::RnnParamLayout(s, pseudo);
    out[0] = o.w;
    out[1] = o.r;
    out[2] = o.p;
    out[3] = o.bw;
    out[4] = o.br;
    out[5] = o.end;
    return TFRNN_CUDA_OK;
  });
}

TFRNN_EXPORT int tfrnn_cuda_rnn_forward(const TfRnnCudaSpec* spec, const TfRnnCudaFwdArgs* args,
                                        void* workspace, int64_t workspace_bytes,
                                        void* stream) {
  return tfrnn::gpu::RnnEntry(spec, args, workspace, workspace_bytes, stream);
}

TFRNN_EXPORT int tfrnn_cuda_rnn_backward(const TfRnnCudaSpec* spec, const TfRnnCudaBwdArgs* args,
                                         void* workspace, int64_t workspace_bytes,
                                         void* stream) {
  return tfrnn::gpu::RnnEntry(spec, args, workspace, workspace_bytes, stream);
}

TFRNN_EXPORT int tfrnn_cuda_swap_major(int32_t elem_bytes, const void* src, void* dst,
                                       int64_t d0, int64_t d1, int64_t c, void* stream) {
  return Guarded([&]() -> int {
    if (d0 < 0 || d1 < 0 || c < 0) {
      return Fail(tfrnn::gpu::InvalidArgument("swap_major: negative size"));
    }
    if (d0 * d1 * c > 0 && (src == nullptr || dst == nullptr)) {
      return Fail(tfrnn::gpu::InvalidArgument("swap_major: NULL pointer"));
    }
    return Finish(tfrnn::gpu::SwapMajor(static_cast<cudaStream_t>(stream), elem_bytes, src, dst,
                                        d0, d1, c));
  });
}

TFRNN_EXPORT int tfrnn_cuda_mma_probe(int32_t dtype, const void* a, const void* bt, float* c,
                                     int64_t M, int64_t N, int64_t K, void* stream) {
  return Guarded([&]() -> int {
    if (dtype != TFRNN_CUDA_HALF && dtype != TFRNN_CUDA_BFLOAT16) {
      return Fail(tfrnn::gpu::InvalidArgument("mma_probe: dtype must be half or bfloat16"));
    }
    return Finish(tfrnn::gpu::MmaProbe(static_cast<cudaStream_t>(stream),
                                       dtype == TFRNN_CUDA_BFLOAT16, a, bt, c, M, N, K));
  });
}

static GpuStatus CopyOrZero(void* dst, const void* src, int64_t bytes, void* stream) {
  if (bytes < 0) return tfrnn::gpu::InvalidArgument("negative byte count");
  if (bytes == 0) return GpuStatus::Ok();
  if (dst == nullptr) return tfrnn::gpu::InvalidArgument("dst is NULL");
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (src != nullptr) {
    TFRNN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
  } else {
    TFRNN_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, s));
  }
  return GpuStatus::Ok();
}

TFRNN_EXPORT int tfrnn_cuda_copy(void* dst, const void* src, int64_t bytes, void* stream) {
  return Guarded([&]() -> int {
    if (src == nullptr && bytes > 0) return Fail(tfrnn::gpu::InvalidArgument("src is NULL"));
    return Finish(CopyOrZero(dst, src, bytes, stream));
  });
}

TFRNN_EXPORT int tfrnn_cuda_zero(void* dst, int64_t bytes, void* stream) {
  return Guarded([&]() -> int { return Finish(CopyOrZero(dst, nullptr, bytes, stream)); });
}

TFRNN_EXPORT int tfrnn_cuda_copy_to_host(void* host, const void* src, int64_t bytes,
                                         void* stream) {
  return Guarded([&]() -> int {
    if (bytes < 0) return Fail(tfrnn::gpu::InvalidArgument("negative byte count"));
    if (bytes == 0) return TFRNN_CUDA_OK;
    if (host == nullptr || src == nullptr) {
      return Fail(tfrnn::gpu::InvalidArgument(host == nullptr ? "host is NULL" : "src is NULL"));
    }
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    auto copy = [&]() -> GpuStatus {
      TFRNN_CUDA_CHECK(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, s));
      TFRNN_CUDA_CHECK(cudaStreamSynchronize(s));
      return GpuStatus::Ok();
    };
    return Finish(copy());
  });
}

TFRNN_EXPORT int tfrnn_cuda_lstm_sizes(const TfRnnCudaLstmSpec* spec, int64_t* fwd_workspace_bytes,
                                       int64_t* bwd_workspace_bytes) {
  return Guarded([&]() -> int {
    tfrnn::LstmCellSpec s;
    GpuStatus st = tfrnn::gpu::ToLstmSpec(spec, &s);
    if (!st.ok()) return Fail(st);
    const int eb = tfrnn::gpu::ElemBytes(spec->dtype);
    if (fwd_workspace_bytes != nullptr) {
      *fwd_workspace_bytes = tfrnn::gpu::LstmFwdWorkspaceBytesGpu(spec->T, spec->B, spec->I, spec->H, eb);
    }
    if (bwd_workspace_bytes != nullptr) {
      *bwd_workspace_bytes = tfrnn::gpu::LstmBwdWorkspaceBytesGpu(spec->T, spec->B, spec->I, spec->H, eb);
    }
    return TFRNN_CUDA_OK;
  });
}

// The LSTM block engine's forward and backward entry points (FN: LstmFwd / LstmBwd).
#define TFRNN_LSTM_ENTRY(NAME, ARGS, CHECK, FN)                                              \
  TFRNN_EXPORT int NAME(const TfRnnCudaLstmSpec* spec, const ARGS* args, void* workspace,   \
                        int64_t workspace_bytes, void* stream) {                            \
    return Guarded([&]() -> int {                                                            \
      tfrnn::LstmCellSpec s;                                                                 \
      return Launch(                                                                         \
          spec, stream,                                                                      \
          [&] {                                                                              \
            GpuStatus st = tfrnn::gpu::ToLstmSpec(spec, &s);                                 \
            return st.ok() ? tfrnn::gpu::CHECK(spec, s, args) : st;                          \
          },                                                                                 \
          [&](const tfrnn::gpu::GpuContext& g, auto t) {                                     \
            using T = typename decltype(t)::type;                                            \
            return tfrnn::gpu::FN<T>(g, s, spec, args, workspace, workspace_bytes);          \
          });                                                                                \
    });                                                                                      \
  }
TFRNN_LSTM_ENTRY(tfrnn_cuda_lstm_forward, TfRnnCudaLstmFwdArgs, CheckLstmFwdArgs, LstmFwd)
TFRNN_LSTM_ENTRY(tfrnn_cuda_lstm_backward, TfRnnCudaLstmBwdArgs, CheckLstmBwdArgs, LstmBwd)
#undef TFRNN_LSTM_ENTRY

TFRNN_EXPORT int tfrnn_cuda_gru_cell_sizes(const TfRnnCudaGruCellSpec* spec,
                                           int64_t* fwd_workspace_bytes,
                                           int64_t* bwd_workspace_bytes) {
  return Guarded([&]() -> int {
    GpuStatus st = tfrnn::gpu::CheckGruCellSpec(spec);
    if (!st.ok()) return Fail(st);
    const int eb = tfrnn::gpu::ElemBytes(spec->dtype);
    if (fwd_workspace_bytes != nullptr) {
      *fwd_workspace_bytes =
          tfrnn::gpu::GruCellFwdWorkspaceBytesGpu(spec->B, spec->I, spec->H, eb);
    }
    if (bwd_workspace_bytes != nullptr) {
      *bwd_workspace_bytes =
          tfrnn::gpu::GruCellBwdWorkspaceBytesGpu(spec->B, spec->I, spec->H, eb);
    }
    return TFRNN_CUDA_OK;
  });
}

// The GRU block cell's forward and backward entry points (FN: GruCellFwd / GruCellBwd).
#define TFRNN_GRU_ENTRY(NAME, ARGS, CHECK, FN)                                                \
  TFRNN_EXPORT int NAME(const TfRnnCudaGruCellSpec* spec, const ARGS* args, void* workspace, \
                        int64_t workspace_bytes, void* stream) {                              \
    return Guarded([&]() -> int {                                                              \
      return Launch(                                                                           \
          spec, stream,                                                                        \
          [&] {                                                                                \
            GpuStatus st = tfrnn::gpu::CheckGruCellSpec(spec);                                 \
            return st.ok() ? tfrnn::gpu::CHECK(spec, args) : st;                               \
          },                                                                                   \
          [&](const tfrnn::gpu::GpuContext& g, auto t) {                                       \
            using T = typename decltype(t)::type;                                              \
            return tfrnn::gpu::FN<T>(g, spec, args, workspace, workspace_bytes);               \
          });                                                                                  \
    });                                                                                        \
  }
TFRNN_GRU_ENTRY(tfrnn_cuda_gru_cell_forward, TfRnnCudaGruCellFwdArgs, CheckGruCellFwdArgs,
                GruCellFwd)
TFRNN_GRU_ENTRY(tfrnn_cuda_gru_cell_backward, TfRnnCudaGruCellBwdArgs, CheckGruCellBwdArgs,
                GruCellBwd)
#undef TFRNN_GRU_ENTRY

}  // extern "C"
