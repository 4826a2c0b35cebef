/* C entry points of the CUDA RNN engine (tf_rnn_ops/_tfrnn_engine_cuda.so). No TensorFlow:
 * callers pass device pointers, sizes and a cudaStream_t; every function returns a status
 * (TFRNN_CUDA_OK = 0) and tfrnn_cuda_last_error() gives the message of the calling thread's
 * last failure. Nothing aborts. Work is queued on `stream`; the functions return without
 * waiting for it (only a host->device copy of per-sequence lengths is staged synchronously).
 *
 * Notation as in cc/engine/rnn.h: T steps, B batch, I input size, H units, P projection
 * (lstm; 0 = none), Hs = P or H, K gates (lstm 4, gru 3, rnn 1), L layers, D directions.
 * Tensors are dense, row-major, time-major:
 *   x [T, B, I]; y [T, B, D*Hs]; h0, hn [L*D, B, Hs]; c0, cn [L*D, B, H] (lstm);
 *   params: the opaque layout of cc/engine/types.h (RnnParamLayout; docs/GPU.md);
 *   reserve: reserve_elems elements written by forward, read by backward.
 * Element type per spec.dtype: 0 half, 1 bfloat16, 2 float, 3 double (half and bfloat16
 * compute and accumulate in float). */
#ifndef TF_RNN_OPS_CC_GPU_C_API_H_
#define TF_RNN_OPS_CC_GPU_C_API_H_

#include <stdint.h>

#include "cc/engine/block_arg_fields.h"
#include "cc/engine/rnn_spec_fields.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TFRNN_CUDA_API_VERSION 5

#define TFRNN_CUDA_OK 0
#define TFRNN_CUDA_INVALID_ARGUMENT 1
#define TFRNN_CUDA_CUDA_ERROR 2
#define TFRNN_CUDA_CUBLAS_UNAVAILABLE 3
#define TFRNN_CUDA_CUBLAS_ERROR 4
#define TFRNN_CUDA_INTERNAL 5

#define TFRNN_CUDA_HALF 0
#define TFRNN_CUDA_BFLOAT16 1
#define TFRNN_CUDA_FLOAT 2
#define TFRNN_CUDA_DOUBLE 3

/* The stacked-RNN problem: dtype, then one member per line of TFRNN_RNN_SPEC_FIELDS
 * (cc/engine/rnn_spec_fields.h documents each; enums as int32_t in the order of
 * TFRNN_RNN_MODES and TFRNN_RNN_ACTS, flags as int32_t 0/1). Every field reaches the engine;
 * the engine rejects the options it has no CUDA path for. */
#define TFRNN_CUDA_SPEC_MEMBER(type, name, c_type, init, lo, hi, what) c_type name;
#define TFRNN_CUDA_SPEC_ARRAY_MEMBER(type, name, c_type, n, init, lo, hi, what) c_type name[n];
typedef struct {
  int32_t dtype; /* TFRNN_CUDA_HALF .. TFRNN_CUDA_DOUBLE */
  TFRNN_RNN_SPEC_FIELDS(TFRNN_CUDA_SPEC_MEMBER, TFRNN_CUDA_SPEC_ARRAY_MEMBER)
} TfRnnCudaSpec;
#undef TFRNN_CUDA_SPEC_MEMBER
#undef TFRNN_CUDA_SPEC_ARRAY_MEMBER

typedef struct {
  const int32_t* lengths;      /* host [B] in [0, T], or NULL (all T) */
  const int32_t* lengths_dev;  /* optional device copy of lengths */
  const void* x;
  const void* h0;
  const void* c0;              /* lstm */
  const void* params;
  void* y;
  void* hn;
  void* cn;                    /* lstm */
  void* reserve;
  const void* peephole;        /* [L*D, K*H] (spec.peephole) */
  const void* mask;            /* [T or 1, B, W] (spec.has_mask; W = D*Hs, or D*K*Hs with
                                  spec.mask_gates: gate block k's mask at columns k*Hs) */
  int32_t mask_per_step;
  /* One layer and direction (L = D = 1): the weights as separate tensors instead of params
   * (used when r is not NULL; params is then not read): w [K*H, I] and r [K*H, H], or with
   * spec.weights_xw w [I, K*H] and r [H, K*H]; the input and recurrent biases bw, br [K*H];
   * gate blocks in the order of spec.gate_pos. */
  const void* w;
  const void* r;
  const void* bw;
  const void* br;
} TfRnnCudaFwdArgs;

typedef struct {
  const int32_t* lengths;
  const int32_t* lengths_dev;
  const void* x;
  const void* h0;
  const void* c0;
  const void* params;
  const void* reserve;         /* from tfrnn_cuda_rnn_forward with the same spec and lengths */
  const void* dy;              /* [T, B, D*Hs] */
  const void* dhn;             /* [L*D, B, Hs] */
  const void* dcn;             /* [L*D, B, H] (lstm) */
  void* dx;
  void* dh0;
  void* dc0;
  void* dparams;
  const void* peephole;
  const void* mask;
  int32_t mask_per_step;
  const void* dc_seq;          /* optional dL/dc of every step [T, B, D*H] (lstm) */
  void* dpeephole;             /* [L*D, K*H] (spec.peephole) */
  const void* w;               /* separate weights, as in TfRnnCudaFwdArgs */
  const void* r;
  const void* bw;
  const void* br;
  void* dw;                    /* with r: their gradients, laid out as the weights (dparams is */
  void* dr;                    /* then not written; dbr NULL: no recurrent bias gradient) */
  void* dbw;
  void* dbr;
} TfRnnCudaBwdArgs;

/* The LSTM block ops (BlockLSTM / BlockLSTMV2 and their gradients; equations in
 * cc/engine/lstm.h) on the stacked CUDA engine (lstm_gpu.cu). Time-major, dense, row-major:
 * shapes at the lists of cc/engine/block_arg_fields.h (steps >= seq_len_max are written as
 * zeros). */
typedef struct {
  int32_t dtype;          /* TFRNN_CUDA_HALF .. TFRNN_CUDA_DOUBLE */
  int64_t T, B, I, H;     /* steps, batch, input width, units */
  int64_t seq_len_max;    /* steps computed, 0 <= seq_len_max <= T */
  int32_t gate_order;     /* 0: i, ci, f, o (BlockLSTM); 1: i, f, ci, o (BlockLSTMV2) */
  float forget_bias;
  float cell_clip;        /* <= 0: no clipping */
  int32_t use_peephole;
  int32_t exact_clip_grad; /* backward: zero gradient through a clipped cell value */
} TfRnnCudaLstmSpec;

/* The pointer members of the args structs: cc/engine/block_arg_fields.h, in its order. */
#define TFRNN_C_ARG_IN(name, shape) const void* name;
#define TFRNN_C_ARG_OUT(name, shape) void* name;

typedef struct {
  TFRNN_LSTM_FWD_ARGS(TFRNN_C_ARG_IN, TFRNN_C_ARG_OUT)
} TfRnnCudaLstmFwdArgs;

typedef struct {
  TFRNN_LSTM_BWD_ARGS(TFRNN_C_ARG_IN, TFRNN_C_ARG_OUT)
  void* dgates;  /* optional: the gate gradients [T, B, 4H] (zeros past seq_len_max) */
} TfRnnCudaLstmBwdArgs;

/* The GRU block cell (GRUBlockCell / GRUBlockCellGrad; equations at GruCellFwdArgs in
 * cc/engine/types.h), shapes at the lists of cc/engine/block_arg_fields.h. */
typedef struct {
  int32_t dtype;
  int64_t B, I, H;        /* batch, input width, units */
} TfRnnCudaGruCellSpec;

typedef struct {
  TFRNN_GRU_CELL_FWD_ARGS(TFRNN_C_ARG_IN, TFRNN_C_ARG_OUT)
} TfRnnCudaGruCellFwdArgs;

typedef struct {
  TFRNN_GRU_CELL_BWD_ARGS(TFRNN_C_ARG_IN, TFRNN_C_ARG_OUT)
} TfRnnCudaGruCellBwdArgs;

int tfrnn_cuda_api_version(void);
/* Message of the calling thread's last failed call ("" if none). */
const char* tfrnn_cuda_last_error(void);
/* Number of CUDA devices (0 with an error status when there is no driver or device). */
int tfrnn_cuda_device_count(int32_t* count);
/* Loads cuBLAS; *soname receives the library opened. */
int tfrnn_cuda_cublas_library(const char** soname);
/* Sizes: params and reserve in elements, workspaces in bytes. No device needed. */
int tfrnn_cuda_rnn_sizes(const TfRnnCudaSpec* spec, int64_t* params_elems,
                         int64_t* reserve_elems, int64_t* fwd_workspace_bytes,
                         int64_t* bwd_workspace_bytes);
/* Offsets (elements) of pseudo-layer p = l*D + d in params: out = {w, r, p, bw, br, end}. */
int tfrnn_cuda_rnn_param_offsets(const TfRnnCudaSpec* spec, int64_t pseudo, int64_t out[6]);
/* stream is a cudaStream_t (NULL: the legacy default stream). */
int tfrnn_cuda_rnn_forward(const TfRnnCudaSpec* spec, const TfRnnCudaFwdArgs* args,
                           void* workspace, int64_t workspace_bytes, void* stream);
/* Writes every output (dparams fully, not accumulated). */
int tfrnn_cuda_rnn_backward(const TfRnnCudaSpec* spec, const TfRnnCudaBwdArgs* args,
                            void* workspace, int64_t workspace_bytes, void* stream);

/* LSTM block engine: workspace bytes (no device needed), forward, backward (writes every
 * output; wci/wcf/wco grads are zeros without peephole). */
int tfrnn_cuda_lstm_sizes(const TfRnnCudaLstmSpec* spec, int64_t* fwd_workspace_bytes,
                          int64_t* bwd_workspace_bytes);
int tfrnn_cuda_lstm_forward(const TfRnnCudaLstmSpec* spec, const TfRnnCudaLstmFwdArgs* args,
                            void* workspace, int64_t workspace_bytes, void* stream);
int tfrnn_cuda_lstm_backward(const TfRnnCudaLstmSpec* spec, const TfRnnCudaLstmBwdArgs* args,
                             void* workspace, int64_t workspace_bytes, void* stream);

int tfrnn_cuda_gru_cell_sizes(const TfRnnCudaGruCellSpec* spec, int64_t* fwd_workspace_bytes,
                              int64_t* bwd_workspace_bytes);
int tfrnn_cuda_gru_cell_forward(const TfRnnCudaGruCellSpec* spec,
                                const TfRnnCudaGruCellFwdArgs* args, void* workspace,
                                int64_t workspace_bytes, void* stream);
int tfrnn_cuda_gru_cell_backward(const TfRnnCudaGruCellSpec* spec,
                                 const TfRnnCudaGruCellBwdArgs* args, void* workspace,
                                 int64_t workspace_bytes, void* stream);

/* Device helpers for framework adapters (all on `stream`, asynchronous):
 * dst [d1, d0, c] = src [d0, d1, c] for elements of elem_bytes (2, 4 or 8) bytes; */
int tfrnn_cuda_swap_major(int32_t elem_bytes, const void* src, void* dst, int64_t d0, int64_t d1,
                          int64_t c, void* stream);
/* device-to-device copy of `bytes` bytes; */
int tfrnn_cuda_copy(void* dst, const void* src, int64_t bytes, void* stream);
/* `bytes` zero bytes at dst; */
int tfrnn_cuda_zero(void* dst, int64_t bytes, void* stream);
/* device-to-host copy of `bytes` bytes, waiting for `stream` (synchronous: for the few values
 * the host needs, such as an XLA custom call's sequence lengths). */
int tfrnn_cuda_copy_to_host(void* host, const void* src, int64_t bytes, void* stream);

/* A check of the tensor-core product the half and bfloat16 kernels build on (cc/gpu/mma.cuh):
 * c [M, N] (float) = a [M, K] · btᵀ with bt [N, K], a and bt of dtype TFRNN_CUDA_HALF or
 * TFRNN_CUDA_BFLOAT16, M, N, K positive multiples of 16, 8, 16 up to 4096; on `stream`. */
int tfrnn_cuda_mma_probe(int32_t dtype, const void* a, const void* bt, float* c, int64_t M,
                         int64_t N, int64_t K, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* TF_RNN_OPS_CC_GPU_C_API_H_ */
