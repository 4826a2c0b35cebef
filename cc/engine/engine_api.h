// The engine's entry point. The engine is built once per instruction set into its own shared
// object (_tfrnn_engine_{avx,avx2,avx512}.so, hidden visibility, loaded RTLD_LOCAL), so code
// compiled with different -m flags is never merged by the linker (no one-definition-rule
// hazard). Each exports one C function returning a table of entry points. Callers pass their
// thread pool as a HostPool; the engine never starts threads of its own.
#ifndef TF_RNN_OPS_CC_ENGINE_ENGINE_API_H_
#define TF_RNN_OPS_CC_ENGINE_ENGINE_API_H_

#include <cstdint>
#include <functional>

#include "cc/engine/types.h"
#include "cc/engine/workspace.h"

namespace tfrnn {

// The caller's thread pool (for TensorFlow: the op's intra-op pool).
class HostPool {
 public:
  virtual ~HostPool() = default;
  virtual void Schedule(std::function<void()> fn) = 0;
  virtual int NumThreads() const = 0;        // threads the engine may use
  virtual int CurrentThreadId() const = 0;   // -1 outside the pool
};

// Bump when the table, any struct in types.h or the workspace a spec needs (workspace.h) changes.
constexpr int kEngineApiVersion = 15;

struct EngineApi {
  int version;
  const char* isa;  // "avx", "avx2" or "avx512"
  void (*lstm_forward_f32)(HostPool&, const LstmCellSpec&, const LstmFwdArgs<float>&, float*);
  void (*lstm_forward_f64)(HostPool&, const LstmCellSpec&, const LstmFwdArgs<double>&, double*);
  void (*lstm_backward_f32)(HostPool&, const LstmCellSpec&, const LstmBwdArgs<float>&, float*);
  void (*lstm_backward_f64)(HostPool&, const LstmCellSpec&, const LstmBwdArgs<double>&,
                            double*);
  void (*lstm_cell_backward_f32)(HostPool&, const LstmCellSpec&, const LstmCellBwdArgs<float>&);
  void (*lstm_cell_backward_f64)(HostPool&, const LstmCellSpec&,
                                 const LstmCellBwdArgs<double>&);
  void (*gru_cell_forward_f32)(HostPool&, const GruCellFwdArgs<float>&, float*);
  void (*gru_cell_forward_f64)(HostPool&, const GruCellFwdArgs<double>&, double*);
  void (*gru_cell_backward_f32)(HostPool&, const GruCellBwdArgs<float>&, float*);
  void (*gru_cell_backward_f64)(HostPool&, const GruCellBwdArgs<double>&, double*);
  void (*rnn_forward_f32)(HostPool&, const RnnSpec&, const RnnFwdArgs<float>&, float*);
  void (*rnn_forward_f64)(HostPool&, const RnnSpec&, const RnnFwdArgs<double>&, double*);
  void (*rnn_backward_f32)(HostPool&, const RnnSpec&, const RnnBwdArgs<float>&, float*);
  void (*rnn_backward_f64)(HostPool&, const RnnSpec&, const RnnBwdArgs<double>&, double*);
  // The 16-bit operands and results at the ops' boundary (Eigen::half and Eigen::bfloat16
  // words) to and from the engines' float, rounded as Eigen rounds (to nearest even), with
  // this variant's vector instructions: on the calling thread up to a few hundred thousand
  // elements (waking the pool costs more), else on the pool (cpu_device.h Convert).
  void (*half_to_f32)(HostPool&, const uint16_t* src, float* dst, int64_t n);
  void (*f32_to_half)(HostPool&, const float* src, uint16_t* dst, int64_t n);
  void (*bf16_to_f32)(HostPool&, const uint16_t* src, float* dst, int64_t n);
  void (*f32_to_bf16)(HostPool&, const float* src, uint16_t* dst, int64_t n);
};

// Typed access for templated callers.
template <typename A>
struct EngineFns;
template <>
struct EngineFns<float> {
  static auto Forward(const EngineApi& e) { return e.lstm_forward_f32; }
  static auto Backward(const EngineApi& e) { return e.lstm_backward_f32; }
  static auto CellBackward(const EngineApi& e) { return e.lstm_cell_backward_f32; }
  static auto GruForward(const EngineApi& e) { return e.gru_cell_forward_f32; }
  static auto GruBackward(const EngineApi& e) { return e.gru_cell_backward_f32; }
  static auto RnnFwd(const EngineApi& e) { return e.rnn_forward_f32; }
  static auto RnnBwd(const EngineApi& e) { return e.rnn_backward_f32; }
};
template <>
struct EngineFns<double> {
  static auto Forward(const EngineApi& e) { return e.lstm_forward_f64; }
  static auto Backward(const EngineApi& e) { return e.lstm_backward_f64; }
  static auto CellBackward(const EngineApi& e) { return e.lstm_cell_backward_f64; }
  static auto GruForward(const EngineApi& e) { return e.gru_cell_forward_f64; }
  static auto GruBackward(const EngineApi& e) { return e.gru_cell_backward_f64; }
  static auto RnnFwd(const EngineApi& e) { return e.rnn_forward_f64; }
  static auto RnnBwd(const EngineApi& e) { return e.rnn_backward_f64; }
};

}  // namespace tfrnn

extern "C" {
// Exported by each engine shared object.
typedef const tfrnn::EngineApi* (*TfRnnEngineApiFn)();
__attribute__((visibility("default"))) const tfrnn::EngineApi* tfrnn_engine_api();
}

#endif  // TF_RNN_OPS_CC_ENGINE_ENGINE_API_H_
