/* The pointer arguments of the block ops' engine calls (LSTM block forward and backward, GRU
 * block cell forward and backward), one list each, in their C ABI order. Expanded from them:
 * the engine's typed structs (types.h: LstmFwdArgs, LstmBwdArgs, LstmCellBwdArgs,
 * GruCellFwdArgs, GruCellBwdArgs), the CUDA C API's void* structs (cc/gpu/c_api.h; not the
 * CPU-only cell backward), c_api.cc's conversion
 * between the two, and the Python ctypes mirror (tests/gpu/cuda_engine.py, which parses this
 * file). IN(name, shape): read by the call; OUT(name, shape): written. Shapes: T steps, B batch,
 * I input width, H units; every array dense and row-major. C-compatible (no C++). */
#ifndef TF_RNN_OPS_CC_ENGINE_BLOCK_ARG_FIELDS_H_
#define TF_RNN_OPS_CC_ENGINE_BLOCK_ARG_FIELDS_H_

/* BlockLSTM(V2) forward: the seven outputs are zero past seq_len_max. wci, wcf, wco are read
 * only with use_peephole. */
#define TFRNN_LSTM_FWD_ARGS(IN, OUT)                                                          \
  IN(x, "[T, B, I]") IN(cs_prev, "[B, H]") IN(h_prev, "[B, H]") IN(w, "[I+H, 4H]")            \
  IN(wci, "[H]") IN(wcf, "[H]") IN(wco, "[H]") IN(b, "[4H]")                                  \
  OUT(i, "[T, B, H]") OUT(cs, "[T, B, H]") OUT(f, "[T, B, H]") OUT(o, "[T, B, H]")            \
  OUT(ci, "[T, B, H]") OUT(co, "[T, B, H]") OUT(h, "[T, B, H]")

/* BlockLSTMGrad(V2): the forward's inputs and outputs, the incoming gradients of cs and h, the
 * optional incoming gradients of the other five outputs (null = zero; the raw *Grad ops ignore
 * them like stock, the registered gradient passes them), then the gradients written (the CPU
 * engine: x_grad null, no input gradient; w_grad, wci_grad, wcf_grad, wco_grad and b_grad all
 * null, no weight gradients). */
#define TFRNN_LSTM_BWD_ARGS(IN, OUT)                                                          \
  IN(x, "[T, B, I]") IN(cs_prev, "[B, H]") IN(h_prev, "[B, H]") IN(w, "[I+H, 4H]")            \
  IN(wci, "[H]") IN(wcf, "[H]") IN(wco, "[H]")                                                \
  IN(i, "[T, B, H]") IN(cs, "[T, B, H]") IN(f, "[T, B, H]") IN(o, "[T, B, H]")                \
  IN(ci, "[T, B, H]") IN(co, "[T, B, H]") IN(h, "[T, B, H]")                                  \
  IN(cs_grad, "[T, B, H]") IN(h_grad, "[T, B, H]")                                            \
  IN(i_grad, "[T, B, H]") IN(f_grad, "[T, B, H]") IN(o_grad, "[T, B, H]")                     \
  IN(ci_grad, "[T, B, H]") IN(co_grad, "[T, B, H]")                                           \
  OUT(x_grad, "[T, B, I]") OUT(cs_prev_grad, "[B, H]") OUT(h_prev_grad, "[B, H]")             \
  OUT(w_grad, "[I+H, 4H]") OUT(wci_grad, "[H]") OUT(wcf_grad, "[H]") OUT(wco_grad, "[H]")     \
  OUT(b_grad, "[4H]")

/* LSTMBlockCellGrad: one step's pointwise backward, no GEMMs (dgates: dicfo, i c f o blocks;
 * the peephole gradients are zeros without use_peephole). */
#define TFRNN_LSTM_CELL_BWD_ARGS(IN, OUT)                                                     \
  IN(cs_prev, "[B, H]") IN(wci, "[H]") IN(wcf, "[H]") IN(wco, "[H]")                          \
  IN(i, "[B, H]") IN(cs, "[B, H]") IN(f, "[B, H]") IN(o, "[B, H]") IN(ci, "[B, H]")           \
  IN(co, "[B, H]") IN(cs_grad, "[B, H]") IN(h_grad, "[B, H]")                                 \
  OUT(cs_prev_grad, "[B, H]") OUT(dgates, "[B, 4H]") OUT(wci_grad, "[H]") OUT(wcf_grad, "[H]") \
  OUT(wco_grad, "[H]")

/* GRUBlockCell: w_ru's r block first. */
#define TFRNN_GRU_CELL_FWD_ARGS(IN, OUT)                                                      \
  IN(x, "[B, I]") IN(h_prev, "[B, H]") IN(w_ru, "[I+H, 2H]") IN(w_c, "[I+H, H]")              \
  IN(b_ru, "[2H]") IN(b_c, "[H]")                                                             \
  OUT(r, "[B, H]") OUT(u, "[B, H]") OUT(c, "[B, H]") OUT(h, "[B, H]")

/* GRUBlockCellGrad: g_r, g_u, g_c are the optional gradients of the r, u, c outputs (null =
 * zero; the raw op ignores them like stock, the registered gradient passes them). */
#define TFRNN_GRU_CELL_BWD_ARGS(IN, OUT)                                                      \
  IN(x, "[B, I]") IN(h_prev, "[B, H]") IN(w_ru, "[I+H, 2H]") IN(w_c, "[I+H, H]")              \
  IN(r, "[B, H]") IN(u, "[B, H]") IN(c, "[B, H]") IN(d_h, "[B, H]")                           \
  IN(g_r, "[B, H]") IN(g_u, "[B, H]") IN(g_c, "[B, H]")                                       \
  OUT(d_x, "[B, I]") OUT(d_h_prev, "[B, H]") OUT(d_c_bar, "[B, H]")                           \
  OUT(d_r_bar_u_bar, "[B, 2H]")

#endif /* TF_RNN_OPS_CC_ENGINE_BLOCK_ARG_FIELDS_H_ */
