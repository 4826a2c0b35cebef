// float <-> bfloat16 at the op boundary (ComputeBridge: a bfloat16 op's inputs into the float
// engine and its outputs back), by the values' bits: float -> bfloat16 rounds to nearest even
// and turns a NaN into the quiet NaN of its sign, which is Eigen's conversion bit for bit.
// The op library is built for the baseline x86-64, where Eigen's cast to bfloat16 is a scalar
// loop (about 0.5 ns an element, a tenth of a bf16 LSTM inference at 200x16x64x128); these
// loops are compiled for AVX-512, AVX2 and the baseline and picked at load time.
#ifndef TF_RNN_OPS_CC_KERNELS_BF16_CONVERT_H_
#define TF_RNN_OPS_CC_KERNELS_BF16_CONVERT_H_

#include <cstdint>
#include <type_traits>

#include "cc/engine/cpu_device.h"

namespace tfrnn {

void FloatToBf16Bits(const float* src, uint16_t* dst, int64_t n);
void Bf16ToFloatBits(const uint16_t* src, float* dst, int64_t n);

// Convert (cpu_device.h), with float <-> bfloat16 through the loops above, on the pool in
// chunks of at least 16 Ki elements.
template <typename From, typename To>
void BridgeConvert(const CpuDevice& d, const From* src, To* dst, Index n) {
  constexpr bool kToBf16 =
      std::is_same<From, float>::value && std::is_same<To, Eigen::bfloat16>::value;
  constexpr bool kFromBf16 =
      std::is_same<From, Eigen::bfloat16>::value && std::is_same<To, float>::value;
  if constexpr (kToBf16 || kFromBf16) {
    constexpr Index kGrain = Index(1) << 14;
    const Index chunks = (n + kGrain - 1) / kGrain;
    ParallelFor(d, chunks, 2.0 * kGrain, [&](Index c0, Index c1) {
      const Index e0 = c0 * kGrain, e1 = c1 * kGrain < n ? c1 * kGrain : n;
      if constexpr (kToBf16) {
        FloatToBf16Bits(src + e0, reinterpret_cast<uint16_t*>(dst + e0), e1 - e0);
      } else {
        Bf16ToFloatBits(reinterpret_cast<const uint16_t*>(src + e0), dst + e0, e1 - e0);
      }
    });
  } else {
    Convert<From, To>(d, src, dst, n);
  }
}

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_KERNELS_BF16_CONVERT_H_
