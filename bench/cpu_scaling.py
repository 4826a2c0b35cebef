"""CPU thread scaling: our TF-free engine (bench/engine_bench.cc, built by Bazel) against
PyTorch's CPU LSTM (and GRU: --modes lstm,gru), forward+backward, at 1, 2, 4, ... threads,
float32 and bfloat16.

    python3 bench/cpu_scaling.py --bench bazel-bin/bench/engine_bench [--threads 1,2,4,8,16]

Ours is the stacked-RNN engine's LSTM or GRU (CudnnRNN's face; BENCH_MODE), timed inside
engine_bench (median of 7 after one warm-up); PyTorch is torch.nn.LSTM or GRU (one layer,
batch_first False) with torch.set_num_threads(n), forward plus backward of sum(y), median of
the same count. bfloat16: BENCH_BF16=1 for ours (bf16 products where the CPU has AVX512_BF16,
float32 elsewhere), the module and inputs in torch.bfloat16 for PyTorch. Prints one line per
case (progress) and a Markdown table last: ms, GFLOP/s (2·K·T·B·H·(I+H) forward, K = 4 gates for LSTM and 3 for
GRU, twice that backward) and each side's speed-up over its own one-thread time.

--chains auto,pipelined,split times ours once per road of the step chains (TF_RNN_OPS_CPU_CHAIN:
the chain on one thread with the rest beside it, or each step split over the threads; auto: the
engine's own choice) and adds a table of forward, backward and inference times per road.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time


def ours(bench, T, B, I, H, threads, bf16, chain="auto", mode="lstm"):
    """(forward, backward, inference forward) ms of the stacked-RNN engine's LSTM or GRU."""
    env = dict(os.environ, BENCH_BF16="1" if bf16 else "0", BENCH_MODE=mode)
    env.pop("TF_RNN_OPS_CPU_CHAIN", None)
    if chain != "auto":
        env["TF_RNN_OPS_CPU_CHAIN"] = chain
    out = subprocess.run([bench, str(T), str(B), str(I), str(H), str(threads), "quick"],
                         env=env, capture_output=True, text=True, timeout=600, check=True).stdout
    m = re.search(r"rnn engine fwd ([\d.]+) bwd ([\d.]+) ms \| rnn engine inference fwd ([\d.]+)",
                  out)
    if not m:
        raise RuntimeError("engine_bench printed no rnn engine line: " + out[-300:])
    return float(m.group(1)), float(m.group(2)), float(m.group(3))


def torch_rnn(T, B, I, H, threads, bf16, mode="lstm", reps=7):
    import torch
    torch.set_num_threads(threads)
    dt = torch.bfloat16 if bf16 else torch.float32
    torch.manual_seed(0)
    rnn = (torch.nn.LSTM if mode == "lstm" else torch.nn.GRU)(I, H).to(dt)
    x = (0.1 * torch.randn(T, B, I)).to(dt).requires_grad_()

    def step():
        y, _ = rnn(x)
        y.float().sum().backward()

    step()
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        step()
        t.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", default="bazel-bin/bench/engine_bench")
    ap.add_argument("--threads", default="1,2,4,8,16")
    ap.add_argument("--sizes", default="100x64x256x256,100x16x512x512",
                    help="T x B x I x H, comma-separated")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--modes", default="lstm", help="lstm, gru or both")
    ap.add_argument("--chains", default="auto",
                    help="the step chains' roads to time (auto, pipelined, split: "
                         "TF_RNN_OPS_CPU_CHAIN); the main table shows the first")
    a = ap.parse_args()
    chains = a.chains.split(",")
    chain_rows = []
    threads = [int(t) for t in a.threads.split(",")]
    rows = []
    for mode in a.modes.split(","):
        K = 4 if mode == "lstm" else 3
        for size in a.sizes.split(","):
            T, B, I, H = (int(v) for v in size.split("x"))
            flops = 3 * 2.0 * K * T * B * H * (I + H)
            for dtype in a.dtypes.split(","):
                bf16 = dtype == "bfloat16"
                base = {}
                for n in threads:
                    for ch in chains:
                        fw, bw, inf = ours(a.bench, T, B, I, H, n, bf16, ch, mode)
                        chain_rows.append((mode, size, dtype, n, ch, fw, bw, inf))
                        if len(chains) > 1:
                            print(f"{mode} {size} {dtype} threads={n} chain={ch}: fwd {fw:.2f} "
                                  f"bwd {bw:.2f} inference {inf:.2f} ms", flush=True)
                    o = sum(chain_rows[-len(chains)][5:7])  # the first road's fwd + bwd
                    p = None if a.no_torch else torch_rnn(T, B, I, H, n, bf16, mode)
                    base.setdefault("o", o)
                    if p is not None:
                        base.setdefault("p", p)
                    row = (mode, size, dtype, n, o, flops / o / 1e6, base["o"] / o, p,
                           None if p is None else flops / p / 1e6,
                           None if p is None else base["p"] / p)
                    rows.append(row)
                    print(f"{mode} {size} {dtype} threads={n}: ours {o:.2f} ms"
                          + ("" if p is None else f", torch {p:.2f} ms"), flush=True)
    print("\n| mode | T×B×I×H | dtype | threads | ours ms | ours GFLOP/s | ours speed-up | "
          "torch ms | torch GFLOP/s | torch speed-up | torch / ours |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for mode, size, dtype, n, o, og, osu, p, pg, psu in rows:
        f = (lambda v, s="{:.2f}": "-" if v is None else s.format(v))
        print(f"| {mode} | {size} | {dtype} | {n} | {o:.2f} | {og:.1f} | {osu:.2f}x | {f(p)} | "
              f"{f(pg, '{:.1f}')} | {f(psu, '{:.2f}x')} | {f(None if p is None else p / o, '{:.2f}x')} |")
    if len(chains) > 1:
        print("\n| mode | T×B×I×H | dtype | threads | chain | fwd ms | bwd ms | fwd+bwd ms | "
              "inference fwd ms |")
        print("|---|---|---|---|---|---|---|---|---|")
        for mode, size, dtype, n, ch, fw, bw, inf in chain_rows:
            print(f"| {mode} | {size} | {dtype} | {n} | {ch} | {fw:.2f} | {bw:.2f} | "
                  f"{fw + bw:.2f} | {inf:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
