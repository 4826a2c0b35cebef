// The engine table of one ISA variant. Compiled once per variant with its own -m flags.
#include "cc/engine/engine_api.h"

#include "cc/engine/gru.h"
#include "cc/engine/lstm.h"
#include "cc/engine/rnn.h"

#ifndef TFRNN_ISA_NAME
#error "TFRNN_ISA_NAME must be defined by the build (avx, avx2, avx512)"
#endif

namespace tfrnn {
namespace {

// Presents the caller's HostPool to this variant's Eigen as an Eigen thread pool.
class PoolAdapter final : public Eigen::ThreadPoolInterface {
 public:
  explicit PoolAdapter(HostPool& pool) : pool_(pool) {}
  void Schedule(std::function<void()> fn) override { pool_.Schedule(std::move(fn)); }
  int NumThreads() const override { return pool_.NumThreads(); }
  int CurrentThreadId() const override { return pool_.CurrentThreadId(); }

 private:
  HostPool& pool_;
};

template <typename Spec, typename Args, typename A,
          void (*Fn)(const CpuDevice&, const Spec&, const Args&, A*)>
void WithDevice(HostPool& pool, const Spec& s, const Args& a, A* ws) {
  PoolAdapter adapter(pool);
  CpuDevice dev(&adapter, pool.NumThreads());
  Fn(dev, s, a, ws);
}

template <typename A>
void CellBackward(HostPool& pool, const LstmCellSpec& s, const LstmCellBwdArgs<A>& a) {
  PoolAdapter adapter(pool);
  CpuDevice dev(&adapter, pool.NumThreads());
  LstmCellBackward<A>(dev, s, a);
}

template <typename Args, typename A, void (*Fn)(const CpuDevice&, const Args&, A*)>
void WithDeviceNoSpec(HostPool& pool, const Args& a, A* ws) {
  PoolAdapter adapter(pool);
  CpuDevice dev(&adapter, pool.NumThreads());
  Fn(dev, a, ws);
}

// Converts n elements between the 16-bit boundary types (Eigen::half, Eigen::bfloat16, as
// their words) and float with this variant's Convert (cpu_device.h).
template <typename From, typename To, typename SrcWord, typename DstWord>
void ConvertBoundary(HostPool& pool, const SrcWord* src_words, DstWord* dst_words, int64_t n) {
  static_assert(sizeof(From) == sizeof(SrcWord) && sizeof(To) == sizeof(DstWord), "words");
  PoolAdapter adapter(pool);
  CpuDevice dev(&adapter, pool.NumThreads());
  Convert(dev, reinterpret_cast<const From*>(src_words), reinterpret_cast<To*>(dst_words), n);
}

const EngineApi kApi = {
    kEngineApiVersion,
    TFRNN_ISA_NAME,
    &WithDevice<LstmCellSpec, LstmFwdArgs<float>, float, &LstmForward<float>>,
    &WithDevice<LstmCellSpec, LstmFwdArgs<double>, double, &LstmForward<double>>,
    &WithDevice<LstmCellSpec, LstmBwdArgs<float>, float, &LstmBackward<float>>,
    &WithDevice<LstmCellSpec, LstmBwdArgs<double>, double, &LstmBackward<double>>,
    &CellBackward<float>,
    &CellBackward<double>,
    &WithDeviceNoSpec<GruCellFwdArgs<float>, float, &GruCellForward<float>>,
    &WithDeviceNoSpec<GruCellFwdArgs<double>, double, &GruCellForward<double>>,
    &WithDeviceNoSpec<GruCellBwdArgs<float>, float, &GruCellBackward<float>>,
    &WithDeviceNoSpec<GruCellBwdArgs<double>, double, &GruCellBackward<double>>,
    &WithDevice<RnnSpec, RnnFwdArgs<float>, float, &RnnForward<float>>,
    &WithDevice<RnnSpec, RnnFwdArgs<double>, double, &RnnForward<double>>,
    &WithDevice<RnnSpec, RnnBwdArgs<float>, float, &RnnBackward<float>>,
    &WithDevice<RnnSpec, RnnBwdArgs<double>, double, &RnnBackward<double>>,
    &ConvertBoundary<Eigen::half, float, uint16_t, float>,
    &ConvertBoundary<float, Eigen::half, float, uint16_t>,
    &ConvertBoundary<Eigen::bfloat16, float, uint16_t, float>,
    &ConvertBoundary<float, Eigen::bfloat16, float, uint16_t>,
};

}  // namespace
}  // namespace tfrnn

extern "C" const tfrnn::EngineApi* tfrnn_engine_api() { return &tfrnn::kApi; }
