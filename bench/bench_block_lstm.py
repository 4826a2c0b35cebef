"""Benchmark: our BlockLSTM / BlockLSTMGrad against stock tf.raw_ops, same run, float32.

    .venv/bin/python bench/bench_block_lstm.py [--T 100 --B 64 --I 256 --H 256 --reps 10]

Prints milliseconds, GF/s (LSTM forward 8·T·B·H·(I+H) FLOPs, backward twice that), the share
of a GEMM rate measured in the same run (tf.matmul, float32), and the ratio stock/ours.
"""
import argparse
import os
import sys
import time

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tf_rnn_ops import raw_ops as ours  # noqa: E402


def median_ms(fn, reps):
    fn()
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(ts))


def gemm_rate(reps):
    """GF/s of tf.matmul on a large square float32 GEMM (the machine's practical peak)."""
    a = tf.random.normal([2048, 2048])
    b = tf.random.normal([2048, 2048])
    ms = median_ms(lambda: tf.matmul(a, b).numpy(), reps)
    return 2 * 2048 ** 3 / (ms * 1e-3) / 1e9


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--T", type=int, default=100)
    p.add_argument("--B", "--N", dest="B", type=int, default=64,
                   help="batch (--N: old spelling, still accepted)")
    p.add_argument("--I", type=int, default=256)
    p.add_argument("--H", type=int, default=256)
    p.add_argument("--reps", type=int, default=10)
    args = p.parse_args()
    T, B, I, H = args.T, args.B, args.I, args.H
    rng = np.random.default_rng(0)

    def r(*s, scale=0.5):
        return tf.constant((rng.standard_normal(s) * scale).astype(np.float32))

    a = dict(x=r(T, B, I), cs_prev=r(B, H), h_prev=r(B, H),
             w=r(I + H, 4 * H, scale=1 / np.sqrt(I + H)), wci=r(H), wcf=r(H), wco=r(H),
             b=r(4 * H))
    slm = tf.constant(T, tf.int64)
    fwd = tf.raw_ops.BlockLSTM(seq_len_max=slm, **a, cell_clip=-1.0)
    acts = dict(zip(["i", "cs", "f", "o", "ci", "co", "h"], fwd))
    g = dict(cs_grad=r(T, B, H), h_grad=r(T, B, H))
    flops_fwd = 8.0 * T * B * H * (I + H)
    peak = gemm_rate(args.reps)
    rows = [
        ("BlockLSTM", flops_fwd,
         lambda: tf.raw_ops.BlockLSTM(seq_len_max=slm, **a, cell_clip=-1.0)[6].numpy(),
         lambda: ours.BlockLSTM(seq_len_max=slm, **a, cell_clip=-1.0)[6].numpy()),
        ("BlockLSTMGrad", 2 * flops_fwd,
         lambda: tf.raw_ops.BlockLSTMGrad(seq_len_max=slm, **a, **acts, **g,
                                          use_peephole=False)[3].numpy(),
         lambda: ours.BlockLSTMGrad(seq_len_max=slm, **a, **acts, **g,
                                    use_peephole=False)[3].numpy()),
    ]
    print(f"T={T} B={B} I={I} H={H} float32, {os.cpu_count()} CPUs, "
          f"tf.matmul 2048^3 GEMM rate {peak:.0f} GF/s")
    print(f"{'op':<15}{'stock ms':>10}{'ours ms':>10}{'stock GF/s':>12}{'ours GF/s':>11}"
          f"{'ours %GEMM':>12}{'speed-up':>10}")
    for name, flops, s_fn, o_fn in rows:
        ts, to = median_ms(s_fn, args.reps), median_ms(o_fn, args.reps)
        gs, go = flops / ts / 1e6, flops / to / 1e6
        print(f"{name:<15}{ts:>10.1f}{to:>10.1f}{gs:>12.1f}{go:>11.1f}{100 * go / peak:>11.0f}%"
              f"{ts / to:>9.2f}x")
    train_step(args, a, peak)


def train_step(args, a, peak):
    """LSTM forward + backward (input, weight, bias and state gradients), IFCO, no peephole:
    ours (BlockLSTMV2 + registered gradient), stock (BlockLSTMV2 + BlockLSTMGradV2 called
    directly: stock's registered V2 gradient is wrong) and PyTorch nn.LSTM when installed."""
    T, B, I, H = args.T, args.B, args.I, args.H
    flops = 3 * 8.0 * T * B * H * (I + H)
    g_out = tf.random.normal([T, B, H])
    zero_h = tf.zeros([H])
    slm = tf.constant(T, tf.int64)

    @tf.function
    def ours_step(x, w, b, h0, c0):
        with tf.GradientTape() as tape:
            tape.watch([x, w, b, h0, c0])
            h = ours.BlockLSTMV2(seq_len_max=slm, x=x, cs_prev=c0, h_prev=h0, w=w, wci=zero_h,
                                 wcf=zero_h, wco=zero_h, b=b)[6]
            loss = tf.reduce_sum(h * g_out)
        return tape.gradient(loss, [x, w, b, h0, c0])

    @tf.function
    def stock_step(x, w, b, h0, c0):
        out = tf.raw_ops.BlockLSTMV2(seq_len_max=slm, x=x, cs_prev=c0, h_prev=h0, w=w,
                                     wci=zero_h, wcf=zero_h, wco=zero_h, b=b)
        acts = dict(zip(["i", "cs", "f", "o", "ci", "co", "h"], out))
        return tf.raw_ops.BlockLSTMGradV2(seq_len_max=slm, x=x, cs_prev=c0, h_prev=h0, w=w,
                                          wci=zero_h, wcf=zero_h, wco=zero_h, b=b, **acts,
                                          cs_grad=tf.zeros_like(out[1]), h_grad=g_out,
                                          use_peephole=False)

    args_tf = (a["x"], a["w"], a["b"], a["h_prev"], a["cs_prev"])
    t_ours = median_ms(lambda: [t.numpy() for t in ours_step(*args_tf)], args.reps)
    t_stock = median_ms(lambda: [t.numpy() for t in stock_step(*args_tf)], args.reps)
    print(f"\nLSTM forward+backward (IFCO, grads of x, w, b, h0, c0), "
          f"{flops / 1e9:.1f} GFLOP:")
    print(f"  {'ours (BlockLSTMV2 + gradient)':<42}{t_ours:>8.1f} ms {flops / t_ours / 1e6:>7.1f} "
          f"GF/s {100 * flops / t_ours / 1e6 / peak:>4.0f}% GEMM")
    print(f"  {'stock (BlockLSTMV2 + BlockLSTMGradV2)':<42}{t_stock:>8.1f} ms "
          f"{flops / t_stock / 1e6:>7.1f} GF/s   ours {t_stock / t_ours:.2f}x faster")
    try:
        import torch
    except ImportError:
        print("  PyTorch not installed: no nn.LSTM comparison")
        return
    torch.set_num_threads(os.cpu_count())
    lstm = torch.nn.LSTM(I, H)
    x = torch.randn(T, B, I, requires_grad=True)
    h0 = torch.zeros(1, B, H, requires_grad=True)
    c0 = torch.zeros(1, B, H, requires_grad=True)
    go = torch.randn(T, B, H)

    def torch_step():
        lstm.zero_grad()
        out, _ = lstm(x, (h0, c0))
        out.backward(go)

    t_torch = median_ms(torch_step, args.reps)
    print(f"  {'PyTorch ' + torch.__version__ + ' nn.LSTM (oneDNN)':<42}{t_torch:>8.1f} ms "
          f"{flops / t_torch / 1e6:>7.1f} GF/s   ours {t_torch / t_ours:.2f}x faster")


if __name__ == "__main__":
    main()
