/* The one field list of the stacked-RNN problem description. Everything that names the fields
 * is expanded from these lists: the engine's C++ struct RnnSpec (cc/engine/types.h), the CUDA
 * engine's C ABI struct TfRnnCudaSpec (cc/gpu/c_api.h), the converters between the two
 * (cc/gpu/c_api_convert.h), the range checks of every validator (cc/engine/rnn_spec_check.h)
 * and the Python ctypes mirror of the C struct (tests/gpu/cuda_engine.py parses this file).
 * A new option is one line here (and a version bump: cc/engine/types.h checks the count).
 *
 * Plain C preprocessor only (c_api.h is a C header). Each list is called with macros that
 * take the columns:
 *   TFRNN_RNN_MODES(X):  X(Name, "op attr spelling"), in enum order from 0.
 *   TFRNN_RNN_ACTS(X):   X(Name, "spelling"), in enum order from 0 (MPSGraph's order, then
 *                        Keras 3's hard sigmoid relu6(x + 3) / 6).
 *   TFRNN_RNN_SPEC_FIELDS(F, A):
 *     F(cpp_type, name, c_type, default, lo, hi, "what")           one value
 *     A(cpp_type, name, c_type, count, default, lo, hi, "what")    a fixed array
 *   lo and hi bound every value (the validators' range check); TFRNN_SPEC_UNBOUNDED is no
 *   upper bound. default, lo and hi are C++ expressions, expanded only in C++ code. */
#ifndef TF_RNN_OPS_CC_ENGINE_RNN_SPEC_FIELDS_H_
#define TF_RNN_OPS_CC_ENGINE_RNN_SPEC_FIELDS_H_

#define TFRNN_RNN_MODES(X) X(Lstm, "lstm") X(Gru, "gru") X(Tanh, "rnn_tanh") X(Relu, "rnn_relu")

#define TFRNN_RNN_ACTS(X)                                                                       \
  X(None, "none") X(Relu, "relu") X(Tanh, "tanh") X(Sigmoid, "sigmoid")                         \
  X(HardSigmoid, "hard_sigmoid") X(KerasHardSigmoid, "keras_hard_sigmoid")

#define TFRNN_SPEC_LIST(...) {__VA_ARGS__}
#define TFRNN_SPEC_UNBOUNDED 9.0e18

/* Sizes: T steps, B batch, I input size, H units, P projection (lstm; 0 none), L layers,
 * D directions. Logical gates: lstm i, f, c (cell input), o; gru r (reset), z (update),
 * n (candidate) in gate_pos[0..2] / gate_act[0..2]. */
#define TFRNN_RNN_SPEC_FIELDS(F, A)                                                             \
  F(RnnMode, mode, int32_t, RnnMode::kLstm, 0, kRnnModeCount - 1, "mode")                       \
  F(Index, T, int64_t, 0, 0, TFRNN_SPEC_UNBOUNDED, "time steps")                                \
  F(Index, B, int64_t, 0, 0, TFRNN_SPEC_UNBOUNDED, "batch")                                     \
  F(Index, I, int64_t, 0, 0, TFRNN_SPEC_UNBOUNDED, "input size")                                \
  F(Index, H, int64_t, 0, 1, TFRNN_SPEC_UNBOUNDED, "num_units")                                 \
  F(Index, P, int64_t, 0, 0, TFRNN_SPEC_UNBOUNDED, "num_proj")                                  \
  F(Index, L, int64_t, 1, 1, TFRNN_SPEC_UNBOUNDED, "num_layers")                                \
  F(Index, D, int64_t, 1, 1, 2, "directions")                                                   \
  /* layer 0 feeds x to every gate as-is (I == H) */                                            \
  F(bool, skip_input, int32_t, false, 0, 1, "skip_input")                                       \
  /* false: no dropout (the reserve is scratch) */                                              \
  F(bool, training, int32_t, true, 0, 1, "training")                                            \
  /* between layers, training only */                                                           \
  F(float, dropout, double, 0.f, 0, 1, "dropout")                                               \
  F(unsigned long long, seed, uint64_t, 0, 0, TFRNN_SPEC_UNBOUNDED, "seed")                     \
  /* block index of each logical gate within a K·H row */                                       \
  A(int, gate_pos, int32_t, 4, TFRNN_SPEC_LIST(0, 1, 2, 3), 0, 3, "gate position")              \
  A(RnnAct, gate_act, int32_t, 4,                                                               \
    TFRNN_SPEC_LIST(RnnAct::kSigmoid, RnnAct::kSigmoid, RnnAct::kTanh, RnnAct::kSigmoid), 0,    \
    kRnnActCount - 1, "gate activation")                                                        \
  /* lstm: h = o ⊙ cell_act(c) */                                                               \
  F(RnnAct, cell_act, int32_t, RnnAct::kTanh, 0, kRnnActCount - 1, "cell activation")           \
  /* lstm: every gate's pre-activation += p ⊙ c_prev (MPSGraph) */                              \
  F(bool, peephole, int32_t, false, 0, 1, "peephole")                                           \
  /* h_prev ⊙ mask enters the recurrent product (not the gru blend) */                          \
  F(bool, has_mask, int32_t, false, 0, 1, "has_mask")                                           \
  /* has_mask: one mask per gate block k (Keras recurrent dropout): R_k multiplies             \
   * h_prev ⊙ mask_k; the mask has D·K·Hs columns, gate block k of direction d at              \
   * (d·K + k)·Hs (L == 1, P == 0) */                                                           \
  F(bool, mask_gates, int32_t, false, 0, 1, "mask_gates")                                       \
  /* layer 0 has no W: x holds W·x, [T, B, D·K·H], direction d reading columns                 \
   * [d·K·H, (d+1)·K·H) */                                                                      \
  F(bool, preprojected, int32_t, false, 0, 1, "preprojected")                                   \
  /* unidirectional only: run each sequence from its end */                                     \
  F(bool, reverse, int32_t, false, 0, 1, "reverse")                                             \
  /* gru: n = act(W·x + b_W + R_n·(r ⊙ h) + b_R) (MPSGraph's resetAfter = NO, Keras             \
   * reset_after=False) instead of act(W·x + b_W + r ⊙ (R_n·h + b_R)) */                        \
  F(bool, gru_reset_before, int32_t, false, 0, 1, "gru_reset_before")                           \
  /* gru: h = z ⊙ n + (1-z) ⊙ h_prev instead of (1-z) ⊙ n + z ⊙ h_prev */                       \
  F(bool, gru_z_new, int32_t, false, 0, 1, "gru_z_new")                                         \
  /* lstm: c = clip(f ⊙ c_prev + i ⊙ c', ±cell_clip); <= 0: none (the LSTM block ops) */        \
  F(float, cell_clip, double, 0.f, -TFRNN_SPEC_UNBOUNDED, TFRNN_SPEC_UNBOUNDED, "cell_clip")    \
  /* backward: no gradient through a clipped c (else straight-through, stock's *Grad ops) */   \
  F(bool, exact_clip_grad, int32_t, false, 0, 1, "exact_clip_grad")                             \
  /* peephole: o's term uses the new c (BlockLSTM), the other gates c_prev; else every gate    \
   * c_prev (MPSGraph) */                                                                       \
  F(bool, peephole_o_new, int32_t, false, 0, 1, "peephole_o_new")                               \
  /* W is [in, K·H] and R [Hs, K·H] (pre-activations x·W + h·R, the block ops' w and Keras's    \
   * kernels), not [K·H, in] and [K·H, Hs] */                                                   \
  F(bool, weights_xw, int32_t, false, 0, 1, "weights_xw")                                       \
  /* a bfloat16 op: products may round their operands to bf16 (bf16_gemm.h) */                  \
  F(bool, bf16, int32_t, false, 0, 1, "bf16")

#endif /* TF_RNN_OPS_CC_ENGINE_RNN_SPEC_FIELDS_H_ */
