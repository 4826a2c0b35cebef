#include "cc/kernels/cuda_engine_loader.h"

#include <dlfcn.h>

#include <mutex>
#include <string>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "cc/kernels/engine_loader.h"
#include "xla/stream_executor/stream.h"

namespace tfrnn {
namespace {

absl::Status Load(CudaEngine* e) {
  const std::string path =
      LibraryDirOf(reinterpret_cast<const void*>(&GetCudaEngine)) + "/_tfrnn_engine_cuda.so";
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
  // Each CudaEngine field is the C API's function tfrnn_cuda_<field>.
#define TFRNN_CUDA_SYM(field) sym("tfrnn_cuda_" #field, &e->field);
  TFRNN_CUDA_SYM(last_error) TFRNN_CUDA_SYM(rnn_sizes) TFRNN_CUDA_SYM(rnn_forward)
  TFRNN_CUDA_SYM(rnn_backward) TFRNN_CUDA_SYM(swap_major) TFRNN_CUDA_SYM(copy)
  TFRNN_CUDA_SYM(zero) TFRNN_CUDA_SYM(lstm_sizes) TFRNN_CUDA_SYM(lstm_forward)
  TFRNN_CUDA_SYM(lstm_backward) TFRNN_CUDA_SYM(gru_cell_sizes) TFRNN_CUDA_SYM(gru_cell_forward)
  TFRNN_CUDA_SYM(gru_cell_backward)
#undef TFRNN_CUDA_SYM
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
