// The GRU block cell, a face of the stacked-RNN engine (gru_cpu.cc; see types.h for the
// equations). No TensorFlow includes.
#ifndef TF_RNN_OPS_CC_ENGINE_GRU_H_
#define TF_RNN_OPS_CC_ENGINE_GRU_H_

#include "cc/engine/cpu_device.h"
#include "cc/engine/types.h"
#include "cc/engine/workspace.h"

namespace tfrnn {

// workspace: GruCellFwdWorkspaceSize(B, H) elements.
template <typename A>
void GruCellForward(const CpuDevice& d, const GruCellFwdArgs<A>& a, A* workspace);

// workspace: GruCellBwdWorkspaceSize(B, H) elements.
template <typename A>
void GruCellBackward(const CpuDevice& d, const GruCellBwdArgs<A>& a, A* workspace);

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_ENGINE_GRU_H_
