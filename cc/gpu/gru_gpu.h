// The CUDA GRU block cell (GRUBlockCell / GRUBlockCellGrad; equations in cc/engine/types.h at
// GruCellFwdArgs / GruCellBwdArgs; mapped by cc/engine/gru_cell_mapping.h as on the CPU), on
// the caller's stream. No TensorFlow includes. GEMM results and pointwise maths in Acc (float,
// double for double).
#ifndef TF_RNN_OPS_CC_GPU_GRU_GPU_H_
#define TF_RNN_OPS_CC_GPU_GRU_GPU_H_

#include <cstdint>

#include "cc/engine/types.h"
#include "cc/gpu/cublas_loader.h"
#include "cc/gpu/gpu_status.h"

namespace tfrnn {
namespace gpu {

template <typename T>
GpuStatus GruCellForwardGpu(const GpuContext& g, const GruCellFwdArgs<T>& a, void* workspace,
                            int64_t workspace_bytes);
template <typename T>
GpuStatus GruCellBackwardGpu(const GpuContext& g, const GruCellBwdArgs<T>& a, void* workspace,
                             int64_t workspace_bytes);

int64_t GruCellFwdWorkspaceBytesGpu(int64_t B, int64_t I, int64_t H, int elem_bytes);
int64_t GruCellBwdWorkspaceBytesGpu(int64_t B, int64_t I, int64_t H, int elem_bytes);

}  // namespace gpu
}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_GPU_GRU_GPU_H_
