#include "cc/kernels/cuda_engine_loader.h"

#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "xla/stream_executor/stream.h"

namespace tfrnn {
namespace {

absl::Status Load(CudaEngine* e) {
  const std::string path =
      LibraryDirOf(reinterpret_cast<const void*>(&GetCudaEngine)) + "/_tfrnn_engine_cuda.so";
  const std::string why = OpenCudaEngine(path, e);
  if (why.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("tf_rnn_ops: ", why, " (build it with tools/build_cuda.sh)"));
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
