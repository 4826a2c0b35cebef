// Opening the CUDA engine (_tfrnn_engine_cuda.so) from outside it: its C API (c_api.h) as a
// table of function pointers, bound with dlopen/dlsym and checked against the API version
// (the path: LibraryDirOf, library_dir.h).
// No TensorFlow and no CUDA headers: used by the TensorFlow GPU kernels
// (cc/kernels/cuda_engine_loader.cc) and by the XLA custom calls' CUDA targets
// (cc/xla/rnn_ffi_gpu.cc, which also build against JAX's FFI headers).
#ifndef TF_RNN_OPS_CC_GPU_C_API_LOADER_H_
#define TF_RNN_OPS_CC_GPU_C_API_LOADER_H_

#include <dlfcn.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "cc/engine/library_dir.h"
#include "cc/gpu/c_api.h"

namespace tfrnn {

// Each member is the C API's function tfrnn_cuda_<member>.
struct CudaEngineFns {
  const char* (*last_error)() = nullptr;
  int (*rnn_sizes)(const TfRnnCudaSpec*, int64_t*, int64_t*, int64_t*, int64_t*) = nullptr;
  int (*rnn_forward)(const TfRnnCudaSpec*, const TfRnnCudaFwdArgs*, void*, int64_t,
                     void*) = nullptr;
  int (*rnn_backward)(const TfRnnCudaSpec*, const TfRnnCudaBwdArgs*, void*, int64_t,
                      void*) = nullptr;
  int (*swap_major)(int32_t, const void*, void*, int64_t, int64_t, int64_t, void*) = nullptr;
  int (*copy)(void*, const void*, int64_t, void*) = nullptr;
  int (*copy_to_host)(void*, const void*, int64_t, void*) = nullptr;
  int (*zero)(void*, int64_t, void*) = nullptr;
  int (*lstm_sizes)(const TfRnnCudaLstmSpec*, int64_t*, int64_t*) = nullptr;
  int (*lstm_forward)(const TfRnnCudaLstmSpec*, const TfRnnCudaLstmFwdArgs*, void*, int64_t,
                      void*) = nullptr;
  int (*lstm_backward)(const TfRnnCudaLstmSpec*, const TfRnnCudaLstmBwdArgs*, void*, int64_t,
                       void*) = nullptr;
  int (*gru_cell_sizes)(const TfRnnCudaGruCellSpec*, int64_t*, int64_t*) = nullptr;
  int (*gru_cell_forward)(const TfRnnCudaGruCellSpec*, const TfRnnCudaGruCellFwdArgs*, void*,
                          int64_t, void*) = nullptr;
  int (*gru_cell_backward)(const TfRnnCudaGruCellSpec*, const TfRnnCudaGruCellBwdArgs*, void*,
                           int64_t, void*) = nullptr;
};

// Opens the engine at `path` and binds every function of *fns: "" on success, else why not
// (the file cannot be opened, has another API version, or lacks a function).
inline std::string OpenCudaEngine(const std::string& path, CudaEngineFns* fns) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* err = dlerror();
    return "cannot load the CUDA engine " + path + ": " +
           (err != nullptr ? err : "dlopen failed");
  }
  auto version = reinterpret_cast<int (*)()>(dlsym(h, "tfrnn_cuda_api_version"));
  if (version == nullptr || version() != TFRNN_CUDA_API_VERSION) {
    return path + " does not have C API version " + std::to_string(TFRNN_CUDA_API_VERSION) +
           "; rebuild it";
  }
  std::string missing;
  auto sym = [&](const char* name, auto* fn) {
    *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(dlsym(h, name));
    if (*fn == nullptr) missing += std::string(" ") + name;
  };
#define TFRNN_CUDA_SYM(member) sym("tfrnn_cuda_" #member, &fns->member);
  TFRNN_CUDA_SYM(last_error) TFRNN_CUDA_SYM(rnn_sizes) TFRNN_CUDA_SYM(rnn_forward)
  TFRNN_CUDA_SYM(rnn_backward) TFRNN_CUDA_SYM(swap_major) TFRNN_CUDA_SYM(copy)
  TFRNN_CUDA_SYM(copy_to_host) TFRNN_CUDA_SYM(zero) TFRNN_CUDA_SYM(lstm_sizes)
  TFRNN_CUDA_SYM(lstm_forward) TFRNN_CUDA_SYM(lstm_backward) TFRNN_CUDA_SYM(gru_cell_sizes)
  TFRNN_CUDA_SYM(gru_cell_forward) TFRNN_CUDA_SYM(gru_cell_backward)
#undef TFRNN_CUDA_SYM
  if (!missing.empty()) {
    return path + " lacks C API functions (" + missing.substr(1) + "); rebuild it";
  }
  return "";
}

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_GPU_C_API_LOADER_H_
