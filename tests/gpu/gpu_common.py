"""Shared helpers of the GPU tests: availability checks, and running the CUDA engine on PyTorch
tensors.  No TensorFlow.  Skips raise unittest.SkipTest (pytest reports it as a skip, and
run_gpu_checks.py counts it).

TF_RNN_OPS_CUDA_EMULATED=1: the checks run on a CPU against the emulation build of the CUDA
engine (tools/build_cuda_emu.sh, cc/gpu/emu/cuda_emu.h): tensors on torch's CPU device, stream 0,
and the references that need a real GPU (cuDNN's weight buffer) skip.  PyTorch's own CPU RNNs
then stand in for cuDNN as the reference of check_vs_cudnn."""

import os
import unittest

import cuda_engine


def skip(msg):
    raise unittest.SkipTest(msg)


def emulated():
    """Whether the checks run on the CUDA emulation (CPU) instead of a GPU."""
    return os.environ.get("TF_RNN_OPS_CUDA_EMULATED", "") == "1"


def torch_cuda():
    """The torch module when PyTorch with a usable CUDA device is present (or, emulated, PyTorch
    at all), else None."""
    try:
        import torch
    except Exception:  # noqa: BLE001 - any import problem means "no torch"
        return None
    if emulated():
        return torch
    try:
        if not torch.cuda.is_available():
            return None
    except Exception:  # noqa: BLE001
        return None
    return torch


def gpu_unavailable_reason():
    """None when the GPU tests can run, else why not."""
    if not os.path.exists(cuda_engine.so_path()):
        return f"CUDA engine not built ({cuda_engine.so_path()})"
    if torch_cuda() is None:
        if emulated():
            return "PyTorch is not installed"
        return "PyTorch with CUDA (torch.cuda.is_available()) is not present"
    return None


def pytest_face(module_name, *case_lists):
    """What a pytest face of a check module (test_gpu_*.py) needs: the mark that skips its
    tests where the GPU tests cannot run (its pytestmark); the module (it imports torch: None
    then); the module's case lists named case_lists ([{}] then) and its case_id (str then)."""
    import importlib

    import pytest
    reason = gpu_unavailable_reason()
    mark = pytest.mark.skipif(reason is not None, reason=reason or "")
    if reason is not None:
        return (mark, None) + tuple([{}] for _ in case_lists) + (str,)
    module = importlib.import_module(module_name)
    return (mark, module) + tuple(getattr(module, n) for n in case_lists) + (module.case_id,)


def device():
    """Where the engine's operands live: torch's CUDA device, or the CPU when emulated."""
    return torch_cuda().device("cpu" if emulated() else "cuda")


def stream(dev):
    """The cudaStream_t to pass (the emulation's streams are synchronous: 0)."""
    return 0 if emulated() else torch_cuda().cuda.current_stream(dev).cuda_stream


def sync(dev):
    if not emulated():
        torch_cuda().cuda.synchronize(dev)


def need_real_gpu(what):
    """Skips a check that needs a real GPU (and its libraries) when emulated."""
    if emulated():
        skip(f"{what} needs a real GPU (CUDA emulation)")


_ENGINE = None


def engine():
    global _ENGINE
    reason = gpu_unavailable_reason()
    if reason:
        skip(reason)
    if _ENGINE is None:
        _ENGINE = cuda_engine.Engine()
    return _ENGINE


def no_tf32():
    torch = torch_cuda()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


TORCH_DTYPES = {"float16": "float16", "bfloat16": "bfloat16", "float32": "float32",
                "float64": "float64"}


def tdtype(name):
    torch = torch_cuda()
    return getattr(torch, TORCH_DTYPES[name])


def _ptr(t):
    return None if t is None else t.data_ptr()


def run_engine(spec, *, x, h0, c0, params, lengths=None, dy=None, dhn=None, dcn=None,
               peephole=None, mask=None, mask_per_step=False, dc_seq=None, lengths_on_device=False,
               weights=None):
    """Forward (and backward when dy is given) of our CUDA engine on torch CUDA tensors of the
    spec's dtype.  Returns dict y, hn, cn, reserve (+ dx, dh0, dc0, dparams, dpeephole).
    weights: the separate weights (dict w, r, bw, br; one layer and direction) instead of
    params, their gradients returned as dw, dr, dbw, dbr."""
    torch = torch_cuda()
    eng = engine()
    dev = x.device
    dt = x.dtype
    T, B, H, L, D = spec.T, spec.B, spec.H, spec.L, spec.D
    Hs = spec.P if spec.P else H
    lstm = spec.mode == cuda_engine.MODES["lstm"]
    n_params, n_reserve, fwd_ws, bwd_ws = eng.sizes(spec)
    assert weights is not None or params.numel() == n_params, (params.numel(), n_params)
    wptrs = {k: _ptr(v) for k, v in (weights or {}).items()}
    out = {
        "y": torch.full((T, B, D * Hs), float("nan"), dtype=dt, device=dev),
        "hn": torch.full((L * D, B, Hs), float("nan"), dtype=dt, device=dev),
        "cn": torch.full((L * D, B, H), float("nan"), dtype=dt, device=dev) if lstm else None,
        "reserve": torch.full((max(1, n_reserve),), float("nan"), dtype=dt, device=dev),
    }
    ws = torch.empty(max(1, fwd_ws), dtype=torch.uint8, device=dev)
    stream_ = stream(dev)
    len_dev = None
    if lengths is not None and lengths_on_device:
        len_dev = torch.tensor(list(lengths), dtype=torch.int32, device=dev)
    ptrs = dict(x=_ptr(x), h0=_ptr(h0), c0=_ptr(c0), params=_ptr(params), y=_ptr(out["y"]),
                hn=_ptr(out["hn"]), cn=_ptr(out["cn"]), reserve=_ptr(out["reserve"]),
                peephole=_ptr(peephole), mask=_ptr(mask), mask_per_step=int(mask_per_step),
                lengths_dev=_ptr(len_dev), **wptrs)
    eng.forward_raw(spec, ptrs, ws.data_ptr(), fwd_ws, stream_, lengths=lengths)
    sync(dev)
    if dy is None:
        return out
    out["dx"] = torch.full_like(x, float("nan"))
    out["dh0"] = torch.full_like(h0, float("nan"))
    out["dc0"] = torch.full_like(c0, float("nan")) if lstm else None
    out["dparams"] = torch.full_like(params, float("nan")) if params is not None else None
    for k, v in (weights or {}).items():
        out["d" + k] = torch.full_like(v, float("nan"))
    out["dpeephole"] = torch.full_like(peephole, float("nan")) if peephole is not None else None
    ws = torch.empty(max(1, bwd_ws), dtype=torch.uint8, device=dev)
    ptrs = dict(x=_ptr(x), h0=_ptr(h0), c0=_ptr(c0), params=_ptr(params),
                reserve=_ptr(out["reserve"]), dy=_ptr(dy), dhn=_ptr(dhn), dcn=_ptr(dcn),
                dx=_ptr(out["dx"]), dh0=_ptr(out["dh0"]), dc0=_ptr(out["dc0"]),
                dparams=_ptr(out["dparams"]), peephole=_ptr(peephole), mask=_ptr(mask),
                mask_per_step=int(mask_per_step), dc_seq=_ptr(dc_seq),
                dpeephole=_ptr(out["dpeephole"]), lengths_dev=_ptr(len_dev), **wptrs,
                **{"d" + k: _ptr(out["d" + k]) for k in (weights or {})})
    eng.backward_raw(spec, ptrs, ws.data_ptr(), bwd_ws, stream_, lengths=lengths)
    sync(dev)
    return out


def max_rel_err(ours, ref):
    """max |ours - ref| / max(1, max |ref|), in float64 (NaN anywhere -> inf)."""
    a = ours.detach().double().cpu()
    b = ref.detach().double().cpu()
    if a.shape != b.shape:
        raise AssertionError(f"shape {tuple(a.shape)} != {tuple(b.shape)}")
    if a.numel() == 0:
        return 0.0
    if not bool(a.isfinite().all()):
        return float("inf")
    scale = max(1.0, float(b.abs().max()))
    return float((a - b).abs().max()) / scale


def assert_close(name, ours, ref, tol):
    err = max_rel_err(ours, ref)
    assert err <= tol, f"{name}: max error {err:.3g} > {tol:.3g}"
