// The persistent forward step kernel of the CUDA stacked-RNN engine (issue 23, first part).
//
// The per-step path launches a cuBLAS GEMM and a pointwise kernel for every step, so at small
// batch a step costs a few launches (~µs each) while its arithmetic takes well under one. The
// persistent kernel runs every step of one (layer, direction) in one cooperative launch: block
// g owns units [g·U, (g+1)·U) of every gate, keeps those K·U rows of R in shared memory for the
// whole sequence, and per step (1) reads h_{t-1} (⊙ the recurrent mask) of the whole batch from
// L2 into shared memory, (2) computes its rows of R·h in Acc into the hr buffer, (3) runs the
// same pointwise code as the per-step kernel (FwdPoint) for its units, (4) waits at one grid
// barrier. h is double-buffered, so one barrier per step suffices. No atomics: the result is
// the same every run.
//
// Used when the layer has no projection and no reset-before gru (both need a second product per
// step that spans every unit), the step is small (B·Hs <= kPersistentMaxWork), R's slice and h
// fit in one block's shared memory and the grid fits on the device at once; else the per-step
// path runs. TFRNN_CUDA_PERSISTENT=0 in the environment turns it off (for A/B runs and tests).
#ifndef TF_RNN_OPS_CC_GPU_RNN_GPU_PERSISTENT_CUH_
#define TF_RNN_OPS_CC_GPU_RNN_GPU_PERSISTENT_CUH_

#include "cc/gpu/rnn_gpu_bwd_point.cuh"
#include "cc/gpu/rnn_gpu_fwd_point.cuh"

namespace tfrnn {
namespace gpu {

constexpr I64 kPersistentMaxWork = 16 * 256;  // B·Hs (more rows with B <= 2: see the plan)

// How one kernel launch runs a whole sequence of a layer: a cooperative grid (the persistent
// kernels) or, with cluster > 0, thread-block clusters (rnn_gpu_cluster.cu).
struct SequenceKernelPlan {
  bool ok = false;
  int blocks = 0, threads = 0;
  I64 units = 0;      // U: units per block
  int rows_per_warp = 1;  // RB: rows of R per warp at a time (1 or 4)
  int batch_tile = 1;     // CB: batch rows per register tile (1 or 8)
  size_t smem = 0;    // dynamic shared memory bytes per block
  // Thread-block clusters (rnn_gpu_cluster.cu): cluster > 0 blocks per cluster, each cluster
  // running `group` batch rows; else one cooperative grid.
  int cluster = 0;
  I64 group = 0;
  // The fused step kernel (rnn_gpu_fused_step.cu): one launch per step, `group` batch rows and
  // `units` units per block.
  bool fused_step = false;
  // The tensor-core persistent forward or backward (rnn_gpu_persistent_mma.cu).
  bool mma = false;
};

// Whether (and how) the persistent forward runs layer `s` with storage type T on the current
// device. Never fails: any CUDA query error means "no" (the per-step path runs).
template <typename T>
SequenceKernelPlan PlanPersistentFwd(const RnnSpec& s);

// Runs `steps` steps of the layer described by `p` (as the per-step kernel sees it; its step
// and h pointers are set per step). h_cur holds the h entering step 0 and h_next is a second
// [B, Hs] buffer; on return the h after the last step is in h_cur when `steps` is even, else in
// h_next. hr is an Acc buffer of [B, K·H]; R the layer's [K·H, Hs] recurrent matrix; mask (or
// null) the recurrent mask as MaskRowsKernel reads it.
template <typename T>
GpuStatus PersistentFwd(const GpuContext& g, const SequenceKernelPlan& plan, FwdStep<T> p,
                        const T* R, const T* mask, bool mask_per_step, I64 steps, T* h_cur,
                        T* h_next, AccOf<T>* hr);

// The persistent forward on tensor cores (rnn_gpu_persistent_mma.cu; T = __half or
// __nv_bfloat16): the same steps with the product on mma.sync and about 16 blocks. A plan
// where it fits and is wanted (by default at the sizes where it measured faster;
// TFRNN_CUDA_MMA=1 everywhere, =0 nowhere); PlanPersistentFwd asks for one first,
// PersistentFwd launches it.
template <typename T>
SequenceKernelPlan PlanPersistentMmaFwd(const RnnSpec& s);
template <typename T>
GpuStatus PersistentMmaFwd(const GpuContext& g, const SequenceKernelPlan& plan, FwdStep<T> p,
                           const T* R, I64 steps, T* h_cur, T* h_next, AccOf<T>* hr);
// Its backward: the persistent backward's steps with dhr·R on mma.sync (the same switch;
// PlanPersistentBwd asks first, PersistentBwd launches it).
template <typename T>
SequenceKernelPlan PlanPersistentMmaBwd(const RnnSpec& s);
template <typename T>
GpuStatus PersistentMmaBwd(const GpuContext& g, const SequenceKernelPlan& plan, BwdStep<T> p,
                           const T* R, I64 steps, T* d0, T* d1);

// The persistent backward (rnn_gpu_persistent_bwd.cu): every backward step of a layer in one
// cooperative launch, the mirror of the forward (block g keeps R's columns of its units and
// adds dhr_{t+1}·R to its units' carries dL/dh, then runs BwdPoint). For layers without
// projection, recurrent mask, reset-before gru or the block ops' options, at the forward's
// sizes; the plan picks it by DefaultBwd (one or two rows) or TFRNN_CUDA_PERSISTENT_BWD=1.
template <typename T>
SequenceKernelPlan PlanPersistentBwd(const RnnSpec& s);

// Runs `steps` backward steps of the layer described by `p` (as the per-step kernel sees it;
// its step and dhr_cur are set per step), latest first. d0 and d1 are [B, K·H] buffers: the
// latest step's dhr goes to d0, the next to d1, and so on; p.dh holds the carry dL/dh in and
// out (the caller adds step 0's dhr·R for dL/dh0, as on the per-step path).
template <typename T>
GpuStatus PersistentBwd(const GpuContext& g, const SequenceKernelPlan& plan, BwdStep<T> p,
                        const T* R, I64 steps, T* d0, T* d1);

// The fused forward step (rnn_gpu_fused_step.cu): the per-step path's recurrent product and
// pointwise kernel in one launch per step (no cuBLAS call, no hr round trip through a second
// kernel). For the layers the persistent forward takes, at any batch (in groups of rows whose
// h fits in shared memory). TF_RNN_OPS_CUDA_FUSED_STEP=1 turns it (and the backward's) on
// where the persistent kernels do not run; off by default (measured slower: docs/GPU.md).
template <typename T>
SequenceKernelPlan PlanFusedStepFwd(const RnnSpec& s);

// One step (p.step, p.h_cur, p.h_next set by the caller) of the fused step kernel; hr is an Acc
// buffer of [B, K·H], R the layer's [K·H, Hs], mask (or null) as MaskRowsKernel reads it.
template <typename T>
GpuStatus FusedStepFwd(const GpuContext& g, const SequenceKernelPlan& plan, FwdStep<T> p,
                       const T* R, const T* mask, bool mask_per_step, AccOf<T>* hr);

// The fused backward step: dh += dhr_{t+1}·R and the pointwise backward in one launch per step,
// reading R's columns as rows of Rt = Rᵀ [Hs, K·H] (the caller transposes R once per layer).
// For the layers the persistent backward takes (no recurrent mask either).
template <typename T>
SequenceKernelPlan PlanFusedStepBwd(const RnnSpec& s);

// One backward step (p.step, p.dhr_cur set by the caller); dhr_later is dhr_{t+1}, or null at
// the sequence's last step.
template <typename T>
GpuStatus FusedStepBwd(const GpuContext& g, const SequenceKernelPlan& plan, BwdStep<T> p,
                       const T* Rt, const T* dhr_later);

// The cluster kernels (rnn_gpu_cluster.cu; Hopper thread-block clusters): the persistent
// kernels' work split the other way round. Batch rows are independent, so each cluster of
// C blocks runs `group` rows of the batch on its own, with a copy of R spread over its blocks'
// shared memory; h (forward) or dhr (backward) goes to every block of the cluster through
// distributed shared memory, and the step barrier is the cluster's, not the grid's. The
// backward plan picks them by DefaultBwd; TFRNN_CUDA_CLUSTER=1 forces them both ways where
// they fit (TFRNN_CUDA_CLUSTER_SIZE=C forces the size), =0 keeps them off.
// PlanPersistentFwd/Bwd return their plans (cluster > 0) when chosen and possible;
// PersistentFwd/Bwd launch them.
template <typename T>
SequenceKernelPlan PlanClusterFwd(const RnnSpec& s);
template <typename T>
SequenceKernelPlan PlanClusterBwd(const RnnSpec& s);
template <typename T>
GpuStatus ClusterFwd(const GpuContext& g, const SequenceKernelPlan& plan, FwdStep<T> p, const T* R,
                     const T* mask, bool mask_per_step, I64 steps, T* h_cur, T* h_next);
template <typename T>
GpuStatus ClusterBwd(const GpuContext& g, const SequenceKernelPlan& plan, BwdStep<T> p, const T* R,
                     I64 steps, T* d_last);

// The cluster kernels on tensor cores (rnn_gpu_cluster_mma.cu; T = __half or __nv_bfloat16):
// the same split, with the step's product on mma.sync; for the layers the persistent
// tensor-core kernels take. TFRNN_CUDA_CLUSTER=1 together with TFRNN_CUDA_MMA=1 asks for them
// first (not yet measured on a GPU: never by default); their plans have cluster > 0 and mma.
template <typename T>
SequenceKernelPlan PlanClusterMmaFwd(const RnnSpec& s);
template <typename T>
SequenceKernelPlan PlanClusterMmaBwd(const RnnSpec& s);
template <typename T>
GpuStatus ClusterMmaFwd(const GpuContext& g, const SequenceKernelPlan& plan, FwdStep<T> p,
                        const T* R, I64 steps, T* h_cur, T* h_next);
template <typename T>
GpuStatus ClusterMmaBwd(const GpuContext& g, const SequenceKernelPlan& plan, BwdStep<T> p,
                        const T* R, I64 steps, T* d_last);

}  // namespace gpu
}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_GPU_RNN_GPU_PERSISTENT_CUH_
