"""Ours (CUDA engine, tf_rnn_ops/_tfrnn_engine_cuda.so) vs cuDNN (torch.nn on CUDA): LSTM and
GRU, T=100, one layer, batch B in {1, 16, 64, 256}, hidden H in {256, 512, 1024} (input size
H), float32, half and bfloat16 (--dtypes). Runs on a GPU machine only (no TensorFlow needed):

    python bench/gpu_bench.py [--iters 10] [--modes lstm,gru] [--dtypes float32,float16,bfloat16]
                              [--variants auto,steps,pbwd,cluster]

For cuDNN and for each of our engine's paths (--variants, chosen by environment variables):
  auto     the defaults (DefaultBwd and the plans: persistent, cluster or per-step by size)
  steps    the per-step path everywhere (TFRNN_CUDA_PERSISTENT=0)
  pbwd     the persistent backward too (TFRNN_CUDA_PERSISTENT_BWD=1)
  cluster  the cluster kernels (TFRNN_CUDA_CLUSTER=1), forward and backward
  fused    the fused step kernels (one launch per step) instead of the persistent kernels
           and the per-step path (TFRNN_CUDA_PERSISTENT=0 TF_RNN_OPS_CUDA_FUSED_STEP=1)
  clusterC the cluster kernels with clusters of C blocks (TFRNN_CUDA_CLUSTER_SIZE=C)
  mma      the tensor-core persistent kernels where they fit, half and bfloat16
           (TFRNN_CUDA_MMA=1; rnn_gpu_persistent_mma.cu)
  nomma    the defaults without any tensor-core kernel (TFRNN_CUDA_MMA=0)
  cmma     the tensor-core cluster kernels where they fit, half and bfloat16
           (TFRNN_CUDA_CLUSTER=1 TFRNN_CUDA_MMA=1; rnn_gpu_cluster_mma.cu); cmmaC with
           clusters of C blocks
it prints the forward, backward (forward+backward minus forward) and forward+backward times in
ms, the forward's time per step in µs, which kernel ran each direction (TFRNN_CUDA_TRACE), and
cuDNN / ours (above 1: ours is faster). Then, per variant:
  - GFLOP/s of forward+backward (the GEMM work: 3 · 2·T·B·K·H·(I+H)) and its share of the GEMM
    rate measured in the same run (torch.matmul, 8192³, same dtype, TF32 off);
  - R GB/s: the recurrent matrix read once per step forward and twice backward (what a
    per-step GEMM path streams), over the time, against the copy bandwidth measured in the
    same run. Above 100 % means R stayed on chip.
Each time is the median of --repeats means of up to --iters calls (CUDA events; fewer calls
for slow configurations, at least 25 ms each). Ours is called through ctypes from Python and
cuDNN through torch.nn (autograd included), so both include host-side launch costs; compare
ratios within one run.

TF_RNN_OPS_CUDA_EMULATED=1 runs it on the CPU against the CUDA emulation (PyTorch's CPU RNNs
for cuDNN, wall-clock timing): a smoke test of this script, meaningless as a measurement.
"""

import argparse
import os
import sys
import tempfile
import time

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(_ROOT, "tests", "gpu"))

import cuda_engine  # noqa: E402
import gpu_common  # noqa: E402

VARIANTS = {
    "auto": {},
    "steps": {"TFRNN_CUDA_PERSISTENT": "0"},
    "pbwd": {"TFRNN_CUDA_PERSISTENT_BWD": "1"},
    "cluster": {"TFRNN_CUDA_CLUSTER": "1"},
    "fused": {"TFRNN_CUDA_PERSISTENT": "0", "TF_RNN_OPS_CUDA_FUSED_STEP": "1"},
    "mma": {"TFRNN_CUDA_MMA": "1"},
    "nomma": {"TFRNN_CUDA_MMA": "0"},
    "cmma": {"TFRNN_CUDA_CLUSTER": "1", "TFRNN_CUDA_MMA": "1"},
}
ENV_KEYS = ("TFRNN_CUDA_PERSISTENT", "TFRNN_CUDA_PERSISTENT_BWD", "TFRNN_CUDA_CLUSTER",
            "TFRNN_CUDA_CLUSTER_SIZE", "TFRNN_CUDA_TRACE", "TF_RNN_OPS_CUDA_FUSED_STEP",
            "TFRNN_CUDA_MMA")


def variant_env(name):
    if name.startswith("cluster") and name[7:].isdigit():
        return {"TFRNN_CUDA_CLUSTER": "1", "TFRNN_CUDA_CLUSTER_SIZE": name[7:]}
    if name.startswith("cmma") and name[4:].isdigit():
        return dict(VARIANTS["cmma"], TFRNN_CUDA_CLUSTER_SIZE=name[4:])
    if name not in VARIANTS:
        raise SystemExit(f"gpu_bench: unknown variant {name!r}")
    return VARIANTS[name]


def set_env(env):
    for k in ENV_KEYS:
        os.environ.pop(k, None)
    os.environ.update(env)


def traced(fn):
    """Runs fn once with TFRNN_CUDA_TRACE=1 and returns the engine's plan lines (its stderr)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as f:
        os.dup2(f.fileno(), 2)
        os.environ["TFRNN_CUDA_TRACE"] = "1"
        try:
            fn()
        finally:
            os.environ.pop("TFRNN_CUDA_TRACE", None)
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        lines = f.read().decode(errors="replace").splitlines()
    return [ln for ln in lines if ln.startswith("tfrnn_cuda ")]


def kernel_names(lines):
    """'fwd=cluster/C16/G2 bwd=per-step' from the trace lines of one forward+backward."""
    out = {}
    for ln in lines:
        d = "fwd" if " forward " in ln else "bwd"
        kind = ln.split(": ", 1)[1].split()[0]
        if kind in ("cluster", "cluster-mma", "fused-step"):
            f = dict(kv.split("=") for kv in ln.split(": ", 1)[1].split()[1:])
            kind = (f"fused-step/G{f['group']}/U{f['units']}" if kind == "fused-step" else
                    f"{kind}/C{f['cluster']}/G{f['group']}")
        out[d] = kind
    return " ".join(f"{d}={out.get(d, '?')}" for d in ("fwd", "bwd"))


def make_timeit(torch, dev, emulated, iters, repeats, warmup):
    """timeit(fn): the median over `repeats` of the mean time of up to `iters` calls of fn (at
    least 25 ms each), in ms: CUDA events, or on the emulation the wall clock."""

    class Clock:
        def record(self):
            if emulated:
                self.t = time.perf_counter()
            else:
                self.e = torch.cuda.Event(enable_timing=True)
                self.e.record()

        def ms_since(self, start):
            if emulated:
                return 1000 * (self.t - start.t)
            return start.e.elapsed_time(self.e)

    def timeit(fn):
        for _ in range(warmup):
            fn()
        start, end = Clock(), Clock()
        gpu_common.sync(dev)
        start.record()
        fn()
        end.record()
        gpu_common.sync(dev)
        n = max(1, min(iters, int(25.0 / max(end.ms_since(start), 1e-3))))
        times = []
        for _ in range(repeats):
            gpu_common.sync(dev)
            start.record()
            for _ in range(n):
                fn()
            end.record()
            gpu_common.sync(dev)
            times.append(end.ms_since(start) / n)
        return sorted(times)[len(times) // 2]

    return timeit


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
    ap.add_argument("--variants", default="auto,steps,pbwd,cluster")
    args = ap.parse_args()
    torch = gpu_common.torch_cuda()
    if torch is None:
        print("gpu_bench: no CUDA device (torch.cuda.is_available() is False)")
        return 0
    emulated = gpu_common.emulated()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    eng = cuda_engine.Engine()
    dev = gpu_common.device()
    variants = args.variants.split(",")
    for v in variants:
        variant_env(v)
    name = "CUDA emulation (CPU)" if emulated else torch.cuda.get_device_name(dev)
    print(f"# {name}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"cuBLAS {eng.cublas_library()}, T={args.T}", flush=True)
    T = args.T

    timeit = make_timeit(torch, dev, emulated, args.iters, args.repeats, args.warmup)

    # The machine's rates, measured in this run: GEMM (per dtype) and device copy bandwidth.
    peak = {}
    for dtype in args.dtypes.split(","):
        n = 256 if emulated else 8192
        a = torch.randn(n, n, device=dev, dtype=getattr(torch, dtype))
        ms = timeit(lambda: torch.matmul(a, a))
        peak[dtype] = 2 * n ** 3 / ms / 1e6
        print(f"# GEMM {n}^3 {dtype}: {peak[dtype]:.0f} GFLOP/s", flush=True)
        del a
    src = torch.empty((1 << 20) if emulated else (256 << 20), device=dev, dtype=torch.float32)
    dst = torch.empty_like(src)
    ms = timeit(lambda: dst.copy_(src))
    copy_gbs = 2 * src.numel() * 4 / ms / 1e6
    print(f"# device copy: {copy_gbs:.0f} GB/s (read + write)", flush=True)
    del src, dst

    rows = []
    for mode in args.modes.split(","):
        for dtype in args.dtypes.split(","):
            tdt = getattr(torch, dtype)
            esize = torch.empty(0, dtype=tdt).element_size()
            for H in [int(v) for v in args.hiddens.split(",")]:
                for B in [int(v) for v in args.batches.split(",")]:
                    I = H
                    lstm = mode == "lstm"
                    K = 4 if lstm else 3
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

                    try:
                        c_fb = timeit(cudnn_step)
                        c_f = timeit(cudnn_fwd)
                    except RuntimeError as e:  # e.g. a cuDNN without this dtype's RNNs
                        print(f"# cuDNN {mode} {dtype}: {str(e).splitlines()[0]}", flush=True)
                        c_fb = c_f = float("nan")
                    spec = cuda_engine.make_spec(mode, T=T, B=B, I=I, H=H, dtype=dtype)
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
                    stream = gpu_common.stream(dev)
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

                    flops = 3 * 2 * T * B * K * H * (I + H)
                    r_bytes = 3 * T * K * H * H * esize
                    print(f"{mode} {dtype} B={B} H={H}: cuDNN fwd {c_f:.3f} "
                          f"fwd+bwd {c_fb:.3f} ms", flush=True)
                    for v in variants:
                        set_env(variant_env(v))
                        try:
                            kernels = kernel_names(traced(lambda: (ours_step(),
                                                                   gpu_common.sync(dev))))
                            o_fb = timeit(ours_step)
                            o_f = timeit(ours_fwd)
                        finally:
                            set_env({})
                        row = dict(mode=mode, dtype=dtype, B=B, H=H, variant=v, kernels=kernels,
                                   o_f=o_f, o_fb=o_fb, c_f=c_f, c_fb=c_fb,
                                   gflops=flops / o_fb / 1e6, rgbs=r_bytes / o_fb / 1e6)
                        rows.append(row)
                        print(f"  {v:9} fwd {o_f:.3f} ({1000 * o_f / T:.1f} us/step) "
                              f"bwd {o_fb - o_f:.3f} fwd+bwd {o_fb:.3f} ms; "
                              f"cuDNN/ours fwd {c_f / o_f:.2f}x fwd+bwd {c_fb / o_fb:.2f}x; "
                              f"{kernels}", flush=True)
    print("\n| mode | dtype | B | H | variant | kernels | fwd ms | µs/step | bwd ms | "
          "fwd+bwd ms | cuDNN fwd ms | cuDNN fwd+bwd ms | cuDNN/ours fwd | "
          "cuDNN/ours fwd+bwd | GFLOP/s (% GEMM) | R GB/s (% copy) |")
    print("|" + "---|" * 16)
    for r in rows:
        print(f"| {r['mode']} | {r['dtype']} | {r['B']} | {r['H']} | {r['variant']} | "
              f"{r['kernels']} | {r['o_f']:.3f} | {1000 * r['o_f'] / T:.1f} | "
              f"{r['o_fb'] - r['o_f']:.3f} | {r['o_fb']:.3f} | {r['c_f']:.3f} | "
              f"{r['c_fb']:.3f} | {r['c_f'] / r['o_f']:.2f}x | {r['c_fb'] / r['o_fb']:.2f}x | "
              f"{r['gflops']:.0f} ({100 * r['gflops'] / peak[r['dtype']]:.1f} %) | "
              f"{r['rgbs']:.0f} ({100 * r['rgbs'] / copy_gbs:.0f} %) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
