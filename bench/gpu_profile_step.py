"""One forward and backward of our CUDA engine at one size and nothing else, for a profiler
(Nsight Compute) to read the kernels of our own path (bench/gpu_bench.py also runs cuDNN):

    python bench/gpu_profile_step.py [--mode lstm] [--dtype float32] [--T 8] [--B 16] [--H 512]
                                     [--cudnn]

--cudnn first runs one forward and backward of torch.nn.LSTM / GRU at the same size (cuDNN,
with whichever algorithm PyTorch picks: its persistent one for half at small batches), so one
profile holds cuDNN's kernels and ours.

Environment switches pick the engine's path as in gpu_bench.py (TFRNN_CUDA_PERSISTENT=0: the
per-step path). Random inputs (never zeros); prints the largest |y| as a sign of life.
TF_RNN_OPS_CUDA_EMULATED=1 runs it on the CUDA emulation.
"""

import argparse
import os
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(_ROOT, "tests", "gpu"))

import cuda_engine  # noqa: E402
import gpu_common  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    for name, default in (("--mode", "lstm"), ("--dtype", "float32"), ("--T", 8), ("--B", 16),
                          ("--H", 512)):
        ap.add_argument(name, type=type(default), default=default)
    ap.add_argument("--cudnn", action="store_true")
    a = ap.parse_args()
    torch = gpu_common.torch_cuda()
    dev = gpu_common.device()
    dt = gpu_common.tdtype(a.dtype)
    spec = cuda_engine.make_spec(a.mode, T=a.T, B=a.B, I=a.H, H=a.H, dtype=a.dtype)
    n_params = gpu_common.engine().sizes(spec)[0]
    gen = torch.Generator(device=dev).manual_seed(0)

    def rand(*shape, scale=1.0):
        return (torch.randn(*shape, generator=gen, device=dev) * scale).to(dt)

    lstm = a.mode == "lstm"
    state = (1, a.B, a.H)
    if a.cudnn:
        m = (torch.nn.LSTM if lstm else torch.nn.GRU)(a.H, a.H).to(dev, dt)
        x = rand(a.T, a.B, a.H).requires_grad_()
        y, _ = m(x)
        torch.autograd.backward(y, rand(a.T, a.B, a.H))
        torch.cuda.synchronize()
        print(f"cuDNN: max |y| {y.abs().max().item():.4f}, max |dx| "
              f"{x.grad.abs().max().item():.4f}")
    out = gpu_common.run_engine(
        spec, x=rand(a.T, a.B, a.H), h0=rand(*state), c0=rand(*state) if lstm else None,
        params=rand(n_params, scale=0.05), dy=rand(a.T, a.B, a.H), dhn=rand(*state),
        dcn=rand(*state) if lstm else None)
    print(f"{a.mode} {a.dtype} T={a.T} B={a.B} H={a.H}: max |y| "
          f"{out['y'].abs().max().item():.4f}, max |dx| {out['dx'].abs().max().item():.4f}")


if __name__ == "__main__":
    main()
