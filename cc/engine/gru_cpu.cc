// CPU implementation of the GRU cell (reset before the recurrent product). A single step of a
// few rows: the products go through SmallGemm (packed_gemm.h) and the pointwise passes run
// inline unless they are large (PointwiseRows), so a small call never waits for the pool.
#include "cc/engine/gru.h"

#include "cc/engine/packed_gemm.h"

namespace tfrnn {
namespace {

constexpr double kCostPerElem = 30;

}  // namespace

template <typename A>
void GruCellForward(const CpuDevice& d, const GruCellFwdArgs<A>& a, A* ws) {
  const Index N = a.N, I = a.I, H = a.H;
  A* ru_bar = ws;              // [N, 2H]
  A* hr = ws + N * 2 * H;      // [N, H]   h_prev ⊙ r
  A* c_bar = hr + N * H;       // [N, H]
  // [r_bar, u_bar] = x · w_ru[:I] + h_prev · w_ru[I:]
  SmallGemm<A>(d, false, false, N, 2 * H, I, a.x, I, a.w_ru, 2 * H, ru_bar, 2 * H, false);
  SmallGemm<A>(d, false, false, N, 2 * H, H, a.h_prev, H, a.w_ru + I * 2 * H, 2 * H, ru_bar,
               2 * H, true);
  PointwiseRows(d, N, H, kCostPerElem, [&](Index n0, Index n1) {
    CVec<A> br(a.b_ru, H), bu(a.b_ru + H, H);
    for (Index n = n0; n < n1; ++n) {
      const A* g = ru_bar + n * 2 * H;
      Vec<A> r(a.r + n * H, H), u(a.u + n * H, H), hrn(hr + n * H, H);
      r = (CVec<A>(g, H) + br).logistic();
      u = (CVec<A>(g + H, H) + bu).logistic();
      hrn = CVec<A>(a.h_prev + n * H, H) * r;
    }
  });
  // c_bar = x · w_c[:I] + (h_prev ⊙ r) · w_c[I:]
  SmallGemm<A>(d, false, false, N, H, I, a.x, I, a.w_c, H, c_bar, H, false);
  SmallGemm<A>(d, false, false, N, H, H, hr, H, a.w_c + I * H, H, c_bar, H, true);
  PointwiseRows(d, N, H, kCostPerElem, [&](Index n0, Index n1) {
    CVec<A> bc(a.b_c, H);
    for (Index n = n0; n < n1; ++n) {
      Vec<A> c(a.c + n * H, H), h(a.h + n * H, H);
      CVec<A> u(a.u + n * H, H), hp(a.h_prev + n * H, H);
      c = (CVec<A>(c_bar + n * H, H) + bc).tanh();
      h = u * (hp - c) + c;
    }
  });
}

template <typename A>
void GruCellBackward(const CpuDevice& d, const GruCellBwdArgs<A>& a, A* ws) {
  const Index N = a.N, I = a.I, H = a.H;
  A* d_hr = ws;  // [N, H]
  const A one(1);
  PointwiseRows(d, N, H, kCostPerElem, [&](Index n0, Index n1) {
    for (Index n = n0; n < n1; ++n) {
      const Index o = n * H;
      CVec<A> u(a.u + o, H), c(a.c + o, H), hp(a.h_prev + o, H), dh(a.d_h + o, H);
      Vec<A> dc(a.d_c_bar + o, H), du(a.d_r_bar_u_bar + n * 2 * H + H, H);
      if (a.g_c != nullptr) {
        dc = (dh * (one - u) + CVec<A>(a.g_c + o, H)) * (one - c.square());
      } else {
        dc = dh * (one - u) * (one - c.square());
      }
      if (a.g_u != nullptr) {
        du = (dh * (hp - c) + CVec<A>(a.g_u + o, H)) * u * (one - u);
      } else {
        du = dh * (hp - c) * u * (one - u);
      }
    }
  });
  // d_x = d_c_bar · w_c[:I]ᵀ ; d_hr = d_c_bar · w_c[I:]ᵀ
  SmallGemm<A>(d, false, true, N, I, H, a.d_c_bar, H, a.w_c, H, a.d_x, I, false);
  SmallGemm<A>(d, false, true, N, H, H, a.d_c_bar, H, a.w_c + I * H, H, d_hr, H, false);
  PointwiseRows(d, N, H, kCostPerElem, [&](Index n0, Index n1) {
    for (Index n = n0; n < n1; ++n) {
      const Index o = n * H;
      CVec<A> r(a.r + o, H), hp(a.h_prev + o, H), dhr(d_hr + o, H);
      Vec<A> dr(a.d_r_bar_u_bar + n * 2 * H, H);
      if (a.g_r != nullptr) {
        dr = (dhr * hp + CVec<A>(a.g_r + o, H)) * r * (one - r);
      } else {
        dr = dhr * hp * r * (one - r);
      }
    }
  });
  // d_x += [d_r_bar, d_u_bar] · w_ru[:I]ᵀ ; d_h_prev = [d_r_bar, d_u_bar] · w_ru[I:]ᵀ
  SmallGemm<A>(d, false, true, N, I, 2 * H, a.d_r_bar_u_bar, 2 * H, a.w_ru, 2 * H, a.d_x, I,
               true);
  SmallGemm<A>(d, false, true, N, H, 2 * H, a.d_r_bar_u_bar, 2 * H, a.w_ru + I * 2 * H, 2 * H,
               a.d_h_prev, H, false);
  PointwiseRows(d, N, H, kCostPerElem, [&](Index n0, Index n1) {
    for (Index n = n0; n < n1; ++n) {
      const Index o = n * H;
      Vec<A> dhp(a.d_h_prev + o, H);
      dhp += CVec<A>(d_hr + o, H) * CVec<A>(a.r + o, H) +
             CVec<A>(a.d_h + o, H) * CVec<A>(a.u + o, H);
    }
  });
}

template void GruCellForward<float>(const CpuDevice&, const GruCellFwdArgs<float>&, float*);
template void GruCellForward<double>(const CpuDevice&, const GruCellFwdArgs<double>&, double*);
template void GruCellBackward<float>(const CpuDevice&, const GruCellBwdArgs<float>&, float*);
template void GruCellBackward<double>(const CpuDevice&, const GruCellBwdArgs<double>&, double*);

}  // namespace tfrnn
