// The float <-> bfloat16 loops of bf16_convert.h, one clone per ISA level (GCC picks at load).
#include "cc/kernels/bf16_convert.h"

#include <cstring>

namespace tfrnn {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TFRNN_ISA_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TFRNN_ISA_CLONES
#endif

TFRNN_ISA_CLONES void FloatToBf16Bits(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, src + i, sizeof(u));
    const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    dst[i] = static_cast<uint16_t>(nan ? ((u >> 16) & 0x8000u) | 0x7fc0u : rounded);
  }
}

TFRNN_ISA_CLONES void Bf16ToFloatBits(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = static_cast<uint32_t>(src[i]) << 16;
    std::memcpy(dst + i, &u, sizeof(u));
  }
}

}  // namespace tfrnn
