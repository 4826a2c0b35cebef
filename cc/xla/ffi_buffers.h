// The buffers of one XLA FFI custom call, each checked (element type, element count) before
// its pointer is handed out: shared by the CPU targets (ffi_cpu_common.h) and the CUDA targets
// (rnn_ffi_gpu.cc). No TensorFlow: the CUDA targets also build against another XLA's FFI
// headers (JAX's, for the engine checks on a GPU machine).
#ifndef TF_RNN_OPS_CC_XLA_FFI_BUFFERS_H_
#define TF_RNN_OPS_CC_XLA_FFI_BUFFERS_H_

#include <cstdint>
#include <string>

#include "cc/engine/types.h"
#include "xla/ffi/api/ffi.h"

namespace tfrnn {

// A call's buffers, each checked (type: the compute type, or int32; element count) before its
// pointer is handed out; the first mismatch is kept as the error.
class Buffers {
 public:
  Buffers(const char* op, bool f64, ::xla::ffi::RemainingArgs args,
          ::xla::ffi::RemainingRets rets)
      : op_(op), f64_(f64), args_(args), rets_(rets) {}

  const std::string& error() const { return error_; }

  // Operand k, which must hold `want` elements of the compute type (or int32 when is_int).
  const void* In(size_t k, Index want, const char* what, bool is_int = false) {
    return InOf(k, want, what, is_int ? ::xla::ffi::DataType::S32 : Compute());
  }
  // Operand k as an int64 scalar (0 when it is not one; the error is kept).
  int64_t InInt64(size_t k, const char* what) {
    const void* p = InOf(k, 1, what, ::xla::ffi::DataType::S64);
    return p == nullptr ? 0 : *static_cast<const int64_t*>(p);
  }
  void* Out(size_t k, Index want, const char* what) {
    auto b = rets_.get<::xla::ffi::AnyBuffer>(k);
    if (!b.has_value()) return const_cast<void*>(Fail(what, "missing"));
    return const_cast<void*>(Check(**b, want, what, Compute()));
  }

 private:
  ::xla::ffi::DataType Compute() const {
    return f64_ ? ::xla::ffi::DataType::F64 : ::xla::ffi::DataType::F32;
  }
  const void* InOf(size_t k, Index want, const char* what, ::xla::ffi::DataType dt) {
    auto b = args_.get<::xla::ffi::AnyBuffer>(k);
    if (!b.has_value()) return Fail(what, "missing");
    return Check(*b, want, what, dt);
  }
  const void* Check(const ::xla::ffi::AnyBuffer& b, Index want, const char* what,
                    ::xla::ffi::DataType dt) {
    if (b.element_type() != dt || static_cast<Index>(b.element_count()) != want) {
      return Fail(what, "has " + std::to_string(b.element_count()) + " elements of type " +
                            std::to_string(static_cast<int>(b.element_type())) + ", want " +
                            std::to_string(want) + " of type " +
                            std::to_string(static_cast<int>(dt)));
    }
    return b.untyped_data();
  }
  const void* Fail(const char* what, const std::string& why) {
    if (error_.empty()) {
      error_ = std::string(op_) + " (XLA custom call): buffer " + what + " " + why +
               "; the call does not match its spec";
    }
    return nullptr;
  }

  const char* op_;
  bool f64_;
  ::xla::ffi::RemainingArgs args_;
  ::xla::ffi::RemainingRets rets_;
  std::string error_;
};

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_XLA_FFI_BUFFERS_H_
