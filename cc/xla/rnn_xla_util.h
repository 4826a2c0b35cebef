// What the XLA kernels share: the compute type, the layout changes done
// in HLO around the custom call (batch-major <-> the engine's time-major, a half/bf16 op's
// reserve_space as the float values it holds), and the call itself (rnn_call.h).
#ifndef TF_RNN_OPS_CC_XLA_RNN_XLA_UTIL_H_
#define TF_RNN_OPS_CC_XLA_RNN_XLA_UTIL_H_

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "cc/xla/block_call.h"
#include "cc/xla/rnn_call.h"
#include "tensorflow/compiler/tf2xla/xla_op_kernel.h"
#include "tensorflow/compiler/tf2xla/xla_op_registry.h"
#include "xla/hlo/builder/lib/constants.h"
#include "xla/hlo/builder/xla_builder.h"
#include "xla/shape_util.h"

namespace tfrnn {

// The custom-call targets (cc/xla/rnn_ffi_cpu.cc, block_ffi_cpu.cc).
constexpr char kXlaRnnForward[] = "tfrnn_rnn_forward";
constexpr char kXlaRnnBackward[] = "tfrnn_rnn_backward";
constexpr char kXlaBlockCall[] = "tfrnn_block_call";  // cc/xla/block_ffi_cpu.cc

// Every XLA kernel of this library, for RegisterXlaKernelsLate (late_registration.cc).
struct XlaKernelEntry {
  const char* op;
  tensorflow::OpKernel* (*factory)(tensorflow::OpKernelConstruction*);
};
std::vector<XlaKernelEntry>& XlaKernelEntries();
template <typename K>
tensorflow::OpKernel* MakeXlaKernel(tensorflow::OpKernelConstruction* c) {
  return new K(c);
}
struct XlaKernelListed {
  XlaKernelListed(const char* op,
                  tensorflow::OpKernel* (*factory)(tensorflow::OpKernelConstruction*)) {
    XlaKernelEntries().push_back({op, factory});
  }
};
#define TFRNN_XLA_CONCAT_(a, b) a##b
#define TFRNN_XLA_CONCAT(a, b) TFRNN_XLA_CONCAT_(a, b)
// REGISTER_XLA_OP for CPU_XLA_JIT and every type (with the builder calls EXTRA), and the
// kernel listed for late registration.
#define TFRNN_REGISTER_XLA_KERNEL_WITH(NAME, KERNEL, EXTRA)                                  \
  REGISTER_XLA_OP(                                                                         \
      Name(NAME).Device(tensorflow::DEVICE_CPU_XLA_JIT).TypeConstraint("T", kXlaRnnTypes)   \
          EXTRA,                                                                           \
      KERNEL);                                                                             \
  static ::tfrnn::XlaKernelListed TFRNN_XLA_CONCAT(tfrnn_xla_listed_, __COUNTER__)(        \
      NAME, &::tfrnn::MakeXlaKernel<KERNEL>)
#define TFRNN_REGISTER_XLA_KERNEL(NAME, KERNEL) TFRNN_REGISTER_XLA_KERNEL_WITH(NAME, KERNEL, )

#ifdef TFRNN_XLA_GPU
// With CUDA the stacked-RNN ops' kernels are also registered for GPU_XLA_JIT (their custom
// calls' "CUDA" targets: rnn_ffi_gpu.cc), when TF_RNN_OPS_XLA_GPU=1 at load: the targets have
// run through JAX's XLA on the CUDA emulation only, never in TensorFlow on a GPU.
inline bool XlaGpuKernelsOn() {
  const char* v = std::getenv("TF_RNN_OPS_XLA_GPU");
  return v != nullptr && std::string(v) == "1";
}
#define TFRNN_REGISTER_XLA_GPU_KERNEL(NAME, KERNEL, EXTRA)                                   \
  static const bool TFRNN_XLA_CONCAT(tfrnn_xla_gpu_, __COUNTER__) =                         \
      ::tfrnn::XlaGpuKernelsOn() &&                                                         \
      (new ::tensorflow::XlaOpRegistrar(                                                    \
           ::tensorflow::XlaOpRegistrationBuilder::Name(NAME)                               \
               .Device(tensorflow::DEVICE_GPU_XLA_JIT)                                      \
               .TypeConstraint("T", kXlaRnnTypes) EXTRA                                     \
               .Build(&::tfrnn::MakeXlaKernel<KERNEL>)),                                    \
       true)
#else
#define TFRNN_REGISTER_XLA_GPU_KERNEL(NAME, KERNEL, EXTRA)
#endif
// The stacked-RNN ops (the custom calls tfrnn_rnn_forward / tfrnn_rnn_backward, or plain HLO):
// CPU, and GPU where built.
#define TFRNN_REGISTER_XLA_RNN_KERNEL(NAME, KERNEL) \
  TFRNN_REGISTER_XLA_KERNEL(NAME, KERNEL);          \
  TFRNN_REGISTER_XLA_GPU_KERNEL(NAME, KERNEL, )
// The params converters, whose size inputs are compile-time constants (CPU, and GPU where
// built).
#define TFRNN_SIZES_INPUTS                      \
  .CompileTimeConstantInput("num_layers")       \
      .CompileTimeConstantInput("num_units")    \
      .CompileTimeConstantInput("input_size")
#define TFRNN_REGISTER_XLA_SIZES_KERNEL(NAME, KERNEL)                  \
  TFRNN_REGISTER_XLA_KERNEL_WITH(NAME, KERNEL, TFRNN_SIZES_INPUTS);    \
  TFRNN_REGISTER_XLA_GPU_KERNEL(NAME, KERNEL, TFRNN_SIZES_INPUTS)

// The op types with XLA kernels (every type the ops take).
constexpr std::initializer_list<tensorflow::DataType> kXlaRnnTypes = {
    tensorflow::DT_HALF, tensorflow::DT_BFLOAT16, tensorflow::DT_FLOAT, tensorflow::DT_DOUBLE};

// The engine computes a half or bfloat16 op in float (the TensorFlow kernels' ComputeBridge);
// the XLA kernels convert in HLO around the call.
inline xla::PrimitiveType XlaComputeType(tensorflow::DataType t) {
  return t == tensorflow::DT_DOUBLE ? xla::F64 : xla::F32;
}
inline xla::PrimitiveType XlaOpType(tensorflow::DataType t) {
  switch (t) {
    case tensorflow::DT_HALF:
      return xla::F16;
    case tensorflow::DT_BFLOAT16:
      return xla::BF16;
    case tensorflow::DT_DOUBLE:
      return xla::F64;
    default:
      return xla::F32;
  }
}

inline xla::XlaOp Convert(xla::XlaOp v, xla::PrimitiveType to) {
  return xla::ConvertElementType(v, to);
}

// The call of `spec` for an op of type `dt` (a bfloat16 op lets the engine round its products'
// operands to bf16, as the TensorFlow kernels' SpecFor does).
inline XlaRnnCall MakeXlaRnnCall(const RnnSpec& spec, tensorflow::DataType dt, XlaFace face,
                                 XlaWeights weights) {
  XlaRnnCall call;
  call.spec = spec;
  call.spec.bf16 = dt == tensorflow::DT_BFLOAT16;
  call.face = face;
  call.f64 = XlaComputeType(dt) == xla::F64;
  call.weights = weights;
  return call;
}

// An array of no elements (an absent optional operand or result), and zeros of a shape.
inline xla::XlaOp Empty(xla::XlaBuilder* b, xla::PrimitiveType t) {
  return xla::Zeros(b, xla::ShapeUtil::MakeShape(t, {0}));
}
inline xla::Shape XlaShape(xla::PrimitiveType t, const tensorflow::TensorShape& s) {
  return xla::ShapeUtil::MakeShape(t, s.dim_sizes());
}
inline xla::XlaOp ZerosOf(xla::XlaBuilder* b, xla::PrimitiveType t,
                          const tensorflow::TensorShape& s) {
  return xla::Zeros(b, XlaShape(t, s));
}

// Elements of an op-type reserve_space holding n compute-type values (ReserveElementsOfT).
inline int64_t OpTypeReserve(int64_t n, xla::PrimitiveType compute, xla::PrimitiveType op_type) {
  return op_type == compute ? n : 2 * n;
}

// Rows [lo, hi) of v's leading dimension.
inline xla::XlaOp Rows(xla::XlaOp v, int64_t lo, int64_t hi) {
  return xla::SliceInDim(v, lo, hi, 1, 0);
}

// The 1-D pieces (offset, value) concatenated in offset order (pieces that tile a vector, such
// as the regions of a params vector).
inline xla::XlaOp ConcatAtOffsets(xla::XlaBuilder* b,
                                  std::vector<std::pair<int64_t, xla::XlaOp>> pieces) {
  std::sort(pieces.begin(), pieces.end(),
            [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<xla::XlaOp> ordered;
  for (const auto& p : pieces) ordered.push_back(p.second);
  return xla::ConcatInDim(b, ordered, 0);
}

// The kernel compiles for the CPU (XLA_CPU_JIT: the custom calls' "Host" targets).
inline bool OnXlaCpu(tensorflow::OpKernelConstruction* c) {
  return c->device_type() == tensorflow::DeviceType(tensorflow::DEVICE_CPU_XLA_JIT);
}

// [d0, d1, c] -> [d1, d0, c] (a bitcast when d0 or d1 is 1: XLA simplifies it).
inline xla::XlaOp SwapMajor(xla::XlaOp v) { return xla::Transpose(v, {1, 0, 2}); }

// The reserve as the op's output of type `op_type`: n floats of a half/bf16 op are 2n halves
// (the TensorFlow kernels' layout: ReserveElementsOfT), bit for bit.
inline xla::XlaOp ReserveToOpType(xla::XlaOp reserve, int64_t n, xla::PrimitiveType compute,
                                  xla::PrimitiveType op_type) {
  if (op_type == compute) return reserve;
  return xla::Reshape(xla::BitcastConvertType(reserve, op_type), {2 * n});
}
inline xla::XlaOp ReserveFromOpType(xla::XlaOp reserve, int64_t n, xla::PrimitiveType compute,
                                    xla::PrimitiveType op_type) {
  if (op_type == compute) return reserve;
  return xla::BitcastConvertType(xla::Reshape(reserve, {n, 2}), compute);
}

// The XLA FFI custom call `target` on `operands`, its int64 array attribute "call" = `call`,
// with results of the given shapes; default (row-major) layouts throughout. Returns one XlaOp
// per result.
inline std::vector<xla::XlaOp> EmitCustomCall(xla::XlaBuilder* b, const char* target,
                                              const std::vector<int64_t>& call,
                                              const std::vector<xla::XlaOp>& operands,
                                              const std::vector<xla::Shape>& results) {
  std::vector<xla::Shape> operand_shapes;
  for (const xla::XlaOp& op : operands) {
    xla::Shape s = b->GetShape(op).value();
    operand_shapes.push_back(
        xla::ShapeUtil::MakeShapeWithDescendingLayout(s.element_type(), s.dimensions()));
  }
  std::vector<xla::Shape> laid_out;
  for (const xla::Shape& s : results) {
    laid_out.push_back(
        xla::ShapeUtil::MakeShapeWithDescendingLayout(s.element_type(), s.dimensions()));
  }
  const std::string config = absl::StrCat("{call = array<i64: ", absl::StrJoin(call, ", "), ">}");
  xla::XlaOp tuple = xla::CustomCallWithLayout(
      b, target, operands, xla::ShapeUtil::MakeTupleShape(laid_out), operand_shapes, config,
      /*has_side_effect=*/false, /*output_operand_aliasing=*/{}, /*literal=*/nullptr,
      xla::CustomCallSchedule::SCHEDULE_NONE, xla::CustomCallApiVersion::API_VERSION_TYPED_FFI);
  std::vector<xla::XlaOp> out;
  for (size_t k = 0; k < results.size(); ++k) out.push_back(xla::GetTupleElement(tuple, k));
  return out;
}

// The stacked-RNN call `call` (rnn_call.h) to `target`.
inline std::vector<xla::XlaOp> EmitRnnCall(xla::XlaBuilder* b, const char* target,
                                           const XlaRnnCall& call,
                                           const std::vector<xla::XlaOp>& operands,
                                           const std::vector<xla::Shape>& results) {
  return EmitCustomCall(b, target, EncodeXlaRnnCall(call), operands, results);
}

// A block op's outputs (shapes `outs`, the op's type `dt`): zeros when `empty` (batch or cell
// size 0), else the block custom call `call` (block_call.h) on the op's inputs `inputs`, one per
// engine IN argument in block_arg_fields.h's order (-1: absent, an empty array; call.present
// says which are there), then the operands `extra` as they are.
inline void EmitBlockOp(tensorflow::XlaOpKernelContext* ctx, XlaBlockCall call, bool empty,
                        const std::vector<int>& inputs, const std::vector<xla::XlaOp>& extra,
                        const std::vector<tensorflow::TensorShape>& outs,
                        tensorflow::DataType dt) {
  const xla::PrimitiveType a_type = XlaComputeType(dt), t_type = XlaOpType(dt);
  xla::XlaBuilder* b = ctx->builder();
  if (empty) {
    for (size_t o = 0; o < outs.size(); ++o) ctx->SetOutput(o, ZerosOf(b, t_type, outs[o]));
    return;
  }
  call.f64 = a_type == xla::F64;
  call.present = 0;
  std::vector<xla::XlaOp> operands;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const bool present = inputs[k] >= 0;
    operands.push_back(present ? Convert(ctx->Input(inputs[k]), a_type) : Empty(b, a_type));
    if (present) call.present |= int64_t{1} << k;
  }
  operands.insert(operands.end(), extra.begin(), extra.end());
  std::vector<xla::Shape> results;
  for (const tensorflow::TensorShape& s : outs) results.push_back(XlaShape(a_type, s));
  const std::vector<xla::XlaOp> r =
      EmitCustomCall(b, kXlaBlockCall, EncodeXlaBlockCall(call), operands, results);
  for (size_t o = 0; o < r.size(); ++o) ctx->SetOutput(o, Convert(r[o], t_type));
}

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_XLA_RNN_XLA_UTIL_H_
