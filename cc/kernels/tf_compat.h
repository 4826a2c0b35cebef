// The one place for differences between the TensorFlow releases this library builds against
// (2.18 to 2.21 and tf-nightly; tools/compat_matrix.sh runs the matrix). Kernels include this
// header and never test TensorFlow versions themselves.
//
// Known difference: tensorflow/core/public/version.h in the 2.21 pip headers #errors unless
// TF's own build defines TF_MAJOR_VERSION & co., so custom ops cannot include it. The version
// built against therefore comes from configure.sh (tf.__version__) through Bazel as
// TFRNN_BUILT_TF_VERSION. No kernel API used here differs between 2.18 and 2.22.dev.
#ifndef TF_RNN_OPS_CC_KERNELS_TF_COMPAT_H_
#define TF_RNN_OPS_CC_KERNELS_TF_COMPAT_H_

#ifndef TFRNN_BUILT_TF_VERSION
#error "TFRNN_BUILT_TF_VERSION must be defined by the build (run ./configure.sh)"
#endif

namespace tfrnn {

// The TensorFlow version these kernels were compiled against.
inline const char* BuiltTfVersion() { return TFRNN_BUILT_TF_VERSION; }

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_KERNELS_TF_COMPAT_H_
