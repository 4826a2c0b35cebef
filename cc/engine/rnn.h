// The stacked-RNN engine behind the CudnnRNN family (cuDNN semantics), no TensorFlow includes.
//
// Sizes: T steps, B batch, I input size, H units, P projection (lstm), Hs = P or H, L layers,
// D directions. Gate blocks per row follow cuDNN's linLayerID order:
//     lstm (K=4): i, f, c', o          gru (K=3): r, z, h'          rnn (K=1): the one gate
// With gx = W·x + b_W (all gates, all steps, one GEMM) and hr = R·h_prev + b_R (per step):
//     lstm:  i,f,o = σ(gx + hr), c' = tanh(gx + hr), c = f⊙c_prev + i⊙c', h = [P·](o⊙tanh c)
//     gru:   r,z = σ(gx + hr), h' = tanh(gx_h + r ⊙ hr_h), h = (1-z)⊙h' + z⊙h_prev
//     rnn:   h = tanh / relu(gx + hr)
// skip_input: layer 0 has no W; x itself (I == H) is gx before b_W, for every gate.
// Layer l > 0 reads layer l-1's output [fwd, bwd] (with dropout in training). Sequence b has
// lengths[b] steps: outputs past it are zero, the final state is the state after its last
// step, and the reverse direction runs from lengths[b]-1 down to 0.
#ifndef TF_RNN_OPS_CC_ENGINE_RNN_H_
#define TF_RNN_OPS_CC_ENGINE_RNN_H_

#include "cc/engine/cpu_device.h"
#include "cc/engine/types.h"
#include "cc/engine/workspace.h"

namespace tfrnn {

// Forward. `a.reserve` receives what RnnBackward needs (for inference pass scratch of the
// same size). `workspace` has RnnFwdWorkspaceSize(s) elements.
template <typename A>
void RnnForward(const CpuDevice& d, const RnnSpec& s, const RnnFwdArgs<A>& a, A* workspace);

// Backward of RnnForward: every output is written (dparams fully). `workspace` has
// RnnBwdWorkspaceSize(s) elements.
template <typename A>
void RnnBackward(const CpuDevice& d, const RnnSpec& s, const RnnBwdArgs<A>& a, A* workspace);

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_ENGINE_RNN_H_
