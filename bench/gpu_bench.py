"""Ours (CUDA engine, tf_rnn_ops/_tfrnn_engine_cuda.so) vs cuDNN (torch.nn on CUDA): LSTM and
GRU forward+backward, T=100, batch N in {1, 16, 64, 256}, hidden H in {256, 512, 1024}
(input size = H), float32 and half.  Runs on a GPU machine only (no TensorFlow needed):

    python bench/gpu_bench.py [--iters 20] [--modes lstm,gru] [--dtypes float32,float16]

Prints one row per configuration as it is measured: milliseconds per forward+backward for both
(median of --repeats means of --iters calls) and ours / cuDNN (below 1: ours is faster); then a
Markdown table with cuDNN / ours (above 1: ours is faster).  TF32 is off for both.
"""

import argparse
import os
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(_ROOT, "tests", "gpu"))

import cuda_engine  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--T", type=int, default=100)
    ap.add_argument("--batches", default="1,16,64,256")
    ap.add_argument("--hiddens", default="256,512,1024")
    ap.add_argument("--modes", default="lstm,gru")
    ap.add_argument("--dtypes", default="float32,float16")
    args = ap.parse_args()
    import torch
    if not torch.cuda.is_available():
        print("gpu_bench: no CUDA device (torch.cuda.is_available() is False)")
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    eng = cuda_engine.Engine()
    dev = torch.device("cuda")
    print(f"# {torch.cuda.get_device_name(dev)}, torch {torch.__version__}, "
          f"cuDNN {torch.backends.cudnn.version()}, cuBLAS {eng.cublas_library()}, T={args.T}")
    print(f"{'mode':5} {'dtype':8} {'N':>4} {'H':>5} {'ours ms':>9} {'cuDNN ms':>9} "
          f"{'ours/cuDNN':>10}")
    T = args.T

    def timeit(fn):
        """Median over --repeats of the mean time of --iters calls (CUDA events), in ms."""
        for _ in range(args.warmup):
            fn()
        times = []
        for _ in range(args.repeats):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            for _ in range(args.iters):
                fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / args.iters)
        return sorted(times)[len(times) // 2]

    rows = []
    for mode in args.modes.split(","):
        for dtype in args.dtypes.split(","):
            tdt = getattr(torch, dtype)
            for H in [int(v) for v in args.hiddens.split(",")]:
                for B in [int(v) for v in args.batches.split(",")]:
                    I = H
                    lstm = mode == "lstm"
                    m = (torch.nn.LSTM if lstm else torch.nn.GRU)(I, H).to(dev, tdt)
                    x = torch.randn(T, B, I, device=dev, dtype=tdt, requires_grad=True)
                    h0 = torch.zeros(1, B, H, device=dev, dtype=tdt, requires_grad=True)
                    c0 = torch.zeros(1, B, H, device=dev, dtype=tdt, requires_grad=True)
                    gy = torch.randn(T, B, H, device=dev, dtype=tdt)

                    def cudnn_step():
                        y, _ = m(x, (h0, c0)) if lstm else m(x, h0)
                        torch.autograd.backward(y, gy)

                    def cudnn_fwd():
                        m(x, (h0, c0)) if lstm else m(x, h0)

                    t_cudnn = timeit(cudnn_step)
                    f_cudnn = timeit(cudnn_fwd)
                    spec = cuda_engine.make_spec(mode, T=T, B=B, I=I, N=H, dtype=dtype)
                    n_params, n_res, fws, bws = eng.sizes(spec)
                    params = torch.randn(n_params, device=dev, dtype=tdt) * 0.05
                    y = torch.empty(T, B, H, device=dev, dtype=tdt)
                    hn = torch.empty(1, B, H, device=dev, dtype=tdt)
                    cn = torch.empty(1, B, H, device=dev, dtype=tdt)
                    res = torch.empty(max(1, n_res), device=dev, dtype=tdt)
                    ws = torch.empty(max(fws, bws, 1), device=dev, dtype=torch.uint8)
                    dx, dh0, dc0 = torch.empty_like(x), torch.empty_like(h0), torch.empty_like(c0)
                    dp = torch.empty_like(params)
                    zeros = torch.zeros(1, B, H, device=dev, dtype=tdt)
                    stream = torch.cuda.current_stream().cuda_stream
                    p = lambda t: t.data_ptr()  # noqa: E731
                    fwd = dict(x=p(x), h0=p(h0), c0=p(c0), params=p(params), y=p(y), hn=p(hn),
                               cn=p(cn), reserve=p(res))
                    bwd = dict(x=p(x), h0=p(h0), c0=p(c0), params=p(params), reserve=p(res),
                               dy=p(gy), dhn=p(zeros), dcn=p(zeros), dx=p(dx), dh0=p(dh0),
                               dc0=p(dc0), dparams=p(dp))
                    if not lstm:
                        for k in ("c0", "cn"):
                            fwd.pop(k)
                        for k in ("c0", "dcn", "dc0"):
                            bwd.pop(k)

                    def ours_step():
                        eng.forward_raw(spec, fwd, p(ws), ws.numel(), stream)
                        eng.backward_raw(spec, bwd, p(ws), ws.numel(), stream)

                    def ours_fwd():
                        eng.forward_raw(spec, fwd, p(ws), ws.numel(), stream)

                    t_ours = timeit(ours_step)
                    f_ours = timeit(ours_fwd)
                    # The per-step forward path (persistent kernel off), same call.
                    os.environ["TFRNN_CUDA_PERSISTENT"] = "0"
                    f_steps = timeit(ours_fwd)
                    del os.environ["TFRNN_CUDA_PERSISTENT"]
                    print(f"{mode:5} {dtype:8} {B:4d} {H:5d} {t_ours:9.3f} {t_cudnn:9.3f} "
                          f"{t_ours / t_cudnn:10.2f}   fwd {f_ours:.3f} / steps {f_steps:.3f} "
                          f"/ cuDNN {f_cudnn:.3f}", flush=True)
                    rows.append((mode, dtype, B, H, t_ours, t_cudnn, f_ours, f_steps, f_cudnn))
    print("\n| mode | dtype | N | H | fwd+bwd ours ms | cuDNN ms | cuDNN / ours | fwd ours ms "
          "| fwd per-step path ms | fwd cuDNN ms | fwd cuDNN / ours |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for mode, dtype, B, H, t_ours, t_cudnn, f_ours, f_steps, f_cudnn in rows:
        print(f"| {mode} | {dtype} | {B} | {H} | {t_ours:.3f} | {t_cudnn:.3f} | "
              f"{t_cudnn / t_ours:.2f}x | {f_ours:.3f} | {f_steps:.3f} | {f_cudnn:.3f} | "
              f"{f_cudnn / f_ours:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
