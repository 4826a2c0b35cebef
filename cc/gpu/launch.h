// Kernel launches written once for nvcc and for the host emulation (cc/gpu/emu/cuda_emu.h):
//   TFRNN_LAUNCH(grid, block, stream, Kernel<T>)(args...);
// is Kernel<T><<<grid, block, 0, stream>>>(args...) under nvcc, and runs the grid on the
// calling thread in the emulation.
#ifndef TF_RNN_OPS_CC_GPU_LAUNCH_H_
#define TF_RNN_OPS_CC_GPU_LAUNCH_H_

#ifdef TFRNN_CUDA_EMULATE
#define TFRNN_LAUNCH(grid, block, stream, ...) \
  ::tfrnn::emu::Launch(grid, block, stream, __VA_ARGS__)
#else
#define TFRNN_LAUNCH(grid, block, stream, ...) __VA_ARGS__<<<grid, block, 0, stream>>>
#endif

#endif  // TF_RNN_OPS_CC_GPU_LAUNCH_H_
