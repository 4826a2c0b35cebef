"""Helpers shared by bench_rnn.py, bench_order.py and profile_cudnn.py (timing, sizes, GEMM
rate, memory, the cuDNN-op training step).

Not a benchmark itself. The scripts in bench/ import it from their own directory.
"""
import ctypes
import os
import sys
import time

import numpy as np

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

DEFAULT_SIZES = [(100, 64, 256, 256), (50, 32, 128, 512), (200, 16, 64, 128),
                 (20, 128, 512, 1024)]
QUICK_SIZES = [(4, 3, 8, 16)]
DTYPES = {"float32": tf.float32, "bfloat16": tf.bfloat16}


def parse_sizes(text):
    """'100x64x256x256,50x32x128x512' -> [(100, 64, 256, 256), (50, 32, 128, 512)]."""
    sizes = []
    for item in text.replace(";", ",").split(","):
        item = item.strip()
        if not item:
            continue
        parts = item.lower().replace(":", "x").split("x")
        if len(parts) != 4:
            raise ValueError(f"size {item!r}: expected TxBxIxH, e.g. 100x64x256x256")
        sizes.append(tuple(int(p) for p in parts))
    return sizes


def parse_dtypes(text):
    names = [d.strip() for d in text.split(",") if d.strip()]
    for d in names:
        if d not in DTYPES:
            raise ValueError(f"dtype {d!r}: choose from {', '.join(DTYPES)}")
    return names


def size_str(size):
    return "x".join(str(s) for s in size)


def clock(seconds):
    """Seconds as m:ss (or h:mm:ss) for progress lines."""
    m, s = divmod(int(round(seconds)), 60)
    return f"{m}:{s:02d}" if m < 60 else f"{m // 60}:{m % 60:02d}:{s:02d}"


def time_once_ms(fn):
    """Wall time of one fn() call in milliseconds."""
    t0 = time.perf_counter()
    fn()
    return 1e3 * (time.perf_counter() - t0)


def median_ms(fn, reps, warmup=1):
    """Median wall time of fn() in milliseconds over reps calls, after warmup calls."""
    for _ in range(warmup):
        fn()
    return float(np.median([time_once_ms(fn) for _ in range(max(1, reps))]))


def cudnn_train_step(ours, kw, output_backprop):
    """One training step as a tf.function: ours.CudnnRNNV3 (is_training) on kw (its inputs and
    attrs), then CudnnRNNBackpropV3 with output_backprop arriving at the output and nothing at
    the final states."""
    @tf.function
    def step():
        y, hn, cn, reserve, host = ours.CudnnRNNV3(**kw, is_training=True)
        return ours.CudnnRNNBackpropV3(
            **kw, output=y, output_h=hn, output_c=cn, output_backprop=output_backprop,
            output_h_backprop=tf.zeros_like(hn), output_c_backprop=tf.zeros_like(cn),
            reserve_space=reserve, host_reserved=host)
    return step


def lstm_flops(T, B, I, H, gates=4):
    """Forward FLOPs of an LSTM (gates=4) or GRU (gates=3): 2·gates·T·B·H·(I+H)."""
    return 2.0 * gates * T * B * H * (I + H)


def train_flops(forward, I, H, input_grad=True):
    """A training step's FLOPs from its forward's: the forward, then the backward's two
    products per forward one; without x's gradient (input_grad False) less its product, I of
    every I + H columns of one forward's worth."""
    return 3 * forward - (0 if input_grad else forward * I / (I + H))


_square_cache = {}


def matmul_call(m, k, n, dtype, rng, torch=None):
    """A call of [m, k]·[k, n] on random operands in `dtype` (a tf.DType: float32 or bfloat16):
    tf.matmul in a tf.function, or torch.matmul with `torch` (PyTorch's threads as set).
    Returns (call, FLOPs)."""
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    if torch is not None:
        tdt = torch.float32 if dtype == tf.float32 else torch.bfloat16
        ta, tb = torch.from_numpy(a).to(tdt), torch.from_numpy(b).to(tdt)
        return (lambda: torch.matmul(ta, tb)), 2.0 * m * k * n
    ta, tb = tf.constant(a, dtype=dtype), tf.constant(b, dtype=dtype)
    return tf.function(lambda: tf.matmul(ta, tb)), 2.0 * m * k * n


def _rate(call_flops, reps):
    call, flops = call_flops
    return flops / median_ms(call, reps) / 1e6


def gemm_rates(T, B, I, H, dtype, reps, square=2048):
    """GF/s of tf.matmul in this run: the RNN's input GEMM [T·B, I+H]·[I+H, 4H] and a square
    GEMM of side `square` (measured once per dtype and side, then reused).
    Returns (rnn_shape_gflops, square_gflops)."""
    rng = np.random.default_rng(1)
    key = (dtype.name, square)
    if key not in _square_cache:
        _square_cache[key] = _rate(matmul_call(square, square, square, dtype, rng), reps)
    return _rate(matmul_call(T * B, I + H, 4 * H, dtype, rng), reps), _square_cache[key]


def torch_gemm_rate(torch, T, B, I, H, dtype, reps):
    """GF/s of torch.matmul (PyTorch's threads as set) on the RNN's input GEMM shape, in
    `dtype` (a tf.DType: float32 or bfloat16)."""
    rng = np.random.default_rng(1)
    return _rate(matmul_call(T * B, I + H, 4 * H, dtype, rng, torch), reps)


# --- peak memory -----------------------------------------------------------------------------
#
# On CPU tf.config.experimental.get_memory_info('CPU:0') fails in TF 2.21 ("Allocator stats not
# available", or zeros), so it cannot be used. Instead: the process's resident-set high-water
# mark (VmHWM), reset right before the measured call by writing "5" to /proc/self/clear_refs
# (Linux >= 4.0), minus the resident set before the call. The measuring process runs
#   * with TF_ENABLE_ONEDNN_OPTS=0: otherwise TensorFlow's CPU allocator is oneDNN's, a BFC
#     allocator that keeps freed buffers of 256 KiB or more and hands them out again, so the
#     second call of an op adds nothing to the resident set (measured: 0 MiB for an 8 MiB
#     result); with it, TensorFlow allocates tensors with malloc;
#   * with glibc's mmap threshold fixed at 64 KiB (MALLOC_MMAP_THRESHOLD_), so every buffer of
#     64 KiB or more is its own mapping, returned to the OS when freed: a buffer freed by an
#     earlier call cannot be reused silently.
# The peak is then what the call itself touched: outputs, temporaries and scratch (checked: an
# 8 MiB tf.function result measures 8.0 MiB). PyTorch's CPU allocator is malloc too.

MEM_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "0",
           "MALLOC_ARENA_MAX": "2", "TF_ENABLE_ONEDNN_OPTS": "0"}
MEM_METHOD = ("peak RSS added by one call (VmHWM reset via /proc/self/clear_refs, minus RSS "
              "before the call) after one warm-up call, in a separate process with "
              "TF_ENABLE_ONEDNN_OPTS=0 (TF allocates with malloc) and glibc mmap threshold "
              "64 KiB; includes the call's outputs")

_libc = None


def _status_kib(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{key} not in /proc/self/status")


def memory_supported():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        _status_kib("VmHWM")
        return True
    except OSError:
        return False


def _trim():
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL("libc.so.6")
        _libc.malloc_trim(0)
    except OSError:
        pass


def peak_mib(fn):
    """Peak resident memory (MiB) that one call of fn() adds on top of the memory before it."""
    fn()  # warm-up: tracing, kernel creation, lazily built caches
    _trim()
    base = _status_kib("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    out = fn()
    peak = _status_kib("VmHWM")
    del out
    return max(0, peak - base) / 1024.0
