// The LSTM block ops (BlockLSTM / BlockLSTMV2 and their gradients) on the GPU: the same maths,
// layouts and semantics as on the CPU (equations in cc/engine/lstm.h), on the caller's stream,
// as one layer of the CUDA stacked-RNN engine: cc/engine/lstm_block_mapping.h maps them for
// both devices, lstm_gpu.cu is its CUDA adapter. No TensorFlow includes.
//
// Storage type T (half, bfloat16, float, double) for every tensor and GEMM operand; the gate
// pre-activations, the carries (dL/dh, dL/dcs) and the pointwise maths in Acc (float, double
// for double). Per step one cuBLAS GEMM (h_{t-1}·w[I:]) and one fused pointwise kernel;
// backward per step one GEMM and one fused kernel, then single GEMMs for x_grad and w_grad
// and deterministic reductions (no atomics) for the bias and peephole gradients.
#ifndef TF_RNN_OPS_CC_GPU_LSTM_GPU_H_
#define TF_RNN_OPS_CC_GPU_LSTM_GPU_H_

#include <cstdint>

#include "cc/engine/types.h"
#include "cc/gpu/cublas_loader.h"
#include "cc/gpu/gpu_status.h"

namespace tfrnn {
namespace gpu {

// Every pointer is device memory. Workspaces: LstmFwdWorkspaceBytesGpu / LstmBwd... bytes.
template <typename T>
GpuStatus LstmForwardGpu(const GpuContext& g, const LstmCellSpec& s, const LstmFwdArgs<T>& a,
                         void* workspace, int64_t workspace_bytes);
template <typename T>
GpuStatus LstmBackwardGpu(const GpuContext& g, const LstmCellSpec& s, const LstmBwdArgs<T>& a,
                          void* workspace, int64_t workspace_bytes, T* dgates_out = nullptr);

int64_t LstmFwdWorkspaceBytesGpu(int64_t T, int64_t B, int64_t I, int64_t H, int elem_bytes);
int64_t LstmBwdWorkspaceBytesGpu(int64_t T, int64_t B, int64_t I, int64_t H, int elem_bytes);

}  // namespace gpu
}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_GPU_LSTM_GPU_H_
