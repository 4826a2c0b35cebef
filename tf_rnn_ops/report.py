"""Conformance and speed report: runs each op of the plugin against stock tf.raw_ops.

    .venv/bin/python -m tf_rnn_ops.report [--quick]

Prints, per op and dtype, the max abs error against stock TensorFlow (only where stock is
right: outputs at t < seq_len_max) and the time ratio stock/ours (> 1 means ours is faster).
The CudnnRNN ops, which stock TensorFlow cannot run on CPU, are compared with the Keras 3
LSTM / GRU layers they implement (a whole training step, same weights).
"""
import argparse
import contextlib
import os
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf

import tf_rnn_ops
from tf_rnn_ops import raw_ops as ours


def _median_time(fn, reps):
    fn()  # warm-up
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def _max_err(a, b, slm=None):
    """Max abs error over all outputs, each relative to the largest stock magnitude. With
    `slm`, only steps t < slm: stock's i, f, o, ci, co past seq_len_max are uninitialised
    memory (docs/SEMANTICS.md §5 #5), cut off before any conversion (NumPy warns "invalid value
    encountered in cast" for a signalling NaN)."""
    err = 0.0
    for x, y in zip(a, b):
        x, y = np.asarray(x), np.asarray(y)
        if slm is not None:
            x, y = x[:slm], y[:slm]
        x, y = x.astype(np.float64), y.astype(np.float64)
        scale = max(1.0, float(np.abs(x).max(initial=0.0)))
        err = max(err, float(np.abs(x - y).max(initial=0.0)) / scale)
    return err


def _inputs(rng, T, B, I, H, dtype):
    # Weights scaled like a Glorot initialiser: large random weights make the recurrence
    # chaotic, where any rounding difference grows exponentially over time.
    def r(*shape, scale=0.5):
        return tf.constant((rng.standard_normal(shape) * scale).astype(np.float32), dtype=dtype)
    ws = 1.0 / np.sqrt(I + H)
    return dict(x=r(T, B, I), cs_prev=r(B, H), h_prev=r(B, H), w=r(I + H, 4 * H, scale=ws),
                wci=r(H, scale=0.1), wcf=r(H, scale=0.1), wco=r(H, scale=0.1), b=r(4 * H))


def run(T, B, I, H, reps, dtypes):
    rng = np.random.default_rng(0)
    rows = []
    for dtype in dtypes:
        a = _inputs(rng, T, B, I, H, dtype)
        slm = T - 1  # exercise the tail
        slm_t = tf.constant(slm, tf.int64)
        cell = {k: (v[0] if k == "x" else v) for k, v in a.items()}
        attrs = dict(use_peephole=True, cell_clip=1.5)

        def fwd_pair(name, **kw):
            s = getattr(tf.raw_ops, name)(seq_len_max=slm_t, **a, **kw)
            o = getattr(ours, name)(seq_len_max=slm, **a, **kw)
            return s, o

        cases = []
        s, o = fwd_pair("BlockLSTM", forget_bias=0.7, **attrs)
        cases.append(("BlockLSTM", s, o, slm,
                      lambda: tf.raw_ops.BlockLSTM(seq_len_max=slm_t, **a, **attrs),
                      lambda: ours.BlockLSTM(seq_len_max=slm, **a, **attrs)))
        s2, o2 = fwd_pair("BlockLSTMV2", **attrs)
        cases.append(("BlockLSTMV2", s2, o2, slm,
                      lambda: tf.raw_ops.BlockLSTMV2(seq_len_max=slm_t, **a, **attrs),
                      lambda: ours.BlockLSTMV2(seq_len_max=slm, **a, **attrs)))
        grads = dict(cs_grad=tf.cast(tf.random.stateless_normal(s[1].shape, [1, 2]), dtype),
                     h_grad=tf.cast(tf.random.stateless_normal(s[1].shape, [3, 4]), dtype))
        for gname, fw in (("BlockLSTMGrad", s), ("BlockLSTMGradV2", s2)):
            acts = dict(zip(["i", "cs", "f", "o", "ci", "co", "h"], fw))
            kw = dict(seq_len_max=slm_t, **a, **acts, **grads, use_peephole=True)
            kw_ours = dict(kw, seq_len_max=slm)
            stock_fn = (lambda g=gname, k=kw: getattr(tf.raw_ops, g)(**k))
            ours_fn = (lambda g=gname, k=kw_ours: getattr(ours, g)(**k))
            cases.append((gname, stock_fn(), ours_fn(), None, stock_fn, ours_fn))
        sc = tf.raw_ops.LSTMBlockCell(**cell, **attrs)
        cases.append(("LSTMBlockCell", sc, ours.LSTMBlockCell(**cell, **attrs), None,
                      lambda: tf.raw_ops.LSTMBlockCell(**cell, **attrs),
                      lambda: ours.LSTMBlockCell(**cell, **attrs)))
        cacts = dict(zip(["i", "cs", "f", "o", "ci", "co"], sc[:6]))
        ckw = dict(**cell, **cacts, cs_grad=grads["cs_grad"][0], h_grad=grads["h_grad"][0],
                   use_peephole=True)
        cases.append(("LSTMBlockCellGrad", tf.raw_ops.LSTMBlockCellGrad(**ckw),
                      ours.LSTMBlockCellGrad(**ckw), None,
                      lambda: tf.raw_ops.LSTMBlockCellGrad(**ckw),
                      lambda: ours.LSTMBlockCellGrad(**ckw)))
        if dtype == tf.float32:  # stock GRU block ops exist for float32 only
            ws = 1.0 / np.sqrt(I + H)
            def r(*shape, scale=0.5):
                return tf.constant((rng.standard_normal(shape) * scale).astype(np.float32))
            gru = dict(x=r(B, I), h_prev=r(B, H), w_ru=r(I + H, 2 * H, scale=ws),
                       w_c=r(I + H, H, scale=ws), b_ru=r(2 * H), b_c=r(H))
            sg = tf.raw_ops.GRUBlockCell(**gru)
            cases.append(("GRUBlockCell", sg, ours.GRUBlockCell(**gru), None,
                          lambda: tf.raw_ops.GRUBlockCell(**gru),
                          lambda: ours.GRUBlockCell(**gru)))
            gkw = dict(**gru, r=sg[0], u=sg[1], c=sg[2], d_h=r(B, H))
            cases.append(("GRUBlockCellGrad", tf.raw_ops.GRUBlockCellGrad(**gkw),
                          ours.GRUBlockCellGrad(**gkw), None,
                          lambda: tf.raw_ops.GRUBlockCellGrad(**gkw),
                          lambda: ours.GRUBlockCellGrad(**gkw)))
        for name, s_out, o_out, lim, s_fn, o_fn in cases:
            err = _max_err(s_out, o_out, lim)
            t_stock = _median_time(s_fn, reps)
            t_ours = _median_time(o_fn, reps)
            rows.append((name, dtype.name, err, t_stock * 1e3, t_ours * 1e3, t_stock / t_ours))
    return rows


def _cudnn_params(mode, kernel, recurrent, bias, H):
    """Flat cuDNN params (1 layer, unidirectional) from Keras weights, differentiably."""
    perm = [0, 1, 2, 3] if mode == "lstm" else [1, 0, 2]  # Keras GRU is z, r, h; cuDNN r, z, h
    mats = [tf.reshape(tf.transpose(m[:, g * H:(g + 1) * H]), [-1])
            for m in (kernel, recurrent) for g in perm]
    if mode == "lstm":
        b_w, b_r = bias, tf.zeros_like(bias)
    else:
        b_w, b_r = bias[0], bias[1]
    biases = [b[g * H:(g + 1) * H] for b in (b_w, b_r) for g in perm]
    return tf.concat(mats + biases, 0)


def run_cudnn_vs_keras(T, B, I, H, reps):
    """TfRnn>CudnnRNNV3 (lstm; gru with reset after) against the Keras 3 layer it implements:
    a training step (forward, loss, gradients for the input and every weight), with the
    Keras weights mapped to the cuDNN layout. Returns rows like run()."""
    import keras
    rows = []
    rng = np.random.default_rng(1)
    x = tf.constant(rng.standard_normal((B, T, I)).astype(np.float32))
    for mode in ("lstm", "gru"):
        if mode == "lstm":
            layer = keras.layers.LSTM(H, return_sequences=True)
        else:
            layer = keras.layers.GRU(H, return_sequences=True, reset_after=True)
        layer(x)
        kernel, recurrent, bias = layer.trainable_variables
        h0 = tf.zeros([B, 1, H])
        lengths = tf.fill([B], T)

        @tf.function
        def keras_step():
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = layer(x)
                loss = tf.reduce_sum(y * y)
            return [y] + tape.gradient(loss, [x, kernel, recurrent, bias])

        def make_ours_step(mode, kernel, recurrent, bias):
            @tf.function
            def step():
                with tf.GradientTape() as tape:
                    tape.watch(x)
                    params = _cudnn_params(mode, kernel, recurrent, bias, H)
                    y = ours.CudnnRNNV3(input=x, input_h=h0, input_c=h0, params=params,
                                        sequence_lengths=lengths, rnn_mode=mode,
                                        time_major=False)[0]
                    loss = tf.reduce_sum(y * y)
                return [y] + tape.gradient(loss, [x, kernel, recurrent, bias])
            return step

        ours_step = make_ours_step(mode, kernel, recurrent, bias)

        err = _max_err([t.numpy() for t in keras_step()], [t.numpy() for t in ours_step()])
        t_k = _median_time(keras_step, reps)
        t_o = _median_time(ours_step, reps)
        rows.append((f"CudnnRNNV3 {mode} step", "float32", err, t_k * 1e3, t_o * 1e3,
                     t_k / t_o))
    return rows


# Stock TensorFlow's notice, logged at error level once per process when a half tensor meets
# its oneDNN rewrite on a CPU without AVX-512 FP16; stock then uses its Eigen kernels.
_STOCK_NOTICES = ("oneDNN supports DT_HALF only on platforms with AVX-512",)


@contextlib.contextmanager
def _without_stock_notices():
    """Runs the body with the process's stderr (file descriptor 2, where TensorFlow's C++ logs
    go) captured, then passes on every line but _STOCK_NOTICES: before the report's table, an
    error-level line reads like a failure of ours."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            for line in captured.read().decode(errors="replace").splitlines(keepends=True):
                if not any(n in line for n in _STOCK_NOTICES):
                    sys.stderr.write(line)
            sys.stderr.flush()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes, few repetitions")
    args = p.parse_args(argv)
    T, B, I, H = (10, 8, 16, 16) if args.quick else (50, 32, 128, 128)
    reps = 3 if args.quick else 10
    lib = tf_rnn_ops.load_library()
    print(f"tf_rnn_ops {tf_rnn_ops.__version__}: {tf_rnn_ops.library_path()}")
    print(f"built for TensorFlow {tf_rnn_ops.built_tf_version()}, running TensorFlow "
          f"{tf.__version__}; ops loaded: {len([n for n in dir(lib) if n.startswith('TfRnn_')])}")
    print(f"sizes T={T} B={B} I={I} H={H}, seq_len_max=T-1, use_peephole, cell_clip=1.5\n")
    with _without_stock_notices():
        rows = run(T, B, I, H, reps, [tf.float32, tf.float16])
    tol = {"float32": 1e-4, "float16": 3e-2}
    print(f"{'op':<20}{'dtype':<9}{'rel err':>11}{'stock ms':>10}{'ours ms':>10}"
          f"{'stock/ours':>12}")
    bad = _print_rows(rows, tol)
    print("\nCudnnRNN (no stock CPU kernel): a training step against the Keras 3 layer with "
          "the same weights")
    print(f"{'op':<24}{'dtype':<9}{'rel err':>11}{'keras ms':>10}{'ours ms':>10}"
          f"{'keras/ours':>12}")
    bad += _print_rows(run_cudnn_vs_keras(T, B, I, H, reps), tol, width=24)
    if bad:
        print(f"\nFAILED: {', '.join(bad)}")
        return 1
    print("\nall ops agree with stock TensorFlow / Keras within tolerance")
    return 0


def _print_rows(rows, tol, width=20):
    bad = []
    for name, dt, err, ts, to, ratio in rows:
        flag = "" if err <= tol[dt] else "  <-- exceeds tolerance"
        if flag:
            bad.append(name)
        print(f"{name:<{width}}{dt:<9}{err:>11.2e}{ts:>10.2f}{to:>10.2f}{ratio:>11.2f}x{flag}")
    return bad


if __name__ == "__main__":
    sys.exit(main())
