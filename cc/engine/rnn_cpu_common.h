// Pieces shared by the stacked-RNN engine's CPU forward (rnn_cpu.cc) and backward
// (rnn_cpu_backward.cc): the step map of a direction, one layer's pointers, activations
// and their derivatives, recurrent-mask rows.
#ifndef TF_RNN_OPS_CC_ENGINE_RNN_CPU_COMMON_H_
#define TF_RNN_OPS_CC_ENGINE_RNN_CPU_COMMON_H_

#include <algorithm>

#include "cc/engine/cpu_device.h"
#include "cc/engine/types.h"

namespace tfrnn {
namespace rnn_cpu {

inline constexpr double kCostPerElem = 50;

// Which time index sequence b visits at step s of one direction (-1: none).
struct StepMap {
  const int* lengths;
  Index T;
  bool reverse;
  Index Len(Index b) const { return lengths != nullptr ? lengths[b] : T; }
  Index Tau(Index b, Index s) const {
    const Index n = Len(b);
    if (s >= n) return -1;
    return reverse ? n - 1 - s : s;
  }
  Index Prev(Index tau) const { return reverse ? tau + 1 : tau - 1; }
  // Every one of the B sequences has length T.
  bool AllFull(Index B) const {
    for (Index b = 0; b < B; ++b) {
      if (Len(b) != T) return false;
    }
    return true;
  }
  Index MaxSteps(Index B) const {
    if (lengths == nullptr) return B > 0 ? T : 0;
    Index m = 0;
    for (Index b = 0; b < B; ++b) m = std::max<Index>(m, lengths[b]);
    return m;
  }
};

// Pointers of one (layer, direction).
template <typename A>
struct Layer {
  Index in = 0;       // width of the W matrices (0: skip input)
  Index in_cols = 0;  // columns of the layer's input tensor
  const A *W = nullptr, *R = nullptr, *Pm = nullptr, *bW = nullptr, *bR = nullptr;
  A *acts = nullptr, *aux = nullptr, *hh = nullptr, *hprev = nullptr;
  Index dcol = 0;  // column offset of this direction in the layer output
};

template <typename A>
Layer<A> MakeLayer(const RnnSpec& s, Index pseudo, const A* params, A* reserve) {
  Layer<A> ly;
  const Index l = pseudo / s.D;
  ly.in = RnnInWidth(s, l);
  ly.in_cols = RnnInCols(s, l);
  const RnnParamOffsets po = RnnParamLayout(s, pseudo);
  ly.W = params + po.w;
  ly.R = params + po.r;
  ly.Pm = params + po.p;
  ly.bW = params + po.bw;
  ly.bR = params + po.br;
  const RnnReserveOffsets ro = RnnReserveLayout(s, pseudo);
  ly.acts = reserve + ro.acts;
  ly.aux = reserve + ro.aux;
  ly.hh = reserve + ro.hh;
  ly.hprev = reserve + ro.hprev;
  ly.dcol = (pseudo % s.D) * RnnHs(s);
  return ly;
}

// v = act(v), in place, in one-packet chunks (no scalar libm peel for tanh and sigmoid:
// cpu_device.h Chunked).
template <typename A>
void Activate(RnnAct act, Vec<A>& v) {
  if (act == RnnAct::kNone) return;
  Chunked<A>(v.size(), [&](auto width, Index c, Index w) {
    VecN<A, decltype(width)::value> x(v.data() + c, w);
    switch (act) {
      case RnnAct::kNone:
        break;
      case RnnAct::kRelu:
        x = x.max(A(0));
        break;
      case RnnAct::kTanh:
        x = x.tanh();
        break;
      case RnnAct::kSigmoid:
        x = x.logistic();
        break;
      case RnnAct::kHardSigmoid:
        x = (x * A(0.2) + A(0.5)).max(A(0)).min(A(1));
        break;
      case RnnAct::kKerasHardSigmoid:
        x = (x * A(1.0 / 6.0) + A(0.5)).max(A(0)).min(A(1));
        break;
    }
  });
}

// d *= act'(x), given y = act(x) (every supported activation's derivative is a function of y).
template <typename A>
void MulActGrad(RnnAct act, const CVec<A>& y, Vec<A>& d) {
  switch (act) {
    case RnnAct::kNone:
      break;
    case RnnAct::kRelu:
      d = (y > A(0)).select(d, A(0));
      break;
    case RnnAct::kTanh:
      d *= A(1) - y.square();
      break;
    case RnnAct::kSigmoid:
      d *= y * (A(1) - y);
      break;
    case RnnAct::kHardSigmoid:
      d = (y > A(0) && y < A(1)).select(d * A(0.2), A(0));
      break;
    case RnnAct::kKerasHardSigmoid:
      d = (y > A(0) && y < A(1)).select(d * A(1.0 / 6.0), A(0));
      break;
  }
}

// Row of the mask for sequence b at time tau (column offset applied by the caller: MaskCol).
template <typename A>
const A* MaskRow(const RnnSpec& s, const A* mask, bool per_step, Index tau, Index b) {
  const Index cols = s.D * (s.mask_gates ? RnnK(s) : 1) * RnnHs(s);
  return mask + ((per_step ? tau * s.B : 0) + b) * cols;
}

// Column of the mask of gate block k in direction column dcol (= d·Hs) of a mask row.
inline Index MaskCol(const RnnSpec& s, Index dcol, Index k) {
  return s.mask_gates ? RnnK(s) * dcol + k * RnnHs(s) : dcol;
}

}  // namespace rnn_cpu
}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_ENGINE_RNN_CPU_COMMON_H_
