"""The Keras layers' GPU path (issue 41, item 6): our CUDA engine on the Keras op's form (the
weights as Keras holds them, Keras's gate order, per-gate recurrent masks: Keras recurrent
dropout in training) against what stock Keras runs for that case on a GPU, its generic loop:
a step-by-step loop of framework ops with the same masks, here in PyTorch on the same GPU
(per step the K masked recurrent products (h ⊙ mask_k) · R_k, the pointwise gates; autograd
for the backward). Runs on a GPU machine, no TensorFlow needed:

    python bench/gpu_bench_keras.py [--T 100] [--B 64] [--H 256] [--modes lstm,gru]

Prints per mode, forward+backward in ms: ours with masks, ours without masks (the same
weights form), ours on the params form without masks (the engine's fastest path), the
framework loop with masks, and the two targets: loop / ours-masked (target ≥ 10x) and
ours-masked / ours-unmasked (target ≤ 1.5x), and the largest difference between our masked
output and the loop's (the same computation, float32). TF_RNN_OPS_CUDA_EMULATED=1 runs it on the CPU
against the CUDA emulation (a smoke test of this script, not a measurement).
"""

import argparse
import os
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(_ROOT, "tests", "gpu"))
sys.path.insert(0, os.path.join(_ROOT, "bench"))

import cuda_engine  # noqa: E402
import gpu_common  # noqa: E402
from gpu_bench import make_timeit  # noqa: E402


def framework_loop(torch, mode, x, h0, c0, W, R, b, masks):
    """Keras's generic loop in framework ops: x [T, B, I], W [I, K·H], R [H, K·H] in Keras's
    gate order (lstm i, f, c, o; gru z, r, h with reset_after), masks [K, B, H]."""
    T, H = x.shape[0], R.shape[0]
    gx = (x.reshape(-1, x.shape[2]) @ W + b[0]).reshape(T, -1, W.shape[1])
    blk = lambda v, k: v[:, k * H:(k + 1) * H]  # noqa: E731
    h, c, ys = h0, c0, []
    for t in range(T):
        hr = [(h * masks[k]) @ R[:, k * H:(k + 1) * H] for k in range(R.shape[1] // H)]
        if mode == "lstm":
            i = torch.sigmoid(blk(gx[t], 0) + hr[0])
            f = torch.sigmoid(blk(gx[t], 1) + hr[1])
            g = torch.tanh(blk(gx[t], 2) + hr[2])
            o = torch.sigmoid(blk(gx[t], 3) + hr[3])
            c = f * c + i * g
            h = o * torch.tanh(c)
        else:
            z = torch.sigmoid(blk(gx[t], 0) + hr[0] + blk(b[1:], 0))
            r = torch.sigmoid(blk(gx[t], 1) + hr[1] + blk(b[1:], 1))
            n = torch.tanh(blk(gx[t], 2) + r * (hr[2] + blk(b[1:], 2)))
            h = z * h + (1 - z) * n
        ys.append(h)
    return torch.stack(ys)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--T", type=int, default=100)
    ap.add_argument("--B", type=int, default=64)
    ap.add_argument("--H", type=int, default=256)
    ap.add_argument("--modes", default="lstm,gru")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    args = ap.parse_args()
    torch = gpu_common.torch_cuda()
    if torch is None:
        print("gpu_bench_keras: no CUDA device (torch.cuda.is_available() is False)")
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False
    emulated = gpu_common.emulated()
    dev = gpu_common.device()
    timeit = make_timeit(torch, dev, emulated, args.iters, args.repeats, args.warmup)
    eng = cuda_engine.Engine()
    T, B, H = args.T, args.B, args.H
    I = H
    name = "CUDA emulation (CPU)" if emulated else torch.cuda.get_device_name(dev)
    print(f"# {name}, torch {torch.__version__}, T={T} B={B} I={I} H={H}, float32", flush=True)
    stream = gpu_common.stream(dev)
    p = lambda t: None if t is None else t.data_ptr()  # noqa: E731
    rows = []
    for mode in args.modes.split(","):
        lstm = mode == "lstm"
        K = 4 if lstm else 3
        f32 = dict(device=dev, dtype=torch.float32)
        x = torch.randn(T, B, I, **f32)
        h0, c0 = torch.zeros(1, B, H, **f32), torch.zeros(1, B, H, **f32)
        W, R = torch.randn(I, K * H, **f32) * 0.05, torch.randn(H, K * H, **f32) * 0.05
        b = torch.randn(2, K * H, **f32) * 0.05  # input, recurrent bias (Keras lstm: one)
        if lstm:
            b[1] = 0
        masks = (torch.rand(K, B, H, **f32) > 0.25).float() / 0.75
        gy = torch.randn(T, B, H, **f32)

        def engine_call(masked, separate):
            """Forward+backward of our engine: the Keras op's form (separate weights, Keras
            gate order) or the params form, with or without per-gate masks."""
            spec = cuda_engine.make_spec(mode, T=T, B=B, I=I, H=H, has_mask=masked,
                                         mask_gates=masked,
                                         gate_pos=(1, 0, 2, 3) if separate and not lstm
                                         else (0, 1, 2, 3))
            spec.weights_xw = int(separate)
            n_params, n_res, fws, bws = eng.sizes(spec)
            o = {k: torch.empty(1, B, H, **f32) for k in ("hn", "cn", "dh0", "dc0")}
            o.update(y=torch.empty(T, B, H, **f32), dx=torch.empty_like(x),
                     res=torch.empty(max(1, n_res), **f32),
                     ws=torch.empty(max(1, fws, bws), device=dev, dtype=torch.uint8))
            mask = masks.permute(1, 0, 2).reshape(1, B, K * H).contiguous() if masked else None
            common = dict(x=p(x), h0=p(h0), c0=p(c0) if lstm else None, mask=p(mask))
            if separate:
                grads = [torch.empty_like(t) for t in (W, R, b)]
                common.update(w=p(W), r=p(R), bw=p(b[0]), br=p(b[1]))
                dgrads = dict(dw=p(grads[0]), dr=p(grads[1]), dbw=p(grads[2][0]),
                              dbr=p(grads[2][1]))
            else:
                params = torch.randn(n_params, **f32) * 0.05
                grads = [params, torch.empty_like(params)]
                common.update(params=p(params))
                dgrads = dict(dparams=p(grads[1]))
            fwd = dict(common, y=p(o["y"]), hn=p(o["hn"]), cn=p(o["cn"]) if lstm else None,
                       reserve=p(o["res"]))
            bwd = dict(common, reserve=p(o["res"]), dy=p(gy), dhn=p(o["hn"]),
                       dcn=p(o["cn"]) if lstm else None, dx=p(o["dx"]), dh0=p(o["dh0"]),
                       dc0=p(o["dc0"]) if lstm else None, **dgrads)
            ws = o["ws"]
            alive = (o, grads, mask, common)  # the engine gets raw pointers: keep the tensors

            def step():
                eng.forward_raw(spec, fwd, p(ws), ws.numel(), stream)
                eng.backward_raw(spec, bwd, p(ws), ws.numel(), stream)
            step.alive, step.y = alive, o["y"]
            return step

        leaves = [t.clone().requires_grad_() for t in (x, h0[0], c0[0], W, R, b)]

        def loop_step():
            y = framework_loop(torch, mode, *leaves, masks)
            torch.autograd.backward(y, gy)

        masked = engine_call(True, True)
        ours_m = timeit(masked)
        # The same computation: our masked output against the loop's (float32).
        with torch.no_grad():
            want = framework_loop(torch, mode, x, h0[0], c0[0], W, R, b, masks)
        err = float((masked.y - want).abs().max()) / max(1.0, float(want.abs().max()))
        ours_u = timeit(engine_call(False, True))
        ours_p = timeit(engine_call(False, False))
        loop = timeit(loop_step)
        rows.append((mode, ours_m, ours_u, ours_p, loop, err))
        print(f"{mode}: ours masked {ours_m:.3f} ms, unmasked {ours_u:.3f} (params form "
              f"{ours_p:.3f}), framework loop masked {loop:.3f}: loop/ours {loop / ours_m:.1f}x, "
              f"masked/unmasked {ours_m / ours_u:.2f}x; output vs the loop: max rel err "
              f"{err:.2g}", flush=True)
    print("\n| mode | ours masked ms | ours unmasked ms | ours params form ms | framework loop "
          "ms | loop / ours masked (≥ 10x) | ours masked / unmasked (≤ 1.5x) | output vs "
          "loop |")
    print("|" + "---|" * 8)
    for mode, m, u, pf, lp, err in rows:
        print(f"| {mode} | {m:.3f} | {u:.3f} | {pf:.3f} | {lp:.3f} | {lp / m:.1f}x | "
              f"{m / u:.2f}x | {err:.2g} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
