// The CPU side of the MPSGraph-style kernels (TfRnn>LSTM/LSTMGradients, TfRnn>GRU/
// GRUGradients): the packing of MPSGraph's per-direction operands into the stacked-RNN
// engine's arguments and of the engine's results back into MPSGraph's layouts, and the
// families' computations on the CPU engine (CpuMps, for the kernels of mps_rnn_face.h).
#ifndef TF_RNN_OPS_CC_KERNELS_MPS_COMMON_H_
#define TF_RNN_OPS_CC_KERNELS_MPS_COMMON_H_

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "cc/kernels/engine_loader.h"
#include "cc/kernels/kernel_util.h"
#include "cc/kernels/mps_rnn_face.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tfrnn {
namespace mps {

// Copies direction-major rows [D, B, H] to/from MPSGraph's [B, D·H] (zeros for null `from`).
template <typename A>
void ToDirMajor(const A* from, int64_t D, int64_t B, int64_t H, A* to) {
  for (int64_t d = 0; d < D; ++d) {
    for (int64_t b = 0; b < B; ++b) {
      A* dst = to + (d * B + b) * H;
      if (from != nullptr) {
        std::copy_n(from + b * D * H + d * H, H, dst);
      } else {
        std::fill_n(dst, H, A(0));
      }
    }
  }
}
template <typename A>
void FromDirMajor(const A* from, int64_t D, int64_t B, int64_t H, A* to) {
  for (int64_t d = 0; d < D; ++d) {
    for (int64_t b = 0; b < B; ++b) {
      std::copy_n(from + (d * B + b) * H, H, to + b * D * H + d * H);
    }
  }
}

// The engine's forward arguments for the operands (compute type A): params in the engine
// layout, h0/c0 as [D, B, H], zeros for absent operands, scratch for the final states and the
// reserve. Only the output sequence `y` is left for the caller.
template <typename Tt>
struct MpsPacked {
  using A = typename ComputeType<Tt>::type;
  RnnFwdArgs<A> f;

  void Pack(ComputeBridge<Tt>& br, const MpsOperands& in) {
    const RnnSpec& s = in.spec;
    const int64_t D = s.D, B = s.B, H = s.H, KN = RnnK(s) * H;
    const int64_t in_w = s.preprojected ? 0 : s.I;
    const bool lstm = s.mode == RnnMode::kLstm;
    f.x = br.In(*in.source);
    A* params = br.Scratch(RnnParamsSize(s));
    A* h0 = br.Scratch(D * B * H);
    A* c0 = lstm ? br.Scratch(D * B * H) : nullptr;
    f.params = params;
    f.h0 = h0;
    f.c0 = c0;
    const A* W = in.W != nullptr ? br.In(*in.W) : nullptr;
    const A* R = br.In(*in.R);
    const A* bias = in.bias != nullptr ? br.In(*in.bias) : nullptr;
    const A* bias2 = in.bias2 != nullptr ? br.In(*in.bias2) : nullptr;
    const A* st = in.init_state != nullptr ? br.In(*in.init_state) : nullptr;
    const A* ce = in.init_cell != nullptr ? br.In(*in.init_cell) : nullptr;
    f.peephole = in.peephole != nullptr ? br.In(*in.peephole) : nullptr;
    f.mask = in.mask != nullptr ? br.In(*in.mask) : nullptr;
    f.mask_per_step = in.mask_per_step;
    f.hn = br.Scratch(D * B * H);
    f.cn = lstm ? br.Scratch(D * B * H) : nullptr;
    f.reserve = br.Scratch(RnnReserveSize(s));
    if (!br.status().ok()) return;
    for (int64_t d = 0; d < D; ++d) {
      const RnnParamOffsets o = RnnParamLayout(s, d);
      if (W != nullptr) std::copy_n(W + d * KN * in_w, KN * in_w, params + o.w);
      std::copy_n(R + d * KN * H, KN * H, params + o.r);
      if (bias != nullptr) {
        std::copy_n(bias + d * KN, KN, params + o.bw);
      } else {
        std::fill_n(params + o.bw, KN, A(0));
      }
      std::fill_n(params + o.br, KN, A(0));
      if (bias2 != nullptr) {  // the candidate's recurrent bias
        std::copy_n(bias2 + d * H, H, params + o.br + s.gate_pos[2] * H);
      }
    }
    ToDirMajor<A>(st, D, B, H, h0);
    if (lstm) ToDirMajor<A>(ce, D, B, H, c0);
  }
};

// The inverse of MpsPacked::Pack for gradients: the engine's dparams into MPSGraph's R [D,
// K·H, H], W [D·K·H, I], bias [D·K·H] and secondary bias [D·H] layouts (null = not wanted).
template <typename A>
void UnpackParamGrads(const RnnSpec& s, const A* dparams, A* dR, A* dW, A* db, A* db2) {
  const int64_t H = s.H, KN = RnnK(s) * H, in_w = s.preprojected ? 0 : s.I;
  for (int64_t d = 0; d < s.D; ++d) {
    const RnnParamOffsets o = RnnParamLayout(s, d);
    std::copy_n(dparams + o.r, KN * H, dR + d * KN * H);
    if (dW != nullptr) std::copy_n(dparams + o.w, KN * in_w, dW + d * KN * in_w);
    if (db != nullptr) std::copy_n(dparams + o.bw, KN, db + d * KN);
    if (db2 != nullptr) std::copy_n(dparams + o.br + s.gate_pos[2] * H, H, db2 + d * H);
  }
}

// out [T, B, D·width] = each direction's [T·B, width] block at reserve + offset(d), interleaved.
template <typename A, typename OffsetFn>
void InterleaveFromReserve(const RnnSpec& s, const A* reserve, OffsetFn offset, int64_t width,
                           A* out) {
  const int64_t TB = s.T * s.B;
  for (int64_t d = 0; d < s.D; ++d) {
    const A* block = reserve + offset(d);
    for (int64_t r = 0; r < TB; ++r) {
      std::copy_n(block + r * width, width, out + (r * s.D + d) * width);
    }
  }
}

// MPSGraph's z_state [T, B, D·K·H]: the per-direction gate activations of the reserve.
template <typename A>
void ZStateFromReserve(const RnnSpec& s, const A* reserve, A* z) {
  InterleaveFromReserve<A>(
      s, reserve, [&s](int64_t d) { return RnnReserveLayout(s, d).acts; }, RnnK(s) * s.H, z);
}

// The LSTM's cell sequence [T, B, D·H]: the per-direction cell states of the reserve.
template <typename A>
void CellsFromReserve(const RnnSpec& s, const A* reserve, A* cell) {
  InterleaveFromReserve<A>(
      s, reserve, [&s](int64_t d) { return RnnReserveLayout(s, d).aux; }, s.H, cell);
}

// A CPU gradients op on the engine: the forward recomputed from the packed operands, then the
// backward, into *g (whose dparams, dh0, dc0 and dpeephole UnpackMpsGrad copies out).
template <typename Tt>
absl::Status RunMpsGrad(OpKernelContext* ctx, ComputeBridge<Tt>& br, MpsPacked<Tt>& pk,
                        const RnnSpec& s, const MpsGradInputs& gi, Tensor* d_source,
                        RnnBwdArgs<typename ComputeType<Tt>::type>* g) {
  using A = typename ComputeType<Tt>::type;
  const bool lstm = s.mode == RnnMode::kLstm;
  const int64_t D = s.D, B = s.B, H = s.H;
  RnnFwdArgs<A>& f = pk.f;
  f.y = br.Scratch(s.T * B * D * H);
  A* fws = br.Scratch(RnnFwdWorkspaceSize(SpecFor<Tt>(s)));
  *g = BwdArgsOf<RnnBwdArgs<A>>(f);
  // Final-state gradients as [D, B, H].
  A* dhn = br.Scratch(D * B * H);
  A* dcn = lstm ? br.Scratch(D * B * H) : nullptr;
  const A* dst = gi.dstate != nullptr ? br.In(*gi.dstate) : nullptr;
  const A* dce = gi.dcell != nullptr ? br.In(*gi.dcell) : nullptr;
  g->dy = br.In(*gi.dy);
  g->dhn = dhn;
  g->dx = br.Out(d_source);
  g->dh0 = br.Scratch(D * B * H);
  g->dparams = br.Scratch(RnnParamsSize(s));
  if (lstm) {
    g->dcn = dcn;
    g->dc_seq = gi.dcseq != nullptr ? br.In(*gi.dcseq) : nullptr;
    g->dc0 = br.Scratch(D * B * H);
    g->dpeephole = br.Scratch(D * 4 * H);
  }
  A* bws = br.Scratch(RnnBwdWorkspaceSize(s));
  TF_RETURN_IF_ERROR(br.status());
  ToDirMajor<A>(dst, D, B, H, dhn);
  if (lstm) ToDirMajor<A>(dce, D, B, H, dcn);
  const EngineApi* engine;
  TF_RETURN_IF_ERROR(GetEngine(&engine));
  TfHostPool pool(ctx);
  EngineFns<A>::RnnFwd(*engine)(pool, SpecFor<Tt>(s), f, fws);
  EngineFns<A>::RnnBwd(*engine)(pool, SpecFor<Tt>(s), *g, bws);
  return absl::OkStatus();
}

// The engine's gradients into MPSGraph's layouts (the outputs AllocateMpsGrad made).
template <typename Tt>
absl::Status UnpackMpsGrad(ComputeBridge<Tt>& br, const RnnSpec& s,
                           const RnnBwdArgs<typename ComputeType<Tt>::type>& g,
                           const MpsGradOutputs& o) {
  using A = typename ComputeType<Tt>::type;
  const int64_t D = s.D, B = s.B, H = s.H;
  auto out = [&](Tensor* t) { return t != nullptr ? br.Out(t) : nullptr; };
  A* dR = br.Out(o.d_R);
  A *dW = out(o.d_W), *db = out(o.d_b), *dp = out(o.d_p), *ds = out(o.d_s), *dc = out(o.d_c),
    *db2 = out(o.d_b2);
  TF_RETURN_IF_ERROR(br.status());
  UnpackParamGrads<A>(s, g.dparams, dR, dW, db, db2);
  if (dp != nullptr) std::copy_n(g.dpeephole, D * 4 * H, dp);
  if (ds != nullptr) FromDirMajor<A>(g.dh0, D, B, H, ds);
  if (dc != nullptr) FromDirMajor<A>(g.dc0, D, B, H, dc);
  return absl::OkStatus();
}

// The MPSGraph families' computations on the CPU engine (see mps_rnn_face.h): the operands
// packed per call; the gradients recompute the forward from the operands.
template <typename Tt>
struct CpuMps {
  using A = typename ComputeType<Tt>::type;

  static absl::Status Forward(OpKernelContext* ctx, const MpsOperands& in, Tensor* state,
                              Tensor* cell, Tensor* z) {
    const RnnSpec& s = in.spec;
    ComputeBridge<Tt> br(ctx);
    MpsPacked<Tt> pk;
    pk.Pack(br, in);
    RnnFwdArgs<A>& a = pk.f;
    a.y = br.Out(state);
    A* cell_out = cell != nullptr ? br.Out(cell) : nullptr;
    A* z_out = z != nullptr ? br.Out(z) : nullptr;
    A* ws = br.Scratch(RnnFwdWorkspaceSize(SpecFor<Tt>(s)));
    return RunEngine(ctx, br, [&](const EngineApi& engine, TfHostPool& pool) {
      EngineFns<A>::RnnFwd(engine)(pool, SpecFor<Tt>(s), a, ws);
      // Interleave the per-direction activations and cell states into MPSGraph's layouts.
      if (z_out != nullptr) ZStateFromReserve<A>(s, a.reserve, z_out);
      if (cell_out != nullptr) CellsFromReserve<A>(s, a.reserve, cell_out);
    });
  }

  static absl::Status Grad(OpKernelContext* ctx, const MpsOperands& in, const MpsGradInputs& gi,
                           const MpsGradOutputs& o) {
    ComputeBridge<Tt> br(ctx);
    MpsPacked<Tt> pk;
    pk.Pack(br, in);
    RnnBwdArgs<A> g;
    TF_RETURN_IF_ERROR(RunMpsGrad(ctx, br, pk, in.spec, gi, o.d_source, &g));
    TF_RETURN_IF_ERROR(UnpackMpsGrad(br, in.spec, g, o));
    br.Finish();
    return absl::OkStatus();
  }
};

}  // namespace mps
}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_KERNELS_MPS_COMMON_H_
