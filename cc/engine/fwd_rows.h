// The forward's one-pass pointwise rows (rnn_cpu.cc FwdBlock): an lstm row and a reset-after
// gru row over a block of units, in packet chunks (the tail in one packet too) with the gates
// in registers.
#ifndef TF_RNN_OPS_CC_ENGINE_FWD_ROWS_H_
#define TF_RNN_OPS_CC_ENGINE_FWD_ROWS_H_

#include "cc/engine/activations.h"
#include "cc/engine/cpu_device.h"
#include "cc/engine/rnn_cpu_common.h"
#include "cc/engine/types.h"

namespace tfrnn {
namespace rnn_cpu {

// One lstm row's pointers for units [j0, j0 + len) (FwdBlock): the pre-activation parts gx,
// hr (nullable), bw, br, the peephole vector (nullable) of K·H columns in block order, the
// activation planes of the logical gates i, f, c', o, c (c_prev in, the new c out), the cell
// plane cs, cell_act(c) co (nullable), h, and h's copies hh (unprojected) and y (the layer
// output), each nullable.
template <typename A>
struct LstmRow {
  const A *gx, *hr, *bw, *br, *peep;
  A* act[4];
  A *c, *cs, *co, *h, *hh, *y;
};

// One lstm row forward in one pass over the units, in packet chunks (ChunkedPadded: the row's
// tail in one packet too) with the gates and the cell in registers. kStd: LstmStandard(s);
// kHr: r.hr is given (else gx holds R·h too); kPlanes: the activation planes and cs are
// written (training: the backward reads them; at inference a standard row keeps its gates in
// registers and writes only c, h and y; the general row always writes its gates' planes).
template <typename A, bool kStd, bool kHr, bool kPlanes>
void LstmFwdRow(const RnnSpec& s, const LstmRow<A>& r, Index len) {
  const Index H = s.H;
  const int* pos = s.gate_pos;
  const A clip = static_cast<A>(s.cell_clip);
  const bool do_clip = s.cell_clip > 0.f;
  ChunkedPadded<A>(len, [&](auto chunk, Index o0, Index w) TFRNN_INLINE_LAMBDA {
    using C = decltype(chunk);
    using L = typename C::L;
    auto in = [&](const A* p) TFRNN_INLINE_LAMBDA { return C::In(p + o0, w); };
    auto out = [&](A* p, const auto& v) TFRNN_INLINE_LAMBDA { C::Out(p + o0, w, v); };
    // The pre-activation of logical gate q (summed in the order gx, hr, bw, br).
    auto pre = [&](int q) -> L {
      const Index off = pos[q] * H;
      if constexpr (kHr) {
        return in(r.gx + off) + in(r.hr + off) + in(r.bw + off) + in(r.br + off);
      } else {
        return in(r.gx + off) + in(r.bw + off) + in(r.br + off);
      }
    };
    const auto cp = in(r.c);
    L cn, hv, og;
    if constexpr (kStd) {
      const L i = Logistic(pre(0)), f = Logistic(pre(1)), cc = pre(2).tanh(),
              o = Logistic(pre(3));
      if constexpr (kPlanes) {
        out(r.act[0], i);
        out(r.act[1], f);
        out(r.act[2], cc);
        out(r.act[3], o);
      }
      cn = f * cp + i * cc;
      if (do_clip) cn = cn.max(-clip).min(clip);
      hv = cn.tanh();
      og = o;
    } else {
      L i, f, cc, o;
      // The peephole term of gate q reads c_prev, or for o with peephole_o_new the new c.
      auto gate = [&](int q, L& v, const auto& cpeep) {
        v = pre(q);
        if (s.peephole) v += in(r.peep + pos[q] * H) * cpeep;
        ActivateIn(s.gate_act[q], v);
      };
      gate(0, i, cp);
      gate(1, f, cp);
      gate(2, cc, cp);
      if (!s.peephole_o_new) gate(3, o, cp);
      cn = f * cp + i * cc;
      if (do_clip) cn = cn.max(-clip).min(clip);
      if (s.peephole_o_new) gate(3, o, cn);
      out(r.act[0], i);
      out(r.act[1], f);
      out(r.act[2], cc);
      out(r.act[3], o);
      hv = cn;
      ActivateIn(s.cell_act, hv);
      og = o;
    }
    if constexpr (kPlanes) out(r.cs, cn);
    out(r.c, cn);
    if (r.co != nullptr) out(r.co, hv);
    hv *= og;
    out(r.h, hv);
    if (r.hh != nullptr) out(r.hh, hv);
    if (r.y != nullptr) out(r.y, hv);
  });
}

// One reset-after gru row forward (logistic r and z, tanh candidate; R·h_prev given apart in
// hr) in one pass over the units, in packet chunks (ChunkedPadded) with the gates in
// registers: the same operations, in the same order, as the general path's passes over the
// row (FwdBlock). kPlanes: the activation planes of r, z and n and aux = R_n·h_prev + b_Rn are
// written (training: the backward reads them); at inference only h and y.
template <typename A>
struct GruRow {
  const A *gx, *hr, *bw, *br, *hp;
  A *act[3], *aux, *h, *y;  // act: r, z, n (logical order); y: the layer output's row
};
template <typename A, bool kPlanes>
void GruFwdRow(const RnnSpec& s, const GruRow<A>& r, Index len) {
  const Index H = s.H;
  const Index pr = s.gate_pos[0] * H, pz = s.gate_pos[1] * H, pn = s.gate_pos[2] * H;
  const bool z_new = s.gru_z_new;
  ChunkedPadded<A>(len, [&](auto chunk, Index o0, Index w) TFRNN_INLINE_LAMBDA {
    using C = decltype(chunk);
    using L = typename C::L;
    // Element o0 on of the row at p, read; an array stored there.
    auto in = [&](const A* p) TFRNN_INLINE_LAMBDA { return C::In(p + o0, w); };
    auto out = [&](A* p, const L& v) TFRNN_INLINE_LAMBDA { C::Out(p + o0, w, v); };
    const L rg = Logistic(in(r.gx + pr) + in(r.hr + pr) + in(r.bw + pr) + in(r.br + pr));
    const L z = Logistic(in(r.gx + pz) + in(r.hr + pz) + in(r.bw + pz) + in(r.br + pz));
    const L aux = in(r.hr + pn) + in(r.br + pn);
    const L n = (in(r.gx + pn) + in(r.bw + pn) + rg * aux).tanh();
    const L h = z_new ? L(z * n + (A(1) - z) * in(r.hp)) : L((A(1) - z) * n + z * in(r.hp));
    if constexpr (kPlanes) {
      out(r.act[0], rg);
      out(r.act[1], z);
      out(r.act[2], n);
      out(r.aux, aux);
    }
    out(r.h, h);
    out(r.y, h);
  });
}

}  // namespace rnn_cpu
}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_ENGINE_FWD_ROWS_H_
