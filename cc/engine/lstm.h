// The LSTM engine: one definition of the LSTM cell maths, forward and backward, over a
// time-major sequence, used by every LSTM op face (LSTMBlockCell(Grad), BlockLSTM(Grad),
// BlockLSTMV2, BlockLSTMGradV2, and the exact-gradient op behind the registered gradients).
// No TensorFlow includes.
//
// Notation: T time steps, B batch, I input size, H cell size ("C" in TF's docs).
// Pre-activation gate rows are [B, 4H]; the four H-wide blocks sit where `order` says:
//
//     gates row:  | block 0 | block 1 | block 2 | block 3 |
//     ICFO:       |    i    |   ci    |    f    |    o    |   BlockLSTM, LSTMBlockCell
//     IFCO:       |    i    |    f    |   ci    |    o    |   BlockLSTMV2, Keras, cuDNN
//
// Forward, per step (xh = [x_t, h_{t-1}], w = [I+H, 4H] with rows 0..I-1 for x):
//     gates = xh · w + b
//     i  = σ(gates_i + [peephole] cs_{t-1} ⊙ wci)
//     ci = tanh(gates_c)
//     f  = σ(gates_f + forget_bias + [peephole] cs_{t-1} ⊙ wcf)
//     cs = clip(i ⊙ ci + f ⊙ cs_{t-1}, ±cell_clip)        (no clip when cell_clip <= 0)
//     co = tanh(cs)
//     o  = σ(gates_o + [peephole] cs ⊙ wco)
//     h  = o ⊙ co
// The input projection x·w[0:I] is one GEMM over all steps; each step adds h_{t-1}·w[I:].
// Steps t >= seq_len_max produce zeros in all seven outputs.
//
// Backward: one pointwise pass and one recurrent GEMM per step (descending t); after the loop
// x_grad and w_grad are single GEMMs over all steps, b and peephole gradients reductions.
#ifndef TF_RNN_OPS_CC_ENGINE_LSTM_H_
#define TF_RNN_OPS_CC_ENGINE_LSTM_H_

#include "cc/engine/cpu_device.h"
#include "cc/engine/types.h"
#include "cc/engine/workspace.h"

namespace tfrnn {


template <typename A>
void LstmForward(const CpuDevice& d, const LstmCellSpec& spec, const LstmFwdArgs<A>& a,
                 A* workspace);


template <typename A>
void LstmBackward(const CpuDevice& d, const LstmCellSpec& spec, const LstmBwdArgs<A>& a,
                  A* workspace);

template <typename A>
void LstmCellBackward(const CpuDevice& d, const LstmCellSpec& spec,
                      const LstmCellBwdArgs<A>& a);

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_ENGINE_LSTM_H_
