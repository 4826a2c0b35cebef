// Where a shared object lies, for loading the engines beside the library that loads them. No
// TensorFlow (used by the op library's loaders and by the TF-free XLA targets).
#ifndef TF_RNN_OPS_CC_ENGINE_LIBRARY_DIR_H_
#define TF_RNN_OPS_CC_ENGINE_LIBRARY_DIR_H_

#include <dlfcn.h>

#include <string>

namespace tfrnn {

// The folder of the shared object that holds `symbol`, or "." when it cannot be found.
inline std::string LibraryDirOf(const void* symbol) {
  Dl_info info;
  if (dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return ".";
  const std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_ENGINE_LIBRARY_DIR_H_
