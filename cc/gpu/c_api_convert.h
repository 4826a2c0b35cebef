// The C API's structs (c_api.h) as the engine's C++ types (cc/engine/types.h): the field
// mapping shared by the CUDA engine's C API (c_api.cc) and the CPU engine's test shim
// (tests/gpu/cpu_engine_shim.cc). No checks here: each caller validates in its own way.
#ifndef TF_RNN_OPS_CC_GPU_C_API_CONVERT_H_
#define TF_RNN_OPS_CC_GPU_C_API_CONVERT_H_

#include "cc/engine/types.h"
#include "cc/gpu/c_api.h"

namespace tfrnn {

inline RnnSpec RnnSpecOf(const TfRnnCudaSpec& in) {
  RnnSpec s;
  s.mode = static_cast<RnnMode>(in.mode);
  s.T = in.T;
  s.B = in.B;
  s.I = in.I;
  s.N = in.N;
  s.P = in.P;
  s.L = in.L;
  s.D = in.D;
  s.skip_input = in.skip_input != 0;
  s.training = in.training != 0;
  s.dropout = static_cast<float>(in.dropout);
  s.seed = in.seed;
  for (int q = 0; q < 4; ++q) {
    s.gate_pos[q] = in.gate_pos[q];
    s.gate_act[q] = static_cast<RnnAct>(in.gate_act[q]);
  }
  s.cell_act = static_cast<RnnAct>(in.cell_act);
  s.peephole = in.peephole != 0;
  s.has_mask = in.has_mask != 0;
  s.preprojected = in.preprojected != 0;
  s.reverse = in.reverse != 0;
  s.gru_reset_before = in.gru_reset_before != 0;
  s.gru_z_new = in.gru_z_new != 0;
  return s;
}

template <typename T>
RnnFwdArgs<T> RnnFwdArgsOf(const TfRnnCudaFwdArgs& in) {
  RnnFwdArgs<T> a;
  a.lengths = in.lengths;
  a.x = static_cast<const T*>(in.x);
  a.h0 = static_cast<const T*>(in.h0);
  a.c0 = static_cast<const T*>(in.c0);
  a.params = static_cast<const T*>(in.params);
  a.y = static_cast<T*>(in.y);
  a.hn = static_cast<T*>(in.hn);
  a.cn = static_cast<T*>(in.cn);
  a.reserve = static_cast<T*>(in.reserve);
  a.peephole = static_cast<const T*>(in.peephole);
  a.mask = static_cast<const T*>(in.mask);
  a.mask_per_step = in.mask_per_step != 0;
  return a;
}

template <typename T>
RnnBwdArgs<T> RnnBwdArgsOf(const TfRnnCudaBwdArgs& in) {
  RnnBwdArgs<T> a;
  a.lengths = in.lengths;
  a.x = static_cast<const T*>(in.x);
  a.h0 = static_cast<const T*>(in.h0);
  a.c0 = static_cast<const T*>(in.c0);
  a.params = static_cast<const T*>(in.params);
  a.reserve = static_cast<const T*>(in.reserve);
  a.dy = static_cast<const T*>(in.dy);
  a.dhn = static_cast<const T*>(in.dhn);
  a.dcn = static_cast<const T*>(in.dcn);
  a.dx = static_cast<T*>(in.dx);
  a.dh0 = static_cast<T*>(in.dh0);
  a.dc0 = static_cast<T*>(in.dc0);
  a.dparams = static_cast<T*>(in.dparams);
  a.peephole = static_cast<const T*>(in.peephole);
  a.mask = static_cast<const T*>(in.mask);
  a.mask_per_step = in.mask_per_step != 0;
  a.dc_seq = static_cast<const T*>(in.dc_seq);
  a.dpeephole = static_cast<T*>(in.dpeephole);
  return a;
}

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_GPU_C_API_CONVERT_H_
