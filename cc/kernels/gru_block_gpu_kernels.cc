// GPU kernels of the GRU block cell (GRUBlockCell, GRUBlockCellGrad, GRUBlockCellGradExact
// under our "TfRnn>" names): the family's kernels (gru_block_face.h: validation and outputs,
// as on CPU) over the TF-free CUDA GRU cell (tfrnn_cuda_gru_cell_*, cc/gpu/gru_gpu.cu) on the
// op's stream with workspace from allocate_temp. Built when the library is built with CUDA.
#include <initializer_list>

#include "cc/kernels/cuda_engine_loader.h"
#include "cc/kernels/gpu_kernel_util.h"
#include "cc/kernels/gru_block_face.h"
#include "cc/kernels/kernel_util.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tfrnn {
namespace gru_block {
namespace {

using GruCall = gpu::EngineCall<TfRnnCudaGruCellSpec, TfRnnCudaGruCellFwdArgs,
                                TfRnnCudaGruCellBwdArgs, &CudaEngine::gru_cell_sizes,
                                &CudaEngine::gru_cell_forward, &CudaEngine::gru_cell_backward>;

// The engine's spec of the cell.
template <typename T>
TfRnnCudaGruCellSpec GruCellSpec(const GruInputs& in) {
  TfRnnCudaGruCellSpec cs{};
  cs.dtype = gpu::CudaDtypeOf<T>();
  cs.B = in.B;
  cs.I = in.I;
  cs.H = in.H;
  return cs;
}

// The family's computations on the CUDA engine's GRU cell (see gru_block_face.h).
template <typename T>
struct GpuGru {
  static absl::Status Forward(OpKernelContext* ctx, const GruInputs& in, Tensor* outs[4]) {
    GruCall call(ctx);
    TF_RETURN_IF_ERROR(call.Start(ctx, GruCellSpec<T>(in), true));
    TfRnnCudaGruCellFwdArgs a{};
    gpu::BindIn<T>(SharedInputs(in, &a));
    gpu::BindIn<T>({{&a.b_ru, in.b_ru}, {&a.b_c, in.b_c}});
    gpu::BindOut<T>({&a.r, &a.u, &a.c, &a.h}, outs);
    return call.Forward(a);
  }

  static absl::Status Backward(OpKernelContext* ctx, const GruInputs& in, bool exact,
                               Tensor* outs[4]) {
    GruCall call(ctx);
    TF_RETURN_IF_ERROR(call.Start(ctx, GruCellSpec<T>(in), false));
    TfRnnCudaGruCellBwdArgs a{};
    gpu::BindIn<T>(SharedInputs(in, &a));
    gpu::BindIn<T>(GradInputs(in, exact, &a));
    gpu::BindOut<T>({&a.d_x, &a.d_h_prev, &a.d_c_bar, &a.d_r_bar_u_bar}, outs);
    return call.Backward(a);
  }

  static absl::Status Zero(OpKernelContext* ctx, std::initializer_list<Tensor*> outs) {
    return gpu::ZeroGpu(ctx, outs);
  }
};

#define TFRNN_REGISTER_GRU_GPU_KERNELS(T) TFRNN_GRU_BLOCK_KERNELS(T, DEVICE_GPU, GpuGru)
TFRNN_FOR_EACH_TYPE(TFRNN_REGISTER_GRU_GPU_KERNELS)
#undef TFRNN_REGISTER_GRU_GPU_KERNELS

}  // namespace
}  // namespace gru_block
}  // namespace tfrnn
