"""One training step (CudnnRNNV3 + CudnnRNNBackpropV3 as a tf.function) against PyTorch's
nn.LSTM / nn.GRU in one process, in two orders, to show how much the order of the timed calls
moves the ratio (docs/PERFORMANCE.md, "What the 1.2x target would take"):

    seq: every step of ours, then every step of PyTorch's;
    alt: the two alternate (a PyTorch step, then ours timed; ours, then PyTorch's timed).

    python bench/bench_order.py [--size 100x64x256x256] [--mode lstm|gru] [--dtype bfloat16]
                                [--reps 10] [--threads 2]
Prints one line per order (median and min of each side, the ratio of the medians)."""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="100x64x256x256", help="TxBxIxH")
    ap.add_argument("--mode", default="lstm", choices=["lstm", "gru"])
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    args = ap.parse_args()
    T, B, I, H = (int(v) for v in args.size.split("x"))
    import tensorflow as tf
    import torch
    from bench_util import cudnn_train_step
    from tf_rnn_ops import raw_ops as ours
    torch.set_num_threads(args.threads)
    dt, tdt = tf.as_dtype(args.dtype), getattr(torch, args.dtype)
    n = int(tf.reshape(ours.CudnnRNNParamsSize(num_layers=1, num_units=H, input_size=I, T=dt,
                                               S=tf.int32, rnn_mode=args.mode), [-1])[0])
    rng = np.random.default_rng(0)
    mk = lambda *s, sc=0.1: tf.constant(  # noqa: E731
        (rng.standard_normal(s) * sc).astype(np.float32), dtype=dt)
    x, h0, c0, dh = mk(T, B, I), mk(1, B, H), mk(1, B, H), mk(T, B, H)
    kw = dict(input=x, input_h=h0, input_c=c0 if args.mode == "lstm" else h0,
              params=mk(n, sc=1 / np.sqrt(I + H)), sequence_lengths=tf.fill([B], T),
              rnn_mode=args.mode)
    step = cudnn_train_step(ours, kw, dh)

    mod = getattr(torch.nn, args.mode.upper())(I, H).to(tdt)
    tx = (torch.randn(T, B, I) * 0.1).to(tdt).requires_grad_()
    th0 = (torch.randn(1, B, H) * 0.1).to(tdt).requires_grad_()
    tc0 = (torch.randn(1, B, H) * 0.1).to(tdt).requires_grad_()
    tdh = (torch.randn(T, B, H) * 0.1).to(tdt)

    def ours_step():
        _ = step()[0].numpy()

    def torch_step():
        y, _ = mod(tx, (th0, tc0)) if args.mode == "lstm" else mod(tx, th0)
        y.backward(tdh)

    def timed(f):
        t0 = time.perf_counter()
        f()
        return 1e3 * (time.perf_counter() - t0)

    ours_step()
    torch_step()
    for order in ("seq", "alt"):
        a, b = [], []
        for i in range(args.reps):
            if order == "seq":
                a.append(timed(ours_step))
            else:
                torch_step()
                a.append(timed(ours_step))
                ours_step()
                b.append(timed(torch_step))
            print(f"  {order} {i + 1}/{args.reps}", file=sys.stderr, flush=True)
        if order == "seq":
            b = [timed(torch_step) for _ in range(args.reps)]
        ratio = np.median(b) / np.median(a)
        print(f"{order}: ours median {np.median(a):.1f} ms (min {min(a):.1f}) | PyTorch median "
              f"{np.median(b):.1f} ms (min {min(b):.1f}) | PyTorch/ours {ratio:.2f}x", flush=True)


if __name__ == "__main__":
    main()
