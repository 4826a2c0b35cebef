// The CUDA stacked-RNN engine: the same computation, layouts and semantics as rnn_cpu.cc
// (rnn.h has the equations, types.h the params and reserve layouts), on the caller's stream.
// No TensorFlow includes.
//
// Storage type T is __half, __nv_bfloat16, float or double: x, params, outputs, the reserve
// and every GEMM operand are T; pointwise maths, the recurrent carries (c, dL/dh, dL/dc) and
// the per-step recurrent products are kept in Acc (float, or double for double). GEMMs run
// through cuBLAS (float accumulation for half/bfloat16).
//
// Structure per (layer, direction), as on CPU: one GEMM for the input projection of all steps,
// then per step one recurrent GEMM and one fused pointwise kernel; backward: per step one GEMM
// for dL/dh and one fused pointwise kernel, then one GEMM per weight matrix over all T·B rows
// and deterministic column reductions (no atomics) for the biases.
#ifndef TF_RNN_OPS_CC_GPU_RNN_GPU_H_
#define TF_RNN_OPS_CC_GPU_RNN_GPU_H_

#include <cstdint>
#include <string>

#include "cc/engine/types.h"
#include "cc/gpu/cublas_loader.h"
#include "cc/gpu/gpu_status.h"

namespace tfrnn {
namespace gpu {

// Every pointer in the args is device memory, except `lengths` (host, [B], or null). A caller
// that already has the lengths on the device passes them as `lengths_dev` (else they are copied
// into the workspace). `workspace` has at least Rnn{Fwd,Bwd}WorkspaceBytesGpu bytes (256-byte
// aligned). The reserve holds RnnReserveSize(s) elements of T.
template <typename T>
GpuStatus RnnForwardGpu(const GpuContext& g, const RnnSpec& s, const RnnFwdArgs<T>& a,
                        const int* lengths_dev, void* workspace, int64_t workspace_bytes);
template <typename T>
GpuStatus RnnBackwardGpu(const GpuContext& g, const RnnSpec& s, const RnnBwdArgs<T>& a,
                         const int* lengths_dev, void* workspace, int64_t workspace_bytes);

// Why the CUDA engine cannot run these per-gate recurrent masks (mask_gates), or "": they run
// on the per-step path, without a projection.
inline std::string GateMasksProblem(const RnnSpec& s) {
  if (!RnnGateMasks(s) || s.P == 0) return "";
  return "per-gate recurrent masks (mask_gates) with a projection have no CUDA path";
}

// Workspace bytes for storage elements of `elem_bytes` (2, 4 or 8).
int64_t RnnFwdWorkspaceBytesGpu(const RnnSpec& s, int elem_bytes);
int64_t RnnBwdWorkspaceBytesGpu(const RnnSpec& s, int elem_bytes);

// dst [d1, d0, c] = src [d0, d1, c] transposed in its first two dimensions (elements of
// elem_bytes = 2, 4 or 8 bytes), on `stream`.
GpuStatus SwapMajor(cudaStream_t stream, int elem_bytes, const void* src, void* dst, int64_t d0,
                    int64_t d1, int64_t c);

// c [M, N] (float) = a [M, K] · btᵀ (bt [N, K]), half or bfloat16 inputs, by the warp
// tensor-core product of mma.cuh (mma_probe.cu: a check of its fragment layout), on `stream`.
GpuStatus MmaProbe(cudaStream_t stream, bool bf16, const void* a, const void* bt, float* c,
                   int64_t M, int64_t N, int64_t K);

// Checks what the engine relies on (sizes, modes, options); the same rules as the CPU faces.
GpuStatus ValidateRnnSpec(const RnnSpec& s);

}  // namespace gpu
}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_GPU_RNN_GPU_H_
