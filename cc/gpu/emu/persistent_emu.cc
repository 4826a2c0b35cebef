// The emulation build's stand-in for rnn_gpu_persistent.cu, whose kernel needs shared memory
// and grid barriers: the plan is always "no", so the per-step path runs (as on a GPU with
// TFRNN_CUDA_PERSISTENT=0).
#include "cc/gpu/rnn_gpu_persistent.cuh"

namespace tfrnn {
namespace gpu {

template <typename T>
PersistentPlan PlanPersistentFwd(const RnnSpec&) {
  return PersistentPlan();
}

template <typename T>
GpuStatus PersistentFwd(const GpuContext&, const PersistentPlan&, FwdStep<T>, const T*,
                        const T*, bool, I64, T*, T*, AccOf<T>*) {
  return GpuStatus(kInternal, "the persistent kernel is not part of the CUDA emulation");
}

#define TFRNN_INSTANTIATE_PERSISTENT(T)                                                       \
  template PersistentPlan PlanPersistentFwd<T>(const RnnSpec&);                               \
  template GpuStatus PersistentFwd<T>(const GpuContext&, const PersistentPlan&, FwdStep<T>,   \
                                      const T*, const T*, bool, I64, T*, T*, AccOf<T>*);
TFRNN_INSTANTIATE_PERSISTENT(__half)
TFRNN_INSTANTIATE_PERSISTENT(__nv_bfloat16)
TFRNN_INSTANTIATE_PERSISTENT(float)
TFRNN_INSTANTIATE_PERSISTENT(double)
#undef TFRNN_INSTANTIATE_PERSISTENT

}  // namespace gpu
}  // namespace tfrnn
