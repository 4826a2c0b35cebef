// REGISTER_XLA_OP only records an XLA kernel: TensorFlow turns the records into kernels of the
// XLA_*_JIT devices once per process (XlaOpRegistry::RegisterCompilationKernels, at the first
// XLA compilation). A process that compiled with XLA before it imported tf_rnn_ops would never
// see ours. tfrnn_xla_register_late() (called by tf_rnn_ops/_loader.py after it loads this
// library) registers them itself in exactly that case: when the JIT kernels of TensorFlow's own
// ops exist but ours do not. Otherwise it does nothing, and TensorFlow's one pass will.
#include <string>
#include <vector>

#include "cc/xla/rnn_xla_util.h"
#include "tensorflow/core/framework/kernel_def_builder.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tfrnn {

std::vector<XlaKernelEntry>& XlaKernelEntries() {
  static std::vector<XlaKernelEntry>* entries = new std::vector<XlaKernelEntry>();
  return *entries;
}

namespace {

bool HasJitKernel(const char* op) {
  return tensorflow::KernelsRegisteredForOp(op).find(tensorflow::DEVICE_CPU_XLA_JIT) !=
         std::string::npos;
}

}  // namespace
}  // namespace tfrnn

// The number of kernels registered now (0: TensorFlow's pass has not run yet, or has already
// registered ours).
extern "C" __attribute__((visibility("default"))) int tfrnn_xla_register_late() {
  using tfrnn::XlaKernelEntries;
  if (XlaKernelEntries().empty() || !tfrnn::HasJitKernel("Identity") ||
      tfrnn::HasJitKernel(XlaKernelEntries().front().op)) {
    return 0;
  }
  int n = 0;
  for (const tfrnn::XlaKernelEntry& e : XlaKernelEntries()) {
    if (tfrnn::HasJitKernel(e.op)) continue;
    tensorflow::KernelDefBuilder builder(e.op);
    builder.Device(tensorflow::DEVICE_CPU_XLA_JIT)
        .TypeConstraint("T", std::vector<tensorflow::DataType>(tfrnn::kXlaRnnTypes));
    // Compile-time constant inputs (as REGISTER_XLA_OP recorded them) are host memory.
    if (const auto* args = tensorflow::XlaOpRegistry::CompileTimeConstantInputArgNames(e.op)) {
      for (const std::string& arg : *args) builder.HostMemory(arg.c_str());
    }
    const tensorflow::KernelDef* kdef = builder.Build();
    // Registrars live for the process, as REGISTER_KERNEL_BUILDER's static ones do.
    new tensorflow::kernel_factory::OpKernelRegistrar(kdef, "TfRnnXlaLate", e.factory);
    ++n;
  }
  return n;
}
