// Plain problem descriptions shared by the engine and its callers: no Eigen, no TensorFlow.
// See lstm.h for the equations and layouts.
#ifndef TF_RNN_OPS_CC_ENGINE_TYPES_H_
#define TF_RNN_OPS_CC_ENGINE_TYPES_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <tuple>

#include "cc/engine/block_arg_fields.h"
#include "cc/engine/pack_cache.h"
#include "cc/engine/rnn_spec_fields.h"

namespace tfrnn {

using Index = std::ptrdiff_t;

// The engine's switches for measurements and tests (docs/ENVIRONMENT.md): the index in
// `choices` of environment variable `name`'s value, or -1 when it is unset or none of them.
// Callers keep the answer in a function-local static, so each is read once per process.
inline int EnvChoice(const char* name, std::initializer_list<const char*> choices) {
  const char* e = std::getenv(name);
  if (e == nullptr) return -1;
  int i = 0;
  for (const char* c : choices) {
    if (std::strcmp(e, c) == 0) return i;
    ++i;
  }
  return -1;
}

// An element type carried as a value, for dispatching on a runtime dtype or element size:
// f(TypeTag<T>()) and, inside, typename decltype(tag)::type.
template <typename T>
struct TypeTag {
  using type = T;
};

// Block index of each gate within a 4H row.
struct LstmGateOrder {
  int i, c, f, o;
};
constexpr LstmGateOrder kIcfo = {0, 1, 2, 3};
constexpr LstmGateOrder kIfco = {0, 2, 1, 3};

struct LstmCellSpec {
  LstmGateOrder order = kIcfo;
  float forget_bias = 0.f;
  float cell_clip = 0.f;   // <= 0: no clipping
  bool use_peephole = false;
  bool bf16 = false;  // a bfloat16 op: products may round their operands to bf16 (bf16_gemm.h)
};

// The engine's arguments of the block ops: sizes, then the pointers of block_arg_fields.h
// (typed; shapes there). T steps, B batch, I input width, H units.
#define TFRNN_ARG_IN(name, shape) const A* name = nullptr;
#define TFRNN_ARG_OUT(name, shape) A* name = nullptr;

// Forward over a time-major sequence.
template <typename A>
struct LstmFwdArgs {
  Index T = 0, B = 0, I = 0, H = 0;
  Index seq_len_max = 0;  // steps actually computed, 0 <= seq_len_max <= T
  TFRNN_LSTM_FWD_ARGS(TFRNN_ARG_IN, TFRNN_ARG_OUT)
};

// Backward over a sequence (BlockLSTMGrad semantics, plus the optional incoming gradients).
template <typename A>
struct LstmBwdArgs {
  Index T = 0, B = 0, I = 0, H = 0;
  Index seq_len_max = 0;
  // When true and spec.cell_clip > 0, the gradient through a clipped cell value is zero (the
  // exact derivative of clip). When false the clip is straight-through (stock *Grad ops).
  bool exact_clip_grad = false;
  TFRNN_LSTM_BWD_ARGS(TFRNN_ARG_IN, TFRNN_ARG_OUT)
};

// One step of the pointwise backward with no carries and no GEMMs (LSTMBlockCellGrad):
// writes dgates [B, 4H] (dicfo), cs_prev_grad [B, H], and peephole grads [H] (zeros when
// spec.use_peephole is false). Reads every input before writing any output, so outputs may
// not alias inputs anyway: the face allocates fresh outputs.
template <typename A>
struct LstmCellBwdArgs {
  Index B = 0, H = 0;
  TFRNN_LSTM_CELL_BWD_ARGS(TFRNN_ARG_IN, TFRNN_ARG_OUT)
};


// The part of a step a pointwise pass runs. A reset-before gru step is split around the
// candidate's recurrent product R_n·(r ⊙ h_prev), which needs every unit's r: forward,
// kBeforeProduct (r, z and r ⊙ h_prev) then kAfterProduct (the candidate and h); backward,
// kBeforeProduct (z's and the candidate's gradients, h_prev's through z) then, once the
// product's gradient is in, kAfterProduct (r's gradient, h_prev's through r). Any other step
// is kWhole.
enum class StepPhase : int { kWhole = 0, kBeforeProduct = 1, kAfterProduct = 2 };

// Which road a step chain takes where both can: TF_RNN_OPS_CPU_CHAIN=pipelined or split forces
// one (for measurements; docs/ENVIRONMENT.md), anything else leaves the choice to the rules
// below. Read once per process.
enum class ChainChoice { kAuto, kPipelined, kSplit };
inline ChainChoice ChainChoiceFromEnv() {
  static const ChainChoice choice = [] {
    switch (EnvChoice("TF_RNN_OPS_CPU_CHAIN", {"pipelined", "split"})) {
      case 0: return ChainChoice::kPipelined;
      case 1: return ChainChoice::kSplit;
      default: return ChainChoice::kAuto;
    }
  }();
  return choice;
}

// Whether a step chain that can take the pipelined road (`fits`) does, with `threads` threads:
// never on one thread or with TF_RNN_OPS_CPU_CHAIN=split, always with =pipelined, else up to
// `max_threads` threads (FwdChainPipelined, BwdChainPipelined below).
inline bool ChainPipelined(bool fits, int threads, int max_threads) {
  const ChainChoice choice = ChainChoiceFromEnv();
  if (!fits || threads < 2 || choice == ChainChoice::kSplit) return false;
  return choice == ChainChoice::kPipelined || threads <= max_threads;
}

// Small steps (a few rows times a small H): the forward's step chain runs on one thread while
// the others compute the input projection of the steps ahead of it (LayerForward, rnn_cpu.cc);
// a step this short does not split well across cores, and the projection takes a share of the
// work off the chain. Only while the recurrent weights (r_elems, packed: pairs of bf16 with
// bf16 products) fit in half of one core's L2 (512 KiB): a chain that streams R from beyond
// it runs faster split over the cores' caches (the unit blocks of StepLoop), e.g. LSTM
// H = 256 or 512 at B 1-16 1.2-1.8x. And only on 2 or 3 threads: the chain's time is one
// core's however many there are, while the split step's shrinks with the threads (16-core
// Intel host, docs/PERFORMANCE.md "CPU thread scaling": at 200x16x64x128 the split forward
// is 1.2x the chain at 4 threads, 1.5x at 8, 1.7x at 16). FwdChainFits: the sizes alone (the
// workspace is sized for them, whatever the thread count).
inline bool FwdChainFits(Index steps, Index batch, Index units, Index r_elems, bool bf16) {
  return steps > 1 && batch > 0 && batch <= 32 && batch * units <= 4096 &&
         r_elems <= (Index(1) << (bf16 ? 18 : 17));
}
constexpr int kFwdChainMaxThreads = 3;
inline bool FwdChainPipelined(Index steps, Index batch, Index units, Index r_elems, bool bf16,
                              int threads) {
  return ChainPipelined(FwdChainFits(steps, batch, units, r_elems, bf16), threads,
                        kFwdChainMaxThreads);
}

// Few steps of few rows (a streaming call: one step of a small batch): each step's products
// run on the weights in place (SmallGemm), the pointwise pass on the calling thread, instead of
// packing R for the step chain first (LayerForward, rnn_cpu.cc): packing R reads and writes
// all of it, which costs more than a step's product of a few rows.
inline bool RnnStepsUnpacked(Index steps, Index batch) {
  return steps > 0 && batch <= 32 && steps * batch <= 32;
}

// The backward's step chain runs on one thread while the others compute the weight, bias and
// input gradients over the finished steps (LayerBackward, rnn_cpu_backward.cc) when the batch
// is small: a step of a chain of up to 64 rows gains little from splitting across cores, and
// the GEMMs beside it keep the other cores busy. That holds on 2 threads, and on 3 or 4 while
// the recurrent weights (r_elems) are at most 1 MiB; beyond, the one core's chain is the
// whole backward's time and the split step (every thread its units of each step, the weight
// gradients after, over all steps) is faster (16-core Intel host, docs/PERFORMANCE.md "CPU
// thread scaling": 1.8-2.7x at 8 threads, 2.1-3.4x at 16, for B 16-64 and H 256-512).
constexpr int kBwdChainMaxThreads = 4;
inline bool BwdChainPipelined(Index steps, Index batch, Index r_elems, bool bf16, int threads) {
  const bool small_r = r_elems <= (Index(1) << (bf16 ? 19 : 18));
  return ChainPipelined(steps > 1 && batch > 0 && batch <= 64, threads,
                        small_r ? kBwdChainMaxThreads : 2);
}

// GRU cell with the reset applied before the recurrent product (GRUBlockCell, Keras
// reset_after=False):
//     [r_bar, u_bar] = [x, h_prev] · w_ru + b_ru            w_ru: [I+H, 2H], r block first
//     r = σ(r_bar), u = σ(u_bar)
//     c = tanh([x, h_prev ⊙ r] · w_c + b_c)                 w_c: [I+H, H]
//     h = u ⊙ h_prev + (1 - u) ⊙ c
template <typename A>
struct GruCellFwdArgs {
  Index B = 0, I = 0, H = 0;
  TFRNN_GRU_CELL_FWD_ARGS(TFRNN_ARG_IN, TFRNN_ARG_OUT)
};

// Backward of one GRU step (GRUBlockCellGrad):
//     d_c_bar = (d_h ⊙ (1-u) + g_c) ⊙ (1 - c²)
//     d_u_bar = (d_h ⊙ (h_prev - c) + g_u) ⊙ u(1-u)
//     d_hr    = d_c_bar · w_c[I:]ᵀ
//     d_r_bar = (d_hr ⊙ h_prev + g_r) ⊙ r(1-r)
//     d_x     = d_c_bar · w_c[:I]ᵀ + [d_r_bar, d_u_bar] · w_ru[:I]ᵀ
//     d_h_prev = [d_r_bar, d_u_bar] · w_ru[I:]ᵀ + d_hr ⊙ r + d_h ⊙ u
// g_r, g_u, g_c are the gradients of the r, u, c outputs: optional (null = zero); the raw
// op ignores them like stock, the registered gradient passes them.
template <typename A>
struct GruCellBwdArgs {
  Index B = 0, I = 0, H = 0;
  TFRNN_GRU_CELL_BWD_ARGS(TFRNN_ARG_IN, TFRNN_ARG_OUT)
};
#undef TFRNN_ARG_OUT
#undef TFRNN_ARG_IN


// ---------------------------------------------------------------------------------------------
// cuDNN-style stacked RNN (the CudnnRNN family): lstm, gru (reset after the recurrent product),
// rnn_tanh, rnn_relu; layers, directions, per-sequence lengths, projection, dropout between
// layers. See rnn.h for the equations and the reserve layout.
#define TFRNN_ENUM_ITEM(name, spelling) k##name,
#define TFRNN_COUNT_ONE(...) +1
enum class RnnMode : int { TFRNN_RNN_MODES(TFRNN_ENUM_ITEM) };
// Gate activations. kHardSigmoid is MPS's clamp(0.2·x + 0.5, 0, 1), kKerasHardSigmoid Keras 3's
// relu6(x + 3) / 6 = clamp(x/6 + 0.5, 0, 1).
enum class RnnAct : int { TFRNN_RNN_ACTS(TFRNN_ENUM_ITEM) };
constexpr int kRnnModeCount = 0 TFRNN_RNN_MODES(TFRNN_COUNT_ONE);
constexpr int kRnnActCount = 0 TFRNN_RNN_ACTS(TFRNN_COUNT_ONE);
#undef TFRNN_ENUM_ITEM

inline int RnnGates(RnnMode m) {
  return m == RnnMode::kLstm ? 4 : m == RnnMode::kGru ? 3 : 1;
}

// The problem description of the stacked-RNN engine: one member per line of
// TFRNN_RNN_SPEC_FIELDS (rnn_spec_fields.h, which documents each), with its default.
struct RnnSpec {
#define TFRNN_SPEC_MEMBER(type, name, c_type, init, lo, hi, what) type name = init;
#define TFRNN_SPEC_ARRAY_MEMBER(type, name, c_type, n, init, lo, hi, what) type name[n] = init;
  TFRNN_RNN_SPEC_FIELDS(TFRNN_SPEC_MEMBER, TFRNN_SPEC_ARRAY_MEMBER)
#undef TFRNN_SPEC_MEMBER
#undef TFRNN_SPEC_ARRAY_MEMBER
};
// A field added to the list changes both engines' binary interface: bump kEngineApiVersion
// (engine_api.h) and TFRNN_CUDA_API_VERSION (cc/gpu/c_api.h), then this count.
constexpr int kRnnSpecFieldCount = 0 TFRNN_RNN_SPEC_FIELDS(TFRNN_COUNT_ONE, TFRNN_COUNT_ONE);
static_assert(kRnnSpecFieldCount == 27, "RnnSpec fields changed: bump the engine API versions");
#undef TFRNN_COUNT_ONE

inline Index RnnK(const RnnSpec& s) { return RnnGates(s.mode); }
// One recurrent mask per gate block in use (has_mask with mask_gates).
inline bool RnnGateMasks(const RnnSpec& s) { return s.has_mask && s.mask_gates; }
// The backward gathers one gate's columns of dhr into a [T·B, H] scratch for that gate's dR
// GEMM: the reset-before gru candidate's, and every gate's with per-gate masks.
inline bool RnnBwdGathers(const RnnSpec& s) {
  return (s.mode == RnnMode::kGru && s.gru_reset_before) || RnnGateMasks(s);
}
inline Index RnnHs(const RnnSpec& s) { return s.P > 0 ? s.P : s.H; }  // width of h
// A recurrent mask row's width: D·Hs, or D·K·Hs with per-gate masks (gate block k of direction
// d at columns (d·K + k)·Hs).
inline Index RnnMaskWidth(const RnnSpec& s) {
  return s.D * (s.mask_gates ? RnnK(s) : 1) * RnnHs(s);
}
// Column of the mask of gate block k in direction column dcol (= d·Hs) of a mask row.
inline Index MaskCol(const RnnSpec& s, Index dcol, Index k) {
  return s.mask_gates ? RnnK(s) * dcol + k * RnnHs(s) : dcol;
}
// Width of layer l's input matrices (0 for layer 0 with skip input).
inline Index RnnInWidth(const RnnSpec& s, Index l) {
  return l == 0 ? (s.skip_input || s.preprojected ? 0 : s.I) : s.D * RnnHs(s);
}
// The widest of the layers' input matrices.
inline Index RnnMaxInWidth(const RnnSpec& s) {
  return std::max(RnnInWidth(s, 0), s.L > 1 ? RnnInWidth(s, 1) : Index(0));
}
// Width of layer l's input tensor.
inline Index RnnInCols(const RnnSpec& s, Index l) { return l == 0 ? s.I : s.D * RnnHs(s); }

// The opaque params buffer: cuDNN's own layout (read on a GPU from the buffer cuDNN 9 lays out
// for PyTorch; tests/gpu check_cudnn_layout). First the matrices of every pseudo-layer
// p = l·D + d in order: K input matrices [H, in_l] (row-major, together one [K·H, in_l]
// matrix), K recurrent matrices [H, Hs] ([K·H, Hs]), the projection [P, H] (lstm with P > 0);
// then the biases of every pseudo-layer in order: K input biases [H], K recurrent biases [H].
// (For one unidirectional layer this is the layout Keras builds: matrices, then biases.)
struct RnnParamOffsets {
  Index w, r, p, bw, br, end;  // end: one past this pseudo-layer's recurrent biases
  // The five pieces of a params (or dparams) buffer at `base`.
  template <typename P>
  void Point(P base, P* W, P* R, P* Pm, P* bW, P* bR) const {
    *W = base + w;
    *R = base + r;
    *Pm = base + p;
    *bW = base + bw;
    *bR = base + br;
  }
};
inline Index RnnPseudoMatrices(const RnnSpec& s, Index pseudo) {
  const Index KH = RnnK(s) * s.H;
  return KH * RnnInWidth(s, pseudo / s.D) + KH * RnnHs(s) + s.P * s.H;
}
inline RnnParamOffsets RnnParamLayout(const RnnSpec& s, Index pseudo) {
  const Index KH = RnnK(s) * s.H;
  Index before = 0, all = 0;  // matrices of the pseudo-layers before this one; of all
  for (Index q = 0; q < s.L * s.D; ++q) {
    const Index m = RnnPseudoMatrices(s, q);
    if (q < pseudo) before += m;
    all += m;
  }
  RnnParamOffsets o{};
  o.w = before;
  o.r = o.w + KH * RnnInWidth(s, pseudo / s.D);
  o.p = o.r + KH * RnnHs(s);
  o.bw = all + pseudo * 2 * KH;
  o.br = o.bw + KH;
  o.end = o.br + KH;
  return o;
}
inline Index RnnParamsSize(const RnnSpec& s) { return RnnParamLayout(s, s.L * s.D - 1).end; }

// Our reserve_space (elements of the compute type), per pseudo-layer: gate activations
// [T,B,K·H], lstm cell states / gru (R_n·h + b_Rn), or r ⊙ h for reset-before, [T,B,H] (none
// for rnn), lstm with projection the unprojected h [T,B,H], the previous h of each step
// [T,B,Hs] (before any recurrent mask); then per layer
// l < L-1 the next layer's input [T,B,D·Hs] and, with dropout, its mask [T,B,D·Hs].
struct RnnReserveOffsets {
  Index acts, aux, hh, hprev, end;
};
inline Index RnnPseudoReserve(const RnnSpec& s) {
  const Index TB = s.T * s.B, K = RnnK(s);
  const Index aux = s.mode == RnnMode::kLstm || s.mode == RnnMode::kGru ? 1 : 0;
  const Index hh = s.mode == RnnMode::kLstm && s.P > 0 ? 1 : 0;
  return TB * (K * s.H + aux * s.H + hh * s.H + RnnHs(s));
}
inline RnnReserveOffsets RnnReserveLayout(const RnnSpec& s, Index pseudo) {
  const Index TB = s.T * s.B, K = RnnK(s);
  RnnReserveOffsets o{};
  o.acts = pseudo * RnnPseudoReserve(s);
  o.aux = o.acts + TB * K * s.H;
  const Index aux = s.mode == RnnMode::kLstm || s.mode == RnnMode::kGru ? s.H : 0;
  o.hh = o.aux + TB * aux;
  o.hprev = o.hh + (s.mode == RnnMode::kLstm && s.P > 0 ? TB * s.H : 0);
  o.end = o.hprev + TB * RnnHs(s);
  return o;
}
inline bool RnnHasMask(const RnnSpec& s) { return s.training && s.dropout > 0.f && s.L > 1; }
// Offset of layer l's (l < L-1) next-layer input and dropout mask.
inline Index RnnNextInOffset(const RnnSpec& s, Index l) {
  const Index per = s.T * s.B * s.D * RnnHs(s) * (RnnHasMask(s) ? 2 : 1);
  return s.L * s.D * RnnPseudoReserve(s) + l * per;
}
inline Index RnnMaskOffset(const RnnSpec& s, Index l) {
  return RnnNextInOffset(s, l) + s.T * s.B * s.D * RnnHs(s);
}
inline Index RnnReserveSize(const RnnSpec& s) { return RnnNextInOffset(s, s.L - 1); }

// One layer and direction's weights given as separate tensors instead of the params buffer
// (the Keras face, cc/kernels/keras_rnn_kernels.cc): W [I, K·H] and R [Hs, K·H] with
// spec.weights_xw (else [K·H, I] and [K·H, Hs]), the input and recurrent biases [K·H] (bR is
// read: pass zeros for none). Null R: the weights are in params.
template <typename A>
struct RnnWeights {
  const A *W = nullptr, *R = nullptr, *bW = nullptr, *bR = nullptr;
};
// Their gradients, laid out as the weights (dbR null: no recurrent bias).
template <typename A>
struct RnnWeightGrads {
  A *dW = nullptr, *dR = nullptr, *dbW = nullptr, *dbR = nullptr;
};

template <typename A>
struct RnnFwdArgs {
  const int* lengths = nullptr;  // [B] in [0, T], or null (every sequence has T steps)
  const A* x = nullptr;          // [T, B, I] time-major (batch_major: [B, T, I])
  const A* h0 = nullptr;         // [L·D, B, Hs]
  const A* c0 = nullptr;         // [L·D, B, H] (lstm)
  const A* params = nullptr;     // RnnParamsSize
  A* y = nullptr;                // [T, B, D·Hs] (batch_major: [B, T, D·Hs])
  A* hn = nullptr;               // [L·D, B, Hs]
  A* cn = nullptr;               // [L·D, B, H] (lstm)
  A* reserve = nullptr;          // RnnReserveSize
  const A* peephole = nullptr;   // [L·D, K·H] in block order (spec.peephole)
  const A* mask = nullptr;       // [T or 1, B, D·Hs] (spec.has_mask; D·K·Hs with mask_gates)
  bool mask_per_step = false;    // mask is [T, B, D·Hs] (else [B, D·Hs] for every step)
  RnnWeights<A> weights;         // L == D == 1: the weights (then params is not read)
  bool batch_major = false;      // x is [B, T, I] and y [B, T, D·Hs] (the reserve stays
                                 // time-major: the backward reads it as usual)
  // A bfloat16 op's x, W and R (weights, weights_xw) and y as its tensors' bf16 words: x and y
  // both or neither, W and R both or neither (neither: weights.W and weights.R are the
  // weights' floats, packed into pair words as a bf16 product rounds them; the Keras mixed
  // op). The engine reads and writes them as they are where its road can (rnn_cpu_stack.cc
  // Reads16), else converts them into and from x, weights.W, weights.R and y, which are then
  // float buffers of their sizes that the caller leaves unfilled.
  struct Words16 {
    const uint16_t *x = nullptr, *W = nullptr, *R = nullptr;
    uint16_t* y = nullptr;
  } words16;
  // At inference of one layer and direction: the packed weights kept between calls while
  // weights_id (the caller's name for W's and R's buffers, new whenever they may hold other
  // values) is the same (pack_cache.h); null: packed per call.
  PackCache* pack_cache = nullptr;
  uint64_t weights_id = 0;
};

// Whether a batch-major forward hands x and y to the engine as they are (RnnFwdArgs::
// batch_major; the TensorFlow kernels and, on the CPU, the XLA calls): at inference, where the
// engine's gate rows follow x. In training the reserve's rows must be time-major, and x would
// be projected per time row, which costs more than transposing x and y around the engine.
inline bool RnnFwdTakesBatchMajor(const RnnSpec& s) { return !s.training; }

template <typename A>
struct RnnBwdArgs {
  const int* lengths = nullptr;
  const A *x = nullptr, *h0 = nullptr, *c0 = nullptr, *params = nullptr;
  const A* reserve = nullptr;  // written by RnnForward with the same spec and lengths
  const A* dy = nullptr;       // [T, B, D·Hs]
  const A* dhn = nullptr;      // [L·D, B, Hs]
  const A* dcn = nullptr;      // [L·D, B, H] (lstm)
  A* dx = nullptr;             // [T, B, I]; null: no input gradient (its products skipped)
  A* dh0 = nullptr;            // [L·D, B, Hs]
  A* dc0 = nullptr;            // [L·D, B, H] (lstm)
  A* dparams = nullptr;        // RnnParamsSize; null (or, with weights, dweights' dW, dR and
                               // dbW null): no weight, bias or peephole gradients (skipped)
  const A* peephole = nullptr;   // as in RnnFwdArgs
  const A* mask = nullptr;
  bool mask_per_step = false;
  const A* dc_seq = nullptr;     // optional dL/dc[t] of every step, [T, B, D·H] (lstm)
  A* dpeephole = nullptr;        // [L·D, K·H] (spec.peephole)
  // lstm, one layer and direction (the exact-gradient block op): optional gradients of the
  // gate activations (logical order i, f, c', o) and of tanh(c), [T, B, H] each, or null.
  const A* dact[4] = {nullptr, nullptr, nullptr, nullptr};
  const A* dco = nullptr;
  RnnWeights<A> weights;      // as in RnnFwdArgs
  RnnWeightGrads<A> dweights;  // with weights: their gradients (then dparams is not written)
};

// The cuDNN activations (σ gates, tanh cell input and cell) and no peephole: the straight-line
// paths of the LSTM's pointwise passes (fwd_rows.h LstmFwdRow, rnn_cpu_backward.cc BwdBlock,
// lanes_lstm.h).
inline bool LstmStandard(const RnnSpec& s) {
  return !s.peephole && s.gate_act[0] == RnnAct::kSigmoid &&
         s.gate_act[1] == RnnAct::kSigmoid && s.gate_act[2] == RnnAct::kTanh &&
         s.gate_act[3] == RnnAct::kSigmoid && s.cell_act == RnnAct::kTanh;
}
// The forward of `s` runs its products on the weights in place (RnnStepsUnpacked; no
// projection or recurrent mask): its workspace (CarveRnnFwd, workspace.h) then holds no packed
// weights, and stays under glibc's mmap threshold (128 KiB) for a streaming step, where an
// mmap'd scratch costs a page fault per page on every call.
inline bool RnnFwdUnpacked(const RnnSpec& s) {
  return s.P == 0 && !s.has_mask && RnnStepsUnpacked(s.T, s.B);
}
// Small weights: the forward's per-step product is [x_t, h_{t-1}] · [W; R] with both packed
// once (LayerForward, rnn_cpu.cc), into the step's pre-activation rows. A separate input
// projection's result makes a round trip through memory (written, read back, read again by the
// pointwise pass) that costs more than the GEMM at small batch; the block's packed weights
// stay in its core's L2. With bf16 products (a bfloat16 op: the spec's bf16; the engine passes
// whether its products take it) the packed weights are pairs of bf16, half the bytes, so twice
// the elements fit.
// `wide`: also larger weights, up to kFusedWeightsMax bytes of [W; R] packed, where the engine
// has no road with the batch in the lanes (rnn_cpu_common.h FuseWide: the AVX2 engine), and for
// a small batch over the whole batch (FuseSmallBatch: the AVX-512 engine, 3-15 rows). There
// a step's R streams from L3 either way; the fused product streams W with it (I/H more bytes a
// step, at the same products per byte) and saves the projection's rows written, zeroed and
// read back and Eigen's packing, which measured more:
// AVX2 Zen 3, 2 threads, LSTM 50x32x128x512 inference 5-9 % faster, its training step 10-15 %
// (its forward then runs in batch blocks, RnnTrainBatchBlocks), 100x64x256x256 3-10 %
// (docs/PERFORMANCE_AVX2.md). The workspace sizes (workspace.h) take wide = true,
// room for either road.
constexpr double kFusedWeightsMax = 8.0 * 1024 * 1024;
inline bool RnnFusesInput(Index in, Index Hs, Index KH, bool bf16 = false, bool wide = false) {
  if (in <= 0) return false;
  const double elems = double(in + Hs) * double(KH);
  return elems <= double(Index(1) << (bf16 ? 19 : 18)) ||
         (wide && elems * (bf16 ? 2 : 4) <= kFusedWeightsMax);
}
// The batch in the SIMD lanes (lanes_gemm.h): where the forward's per-step recurrent product
// runs as Rᵀ · hᵀ, each weight read once per step, on a CPU with AVX-512 (float products, or
// bf16 products on pair words). The spec's part: 32 to 64 rows with at most an eighth of the
// 16-lane packets padding, on the packed roads without a mask, projection or a reset-before
// gru's second product (whose operand is r ⊙ h). Returns the padded row count (the lanes of
// hᵀ), else 0. The engine adds its own conditions (lanes_gemm.h LanesFor: not the pipelined
// chain or the unpacked products, a bf16 spec only with bf16 products, a thread's slice of R
// over a size) and TF_RNN_OPS_CPU_LANES (LanesSetting).
inline Index RnnLanesWidth(const RnnSpec& s) {
  const Index bp = (s.B + 15) / 16 * 16;
  if (s.B < 32 || bp > 64 || (bp - s.B) * 8 > bp) return 0;
  if (s.P > 0 || s.has_mask || RnnFwdUnpacked(s)) return 0;
  if (s.mode == RnnMode::kGru && s.gru_reset_before) return 0;
  return bp;
}
// In the lanes the step's input product fuses with R's (rnn_cpu.cc LayerForward, `fused`) where
// the input is narrow, at most an eighth of the units: there W adds little to the weights each
// step streams, and the projection's rows no longer go through memory (100×48×64×512 at
// inference 1.07-1.23x on 2 threads); at an input of a quarter of the units the two were level,
// at a half the separate projection was faster (docs/PERFORMANCE_STEPS.md, "The batch in the
// lanes").
inline bool RnnLanesFuseInput(Index in, Index Hs) { return in > 0 && 8 * in <= Hs; }
// TF_RNN_OPS_CPU_LANES, read once per process: 0 never, 1 wherever the spec and the road allow
// (whatever the slice's size: for tests and measurements), else by the slice's size.
enum class LanesMode { kAuto, kOff, kForce };
inline LanesMode LanesSetting() {
  static const LanesMode m = [] {
    switch (EnvChoice("TF_RNN_OPS_CPU_LANES", {"0", "1"})) {
      case 0: return LanesMode::kOff;
      case 1: return LanesMode::kForce;
      default: return LanesMode::kAuto;
    }
  }();
  return m;
}
// TF_RNN_OPS_CPU_LANES_LSTM (docs/ENVIRONMENT.md), read once per process: "0" keeps the
// row-major gates of the lanes road for the LSTM too.
inline bool LanesLstmOn() {
  static const bool on = EnvChoice("TF_RNN_OPS_CPU_LANES_LSTM", {"0"}) != 0;
  return on;
}
// A standard LSTM's forward with its gates in the lanes (lanes_lstm.h; in training its
// pointwise pass writes the reserve's planes too): the spec's part; `layer_ok`: the layer's
// (rnn_cpu.cc LayerForward: every sequence full length, more than one step, an input of its
// own). The engine adds the lanes' own conditions (LanesFor).
inline bool LanesLstmFor(const RnnSpec& s, bool layer_ok) {
  return layer_ok && s.mode == RnnMode::kLstm && LstmStandard(s) &&
         !s.preprojected && RnnLanesWidth(s) == s.B && LanesLstmOn();
}
// Batch blocks (RnnForward, rnn_cpu_stack.cc). The batch's rows are independent sequences, so the
// forward can run them in blocks of rows, each block's whole stack as a call of its own on one
// thread: no step of a block waits for another block, and each thread keeps the packed
// weights in its core's cache. The unit blocks of StepLoop and the pipelined chain
// instead meet at every step, and their product of a step reads the h rows another core has
// just written. On 2 cores two blocks of B/2 rows ran 1.0-1.5x as fast as those roads at every
// size measured (docs/PERFORMANCE_STEPS.md, "Batch blocks"). A block keeps at least
// kBatchBlockRows rows (the kernel's register block of rows; on 2 threads with small weights
// kBatchBlockRowsSmall or kBatchBlockRowsTiny, RnnBatchBlockRows); blocks run on up to
// kBatchBlockMaxThreads threads (beyond, the roads measured on the 16-core host stay), and
// only while a layer's weights take at most kBatchBlockMaxWeights bytes: the blocks pack them
// in the workspace (one copy for a one-layer call, rnn_cpu_common.h PackShare, else one per
// block) and each streams all of R at every step, where the unit blocks stream a slice each
// (20x128x512x1024, 25 MB of weights: 0.93-0.98x). Not with a recurrent mask, or for the few rows of a streaming call.
// In training (RnnTrainBatchBlocks) a block writes its rows of the reserve, x and y where they
// are, time-major over the whole batch (rnn_cpu::Layer::row_B), so the backward reads the
// reserve as usual and the block count is the forward's alone. That holds on the road whose
// per-step product writes the step's rows (the fused input, RnnFusesInput: small weights, not
// gru), with no dropout or projection; elsewhere training keeps the roads over the whole batch.
// An inference call's blocks use a time-major x and y in place the same way where their roads
// are that one (rnn_cpu_stack.cc InferenceRowsInPlace), else gather and scatter their rows.
// The LSTM block ops' forward takes blocks on the same condition, its rows of the op's outputs
// in place (workspace.h LstmBlockBatchBlocksMax, lstm_cpu.cc).
// TF_RNN_OPS_CPU_BATCH_BLOCKS=0 turns them off (for measurements; read once per process).
constexpr Index kBatchBlockRows = 8;
constexpr int kBatchBlockMaxThreads = 4;
constexpr double kBatchBlockMaxWeights = 8.0 * 1024 * 1024;
// Blocks of 4-7 rows: on 2 threads, 8-15 rows in two blocks where the layers' weights take
// at most kBatchBlockSmallWeights bytes, instead of one block over both cores (the unit
// blocks of the whole batch, or the pipelined chain): a block's register blocks of 4 rows
// read each weight once per 4 rows, so the weights must come from L2 or near it. Engine alone,
// 2-core Zen 4, fastest / median call, inference: LSTM 100×8×64×128 1.24 / 1.35x,
// 100×10×128×200 1.50 / 1.50x, 100×15×64×128 1.28 / 1.26x, 100×12×300×300 (2.75 MiB) 1.10 /
// 1.20x; GRU 100×8×64×128 1.36 / 1.22x; bf16 100×10×128×200 1.36 / 1.32x; LSTM training
// forward 100×8×64×200 1.29 / 1.26x. Level (0.95-1.05x) at 100×13×128×256 and 200×8×64×64;
// mixed at 3 MiB (100×8×128×384 1.32x, 100×8×512×256 0.96x, 50×8×512×256 0.89x), slower
// beyond (30×8×512×512, 8 MiB: 0.85x). Blocks of 2-3 rows (4-7 rows in two blocks) measured
// 0.77-1.39x in two runs, with no consistent sign: not taken (but see kBatchBlockRowsTiny and
// kBatchBlockRowsPair).
constexpr Index kBatchBlockRowsSmall = 4;
constexpr double kBatchBlockSmallWeights = 2.75 * 1024 * 1024;
// Blocks of 3 rows: on 2 threads, 6-7 rows in two blocks where the weights take at most
// kBatchBlockTinyWeights bytes (about a core's L2 on Zen 4). Engine alone, 2-core Zen 4,
// fastest / median of 3-5 alternating rounds, inference: LSTM 100×6×64×128 1.30 / 1.26x,
// 100×7×64×128 1.27 / 1.18x, 50×6×64×128 1.29 / 1.33x, 100×7×256×128 1.22 / 1.24x,
// 100×6×128×200 1.07 / 1.10x, 100×7×300×160 1.23 / 1.23x, at 1.2-1.25 MiB 0.97-1.32x; GRU
// 100×6×64×128 1.38 / 1.47x, 100×7×128×200 0.90-1.14x over three runs; bf16 100×6×256×128
// 1.23 / 1.18x; LSTM training forward 100×6×64×128 1.17 / 1.17x. Slower beyond: 1.5 MiB
// 0.88-1.29x, 2 MiB (100×6×256×256) 0.88-0.93x.
constexpr Index kBatchBlockRowsTiny = 3;
constexpr double kBatchBlockTinyWeights = 1.25 * 1024 * 1024;
// Blocks of 2 rows: on 2 threads, 4-5 rows in two blocks (2 + 2, 3 + 2) where the weights
// take at most kBatchBlockPairWeights bytes. Engine alone, 2-core Zen 4, fastest / median of
// 3 alternating rounds, LSTM inference: 100×4×64×128 1.21 / 1.22x, 100×4×32×64 1.20 / 1.22x,
// 100×4×100×100 1.18 / 1.18x, 100×4×128×128 1.17 / 1.16x, 20×4 and 200×4×64×128 1.18-1.22x,
// 100×5×64×128 1.10 / 1.10x, 100×5×128×128 1.02 / 1.03x; GRU 100×4-5×64×128 1.13-1.32x; bf16
// 1.09-1.18x; LSTM training forward 1.06-1.17x, training step 1.02-1.06x. Between 0.5 and 1
// MiB mixed, more so with the pool asleep before each call (a helper starting 50-100 µs late,
// as between a Keras layer's calls): 100×4×128×160 (0.7 MiB) 1.16x awake, 0.91-0.94x asleep;
// 100×4×64×192 1.19-1.26x; 100×5×128×160 0.90-0.94x; 100×4×64×200 0.96-0.99x. Slower from
// 1.25 MiB (0.84-0.92x).
constexpr Index kBatchBlockRowsPair = 2;
constexpr double kBatchBlockPairWeights = 0.5 * 1024 * 1024;
inline bool BatchBlocksOff() {
  static const bool off = EnvChoice("TF_RNN_OPS_CPU_BATCH_BLOCKS", {"0"}) == 0;
  return off;
}
// The spec's part of whether training runs in batch blocks: every layer's input fuses into
// its step's product (with bf16 products: `bf16`, whether the CPU has them), no dropout,
// projection or preprojected or skipped input, not gru; and more steps than a streaming call
// has, also for a block of kBatchBlockRows rows (`wide`: RnnFusesInput's). The forward adds
// that every sequence is full length (the fused road's condition).
inline bool RnnTrainBatchBlocks(const RnnSpec& s, bool bf16, bool wide) {
  if (RnnHasMask(s) || s.P > 0 || s.preprojected || s.skip_input || s.mode == RnnMode::kGru ||
      RnnStepsUnpacked(s.T, kBatchBlockRows) || s.T < 2) {
    return false;
  }
  const Index Hs = RnnHs(s), KH = RnnK(s) * s.H;
  for (Index l = 0; l < std::min<Index>(s.L, 2); ++l) {
    if (!RnnFusesInput(RnnInWidth(s, l), Hs, KH, bf16, wide)) return false;
  }
  return true;
}
// The bytes of a layer's [W; R] at the widest input (bf16: 2 bytes an element).
inline double RnnBatchBlockWeights(const RnnSpec& s) {
  return double(RnnK(s) * s.H) * double(RnnMaxInWidth(s) + RnnHs(s)) * (s.bf16 ? 2.0 : 4.0);
}
// The fewest rows a block of s keeps on `threads` threads (kBatchBlockRowsPair,
// kBatchBlockRowsTiny and kBatchBlockRowsSmall above).
inline Index RnnBatchBlockRows(const RnnSpec& s, int threads) {
  if (threads != 2) return kBatchBlockRows;
  const double w = RnnBatchBlockWeights(s);
  if (s.B < 2 * kBatchBlockRowsTiny && w <= kBatchBlockPairWeights &&
      !RnnStepsUnpacked(s.T, kBatchBlockRowsPair)) {
    return kBatchBlockRowsPair;
  }
  if (w <= kBatchBlockTinyWeights && !RnnStepsUnpacked(s.T, kBatchBlockRowsTiny)) {
    return kBatchBlockRowsTiny;
  }
  if (w <= kBatchBlockSmallWeights && !RnnStepsUnpacked(s.T, kBatchBlockRowsSmall)) {
    return kBatchBlockRowsSmall;
  }
  return kBatchBlockRows;
}
// The blocks of s on `threads` threads: 1 = none.
inline Index RnnBatchBlocks(const RnnSpec& s, int threads) {
  if (threads < 2 || threads > kBatchBlockMaxThreads) return 1;
  if (s.has_mask || RnnStepsUnpacked(s.T, s.B) || BatchBlocksOff()) return 1;
  if (s.training && !RnnTrainBatchBlocks(s, s.bf16, true)) return 1;
  if (RnnBatchBlockWeights(s) > kBatchBlockMaxWeights) return 1;
  return std::max<Index>(1, std::min<Index>(s.B / RnnBatchBlockRows(s, threads), threads));
}
// The most blocks the spec allows, whatever the thread count (the workspace is sized for
// each count up to it): 1 = none.
inline Index RnnBatchBlocksMax(const RnnSpec& s) {
  Index n = 1;
  for (int t = 2; t <= kBatchBlockMaxThreads; ++t) n = std::max(n, RnnBatchBlocks(s, t));
  return n;
}
// Block i of n: rows [RnnBatchBlockRow(B, n, i), RnnBatchBlockRow(B, n, i + 1)). Where B is
// not a multiple of n the first blocks take the extra rows: the caller runs block 0 and starts
// at once (StepLoop), a helper woken from sleep 50-100 µs later on these VMs (the pool sleeps
// between a Keras layer's calls), so the caller's larger block and the helper's smaller one
// end closer together. Engine alone, 200 µs idle before each call, median of 4 rounds against
// the last blocks taking the extra rows: 100×5×64×128 (blocks of 3 and 2) LSTM 1.22x, GRU
// 1.32x; 7 and 9 rows level.
inline Index RnnBatchBlockRow(Index B, Index n, Index i) { return B - B * (n - i) / n; }

// The LSTM block ops (lstm_block_mapping.h) as one layer of this engine:
// T = seq_len_max steps, B batch rows, H units, the block ops' w as x·W + h·R.
inline RnnSpec LstmBlockRnnSpec(const LstmCellSpec& c, Index steps, Index B, Index I, Index H) {
  RnnSpec s;
  s.mode = RnnMode::kLstm;
  s.T = steps;
  s.B = B;
  s.I = I;
  s.H = H;
  s.gate_pos[0] = c.order.i;
  s.gate_pos[1] = c.order.f;
  s.gate_pos[2] = c.order.c;
  s.gate_pos[3] = c.order.o;
  s.cell_clip = c.cell_clip;
  s.peephole = c.use_peephole;
  s.peephole_o_new = true;
  s.weights_xw = true;
  s.bf16 = c.bf16;
  return s;
}
// The layer pointers of pseudo-layer `pseudo` in the cuDNN-layout buffers, for both engines'
// layer structs (rnn_cpu::Layer, gpu::LayerPtrs): the weights in params (left alone when params
// is null: the caller sets them) and their gradients in dparams (when not null), the gate
// activations' rows, aux, hh and hprev in the reserve. Returns the activation rows' base.
template <typename L, typename A>
A* SetCudnnLayer(const RnnSpec& s, Index pseudo, const A* params, A* reserve, A* dparams,
                 L* ly) {
  const Index l = pseudo / s.D, KH = RnnK(s) * s.H;
  ly->in = RnnInWidth(s, l);
  ly->in_cols = RnnInCols(s, l);
  const RnnParamOffsets po = RnnParamLayout(s, pseudo);
  if (params != nullptr) po.Point(params, &ly->W, &ly->R, &ly->Pm, &ly->bW, &ly->bR);
  if (dparams != nullptr) po.Point(dparams, &ly->dW, &ly->dR, &ly->dP, &ly->dbW, &ly->dbR);
  const RnnReserveOffsets ro = RnnReserveLayout(s, pseudo);
  A* const acts = reserve + ro.acts;
  for (Index k = 0; k < RnnK(s); ++k) ly->act[k] = acts + k * s.H;
  ly->act_ld = KH;
  ly->aux = reserve + ro.aux;
  ly->hh = reserve + ro.hh;
  ly->hprev = reserve + ro.hprev;
  ly->dcol = (pseudo % s.D) * RnnHs(s);
  return acts;
}

// SetCudnnLayer, or given weights.R (one layer and direction) the separate tensors of
// RnnWeights instead of params and their gradients in dweights instead of dparams: the
// engines' layers (rnn_cpu.cc, rnn_cpu_backward.cc; MakeLayerPtrs in cc/gpu/rnn_gpu_common.cuh).
template <typename L, typename A>
A* SetRnnLayer(const RnnSpec& s, Index pseudo, const A* params, A* reserve, A* dparams,
               const RnnWeights<A>& weights, const RnnWeightGrads<A>& dweights, L* ly) {
  const bool separate = weights.R != nullptr;
  A* acts = SetCudnnLayer(s, pseudo, separate ? nullptr : params, reserve,
                          separate ? nullptr : dparams, ly);
  if (separate) {
    std::tie(ly->W, ly->R, ly->bW, ly->bR) = std::tie(weights.W, weights.R, weights.bW, weights.bR);
    std::tie(ly->dW, ly->dR, ly->dbW, ly->dbR) =
        std::tie(dweights.dW, dweights.dR, dweights.dbW, dweights.dbR);
  }
  return acts;
}

// The engine layer of an LSTM block op over the op's tensors, for both engines' layer structs
// (rnn_cpu::Layer, gpu::LayerPtrs; lstm_block_mapping.h): W = w[:I] and R = w[I:]
// (weights_xw), the input bias b, the recurrent bias br (forget_bias at f), the gate activations
// in the [T, B, H] planes i, f, ci, o (act_ld = H), c in cs and tanh(c) in co. The forward
// writes the planes; the backward only reads them.
template <typename L, typename A>
void SetLstmBlockLayer(const RnnSpec& s, const A* w, const A* b, const A* br, const A* i,
                       const A* f, const A* ci, const A* o, const A* cs, const A* co, L* ly) {
  ly->in = ly->in_cols = s.I;
  ly->W = w;
  ly->R = w != nullptr ? w + s.I * 4 * s.H : nullptr;
  ly->bW = b;
  ly->bR = br;
  const int* pos = s.gate_pos;
  ly->act[pos[0]] = const_cast<A*>(i);
  ly->act[pos[1]] = const_cast<A*>(f);
  ly->act[pos[2]] = const_cast<A*>(ci);
  ly->act[pos[3]] = const_cast<A*>(o);
  ly->act_ld = s.H;
  ly->aux = const_cast<A*>(cs);
  ly->co = const_cast<A*>(co);
}

// The engine spec of the GRU block cell (GRUBlockCell(Grad), gru_cpu.cc): one step of a
// reset-before gru, gates r, u (z), c (n) in blocks 0, 1, 2 of 3H columns, h = u ⊙ h_prev +
// (1 - u) ⊙ c. The face computes the products itself (w_ru and w_c are two tensors).
inline RnnSpec GruBlockRnnSpec(Index B, Index I, Index H) {
  RnnSpec s;
  s.mode = RnnMode::kGru;
  s.T = 1;
  s.B = B;
  s.I = I;
  s.H = H;
  s.gru_reset_before = true;
  s.weights_xw = true;
  return s;
}

}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_ENGINE_TYPES_H_
