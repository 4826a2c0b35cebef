// The logistic function of the engine's forward passes: `Logistic(x)` for any Eigen array
// expression x. For float on AVX-512 and AVX2+FMA it is computed here; otherwise (double, the
// AVX build) it is Eigen's own logistic.
//
// Eigen's float logistic halves x, takes exp by a degree-5 polynomial, squares it back and
// divides: a vdivps and about 30 instructions per packet, which at the small batches of a step
// chain is a fifth of the LSTM's pointwise pass (three per unit). Here, with e = exp(-|x|)
// (always <= 1, so neither overflow nor halving), σ(x) = 1 / (1 + e) for x >= 0 and e / (1 + e)
// for x < 0: no cancellation in either tail, so the relative error stays within a few ulp
// everywhere (measured: at most 5.2 float epsilons against float64 over [-120, 40], Eigen's
// 8.1). exp(y) = 2^m · p(r) with m = round(y / ln 2), r = y - m·ln 2 (ln 2 in two parts) and
// p the same degree-5 minimax polynomial Eigen uses; on AVX-512 2^m is vscalefps and 1 / d a
// vrcp14ps refined by one Newton step (relative error about 2^-28 before rounding); on AVX2
// 2^m is built in the exponent bits and 1 / d is a division. y is clamped at -104, where σ
// rounds to zero; NaN propagates; σ(±inf) = 1, 0.
//
// Every width computes through the full packet (a half or quarter packet and a scalar are
// widened, computed and narrowed), so an element's result does not depend on the chunk it
// falls in (cpu_device.h Chunked: packets, then half, quarter and scalar tails).
#ifndef TF_RNN_OPS_CC_ENGINE_ACTIVATIONS_H_
#define TF_RNN_OPS_CC_ENGINE_ACTIVATIONS_H_

#include <Eigen/Core>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

namespace tfrnn {
namespace act {

// exp(y) / 2^m for m = round(y / ln 2): exp(r) by a degree-5 minimax polynomial, with
// r = y - m·ln 2 (ln 2 in two parts); Eigen's packet primitives, fused multiply-adds on the
// ISAs that use it.
template <typename P>
EIGEN_ALWAYS_INLINE P ExpReduced(const P& y, const P& m) {
  using Eigen::internal::padd;
  using Eigen::internal::pmadd;
  using Eigen::internal::pmul;
  using Eigen::internal::pset1;
  P r = pmadd(m, pset1<P>(-0.693359375f), y);
  r = pmadd(m, pset1<P>(2.12194440e-4f), r);
  const P r2 = pmul(r, r);
  const P pe = pmadd(r2, pset1<P>(4.1898667812347412109375e-2f),
                     pset1<P>(0.49999141693115234375f));
  const P po = pmadd(r2, pset1<P>(8.33471305668354034423828125e-3f),
                     pset1<P>(0.16666877269744873046875f));
  return pmadd(r2, pmadd(r, po, pe), padd(r, pset1<P>(1.f)));
}

#if defined(__AVX512F__)
#define TFRNN_FAST_LOGISTIC 1
using Full = __m512;
EIGEN_ALWAYS_INLINE __m512 LogisticFull(__m512 x) {
  // y = -|x| (the sign bit set), clamped at -104; max returns its second operand for NaN.
  const __m512 y = _mm512_max_ps(
      _mm512_set1_ps(-104.f),
      _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(x),
                                          _mm512_set1_epi32(static_cast<int>(0x80000000u)))));
  const __m512 m = _mm512_roundscale_ps(_mm512_mul_ps(y, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 e = _mm512_scalef_ps(ExpReduced(y, m), m);
  const __m512 d = _mm512_add_ps(e, _mm512_set1_ps(1.f));
  const __m512 q0 = _mm512_rcp14_ps(d);
  const __m512 q = _mm512_mul_ps(q0, _mm512_fnmadd_ps(d, q0, _mm512_set1_ps(2.f)));
  const __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  return _mm512_mask_mul_ps(q, neg, e, q);
}
EIGEN_ALWAYS_INLINE __m512 Widen(__m256 x) { return _mm512_zextps256_ps512(x); }
EIGEN_ALWAYS_INLINE __m512 Widen(__m128 x) { return _mm512_zextps128_ps512(x); }
EIGEN_ALWAYS_INLINE __m512 Widen(float x) { return _mm512_set1_ps(x); }
EIGEN_ALWAYS_INLINE void Narrow(__m512 v, __m512* out) { *out = v; }
EIGEN_ALWAYS_INLINE void Narrow(__m512 v, __m256* out) { *out = _mm512_castps512_ps256(v); }
EIGEN_ALWAYS_INLINE void Narrow(__m512 v, __m128* out) { *out = _mm512_castps512_ps128(v); }
EIGEN_ALWAYS_INLINE void Narrow(__m512 v, float* out) { *out = _mm512_cvtss_f32(v); }
#elif defined(__AVX2__) && defined(__FMA__)
#define TFRNN_FAST_LOGISTIC 1
using Full = __m256;
EIGEN_ALWAYS_INLINE __m256 LogisticFull(__m256 x) {
  const __m256 y = _mm256_max_ps(_mm256_set1_ps(-104.f), _mm256_or_ps(x, _mm256_set1_ps(-0.f)));
  const __m256 m = _mm256_round_ps(_mm256_mul_ps(y, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 p = ExpReduced(y, m);
  // 2^m for m in [-150, 0] (NaN: any), as exponent bits; a biased exponent <= 0 gives 0, so e
  // underflows to zero instead of to a denormal (σ(x) < 2^-126 for those x anyway).
  const __m256i bexp = _mm256_max_epi32(
      _mm256_add_epi32(_mm256_cvtps_epi32(m), _mm256_set1_epi32(127)), _mm256_setzero_si256());
  const __m256 e = _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(bexp, 23)));
  const __m256 q = _mm256_div_ps(_mm256_set1_ps(1.f), _mm256_add_ps(e, _mm256_set1_ps(1.f)));
  return _mm256_blendv_ps(q, _mm256_mul_ps(e, q), x);  // x's sign bit picks e / (1 + e)
}
EIGEN_ALWAYS_INLINE __m256 Widen(__m128 x) { return _mm256_set_m128(_mm_setzero_ps(), x); }
EIGEN_ALWAYS_INLINE __m256 Widen(float x) { return _mm256_set1_ps(x); }
EIGEN_ALWAYS_INLINE void Narrow(__m256 v, __m256* out) { *out = v; }
EIGEN_ALWAYS_INLINE void Narrow(__m256 v, __m128* out) { *out = _mm256_castps256_ps128(v); }
EIGEN_ALWAYS_INLINE void Narrow(__m256 v, float* out) { *out = _mm256_cvtss_f32(v); }
#endif

#ifdef TFRNN_FAST_LOGISTIC
EIGEN_ALWAYS_INLINE Full Widen(Full x) { return x; }
template <typename T>
EIGEN_ALWAYS_INLINE T LogisticAny(const T& x) {
  T out;
  Narrow(LogisticFull(Widen(x)), &out);
  return out;
}
#endif

// The Eigen functor: float on a fast ISA computes here, anything else is Eigen's logistic.
template <typename S>
struct LogisticOp : Eigen::internal::scalar_logistic_op<S> {};
#ifdef TFRNN_FAST_LOGISTIC
template <>
struct LogisticOp<float> {
  EIGEN_ALWAYS_INLINE float operator()(const float& x) const { return LogisticAny(x); }
  template <typename Packet>
  EIGEN_ALWAYS_INLINE Packet packetOp(const Packet& x) const {
    return LogisticAny(x);
  }
};
#endif

}  // namespace act

// σ(x), elementwise, for an Eigen array expression.
template <typename X>
EIGEN_ALWAYS_INLINE auto Logistic(const X& x) {
  return x.unaryExpr(act::LogisticOp<typename X::Scalar>());
}

}  // namespace tfrnn

namespace Eigen {
namespace internal {
template <typename S>
struct functor_traits<tfrnn::act::LogisticOp<S>> {
  enum {
    Cost = functor_traits<scalar_logistic_op<S>>::Cost,
    PacketAccess = functor_traits<scalar_logistic_op<S>>::PacketAccess
  };
};
}  // namespace internal
}  // namespace Eigen

#endif  // TF_RNN_OPS_CC_ENGINE_ACTIVATIONS_H_
