"""CPU-vs-GPU parity of the stacked-RNN engines, without TensorFlow or bazel.

    python3 tests/gpu/cpu_parity.py              # CPU engine vs CUDA engine (needs torch+CUDA)
    python3 tests/gpu/cpu_parity.py --cpu-only   # CPU engine alone vs a numpy reference
    TF_RNN_OPS_CUDA_EMULATED=1 python3 tests/gpu/cpu_parity.py
        # CPU engine vs the CUDA engine's CPU emulation build (tools/build_cuda_emu.sh), on
        # numpy arrays: no GPU and no PyTorch needed
    ... --dtypes float32                         # one dtype only (default float32,float64)

The CPU engine (tf_rnn_ops/_tfrnn_engine_{avx512,avx2,avx}.so, the best variant this CPU runs,
chosen like cc/kernels/engine_loader.cc; TF_RNN_OPS_ISA forces one) is driven through
tests/gpu/cpu_engine_shim.cc, built here with g++ when build/cpu_engine_shim.so is missing or
older than its source or the headers it includes.  The CUDA engine runs through
gpu_common.run_engine.  Both get the same random inputs (drawn in float64, then cast) and the
same spec (cuda_engine.Spec); forward and backward outputs must agree to max|a-b| / max(1, max|b|) <= 1e-4 (float32) or 1e-10 (float64),
and the dropout masks that both engines draw into the reserve must be bitwise equal.  Prints one
line per check and a summary; exits 1 on any FAIL, 0 when everything passed or was skipped.
"""

import ctypes
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cuda_engine as ce  # noqa: E402  (ctypes structs and layout mirror; no torch)

REPO = os.path.dirname(os.path.dirname(HERE))
SHIM_SRC = "tests/gpu/cpu_engine_shim.cc"
SHIM_SO = "build/cpu_engine_shim.so"
BUILD_CMD = ["g++", "-O2", "-std=c++17", "-shared", "-fPIC", "-I.", SHIM_SRC, "-o", SHIM_SO,
             "-ldl", "-lpthread"]
ISA_FLAGS = {"avx512": {"avx512f", "avx512dq", "avx512bw", "avx512vl", "fma"},
             "avx2": {"avx2", "fma"}, "avx": {"avx"}}
TOL = {"float32": 1e-4, "float64": 1e-10}
FIELDS = ("y", "hn", "cn", "dx", "dh0", "dc0", "dparams", "dpeephole", "dw", "dr", "dbw", "dbr")
WEIGHTS = ("w", "r", "bw", "br")  # the separate weights of a Keras-face case (args.w ...)
COUNTS = {"PASS": 0, "FAIL": 0, "SKIP": 0}


def report(status, name, detail=""):
    COUNTS[status] += 1
    print(f"{status} {name}" + (f"  {detail}" if detail else ""), flush=True)


def pick_cpu_engine():
    """(path, None) of the CPU engine variant to use, or (None, why not)."""
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            flags = set(next((ln for ln in f if ln.startswith("flags")), ":").split(":")[1].split())
    except OSError:
        pass
    forced = os.environ.get("TF_RNN_OPS_ISA", "")
    for isa in ([forced] if forced else ["avx512", "avx2", "avx"]):
        path = os.path.join(REPO, "tf_rnn_ops", f"_tfrnn_engine_{isa}.so")
        if isa in ISA_FLAGS and ISA_FLAGS[isa] <= flags and os.path.exists(path):
            return path, None
    return None, f"no usable CPU engine .so in tf_rnn_ops/ for this CPU (TF_RNN_OPS_ISA={forced!r})"


def _nan_grads(x, h0, c0, params, peephole, weights=None):
    """The backward's outputs, NaN until written (None where the input is None)."""
    nan = lambda a: None if a is None else np.full_like(a, np.nan)  # noqa: E731
    out = dict(dx=nan(x), dh0=nan(h0), dc0=nan(c0), dparams=nan(params),
               dpeephole=nan(peephole))
    out.update({"d" + k: nan(v) for k, v in (weights or {}).items()})
    return out


class CpuEngine:
    """The CPU engine through the shim; host numpy arrays in, numpy arrays out."""

    def __init__(self, engine_path):
        so = os.path.join(REPO, SHIM_SO)
        deps = [SHIM_SRC, "cc/engine/types.h", "cc/engine/engine_api.h", "cc/gpu/c_api.h",
                "cc/gpu/c_api_convert.h"]
        newest = max(os.path.getmtime(os.path.join(REPO, d)) for d in deps)
        if not os.path.exists(so) or os.path.getmtime(so) < newest:
            os.makedirs(os.path.dirname(so), exist_ok=True)
            subprocess.run(BUILD_CMD, cwd=REPO, check=True)
        lib = self.lib = ctypes.CDLL(so)
        sp, i64p = ctypes.POINTER(ce.Spec), ctypes.POINTER(ctypes.c_int64)
        lib.tfrnn_cpu_last_error.restype = lib.tfrnn_cpu_isa.restype = ctypes.c_char_p
        lib.tfrnn_cpu_open.argtypes = [ctypes.c_char_p]
        lib.tfrnn_cpu_rnn_sizes.argtypes = [sp] + [i64p] * 4
        lib.tfrnn_cpu_rnn_forward.argtypes = [sp, ctypes.POINTER(ce.FwdArgs), ctypes.c_void_p]
        lib.tfrnn_cpu_rnn_backward.argtypes = [sp, ctypes.POINTER(ce.BwdArgs), ctypes.c_void_p]
        self._check(lib.tfrnn_cpu_open(engine_path.encode()))
        self.isa = lib.tfrnn_cpu_isa().decode()

    def _check(self, rc):
        if rc != 0:
            raise RuntimeError("CPU shim: " + self.lib.tfrnn_cpu_last_error().decode())

    def run(self, spec, *, x, h0, c0, params, lengths=None, dy=None, dhn=None, dcn=None,
            peephole=None, mask=None, mask_per_step=False, weights=None):
        """Mirror of gpu_common.run_engine on numpy arrays of the spec's dtype (outputs start
        as NaN so that anything left unwritten shows); weights: the separate weights (dict
        w, r, bw, br) instead of params, their gradients returned as dw, dr, dbw, dbr."""
        dt = x.dtype
        T, B, H, L, D = spec.T, spec.B, spec.H, spec.L, spec.D
        Hs = spec.P or H
        lstm = spec.mode == ce.MODES["lstm"]
        sz = [ctypes.c_int64() for _ in range(4)]  # params, reserve, fwd/bwd workspace
        self._check(self.lib.tfrnn_cpu_rnn_sizes(ctypes.byref(spec), *map(ctypes.byref, sz)))
        n_params, n_reserve, fws, bws = (v.value for v in sz)
        assert weights is not None or params.size == n_params, (params.size, n_params)
        nan = lambda *shape: np.full(shape, np.nan, dtype=dt)  # noqa: E731
        out = {"y": nan(T, B, D * Hs), "hn": nan(L * D, B, Hs),
               "cn": nan(L * D, B, H) if lstm else None,
               # Zeros, as the TF kernel passes it with short sequences: the forward skips rows
               # past each length, and the reset-before gru backward reads them (NaN there
               # would reach dparams).
               "reserve": np.zeros(max(1, n_reserve), dtype=dt)}
        def ptr(a):
            assert a is None or (a.dtype == dt and a.flags.c_contiguous), "dtype or layout"
            return None if a is None else a.ctypes.data
        lens = None if lengths is None else np.ascontiguousarray(lengths, dtype=np.int32)
        lp = None if lens is None else lens.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
        common = dict(x=ptr(x), h0=ptr(h0), c0=ptr(c0), params=ptr(params),
                      peephole=ptr(peephole), mask=ptr(mask), mask_per_step=int(mask_per_step),
                      **{k: ptr(v) for k, v in (weights or {}).items()})
        fa = ce.FwdArgs(lengths=lp, y=ptr(out["y"]), hn=ptr(out["hn"]), cn=ptr(out["cn"]),
                        reserve=ptr(out["reserve"]), **common)
        ws = np.empty(max(1, fws), dtype=dt)
        self._check(self.lib.tfrnn_cpu_rnn_forward(ctypes.byref(spec), ctypes.byref(fa),
                                                   ws.ctypes.data))
        if dy is None:
            return out
        out.update(_nan_grads(x, h0, c0 if lstm else None, params, peephole, weights))
        grads = {"d" + k: ptr(out["d" + k]) for k in (weights or {})}
        ba = ce.BwdArgs(lengths=lp, reserve=ptr(out["reserve"]), dy=ptr(dy), dhn=ptr(dhn),
                        dcn=ptr(dcn), dx=ptr(out["dx"]), dh0=ptr(out["dh0"]),
                        dc0=ptr(out["dc0"]), dparams=ptr(out["dparams"]),
                        dpeephole=ptr(out["dpeephole"]), **common, **grads)
        ws = np.empty(max(1, bws), dtype=dt)
        self._check(self.lib.tfrnn_cpu_rnn_backward(ctypes.byref(spec), ctypes.byref(ba),
                                                    ws.ctypes.data))
        return out


class EmulatedCudaEngine:
    """The CUDA engine's C API on host numpy arrays: only for its CPU emulation build
    (TF_RNN_OPS_CUDA_EMULATED=1, tools/build_cuda_emu.sh), whose device memory is host memory.
    Needs no PyTorch, so the parity check runs wherever g++ does (CI included)."""

    def __init__(self):
        self.eng = ce.Engine()

    def run(self, spec, *, x, h0, c0, params, lengths=None, dy=None, dhn=None, dcn=None,
            peephole=None, mask=None, mask_per_step=False, weights=None):
        """Same as CpuEngine.run (and gpu_common.run_engine): outputs and reserve start NaN."""
        dt = x.dtype
        T, B, H, L, D = spec.T, spec.B, spec.H, spec.L, spec.D
        Hs = spec.P or H
        lstm = spec.mode == ce.MODES["lstm"]
        n_params, n_reserve, fws, bws = self.eng.sizes(spec)
        assert weights is not None or params.size == n_params, (params.size, n_params)
        nan = lambda *shape: np.full(shape, np.nan, dtype=dt)  # noqa: E731
        out = {"y": nan(T, B, D * Hs), "hn": nan(L * D, B, Hs),
               "cn": nan(L * D, B, H) if lstm else None, "reserve": nan(max(1, n_reserve))}
        p = lambda a: None if a is None else a.ctypes.data  # noqa: E731
        common = dict(x=p(x), h0=p(h0), c0=p(c0), params=p(params), peephole=p(peephole),
                      mask=p(mask), mask_per_step=int(mask_per_step),
                      **{k: p(v) for k, v in (weights or {}).items()})
        ws = np.empty(max(1, fws), dtype=np.uint8)
        self.eng.forward_raw(spec, dict(common, y=p(out["y"]), hn=p(out["hn"]),
                                        cn=p(out["cn"]), reserve=p(out["reserve"])),
                             ws.ctypes.data, fws, 0, lengths=lengths)
        if dy is None:
            return out
        out.update(_nan_grads(x, h0, c0 if lstm else None, params, peephole, weights))
        grads = {"d" + k: p(out["d" + k]) for k in (weights or {})}
        ws = np.empty(max(1, bws), dtype=np.uint8)
        self.eng.backward_raw(spec, dict(common, reserve=p(out["reserve"]), dy=p(dy),
                                         dhn=p(dhn), dcn=p(dcn), dx=p(out["dx"]),
                                         dh0=p(out["dh0"]), dc0=p(out["dc0"]),
                                         dparams=p(out["dparams"]),
                                         dpeephole=p(out["dpeephole"]), **grads),
                              ws.ctypes.data, bws, 0, lengths=lengths)
        return out


def mask_regions(spec):
    """Python mirror of RnnMaskOffset (cc/engine/types.h): [(offset, count)] of the dropout
    mask of each layer l < L-1 in the reserve, and the reserve size (RnnReserveSize)."""
    mode = {v: k for k, v in ce.MODES.items()}[spec.mode]
    T, B, H, L, D, K = spec.T, spec.B, spec.H, spec.L, spec.D, ce.GATES[mode]
    Hs = spec.P or H
    aux = H if mode in ("lstm", "gru") else 0
    hh = H if mode == "lstm" and spec.P else 0
    pseudo = T * B * (K * H + aux + hh + Hs)
    has = bool(spec.training) and np.float32(spec.dropout) > 0 and L > 1
    n = T * B * D * Hs
    nxt = lambda l: L * D * pseudo + l * n * (2 if has else 1)  # noqa: E731
    return ([(nxt(l) + n, n) for l in range(L - 1)] if has else []), nxt(L - 1)


def make_case(c, dtype):
    """(spec, inputs as float64 numpy arrays, lengths); shapes as gpu_checks.check_vs_reference."""
    mode, L, D, P = c["mode"], c.get("L", 1), c.get("D", 1), c.get("P", 0)
    T, B, I, H = c.get("T", 6), c.get("B", 4), c.get("I", 5), c.get("H", 7)
    K, Hs = ce.GATES[mode], P or H
    rng = np.random.default_rng(c.get("rng", 99))
    lengths = {None: None, "var": [max(1, T - b) for b in range(B)],
               "zero": [(T - 2 * b) % (T + 1) for b in range(B)]}[c.get("lengths")]
    keras = c.get("keras", False)
    act, rec = c.get("act", "tanh"), c.get("rec_act", "sigmoid")
    spec = ce.make_spec(mode, T=T, B=B, I=I, H=H, P=P, L=L, D=D, dtype=dtype,
                        dropout=c.get("dropout", 0.0), seed=c.get("seed", 0),
                        peephole=c.get("peephole", False), has_mask=c.get("has_mask", False),
                        gru_reset_before=c.get("gru_reset_before", False),
                        gru_z_new=c.get("gru_z_new", False),
                        mask_gates=c.get("mask_gates", False),
                        gate_pos=c.get("gate_pos", (1, 0, 2, 3) if keras and mode == "gru"
                                       else (0, 1, 2, 3)),
                        gate_act=(rec, rec, act, rec), cell_act=act)
    spec.weights_xw = int(keras)
    n_params = max(o["end"] for o in ce.param_layout(mode, L=L, D=D, I=I, H=H, P=P))
    r = lambda shape, s=1.0: rng.standard_normal(shape) * s  # noqa: E731
    inp = dict(params=r(n_params, 0.4), x=r((T, B, I)), h0=r((L * D, B, Hs), 0.5),
               c0=r((L * D, B, H), 0.5) if mode == "lstm" else None, dy=r((T, B, D * Hs)),
               dhn=r((L * D, B, Hs)), dcn=r((L * D, B, H)) if mode == "lstm" else None,
               peephole=r((L * D, K * H), 0.5) if c.get("peephole") else None, mask=None)
    if c.get("has_mask"):
        mt = T if c.get("mask_per_step") else 1
        cols = D * (K if c.get("mask_gates") else 1) * Hs
        inp["mask"] = (rng.random((mt, B, cols)) > 0.3) * 1.25
    if keras:
        # The Keras layers' op (TfRnn>KerasRNN): W [I, K·H], R [H, K·H] as Keras holds them
        # (weights_xw), gate blocks in Keras's order, the input and recurrent biases (zeros
        # for Keras's single bias).
        inp["params"] = None
        inp["weights"] = dict(w=r((I, K * H), 0.4), r=r((H, K * H), 0.4), bw=r(K * H, 0.4),
                              br=np.zeros(K * H) if c.get("one_bias") else r(K * H, 0.4))
    return spec, inp, lengths


CASES = [
    ("lstm-L2-D2-var", dict(mode="lstm", L=2, D=2, lengths="var")),
    ("gru-L2-D1-zero", dict(mode="gru", L=2, D=1, lengths="zero")),
    ("rnn_tanh-L1-D2", dict(mode="rnn_tanh", L=1, D=2)),
    ("rnn_relu-L3-D1", dict(mode="rnn_relu", L=3, D=1)),
    ("lstm-P3-L2-D2-var", dict(mode="lstm", P=3, L=2, D=2, lengths="var")),
    ("gru-resetbefore-znew-mask", dict(mode="gru", gru_reset_before=True, gru_z_new=True,
                                       has_mask=True, lengths="var")),
    ("lstm-peephole-maskperstep", dict(mode="lstm", D=2, peephole=True, has_mask=True,
                                       mask_per_step=True)),
    # Odd sizes: clusters of 4 blocks leave one block without units, clusters of 2 split the
    # batch 2 + 1 (the cluster kernels).
    ("gru-H5-B3-var", dict(mode="gru", H=5, B=3, lengths="var")),
    # Per-gate recurrent masks (one mask per gate block).
    ("lstm-maskgates-D2-var", dict(mode="lstm", D=2, has_mask=True, mask_gates=True,
                                   mask_per_step=True, lengths="var")),
    ("gru-maskgates-L2", dict(mode="gru", L=2, has_mask=True, mask_gates=True)),
    # One batch row: the persistent backward by default (DefaultBwd).
    ("lstm-B1-D2-var", dict(mode="lstm", B=1, D=2, lengths="var")),
    # The Keras layers' op: separate weights as Keras holds them, Keras's gate order and
    # activations, per-gate masks (recurrent dropout), reset-before gru.
    ("keras-lstm-var", dict(mode="lstm", keras=True, one_bias=True, lengths="var")),
    ("keras-lstm-relu-hardsig-maskgates", dict(mode="lstm", keras=True, one_bias=True,
                                               act="relu", rec_act="keras_hard_sigmoid",
                                               has_mask=True, mask_gates=True)),
    ("keras-gru-maskgates-var", dict(mode="gru", keras=True, has_mask=True, mask_gates=True,
                                     lengths="var")),
    ("keras-gru-resetbefore-var", dict(mode="gru", keras=True, one_bias=True,
                                       gru_reset_before=True, lengths="var")),
    ("keras-gru-resetbefore-maskgates", dict(mode="gru", keras=True, one_bias=True,
                                             gru_reset_before=True, has_mask=True,
                                             mask_gates=True, lengths="zero")),
    ("gru-resetbefore-maskgates-D2", dict(mode="gru", D=2, gru_reset_before=True,
                                          has_mask=True, mask_gates=True)),
    # The candidate's block between the other two (its product is not in a batched run).
    ("gru-resetbefore-maskgates-candmid", dict(mode="gru", gru_reset_before=True, has_mask=True,
                                               mask_gates=True, gate_pos=(0, 2, 1, 3),
                                               lengths="var")),
    ("lstm-L3-D2-dropout0.3", dict(mode="lstm", L=3, D=2, dropout=0.3, seed=7)),
    ("gru-L2-D1-dropout0.5-var", dict(mode="gru", L=2, D=1, dropout=0.5, seed=3,
                                      lengths="var")),
]


def rel_err(a, b):
    """max |a - b| / max(1, max |b|) in float64 (NaN or inf anywhere -> inf)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape or not (np.isfinite(a).all() and np.isfinite(b).all()):
        return float("inf")
    return float(np.abs(a - b).max() / max(1.0, np.abs(b).max())) if a.size else 0.0


def report_errs(name, errs, tol, extra=""):
    """One PASS/FAIL line for a dict field -> error (tol: a number, or field -> number)."""
    bad = [k for k, e in errs.items() if not e <= (tol(k) if callable(tol) else tol)]
    worst = max(errs, key=errs.get)
    report("FAIL" if bad else "PASS", name, f"max_rel_err={errs[worst]:.3g} ({worst})"
           + (f" over tol: {bad}" if bad else "") + extra)


def parity(cpu, dtypes=("float32", "float64")):
    """Every case and dtype: CPU engine vs CUDA engine (or its CPU emulation, on numpy)."""
    import gpu_common as gc
    emu = EmulatedCudaEngine() if gc.emulated() else None
    torch = None if emu else gc.torch_cuda()
    if torch is not None:
        gc.no_tf32()
    for name, c in CASES:
        for dtype in dtypes:
            full = f"{name} {dtype}"
            spec, inp, lengths = make_case(c, dtype)
            cast = lambda v: None if v is None else np.ascontiguousarray(v.astype(dtype))  # noqa: E731
            weights = inp.pop("weights", None)
            host = {k: cast(v) for k, v in inp.items()}
            kw = dict(lengths=lengths, mask_per_step=c.get("mask_per_step", False))
            if weights is not None:
                kw["weights"] = {k: cast(v) for k, v in weights.items()}
            try:
                a = cpu.run(spec, **host, **kw)
                if emu is not None:
                    g = emu.run(spec, **{k: None if v is None else v.copy()
                                         for k, v in host.items()}, **kw)
                else:
                    to_dev = lambda v: None if v is None else torch.from_numpy(v).to(gc.device())  # noqa: E731
                    dev = {k: to_dev(v) for k, v in host.items()}
                    if weights is not None:
                        kw["weights"] = {k: to_dev(v) for k, v in kw["weights"].items()}
                    g = gc.run_engine(spec, **dev, **kw)
                    g = {k: None if v is None else v.detach().cpu().numpy() for k, v in g.items()}
            except Exception as e:  # noqa: BLE001 - one broken case must not stop the rest
                report("FAIL", full, f"error: {e}")
                continue
            errs = {k: rel_err(a[k], g[k]) for k in FIELDS if a.get(k) is not None}
            # For information only: the whole reserve where the GPU wrote it (the engines
            # may keep different intermediates there; only the masks must be equal).
            ra, rg = a["reserve"], g["reserve"]
            info = "; reserve sizes differ" if ra.size != rg.size else \
                f"; reserve (info) {rel_err(ra[np.isfinite(rg)], rg[np.isfinite(rg)]):.3g}"
            report_errs(full, errs, TOL[dtype], info)
            check_masks(full, spec, ra, rg)


def check_masks(name, spec, reserve, other):
    """A PASS/FAIL line (none without dropout): the dropout masks in `reserve` equal those of
    `other`, a reserve of the same layout or a function (layer, n) -> the expected mask."""
    regions, size = mask_regions(spec)
    if not regions:
        return
    if reserve.size != size or (not callable(other) and other.size != size):
        other_size = "" if callable(other) else f", other {other.size}"
        report("FAIL", name + " dropout masks", f"reserve size {reserve.size}{other_size} != "
               f"{size} (RnnReserveSize): the reserve layouts differ")
        return
    diff = kept = 0
    for l, (o, n) in enumerate(regions):
        want = other(l, n) if callable(other) else other[o:o + n]
        diff += int((reserve[o:o + n] != want).sum())
        kept += int((reserve[o:o + n] != 0).sum())
    report("FAIL" if diff else "PASS", name + " dropout masks",
           f"{diff} of {sum(n for _, n in regions)} mask elements differ ({kept} kept)")


def _np_reference(mode, x, h0, c0, params, lengths, H):
    """Float64 numpy forward of one unidirectional layer (cuDNN equations; lstm or gru)."""
    T, B, I = x.shape
    K = ce.GATES[mode]
    o = ce.param_layout(mode, L=1, D=1, I=I, H=H)[0]
    W, R = params[o["w"]:o["r"]].reshape(K * H, I), params[o["r"]:o["p"]].reshape(K * H, H)
    bW, bR = params[o["bw"]:o["br"]], params[o["br"]:o["end"]]
    sig = lambda v: 1.0 / (1.0 + np.exp(-v))  # noqa: E731
    h, c = h0[0].copy(), None if c0 is None else c0[0].copy()
    y = np.zeros((T, B, H))
    for t in range(T):
        gx, hr = x[t] @ W.T + bW, h @ R.T + bR
        blk = lambda v, k: v[:, k * H:(k + 1) * H]  # noqa: E731
        if mode == "lstm":
            i, f, g, og = (sig(blk(gx, 0) + blk(hr, 0)), sig(blk(gx, 1) + blk(hr, 1)),
                           np.tanh(blk(gx, 2) + blk(hr, 2)), sig(blk(gx, 3) + blk(hr, 3)))
            cn = f * c + i * g
            hn = og * np.tanh(cn)
        else:
            r, z = sig(blk(gx, 0) + blk(hr, 0)), sig(blk(gx, 1) + blk(hr, 1))
            hn = (1 - z) * np.tanh(blk(gx, 2) + r * blk(hr, 2)) + z * h
        v = (t < np.asarray(lengths if lengths is not None else [T] * B))[:, None]
        h, y[t] = np.where(v, hn, h), np.where(v, hn, 0.0)
        c = None if c is None else np.where(v, cn, c)
    return y, h[None], None if c is None else c[None]


def cpu_only(cpu):
    """Local self-check (numpy only): forward vs _np_reference, gradients vs central
    differences, and the reserve's dropout masks vs gpu_reference.dropout_mask."""
    import gpu_reference
    for mode in ("lstm", "gru"):
        name = f"cpu-only {mode}-L1-D1-var float64"
        spec, inp, lengths = make_case(dict(mode=mode, lengths="var", rng=5), "float64")
        out = cpu.run(spec, lengths=lengths, **inp)
        ref = _np_reference(mode, inp["x"], inp["h0"], inp["c0"], inp["params"], lengths, spec.H)
        errs = {k: rel_err(out[k], r) for k, r in zip(("y", "hn", "cn"), ref) if r is not None}

        def loss(**over):
            a = dict(inp, **over)
            o = cpu.run(spec, x=a["x"], h0=a["h0"], c0=a["c0"], params=a["params"],
                        lengths=lengths)
            return sum(float((o[k] * a[d]).sum()) for k, d in (("y", "dy"), ("hn", "dhn"),
                                                               ("cn", "dcn")) if o[k] is not None)
        def central_diff(key, j, eps=1e-6):
            plus, minus = inp[key].copy(), inp[key].copy()
            plus.flat[j] += eps
            minus.flat[j] -= eps
            return (loss(**{key: plus}) - loss(**{key: minus})) / (2 * eps)
        rng = np.random.default_rng(1)
        for key in ("x", "h0", "c0", "params"):
            if inp[key] is not None:  # 8 random coordinates of each input
                js = rng.choice(inp[key].size, 8, replace=False)
                errs[f"d{key}(fd)"] = rel_err(out["d" + key].flat[js],
                                              [central_diff(key, j) for j in js])
        report_errs(name, errs, lambda k: 1e-6 if "(fd)" in k else 1e-12)
    for name, c in CASES[-2:]:  # the dropout cases: masks vs gpu_reference.dropout_mask
        for dtype in ("float32", "float64"):
            spec, inp, lengths = make_case(c, dtype)
            out = cpu.run(spec, lengths=lengths,
                          **{k: None if v is None else v.astype(dtype) for k, v in inp.items()})
            errs = {k: rel_err(out[k], out[k]) for k in FIELDS if out.get(k) is not None}
            report_errs(f"cpu-only {name} {dtype} finite", errs, 0.0)
            check_masks(f"cpu-only {name} {dtype}", spec, out["reserve"], lambda l, n: (
                gpu_reference.dropout_mask(spec.seed, l, n, spec.dropout).astype(dtype)))


def main():
    argv = sys.argv[1:]
    only = "--cpu-only" in argv
    dtypes = ("float32", "float64")
    if "--dtypes" in argv and argv.index("--dtypes") + 1 < len(argv):
        dtypes = tuple(argv[argv.index("--dtypes") + 1].split(","))
        if not set(dtypes) <= set(TOL):
            print(f"cpu_parity: --dtypes takes {','.join(TOL)}, not {','.join(dtypes)}")
            return 2
    path, why = pick_cpu_engine()
    cpu = None
    if path is None:
        report("SKIP", "all", why)
    else:
        try:
            cpu = CpuEngine(path)
            print(f"CPU engine: {os.path.basename(path)} (isa {cpu.isa})", flush=True)
        except FileNotFoundError as e:  # no g++
            report("SKIP", "all", f"cannot build the CPU shim: {e}")
        except (OSError, subprocess.CalledProcessError, RuntimeError) as e:
            report("FAIL", "all", f"CPU shim: {e}")
    if cpu is not None and only:
        cpu_only(cpu)
    elif cpu is not None:
        import gpu_common as gc
        reason = gc.gpu_unavailable_reason()
        if reason and gc.emulated() and os.path.exists(ce.so_path()):
            reason = None  # the emulation's numpy path needs no PyTorch
        report("SKIP", "all", reason) if reason else parity(cpu, dtypes)
    print("summary:", COUNTS)
    return 1 if COUNTS["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
