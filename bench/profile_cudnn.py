"""Profile our CudnnRNN CPU kernels: forward (CudnnRNNV3) against backward (CudnnRNNBackpropV3).

    .venv/bin/python bench/profile_cudnn.py                           # the four issue-#5 sizes
    .venv/bin/python bench/profile_cudnn.py --sizes 100x64x256x256 --modes lstm --reps 20
    .venv/bin/python bench/profile_cudnn.py --quick                   # tiny: smoke test

For each size, dtype and mode (lstm, gru; one layer, unidirectional, time-major) it times, as
tf.functions, median of --reps after one warm-up call:
  fwd-infer  CudnnRNNV3 with is_training=False (no reserve space)
  fwd-train  CudnnRNNV3 with is_training=True (what a training step runs)
  bwd        CudnnRNNBackpropV3 alone (inputs: a fwd-train result computed once beforehand)
and prints bwd / fwd-train, which should be about 2 (backward does twice the FLOPs of forward:
forward 8·T·B·H·(I+H) for LSTM, 6· for GRU), GF/s of each and the share of the larger tf.matmul
rate measured in the same run (the RNN input GEMM [T·B, I+H]·[I+H, 4H] and a 2048³ square).
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_util as bu  # noqa: E402  (puts the repository root on sys.path)
from bench_util import tf  # noqa: E402

import numpy as np  # noqa: E402

from tf_rnn_ops import raw_ops as ours  # noqa: E402


def profile(size, dtype, mode, reps):
    T, B, I, H = size
    rng = np.random.default_rng(0)

    def r(*shape, scale=0.5):
        return tf.constant((rng.standard_normal(shape) * scale).astype(np.float32), dtype=dtype)

    n_params = int(tf.reshape(ours.CudnnRNNParamsSize(
        num_layers=1, num_units=H, input_size=I, T=dtype, S=tf.int32, rnn_mode=mode), [-1])[0])
    kw = dict(input=r(T, B, I), input_h=r(1, B, H), input_c=r(1, B, H),
              params=r(n_params, scale=1.0 / np.sqrt(I + H)),
              sequence_lengths=tf.fill([B], T), rnn_mode=mode)
    fwd_infer = tf.function(lambda: ours.CudnnRNNV3(**kw, is_training=False))
    fwd_train = tf.function(lambda: ours.CudnnRNNV3(**kw, is_training=True))
    y, hn, cn, reserve, host = fwd_train()
    dy = r(T, B, H)
    bwd = tf.function(lambda: ours.CudnnRNNBackpropV3(
        **kw, output=y, output_h=hn, output_c=cn, output_backprop=dy,
        output_h_backprop=tf.zeros_like(hn), output_c_backprop=tf.zeros_like(cn),
        reserve_space=reserve, host_reserved=host))
    f = bu.lstm_flops(T, B, I, H, 4 if mode == "lstm" else 3)
    t_inf = bu.median_ms(fwd_infer, reps)
    t_fwd = bu.median_ms(fwd_train, reps)
    t_bwd = bu.median_ms(bwd, reps)
    return dict(size=list(size), dtype=dtype.name, mode=mode, fwd_flops=f,
                fwd_infer_ms=t_inf, fwd_train_ms=t_fwd, bwd_ms=t_bwd,
                bwd_over_fwd=t_bwd / t_fwd, fwd_infer_gflops=f / t_inf / 1e6,
                fwd_train_gflops=f / t_fwd / 1e6, bwd_gflops=2 * f / t_bwd / 1e6)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 2)[2])
    p.add_argument("--sizes", help="comma-separated TxBxIxH (default: the four of issue #5)")
    p.add_argument("--dtypes", default="float32", help="float32,bfloat16")
    p.add_argument("--modes", default="lstm,gru")
    p.add_argument("--reps", type=int, help="timed calls per measurement (default 10)")
    p.add_argument("--quick", action="store_true", help="tiny size, 2 reps, 256³ square GEMM")
    p.add_argument("--json", help="also write the rows as JSON to this path")
    args = p.parse_args(argv)
    sizes = (bu.parse_sizes(args.sizes) if args.sizes
             else (bu.QUICK_SIZES if args.quick else bu.DEFAULT_SIZES))
    dtypes = bu.parse_dtypes(args.dtypes)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    reps = args.reps or (2 if args.quick else 10)
    square = 256 if args.quick else 2048
    rows = []
    print(f"CudnnRNNV3 / CudnnRNNBackpropV3 (ours), {os.cpu_count()} CPUs, TensorFlow "
          f"{tf.__version__}, median of {reps} reps; bwd FLOPs = 2 x fwd\n")
    print("| mode | dtype | T×B×I×H | fwd-infer ms | fwd-train ms | bwd ms | bwd/fwd | "
          "fwd GF/s | bwd GF/s | fwd %GEMM | bwd %GEMM | GEMM peak GF/s |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for dt in dtypes:
        for size in sizes:
            peak = max(bu.gemm_rates(*size, bu.DTYPES[dt], reps, square))
            for mode in modes:
                row = profile(size, bu.DTYPES[dt], mode, reps)
                row["gemm_peak_gflops"] = peak
                rows.append(row)
                print(f"| {mode} | {dt} | {bu.size_str(size)} | {row['fwd_infer_ms']:.2f} | "
                      f"{row['fwd_train_ms']:.2f} | {row['bwd_ms']:.2f} | "
                      f"{row['bwd_over_fwd']:.2f} | {row['fwd_train_gflops']:.1f} | "
                      f"{row['bwd_gflops']:.1f} | {100 * row['fwd_train_gflops'] / peak:.0f}% | "
                      f"{100 * row['bwd_gflops'] / peak:.0f}% | {peak:.1f} |", flush=True)
    slow = [r for r in rows if r["bwd_over_fwd"] > 2.5]
    if slow:
        print("\nbackward slower than 2.5x forward: " + ", ".join(
            f"{r['mode']} {r['dtype']} {bu.size_str(r['size'])} ({r['bwd_over_fwd']:.2f}x)"
            for r in slow))
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
        print(f"json: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
