// The standard LSTM's forward steps with the batch in the SIMD lanes from the products to
// the pointwise pass (rnn_cpu.cc LayerForward, `tlanes`), at inference and in training.
//
// In the lanes road of lanes_gemm.h a step's product Cᵀ = Rᵀ · hᵀ is transposed into the gate
// rows C[B, K·H] (added to the input projection's W·x there), the pointwise pass reads those
// rows, and each unit block transposes its h back into hᵀ for the next step: five transposes
// of a 16 × 16 tile per 16 units and 16 rows, and the projection's rows go through memory
// (written, read and written back, read). Here a unit block's gates stay transposed:
//   - its product is Cᵀ = [W; R]ᵀ · [xᵀ; hᵀ] (the input's product fused, whatever the input's
//     width: x_t transposed once per block), in the thread's scratch;
//   - the pointwise pass runs on 16 lanes of batch per unit, the cell state kept transposed
//     (cT, [H][B]), and writes hᵀ (float, or the bf16 pair words) for the next step directly;
//   - the layer output's rows take one 16 × 16 transpose per tile of h;
//   - in training the reserve's planes (the gates' activations, the cell state, the next
//     step's h_prev rows) take one more transpose per plane and tile, and go to memory in
//     streaming stores (StreamRow).
// Float products, or bf16 products on pair words (lanes_gemm.h), on AVX-512, for a batch of
// whole 16-lane packets (32, 48 or 64 rows). On the 2-core AMD Zen 4 development machine, float
// inference at 50×32×128×512 took 19.8 instead of 21.4 ms, 100×32×128×600 52.0 instead of
// 55.0, 50×48×512×512 46.2 instead of 49.1; a training step (forward and backward through
// TensorFlow) 0.96x the time before in float32 and 0.85-0.99x in bf16
// (docs/PERFORMANCE_STEPS.md, "The LSTM's gates in the lanes").
#ifndef TF_RNN_OPS_CC_ENGINE_LANES_LSTM_H_
#define TF_RNN_OPS_CC_ENGINE_LANES_LSTM_H_

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "cc/engine/activations.h"
#include "cc/engine/cpu_device.h"
#include "cc/engine/lanes_gemm.h"
#include "cc/engine/types.h"

namespace tfrnn {
namespace lanes {

// A training step's rows for the backward (the reserve's; LstmPointwiseT): logical gate q's
// activation of batch row b and unit j at act[q] + b · ld + j, the new cell state at
// cs + b · lds + j, and h at hprev + b · ldh + j (the next step's h_prev rows; null at the
// last step).
struct StepPlanes {
  float* act[4] = {};
  Index ld = 0;
  float* cs = nullptr;
  Index lds = 0;
  float* hprev = nullptr;
  Index ldh = 0;
};

#ifdef __AVX512F__

// The lanes of v in mask m to p: a whole aligned line as a streaming store, else masked. A
// training step's planes are read by the backward only, after the forward has returned:
// stored through the caches, each fresh line was first read from memory and then took cache
// space from what the next steps read.
EIGEN_ALWAYS_INLINE void StreamRow(float* p, __mmask16 m, __m512 v) {
  if (m == 0xFFFF && (reinterpret_cast<uintptr_t>(p) & 63) == 0) {
    _mm512_stream_ps(p, v);
  } else {
    _mm512_mask_storeu_ps(p, m, v);
  }
}

// The pointwise pass of units [j0, j0 + len) of one step of a standard LSTM (σ gates, tanh
// cell input and cell, no peephole) on the block's Cᵀ g ([K·len][B], W·x + R·h_prev without
// bias, gate block k from row k · len), logical gate q in block pos[q], the bias bw + br added
// per unit: the cell state cT ([H][B]) updated in place, h written as hᵀ for the next step
// (hTn: [H][B] floats, or with `pairs` [ceil(H/2)][B] pair words; null after the last step),
// as rows b of the layer output (y + b · ldy + unit; with y16, a bfloat16 op's output, its
// bf16 words there instead, rounded as the op's boundary conversion rounds), into h's rows
// (hrows, [B][H]; nullable) and, in training (planes not null), into the step's planes: each
// tile of 16 units and 16 lanes transposed once per plane.
TFRNN_BF16_TARGET inline void LstmPointwiseT(const int* pos, Index H, Index B, Index j0,
                                             Index len, const float* g, const float* bw,
                                             const float* br, float clip, float* cT,
                                             float* hTn, bool pairs, float* y, uint16_t* y16,
                                             Index ldy, float* hrows,
                                             const StepPlanes* planes = nullptr) {
  using Eigen::internal::ptanh;
  alignas(64) float ht[16 * 16];
  alignas(64) float pt[5][16 * 16];  // training: the tile's i, f, c', o and new c
  const __m512 zero = _mm512_setzero_ps();
  for (Index u0 = j0; u0 < j0 + len; u0 += 16) {
    const Index nu = std::min<Index>(16, j0 + len - u0);
    const __mmask16 mu = static_cast<__mmask16>((1u << nu) - 1);
    for (Index p = 0; p < B / 16; ++p) {
      for (Index u = 0; u < nu; ++u) {
        const Index unit = u0 + u;
        auto pre = [&](int q) {
          const Index row = pos[q] * H + unit;
          const float* gq = g + (pos[q] * len + unit - j0) * B + 16 * p;
          return _mm512_add_ps(_mm512_add_ps(_mm512_loadu_ps(gq), _mm512_set1_ps(bw[row])),
                               _mm512_set1_ps(br[row]));
        };
        const __m512 i = act::LogisticFull(pre(0)), f = act::LogisticFull(pre(1));
        const __m512 cc = ptanh(pre(2)), o = act::LogisticFull(pre(3));
        float* cp = cT + unit * B + 16 * p;
        __m512 cn = _mm512_add_ps(_mm512_mul_ps(f, _mm512_loadu_ps(cp)), _mm512_mul_ps(i, cc));
        if (clip > 0.f) {
          cn = _mm512_min_ps(_mm512_max_ps(cn, _mm512_set1_ps(-clip)), _mm512_set1_ps(clip));
        }
        _mm512_storeu_ps(cp, cn);
        const __m512 hv = _mm512_mul_ps(ptanh(cn), o);
        _mm512_store_ps(ht + 16 * u, hv);
        if (hTn != nullptr && !pairs) _mm512_storeu_ps(hTn + unit * B + 16 * p, hv);
        if (planes != nullptr) {
          _mm512_store_ps(pt[0] + 16 * u, i);
          _mm512_store_ps(pt[1] + 16 * u, f);
          _mm512_store_ps(pt[2] + 16 * u, cc);
          _mm512_store_ps(pt[3] + 16 * u, o);
          _mm512_store_ps(pt[4] + 16 * u, cn);
        }
      }
      for (Index u = nu; u < 16; ++u) _mm512_store_ps(ht + 16 * u, zero);
      // A tile's rows b: its units' values of lane b, at base + (16p + b) · ld + u0; whole
      // 64-byte lines stream past the caches (StreamRow).
      auto tile_rows = [&](const float* tile, float* base, Index ld) {
        __m512 t[16];
        for (int u = 0; u < 16; ++u) t[u] = _mm512_load_ps(tile + 16 * u);
        bf16::Transpose16(t);
        for (Index b = 0; b < 16; ++b) StreamRow(base + (16 * p + b) * ld + u0, mu, t[b]);
      };
      if (planes != nullptr) {
        for (int q = 0; q < 4; ++q) tile_rows(pt[q], planes->act[q], planes->ld);
        tile_rows(pt[4], planes->cs, planes->lds);
      }
#if TFRNN_BF16_KERNELS
      if (hTn != nullptr && pairs) {  // units 2q and 2q + 1 (a zero past the block's last)
        uint32_t* words = reinterpret_cast<uint32_t*>(hTn);
        for (Index u = 0; u < nu; u += 2) {
          _mm512_storeu_si512(words + (u0 + u) / 2 * B + 16 * p,
                              bf16::PairWords(_mm512_load_ps(ht + 16 * u),
                                              _mm512_load_ps(ht + 16 * (u + 1))));
        }
      }
#endif
      __m512 r[16];
      for (int u = 0; u < 16; ++u) r[u] = _mm512_load_ps(ht + 16 * u);
      bf16::Transpose16(r);  // r[b]: lane b's h of the tile's units
      for (Index b = 0; b < 16; ++b) {
        const Index row = 16 * p + b;
        if (y16 != nullptr) {
          const __m256i words = Eigen::internal::F32ToBf16(r[b]);
          _mm256_mask_storeu_epi16(y16 + row * ldy + u0, mu, words);
        } else {
          _mm512_mask_storeu_ps(y + row * ldy + u0, mu, r[b]);
        }
        if (hrows != nullptr) _mm512_mask_storeu_ps(hrows + row * H + u0, mu, r[b]);
        if (planes != nullptr && planes->hprev != nullptr) {
          StreamRow(planes->hprev + row * planes->ldh + u0, mu, r[b]);
        }
      }
    }
  }
  // The streamed lines are visible to other threads (the backward's) once the caller's step
  // loop hands the step on.
  if (planes != nullptr) _mm_sfence();
}

#else

inline void LstmPointwiseT(const int*, Index, Index, Index, Index, const float*, const float*,
                           const float*, float, float*, float*, bool, float*, uint16_t*, Index,
                           float*, const StepPlanes* = nullptr) {
  std::abort();
}

#endif  // __AVX512F__

}  // namespace lanes
}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_ENGINE_LANES_LSTM_H_
