#include "cc/kernels/cuda_engine_loader.h"

#include <dlfcn.h>

#include <mutex>
#include <string>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "xla/stream_executor/stream.h"

namespace tfrnn {
namespace {

std::string ThisLibraryDir() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&GetCudaEngine), &info) == 0 || info.dli_fname == nullptr) {
    return ".";
  }
  std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

absl::Status Load(CudaEngine* e) {
  const std::string path = ThisLibraryDir() + "/_tfrnn_engine_cuda.so";
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("tf_rnn_ops: cannot load the CUDA engine ", path, ": ", dlerror(),
                     " (build it with tools/build_cuda.sh)"));
  }
  auto version = reinterpret_cast<int (*)()>(dlsym(h, "tfrnn_cuda_api_version"));
  if (version == nullptr || version() != TFRNN_CUDA_API_VERSION) {
    return absl::FailedPreconditionError(absl::StrCat(
        "tf_rnn_ops: ", path, " does not have C API version ", TFRNN_CUDA_API_VERSION,
        "; rebuild it"));
  }
  bool ok = true;
  auto sym = [&](const char* name, auto* fn) {
    *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(dlsym(h, name));
    ok = ok && *fn != nullptr;
  };
  sym("tfrnn_cuda_last_error", &e->last_error);
  sym("tfrnn_cuda_rnn_sizes", &e->rnn_sizes);
  sym("tfrnn_cuda_rnn_forward", &e->rnn_forward);
  sym("tfrnn_cuda_rnn_backward", &e->rnn_backward);
  sym("tfrnn_cuda_swap_major", &e->swap_major);
  sym("tfrnn_cuda_copy", &e->copy);
  sym("tfrnn_cuda_zero", &e->zero);
  sym("tfrnn_cuda_lstm_sizes", &e->lstm_sizes);
  sym("tfrnn_cuda_lstm_forward", &e->lstm_forward);
  sym("tfrnn_cuda_lstm_backward", &e->lstm_backward);
  sym("tfrnn_cuda_gru_cell_sizes", &e->gru_cell_sizes);
  sym("tfrnn_cuda_gru_cell_forward", &e->gru_cell_forward);
  sym("tfrnn_cuda_gru_cell_backward", &e->gru_cell_backward);
  if (!ok) {
    return absl::FailedPreconditionError(
        absl::StrCat("tf_rnn_ops: ", path, " lacks C API functions; rebuild it"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CudaEngine::Check(int code, const std::string& op) const {
  if (code == TFRNN_CUDA_OK) return absl::OkStatus();
  const std::string msg = absl::StrCat(op, ": CUDA engine: ", last_error());
  switch (code) {
    case TFRNN_CUDA_INVALID_ARGUMENT:
      return absl::InvalidArgumentError(msg);
    case TFRNN_CUDA_CUBLAS_UNAVAILABLE:
      return absl::FailedPreconditionError(msg);
    default:
      return absl::InternalError(msg);
  }
}

absl::Status GetCudaEngine(const CudaEngine** engine) {
  static std::once_flag once;
  static absl::Status* status = nullptr;
  static CudaEngine* loaded = nullptr;
  std::call_once(once, [] {
    loaded = new CudaEngine();
    status = new absl::Status(Load(loaded));
  });
  *engine = loaded;
  return *status;
}

absl::Status GetCudaStream(tensorflow::OpKernelContext* ctx, void** stream) {
  tensorflow::DeviceContext* dc = ctx->op_device_context();
  stream_executor::Stream* s = dc != nullptr ? dc->stream() : nullptr;
  if (s == nullptr) {
    return absl::InternalError(
        absl::StrCat(ctx->op_kernel().type_string(), ": no GPU stream for this op"));
  }
  *stream = s->platform_specific_handle().stream;
  if (*stream == nullptr) {
    return absl::InternalError(absl::StrCat(ctx->op_kernel().type_string(),
                                            ": the GPU stream has no CUDA handle"));
  }
  return absl::OkStatus();
}

}  // namespace tfrnn
