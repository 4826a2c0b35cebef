"""The warp tensor-core product of the CUDA engine (cc/gpu/mma.cuh: the fragment layout of
mma.sync m16n8k16 and the instruction) against numpy, through the C API's
tfrnn_cuda_mma_probe, for half and bfloat16 inputs.

    TF_RNN_OPS_CUDA_EMULATED=1 python3 tests/gpu/mma_checks.py   # the emulation, numpy only
    python3 tests/gpu/mma_checks.py                              # a GPU (PyTorch with CUDA)

Random A [M, K] and B [K, N] are drawn in float64 and rounded to the input type; the reference
is their float64 product, and the probe's float32 result must agree to
max|c - ref| / max(1, max|ref|) <= 1e-4 (the products are exact in float32, the sums round:
a wrong fragment layout is off by O(1)). Sizes off the tile grid or too large, another dtype
and a NULL operand must be refused. Prints a line per check and a summary; exits 1 on any
failure.
"""

import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cuda_engine as ce  # noqa: E402

SHAPES = [(16, 8, 16), (32, 16, 48), (48, 40, 64), (64, 24, 128)]
TOL = 1e-4


def emulated():
    return os.environ.get("TF_RNN_OPS_CUDA_EMULATED", "") == "1"


def to_bits(x, dtype):
    """float64 array -> (uint16 bits of the rounded values, the rounded values as float64)."""
    if dtype == "float16":
        h = x.astype(np.float16)
        return h.view(np.uint16), h.astype(np.float64)
    f = x.astype(np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)  # round to nearest even
    back = (u.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return u, back


class Memory:
    """Device buffers: numpy arrays on the emulation (device memory is host memory), torch
    CUDA tensors on a GPU."""

    def __init__(self):
        self.torch = None
        if not emulated():
            import torch
            if not torch.cuda.is_available():
                raise SystemExit("no CUDA device (set TF_RNN_OPS_CUDA_EMULATED=1 for the emulation)")
            self.torch = torch
        self.keep = []

    def put(self, arr):
        if self.torch is None:
            arr = np.ascontiguousarray(arr)
            self.keep.append(arr)
            return arr.ctypes.data, arr
        t = self.torch.from_numpy(np.ascontiguousarray(arr).view(np.int16)
                                  if arr.dtype == np.uint16 else np.ascontiguousarray(arr)).cuda()
        self.keep.append(t)
        return t.data_ptr(), t

    def get(self, handle):
        if self.torch is None:
            return handle
        self.torch.cuda.synchronize()
        return handle.cpu().numpy()

    def stream(self):
        return 0 if self.torch is None else self.torch.cuda.current_stream().cuda_stream


def main():
    eng = ce.Engine()
    mem = Memory()
    rng = np.random.default_rng(0)
    failed = passed = 0
    for dtype in ("float16", "bfloat16"):
        for M, N, K in SHAPES:
            a, a_r = to_bits(rng.standard_normal((M, K)), dtype)
            bt, bt_r = to_bits(rng.standard_normal((N, K)), dtype)
            pa, _ = mem.put(a)
            pb, _ = mem.put(bt)
            pc, hc = mem.put(np.full((M, N), np.nan, np.float32))
            eng.mma_probe(dtype, pa, pb, pc, M, N, K, mem.stream())
            c = mem.get(hc).astype(np.float64)
            ref = a_r @ bt_r.T
            err = float(np.nanmax(np.abs(c - ref)) / max(1.0, np.abs(ref).max()))
            ok = bool(np.isfinite(c).all()) and err <= TOL
            failed += not ok
            passed += ok
            print(f"{'PASS' if ok else 'FAIL'} mma {dtype} M={M} N={N} K={K}: rel err {err:.2e}",
                  flush=True)
    # Refused: sizes off the tile grid or too large, another dtype, a NULL operand.
    pa, _ = mem.put(np.zeros((16, 16), np.uint16))
    pc, _ = mem.put(np.zeros((16, 8), np.float32))
    for what, args in (("M = 8", ("float16", 8, 8, 16, pa)),
                       ("K = 24", ("bfloat16", 16, 8, 24, pa)),
                       ("N = 4104", ("float16", 16, 4104, 16, pa)),
                       ("dtype float32", ("float32", 16, 8, 16, pa)),
                       ("NULL b", ("bfloat16", 16, 8, 16, None))):
        dtype, M, N, K, pb = args
        try:
            eng.mma_probe(dtype, pa, pb, pc, M, N, K, mem.stream())
            ok = False
        except ce.EngineError as e:
            ok = e.code == 1
        failed += not ok
        passed += ok
        print(f"{'PASS' if ok else 'FAIL'} mma refuses {what}", flush=True)
    print(f"summary: {{'PASS': {passed}, 'FAIL': {failed}, 'SKIP': 0}}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
