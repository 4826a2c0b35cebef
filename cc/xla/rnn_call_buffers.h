// The operands and results of one stacked-RNN custom call (the list in rnn_call.h), bound and
// checked once for both targets: rnn_ffi_cpu.cc maps them into the CPU engine's typed
// arguments, rnn_ffi_gpu.cc into the CUDA engine's C API. Every buffer is checked (type and
// element count, an absent optional one with no elements) before its pointer is handed out;
// an absent one is null. No TensorFlow (the CUDA targets also build against JAX's FFI headers).
#ifndef TF_RNN_OPS_CC_XLA_RNN_CALL_BUFFERS_H_
#define TF_RNN_OPS_CC_XLA_RNN_CALL_BUFFERS_H_

#include <cstdint>

#include "cc/xla/ffi_buffers.h"
#include "cc/xla/rnn_call.h"

namespace tfrnn {

// Pointers into one call's buffers (of the call's compute type but lengths).
struct XlaRnnBuffers {
  // Operands 0..8, both directions: lengths [B] when the call has them, c0 for lstm, params
  // for XlaWeights::kParamsVector; for kKerasWeights kernel, recurrent_kernel, the input bias
  // row and the recurrent one (bias_r null when Keras's bias has one row: the target supplies
  // zeros).
  const int32_t* lengths = nullptr;
  const void *x = nullptr, *h0 = nullptr, *c0 = nullptr, *params = nullptr;
  const void *kernel = nullptr, *recurrent_kernel = nullptr, *bias = nullptr, *bias_r = nullptr;
  const void *mask = nullptr, *peephole = nullptr;
  // Backward operands 9..13 (dcn: lstm; dc_seq: lstm with has_dc_seq).
  const void *dy = nullptr, *dhn = nullptr, *dcn = nullptr, *reserve_in = nullptr;
  const void* dc_seq = nullptr;
  // Forward results 0..3 (reserve: null outside training, where it is the target's scratch).
  void *y = nullptr, *hn = nullptr, *cn = nullptr, *reserve = nullptr;
  // Backward results 0..6 (dx: null without input_grad; dbias_r: the second row of a two-row
  // bias gradient).
  void *dx = nullptr, *dh0 = nullptr, *dc0 = nullptr, *dparams = nullptr;
  void *dkernel = nullptr, *drecurrent_kernel = nullptr, *dbias = nullptr, *dbias_r = nullptr;
  void* dpeephole = nullptr;
};

// Binds the forward's (backward false) or the backward's buffers of `call`; buf.error() names
// the first one that does not match the call's spec.
inline XlaRnnBuffers BindXlaRnnBuffers(const XlaRnnCall& call, Buffers& buf, bool backward) {
  const RnnSpec& s = call.spec;
  const bool lstm = s.mode == RnnMode::kLstm;
  const bool keras = call.weights == XlaWeights::kKerasWeights;
  const Index states = s.L * s.D * s.B, KH = RnnK(s) * s.H, Hs = RnnHs(s);
  const Index rows = s.T * s.B;
  const Index bias_rows = call.two_biases ? 2 : 1;
  const int64_t esize = call.f64 ? 8 : 4;
  auto nonempty = [](auto* p, bool present) { return present ? p : nullptr; };
  XlaRnnBuffers b;
  b.lengths = static_cast<const int32_t*>(
      nonempty(buf.In(0, call.has_lengths ? s.B : 0, "lengths", true), call.has_lengths));
  b.x = buf.In(1, rows * s.I, "x");
  b.h0 = buf.In(2, states * Hs, "h0");
  b.c0 = lstm ? buf.In(3, states * s.H, "c0") : nullptr;
  if (keras) {
    b.kernel = buf.In(4, (s.preprojected ? 0 : s.I) * KH, "kernel");
    b.recurrent_kernel = buf.In(5, s.H * KH, "recurrent_kernel");
    b.bias = buf.In(6, bias_rows * KH, "bias");
    if (call.two_biases && b.bias != nullptr) {
      b.bias_r = static_cast<const char*>(b.bias) + KH * esize;
    }
  } else {
    b.params = buf.In(4, RnnParamsSize(s), "params");
  }
  b.mask = nonempty(buf.In(7, XlaRnnMaskSize(call), "mask"), s.has_mask);
  b.peephole = nonempty(buf.In(8, XlaRnnPeepholeSize(call), "peephole"), s.peephole);
  if (!backward) {
    b.y = buf.Out(0, rows * s.D * Hs, "y");
    b.hn = buf.Out(1, states * Hs, "hn");
    b.cn = nonempty(buf.Out(2, lstm ? states * s.H : 0, "cn"), lstm);
    b.reserve = nonempty(buf.Out(3, XlaRnnReserveResult(call), "reserve"), s.training);
    return b;
  }
  const bool dc_seq = lstm && call.has_dc_seq;
  b.dy = buf.In(9, rows * s.D * Hs, "dy");
  b.dhn = buf.In(10, states * Hs, "dhn");
  b.dcn = lstm ? buf.In(11, states * s.H, "dcn") : nullptr;
  b.reserve_in = buf.In(12, RnnReserveSize(s), "reserve");
  b.dc_seq = nonempty(buf.In(13, dc_seq ? rows * s.D * s.H : 0, "dc_seq"), dc_seq);
  b.dx = nonempty(buf.Out(0, call.input_grad ? rows * s.I : 0, "dx"), call.input_grad);
  b.dh0 = buf.Out(1, states * Hs, "dh0");
  b.dc0 = nonempty(buf.Out(2, lstm ? states * s.H : 0, "dc0"), lstm);
  if (keras) {
    b.dkernel = buf.Out(3, (s.preprojected ? 0 : s.I) * KH, "dkernel");
    b.drecurrent_kernel = buf.Out(4, s.H * KH, "drecurrent_kernel");
    b.dbias = buf.Out(5, bias_rows * KH, "dbias");
    if (call.two_biases && b.dbias != nullptr) b.dbias_r = static_cast<char*>(b.dbias) + KH * esize;
  } else {
    b.dparams = buf.Out(3, RnnParamsSize(s), "dparams");
    buf.Out(4, 0, "dw1");
    buf.Out(5, 0, "dw2");
  }
  b.dpeephole = nonempty(buf.Out(6, XlaRnnPeepholeSize(call), "dpeephole"), s.peephole);
  return b;
}

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_XLA_RNN_CALL_BUFFERS_H_
