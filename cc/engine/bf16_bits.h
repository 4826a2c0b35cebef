// A bfloat16 value's bits and float: rounding a float to bf16 (Round), a bf16's bits widened
// to the float they stand for (Widen), and two floats as one pair word (Pair, the packed
// panels' word of bf16_gemm.h). Used by the bf16 products (bf16_gemm.h), the AMX tiles'
// emulation (amx_gemm.h) and their checks (tests/amx_checks.cc).
#ifndef TF_RNN_OPS_CC_ENGINE_BF16_BITS_H_
#define TF_RNN_OPS_CC_ENGINE_BF16_BITS_H_

#include <cstdint>
#include <cstring>

namespace tfrnn {
namespace bf16 {

// float -> bf16 bits, rounding to nearest even (NaN stays NaN), as vcvtne2ps2bf16 does for
// normal numbers (a denormal is rounded here; the instruction flushes it to zero).
inline uint16_t Round(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float Widen(uint32_t bits16) {
  const uint32_t u = bits16 << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
inline uint32_t Pair(float lo, float hi) {
  return uint32_t(Round(lo)) | (uint32_t(Round(hi)) << 16);
}

}  // namespace bf16
}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_ENGINE_BF16_BITS_H_
