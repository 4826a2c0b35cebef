"""Conformance checks of the engine's SIMD code paths, run by tests/test_engine_isa.py in a
child process per engine variant (TF_RNN_OPS_ISA=avx|avx2|avx512 picks the shared object at
load time, so each variant needs a fresh process).

The sizes are chosen for the register-blocked recurrent kernel (cc/engine/packed_gemm.h) and the
packet-chunked pointwise passes: batch sizes that leave every row-block tail (rows of 8 on
AVX-512, 6 otherwise), and hidden sizes whose unit blocks have full panels (three packets on
AVX-512, two otherwise), narrower last panels and masked partial packets for 4-, 8- and
16-wide packets. Each case compares with
the float64 NumPy reference (tests/reference.py): forward outputs and all gradients, float32
and float64; and the forward's activations over their whole range against float64.

    python tests/isa_checks.py            # prints one line per case, exit status 1 on a mismatch
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tensorflow as tf  # noqa: E402

import lstm_util as U  # noqa: E402
import reference as ref  # noqa: E402

# (T, B, I, H)
# The last panel of a unit block's columns is read and written with masked packets
# (packed_gemm.h LoadN/StoreN): (2, 3, 7, 60) and (2, 11, 5, 300) leave a partial second packet
# and a partial single packet for 4-, 8- and 16-wide packets (unit blocks of 32 + 28 and
# 160 + 140 on two threads); with AVX-512's three-packet panels 140 = 48 + 48 + a partial
# third packet, and blocks of 64 (H = 128) and 112 (H = 224) end in two panels of two packets
# (PanelWidth). B = 9, 10, 11: a register block of 8 rows (the one that prefetches the panel)
# and a row tail.
# (3, 5, 9, 256) has weights too large for the fused input path (types.h LstmFusesInput):
# input projection as one GEMM, then the packed recurrent product. (75, 4, 6, 37) and
# (140, 2, 5, 40) run the pipelined forward and backward (FwdChainPipelined, BwdChainPipelined)
# over several chunks of steps (128 / B steps each), with seq_len_max = T - 5, on pool threads
# too (lstm_cpu.cc SideHelpers); 4H = 148 splits into uneven column panels.
BLOCK_SIZES = [(3, 19, 5, 50), (2, 9, 4, 37), (3, 8, 3, 64), (2, 17, 6, 96), (2, 1, 3, 33),
               (3, 5, 9, 256), (75, 4, 6, 37), (140, 2, 5, 40), (2, 3, 7, 60),
               (2, 11, 5, 300), (2, 9, 5, 128), (2, 10, 6, 224)]
# Single steps (T = 1: lstm_cpu.cc's L == 1 path): SmallGemm (packed_gemm.h) runs its register
# blocks on w in place up to 32 rows and Eigen's product beyond, split over the pool when large;
# fewer rows than a block (2, 3, 5) on WideRows' wide panels, whose widths depend on the ISA
# (16 or 12 accumulator registers), then narrower panels and a masked packet (4H = 280, 116).
BLOCK_SIZES += [(1, 1, 7, 37), (1, 13, 9, 50), (1, 17, 20, 33), (1, 32, 256, 256),
                (1, 2, 64, 70), (1, 3, 33, 29), (1, 5, 8, 70), (1, 33, 12, 20)]
# GRUBlockCell(Grad) (gru_cpu.cc), the same SmallGemm paths, (B, I, H).
GRU_CELL_SIZES = [(1, 7, 37), (13, 9, 50), (17, 20, 33), (32, 256, 256), (3, 40, 45)]
RNN_SIZES = [(3, 13, 5, 40), (2, 7, 6, 67)]
# Enough work for pool threads: the pipelined layer forward and backward (rnn_cpu.cc
# PipelinedGrads) over several chunks of steps, both directions with every sequence of full
# length, the forward direction also with shorter ones; 2 layers.
RNN_FULL_SIZE = (40, 6, 12, 40)
# The MPSGraph ops reach the engine paths CudnnRNN does not: a recurrent mask ([B, H] and
# [T, B, H]), whose h ⊙ mask each unit block writes for the next step, and the reset-before
# gru, whose steps have two phases (cc/engine/rnn_cpu.cc); H gives several unit blocks.
MPS_SIZE = (4, 13, 5, 40)
# (T, B, I, H) of the Keras recurrent-dropout cases: several unit blocks and row-block tails.
KERAS_SIZE = (5, 13, 6, 40)
F32, F64 = tf.float32, tf.float64


def _block_lstm(ours, rng, op, size, peep, dtype):
    T, B, I, H = size
    grad_op = {"BlockLSTM": "BlockLSTMGrad", "BlockLSTMV2": "BlockLSTMGradV2"}[op]
    p = {k: U.round_to(v, dtype) for k, v in U.make_params(rng, T, B, I, H).items()}
    slm = T - 5 if T > 40 else T
    clip = 3.0 if op == "BlockLSTM" else 0.0
    outs = U.call_fwd(ours, op, U.tensors(p, dtype), slm, **U.fwd_attrs(op, 0.5, clip, peep))
    got = [U.to_numpy(o) for o in outs]
    want = U.ref_fwd(op, p, slm, forget_bias=0.5, cell_clip=clip, use_peephole=peep)
    U.assert_all_close(got, want, ref.OUTPUT_NAMES, U.TOL[dtype], prefix=f"{op} forward: ")
    cs_grad = U.round_to(rng.normal(size=(T, B, H)), dtype)
    h_grad = U.round_to(rng.normal(size=(T, B, H)), dtype)
    acts = [U.round_to(g, dtype) for g in got]
    inputs = U.grad_inputs(grad_op, p, acts, cs_grad, h_grad)
    g = U.call_grad(ours, grad_op, U.tensors(inputs, dtype), slm, use_peephole=peep)
    want_g = U.ref_grad(grad_op, inputs, slm, use_peephole=peep)
    U.assert_all_close([U.to_numpy(x) for x in g], want_g, U.grad_output_names(grad_op),
                       U.TOL[dtype], scale=True, prefix=f"{grad_op}: ")


def _cudnn_rnn(ours, rng, mode, size, bidi, dtype, full=False, short=False):
    """CudnnRNNV3 forward and CudnnRNNBackpropV3 (2 layers, per-sequence lengths, or all of
    length T when `full`, or all shorter than T with one empty when `short`) vs autodiff of the
    float64 reference (tests/test_cudnn_rnn_grads.py run_case)."""
    import test_cudnn_rnn as C
    import test_cudnn_rnn_grads as G
    T, B, I, H = size
    kw = C.model_kw(mode, 2, H, I, direction="bidirectional" if bidi else "unidirectional")
    lengths = rng.integers(1, T + 1, size=B).astype(np.int32)
    lengths[0] = T
    if full:
        lengths[:] = T
    if short:
        lengths = rng.integers(0, T - 3, size=B).astype(np.int32)
        lengths[1] = 0
    G.run_case(ours, rng, "V3", kw, T, B, dtype, seq_lengths=lengths)


def _keras_rdrop(kind, over):
    """tf_rnn_ops.keras layer (TfRnn>KerasRNN) vs the stock Keras 3 layer, float64, training
    with recurrent and input dropout (same seed) and a left-padded mask: outputs and gradients
    of the input and every weight."""
    import keras
    import tf_rnn_ops.keras as K
    T, B, I, H = KERAS_SIZE
    rng = np.random.default_rng(17)
    x = tf.constant(rng.normal(size=(B, T, I)), tf.float64)
    lengths = rng.integers(1, T + 1, size=B)
    mask = tf.constant(np.arange(T)[None, :] >= (T - lengths)[:, None])
    kw = dict(recurrent_dropout=0.3, dropout=0.2, seed=5, return_sequences=True,
              dtype="float64", **over)
    layers = [getattr(keras.layers, kind)(H, **kw), getattr(K, kind)(H, **kw)]
    for layer in layers:
        layer.build((B, T, I))
    layers[0].set_weights([rng.uniform(-0.5, 0.5, size=w.shape) for w in layers[0].get_weights()])
    layers[1].set_weights(layers[0].get_weights())
    dy = tf.constant(rng.normal(size=(B, T, H)), tf.float64)
    res = []
    for layer in layers:
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, mask=mask, training=True)
            loss = tf.reduce_sum(y * dy)
        res.append([y.numpy()] + [g.numpy() for g in
                                  tape.gradient(loss, [x] + layer.trainable_weights)])
    for k, (a, e) in enumerate(zip(res[1], res[0])):
        np.testing.assert_allclose(a, e, rtol=1e-9, atol=1e-9, err_msg=f"{kind} result {k}")


def _mps(rng, kind, dtype, **over):
    """MPSGraph-style LSTM / GRU forward and gradients vs the float64 reference
    (tests/test_mps_lstm.py, tests/test_mps_gru.py)."""
    from tf_rnn_ops import mps
    from mps_test_util import check_forward, check_gradients
    if kind == "lstm":
        import test_mps_lstm as M
        case = dict(forget_gate_last=False, input_gate_activation="sigmoid",
                    forget_gate_activation="sigmoid", cell_gate_activation="tanh",
                    output_gate_activation="sigmoid", activation="tanh", init_cell=True,
                    peephole=True)
    else:
        import test_mps_gru as M
        case = dict(reset_gate_first=True, flip_z=False, update_gate_activation="sigmoid",
                    reset_gate_activation="sigmoid", output_gate_activation="tanh")
    case.update(size=MPS_SIZE, bidirectional=False, reverse=False, input_weight=True,
                bias=True, init_state=True, mask=None, state_gradient=True)
    case.update(over)
    check_forward(M.OP, mps, rng, case, dtype)
    check_gradients(M.OP, mps, rng, case, dtype)


def _activations(ours, batch):
    """The pointwise activations of the forward pass alone (cc/engine/activations.h): gate
    pre-activations = the bias (x = 0, h_prev = 0) over [-120, 40] and the special values, in
    H = 4093 units (packets, then half, quarter and scalar tails: cpu_device.h Chunked), against
    float64 σ and tanh: at most 6 float epsilons relative, or the smallest normal float absolute
    (TensorFlow's threads flush denormals to zero), NaN in, NaN out."""
    vals = np.concatenate([np.linspace(-120.0, 40.0, 4093 - 12),
                           [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, -87.5, -88.8,
                            -103.9, -104.1, 17.0]]).astype(np.float32)
    H = vals.size
    b = np.tile(vals, 4)  # i, ci, f, o blocks (LSTMBlockCell's gate order)
    z = tf.zeros([batch, H], F32)
    out = ours.LSTMBlockCell(x=tf.zeros([batch, 1], F32), cs_prev=z, h_prev=z,
                             w=tf.zeros([1 + H, 4 * H], F32), wci=tf.zeros([H], F32),
                             wcf=tf.zeros([H], F32), wco=tf.zeros([H], F32), b=b,
                             forget_bias=0.0, cell_clip=-1.0, use_peephole=False)
    v64 = vals.astype(np.float64)
    with np.errstate(over="ignore"):
        sig = 1.0 / (1.0 + np.exp(-v64))
    for name, got, want in (("i", out[0], sig), ("f", out[2], sig), ("o", out[3], sig),
                            ("ci", out[4], np.tanh(v64))):
        got = got.numpy()
        for row in got:
            nan = np.isnan(want)
            assert np.array_equal(np.isnan(row), nan), f"{name}: NaN where the input is not"
            err = np.abs(row[~nan] - want[~nan])
            tol = 6 * np.finfo(np.float32).eps * np.abs(want[~nan]) + np.finfo(np.float32).tiny
            worst = int(np.argmax(err / tol))
            assert np.all(err <= tol), (f"{name}({vals[~nan][worst]}) = {row[~nan][worst]}, "
                                        f"float64 {want[~nan][worst]}")


def main():
    from tf_rnn_ops import raw_ops as ours
    rng = np.random.default_rng(7)
    failures = 0
    cases = []
    for batch in (1, 3):
        cases.append((f"activations against float64, batch {batch}",
                      lambda batch=batch: _activations(ours, batch)))
    for size in BLOCK_SIZES:
        for op in ("BlockLSTM", "BlockLSTMV2"):
            for dtype in (F32, F64):
                cases.append((f"{op} {size} {dtype.name}",
                              lambda op=op, size=size, dtype=dtype:
                              _block_lstm(ours, rng, op, size, size[3] % 2 == 0, dtype)))
    import test_gru_block as G
    for size in GRU_CELL_SIZES:
        cases.append((f"GRUBlockCell(Grad) {size} float32",
                      lambda size=size: (G.test_fwd_float32(ours, rng, size),
                                         G.test_grad_op_float32(ours, rng, size))))
    for size in RNN_SIZES:
        for mode in ("lstm", "gru", "rnn_tanh"):
            for dtype in (F32, F64):
                cases.append((f"CudnnRNNV3 {mode} {size} {dtype.name}",
                              lambda mode=mode, size=size, dtype=dtype:
                              _cudnn_rnn(ours, rng, mode, size, size[0] == 2, dtype)))
    for mode in ("lstm", "gru", "rnn_relu"):
        for bidi in (False, True):
            cases.append((f"CudnnRNNV3 {mode} {RNN_FULL_SIZE} full lengths bidi={bidi}",
                          lambda mode=mode, bidi=bidi:
                          _cudnn_rnn(ours, rng, mode, RNN_FULL_SIZE, bidi, F64, full=True)))
    # Forward direction with sequences of different lengths, all shorter than T: the pipelined
    # paths too (step s reads time row s of every sequence; rows no sequence reaches are zero).
    for mode in ("lstm", "gru"):
        for dtype in (F32, F64):
            cases.append((f"CudnnRNNV3 {mode} {RNN_FULL_SIZE} short lengths {dtype.name}",
                          lambda mode=mode, dtype=dtype:
                          _cudnn_rnn(ours, rng, mode, RNN_FULL_SIZE, False, dtype, short=True)))
    mps_cases = [("lstm", dict(mask="nh")), ("lstm", dict(mask="tnh", bidirectional=True)),
                 ("gru", dict(reset="before")), ("gru", dict(reset="before", mask="tnh")),
                 ("gru", dict(reset="after", mask="nh", bidirectional=True)),
                 ("gru", dict(reset="before", mask="nh", reverse=True))]
    for kind, over in mps_cases:
        for dtype in (F32, F64):
            cases.append((f"MPS {kind} {over} {dtype.name}",
                          lambda kind=kind, over=over, dtype=dtype:
                          _mps(rng, kind, dtype, **over)))
    # Keras recurrent dropout: one mask per gate block (rnn_cpu.cc mask_gates: K masked copies
    # of h per step, gate-packed R in the backward), with a left-padded mask (lengths), Keras's
    # hard_sigmoid, GRU reset_after=False; float64 against the stock Keras layer.
    keras_cases = [("LSTM", dict(recurrent_activation="hard_sigmoid")),
                   ("GRU", dict(reset_after=False)), ("GRU", dict(activation="relu")),
                   ("SimpleRNN", dict())]
    for kind, over in keras_cases:
        cases.append((f"KerasRNN {kind} recurrent_dropout {over} {KERAS_SIZE} float64",
                      lambda kind=kind, over=over: _keras_rdrop(kind, over)))
    for name, fn in cases:
        try:
            fn()
            print("ok  ", name)
        except AssertionError as e:
            failures += 1
            print("FAIL", name, str(e)[:2000])
    maps = open("/proc/self/maps").read()
    engines = sorted({ln.split("/")[-1] for ln in maps.splitlines() if "_tfrnn_engine_" in ln})
    print("ENGINES", ",".join(engines), "FAILURES", failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
