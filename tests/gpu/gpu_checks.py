"""The GPU checks of the CUDA engine, as plain functions over case lists (test_gpu_engine.py
parametrizes them for pytest; run_gpu_checks.py runs them where pytest is missing).

* check_vs_cudnn: ours vs torch.nn.LSTM/GRU/RNN on CUDA (cuDNN) with the same canonical weights:
  outputs, final states, input/state/weight gradients; layers, directions, lengths, projection.
* check_vs_reference: ours vs a float64 PyTorch step-by-step reference (reference.py), for what
  cuDNN cannot do (skip input, dropout masks, zero lengths, MPSGraph-style LSTM options) and
  for every dtype.
* check_cudnn_layout: our RnnParamLayout vs the real opaque cuDNN weight buffer that PyTorch
  flattens (offset of every weight and bias view inside it).
* check_deterministic, check_bad_input.
"""

import os

import numpy as np

import cuda_engine
import gpu_common as gc
import gpu_reference as reference

# Tolerances: max |ours - ref| / max(1, max |ref|).
TOL = {"float64": 1e-9, "float32": 2e-4, "float16": 2e-2, "bfloat16": 8e-2}


def _torch():
    gc.engine()  # skips when unavailable
    gc.no_tf32()
    return gc.torch_cuda()


def _rand(torch, shape, scale=1.0, gen=None):
    return torch.randn(*shape, generator=gen, dtype=torch.float64) * scale


# ---------------------------------------------------------------------------------------------
# vs cuDNN (torch.nn on CUDA)

def _torch_module(torch, mode, I, H, L, D, P):
    nn = torch.nn
    kw = dict(num_layers=L, bidirectional=D == 2)
    if mode == "lstm":
        return nn.LSTM(I, H, proj_size=P, **kw)
    if mode == "gru":
        return nn.GRU(I, H, **kw)
    return nn.RNN(I, H, nonlinearity="tanh" if mode == "rnn_tanh" else "relu", **kw)


def _module_params(m, mode, L, D):
    """Per pseudo-layer dict W, R, Pm, bW, bR of torch parameters (canonical cuDNN order)."""
    out = []
    for l in range(L):
        for d in range(D):
            sfx = f"_l{l}" + ("_reverse" if d else "")
            out.append({"W": getattr(m, "weight_ih" + sfx), "R": getattr(m, "weight_hh" + sfx),
                        "Pm": getattr(m, "weight_hr" + sfx, None),
                        "bW": getattr(m, "bias_ih" + sfx), "bR": getattr(m, "bias_hh" + sfx)})
    return out


def _pack(torch, mode, per_layer, *, L, D, I, H, P, dtype, device):
    lay = cuda_engine.param_layout(mode, L=L, D=D, I=I, H=H, P=P)
    flat = torch.zeros(lay[-1]["end"], dtype=dtype, device=device)
    for o, p in zip(lay, per_layer):
        for key, (a, b) in _regions(o, P * H).items():
            if p[key] is not None and b > a:
                flat[a:b] = p[key].detach().reshape(-1).to(dtype)
    return flat


def _regions(o, pn):
    """{key: (start, end)} of one pseudo-layer's regions (param_layout offsets o; the
    projection has pn = P*H elements)."""
    return {"W": (o["w"], o["r"]), "R": (o["r"], o["p"]), "Pm": (o["p"], o["p"] + pn),
            "bW": (o["bw"], o["br"]), "bR": (o["br"], o["end"])}


def _unpack_grads(mode, dflat, *, L, D, I, H, P):
    lay = cuda_engine.param_layout(mode, L=L, D=D, I=I, H=H, P=P)
    return [{key: dflat[a:b] for key, (a, b) in _regions(o, P * H).items()} for o in lay]


CUDNN_CASES = []
for _mode in ("lstm", "gru", "rnn_tanh", "rnn_relu"):
    for _L, _D in ((1, 1), (2, 1), (1, 2), (3, 2)):
        for _lens in (None, "var"):
            CUDNN_CASES.append(dict(mode=_mode, L=_L, D=_D, lengths=_lens, dtype="float32"))
CUDNN_CASES += [
    dict(mode="lstm", L=2, D=2, lengths="var", dtype="float32", P=3),
    dict(mode="lstm", L=1, D=1, lengths=None, dtype="float32", P=5),
    dict(mode="lstm", L=2, D=2, lengths="var", dtype="float64"),
    dict(mode="gru", L=2, D=2, lengths="var", dtype="float64"),
    dict(mode="lstm", L=2, D=2, lengths=None, dtype="float16"),
    dict(mode="gru", L=1, D=2, lengths="var", dtype="float16"),
    dict(mode="lstm", L=1, D=1, lengths=None, dtype="float32", T=1, B=1),
    dict(mode="gru", L=2, D=1, lengths=None, dtype="float32", T=40, B=64, I=96, H=128),
    dict(mode="lstm", L=1, D=2, lengths="var", dtype="float32", T=30, B=33, I=64, H=256),
]


def case_id(c):
    return "-".join(f"{k}={v}" for k, v in c.items())


def check_vs_cudnn(case):
    torch = _torch()
    mode, L, D, dtype = case["mode"], case["L"], case["D"], case["dtype"]
    T, B, I, H, P = case.get("T", 7), case.get("B", 5), case.get("I", 6), case.get("H", 8), \
        case.get("P", 0)
    Hs = P if P else H
    dev = gc.device()
    tdt = gc.tdtype(dtype)
    gen = torch.Generator().manual_seed(1234)
    m = _torch_module(torch, mode, I, H, L, D, P).to(dev, tdt)
    lengths = None
    if case["lengths"] == "var":
        lengths = [max(1, T - (3 * b) % T) for b in range(B)]
        lengths[0] = T
    x = _rand(torch, (T, B, I), gen=gen).to(dev, tdt).requires_grad_()
    h0 = _rand(torch, (L * D, B, Hs), 0.5, gen).to(dev, tdt).requires_grad_()
    c0 = _rand(torch, (L * D, B, H), 0.5, gen).to(dev, tdt).requires_grad_()
    gy = _rand(torch, (T, B, D * Hs), gen=gen).to(dev, tdt)
    ghn = _rand(torch, (L * D, B, Hs), gen=gen).to(dev, tdt)
    gcn = _rand(torch, (L * D, B, H), gen=gen).to(dev, tdt)
    if lengths is not None:
        for b, n in enumerate(lengths):
            gy[n:, b] = 0
    # cuDNN through torch.nn.
    if lengths is not None:
        packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, enforce_sorted=False)
        out, st = m(packed, (h0, c0) if mode == "lstm" else h0)
        y, _ = torch.nn.utils.rnn.pad_packed_sequence(out, total_length=T)
    else:
        y, st = m(x, (h0, c0) if mode == "lstm" else h0)
    hn, cn = st if mode == "lstm" else (st, None)
    loss = (y * gy).sum() + (hn * ghn).sum() + (cn * gcn).sum() if mode == "lstm" else \
        (y * gy).sum() + (hn * ghn).sum()
    loss.backward()
    mp = _module_params(m, mode, L, D)
    # Ours with the same weights.
    params = _pack(torch, mode, mp, L=L, D=D, I=I, H=H, P=P, dtype=tdt, device=dev)
    spec = cuda_engine.make_spec(mode, T=T, B=B, I=I, H=H, P=P, L=L, D=D, dtype=dtype)
    r = gc.run_engine(spec, x=x.detach(), h0=h0.detach(),
                      c0=c0.detach() if mode == "lstm" else None, params=params,
                      lengths=lengths, dy=gy, dhn=ghn, dcn=gcn if mode == "lstm" else None)
    tol = TOL[dtype]
    gc.assert_close("y", r["y"], y, tol)
    gc.assert_close("hn", r["hn"], hn, tol)
    if mode == "lstm":
        gc.assert_close("cn", r["cn"], cn, tol)
        gc.assert_close("dc0", r["dc0"], c0.grad, 5 * tol)
    gc.assert_close("dx", r["dx"], x.grad, 5 * tol)
    gc.assert_close("dh0", r["dh0"], h0.grad, 5 * tol)
    grads = _unpack_grads(mode, r["dparams"], L=L, D=D, I=I, H=H, P=P)
    for p, (ours, ref) in enumerate(zip(grads, mp)):
        for key in ("W", "R", "Pm", "bW", "bR"):
            if ref[key] is not None:
                gc.assert_close(f"d{key}[{p}]", ours[key], ref[key].grad.reshape(-1), 5 * tol)


# ---------------------------------------------------------------------------------------------
# vs the float64 reference

REF_CASES = [
    dict(mode="lstm", L=2, D=2, lengths="zero"),
    dict(mode="gru", L=2, D=2, lengths="zero"),
    dict(mode="rnn_tanh", L=1, D=2, lengths="zero"),
    dict(mode="rnn_relu", L=2, D=1, lengths="var"),
    dict(mode="lstm", L=1, D=1, skip_input=True),
    dict(mode="gru", L=2, D=2, skip_input=True, lengths="var"),
    dict(mode="lstm", L=3, D=2, dropout=0.3, seed=7),
    dict(mode="gru", L=2, D=1, dropout=0.5, seed=3, lengths="var"),
    dict(mode="lstm", L=2, D=2, P=3, lengths="zero"),
    dict(mode="lstm", L=1, D=1, T=0),
    dict(mode="gru", L=1, D=2, B=0),
    # MPSGraph-style LSTM options.
    dict(mode="lstm", gate_pos=(0, 2, 1, 3), gate_act=("hard_sigmoid", "sigmoid", "relu",
                                                       "tanh"), cell_act="sigmoid"),
    dict(mode="lstm", peephole=True, lengths="var"),
    dict(mode="lstm", D=2, peephole=True, has_mask=True, mask_per_step=True),
    dict(mode="lstm", has_mask=True, reverse=True, lengths="var"),
    dict(mode="lstm", D=2, preprojected=True),
    dict(mode="lstm", D=2, lengths="var", lengths_on_device=True),
    # MPSGraph-style GRU options (gate blocks/activations, z_new, reset before, mask).
    dict(mode="gru", gate_pos=(1, 0, 2, 3), gru_z_new=True),
    dict(mode="gru", gate_act=("hard_sigmoid", "sigmoid", "relu", "sigmoid"), lengths="var"),
    dict(mode="gru", gru_reset_before=True),
    dict(mode="gru", gru_reset_before=True, gate_pos=(1, 0, 2, 3), gru_z_new=True, D=2,
         lengths="zero"),
    dict(mode="gru", has_mask=True, lengths="var"),
    # Per-gate recurrent masks (Keras recurrent dropout: one mask per gate block).
    dict(mode="lstm", D=2, has_mask=True, mask_gates=True, mask_per_step=True, lengths="var"),
    dict(mode="lstm", L=2, has_mask=True, mask_gates=True, gate_pos=(1, 0, 3, 2)),
    dict(mode="gru", D=2, has_mask=True, mask_gates=True, reverse=True, lengths="var"),
    dict(mode="gru", has_mask=True, mask_gates=True, mask_per_step=True, gru_z_new=True),
    dict(mode="gru", has_mask=True, mask_per_step=True, gru_reset_before=True, D=2),
    dict(mode="gru", has_mask=True, gru_reset_before=True, reverse=True, lengths="var",
         gate_act=("sigmoid", "hard_sigmoid", "tanh", "sigmoid")),
    dict(mode="gru", L=2, gru_reset_before=True, gru_z_new=True, skip_input=True),
    dict(mode="gru", D=2, preprojected=True, gru_reset_before=True),
    dict(mode="gru", gru_reset_before=True, B=0),
    dict(mode="gru", gru_reset_before=True, has_mask=True, T=0),
]
for _dt in ("float32", "float16", "bfloat16"):
    REF_CASES += [dict(mode="lstm", L=2, D=2, lengths="var", dtype=_dt),
                  dict(mode="gru", L=1, D=2, dtype=_dt),
                  dict(mode="rnn_tanh", L=2, D=1, lengths="var", dtype=_dt),
                  dict(mode="gru", D=2, lengths="var", gru_reset_before=True, has_mask=True,
                       gru_z_new=True, dtype=_dt)]
# Half and bfloat16 layers whose hidden size is a multiple of 16 (the tensor-core persistent
# kernels' shapes, rnn_gpu_persistent_mma.cu): one and two 16-row batch tiles, a last block with
# fewer units, 8-row gate tiles of gru and rnn_tanh; with TFRNN_CUDA_MMA=1 they run on those
# kernels and are also compared with the CUDA-core kernels (MMA_TOL).
for _dt in ("float16", "bfloat16"):
    REF_CASES += [dict(mode="lstm", B=20, H=16, lengths="var", dtype=_dt, mma=True),
                  dict(mode="gru", D=2, H=80, dtype=_dt, mma=True),
                  dict(mode="rnn_tanh", B=3, H=32, L=2, dtype=_dt, mma=True)]
# Sizes where the engine takes those kernels by default (MmaFwdByDefault, MmaBwdByDefault): the
# forward at B = 9, forward and backward at B = 20 (H = 144: 129 to 256).
REF_CASES += [dict(mode="gru", B=9, H=144, T=3, dtype="bfloat16", mma=True),
              dict(mode="lstm", B=20, H=144, T=3, lengths="var", dtype="float16", mma=True)]
# A half LSTM whose tensor-core cluster backward holds 8-row groups only (TFRNN_CUDA_CLUSTER=1
# TFRNN_CUDA_MMA=1 on an H100 or H200: clusters of 16 blocks, 16-row vectors would need 267 KB).
REF_CASES += [dict(mode="lstm", B=16, H=512, T=2, dtype="float16", mma=True)]


# Tensor-core kernels against the CUDA-core kernels on the same inputs: the same products
# of T values, summed in float in another order, so the results differ by a few units in the
# last place of T (tighter than the float64 reference's tolerances for half and bfloat16).
MMA_TOL = {"float16": 4e-3, "bfloat16": 3e-2}


def _check_mma_vs_cuda_cores(r, run, dtype):
    os.environ["TFRNN_CUDA_MMA"] = "0"
    try:
        rc = run()
    finally:
        os.environ["TFRNN_CUDA_MMA"] = "1"
    for key in ("y", "hn", "cn", "dx", "dh0", "dc0", "dparams"):
        if r.get(key) is not None and rc.get(key) is not None:
            gc.assert_close(f"{key} (tensor cores vs CUDA cores)", r[key], rc[key],
                            MMA_TOL[dtype])


def check_vs_reference(case):
    torch = _torch()
    mode = case["mode"]
    L, D, P = case.get("L", 1), case.get("D", 1), case.get("P", 0)
    T, B, I, H = case.get("T", 6), case.get("B", 4), case.get("I", 5), case.get("H", 7)
    dtype = case.get("dtype", "float64")
    skip_input, preprojected = case.get("skip_input", False), case.get("preprojected", False)
    K = cuda_engine.GATES[mode]
    if skip_input:
        I = H
    if preprojected:
        I = D * K * H
    Hs = P if P else H
    dev = gc.device()
    f64 = torch.float64
    gen = torch.Generator().manual_seed(99)
    lengths = None
    if case.get("lengths") == "var":
        lengths = [max(1, T - b) for b in range(B)]
    elif case.get("lengths") == "zero":
        lengths = [(T - 2 * b) % (T + 1) for b in range(B)]  # includes 0 and T
    lay = cuda_engine.param_layout(mode, L=L, D=D, I=I, H=H, P=P,
                                   skip_input=skip_input or preprojected)
    params = (_rand(torch, (lay[-1]["end"],), 0.4, gen)).to(dev)
    x = _rand(torch, (T, B, I), gen=gen).to(dev)
    h0 = _rand(torch, (L * D, B, Hs), 0.5, gen).to(dev)
    c0 = _rand(torch, (L * D, B, H), 0.5, gen).to(dev)
    gy = _rand(torch, (T, B, D * Hs), gen=gen).to(dev)
    ghn = _rand(torch, (L * D, B, Hs), gen=gen).to(dev)
    gcn = _rand(torch, (L * D, B, H), gen=gen).to(dev)
    peep = _rand(torch, (L * D, K * H), 0.5, gen).to(dev) if case.get("peephole") else None
    mask = None
    if case.get("has_mask"):
        mt = T if case.get("mask_per_step") else 1
        mcols = D * (K if case.get("mask_gates") else 1) * Hs
        mask = (torch.rand(mt, B, mcols, generator=gen, dtype=f64) > 0.3).to(f64).to(dev) * 1.25
    opts = dict(gate_pos=case.get("gate_pos", (0, 1, 2, 3)),
                gate_act=case.get("gate_act", ("sigmoid", "sigmoid", "tanh", "sigmoid")),
                cell_act=case.get("cell_act", "tanh"),
                gru_reset_before=case.get("gru_reset_before", False),
                gru_z_new=case.get("gru_z_new", False), mask_gates=case.get("mask_gates", False))
    spec = cuda_engine.make_spec(mode, T=T, B=B, I=I, H=H, P=P, L=L, D=D, dtype=dtype,
                                 skip_input=skip_input, dropout=case.get("dropout", 0.0),
                                 seed=case.get("seed", 0), peephole=peep is not None,
                                 has_mask=mask is not None, preprojected=preprojected,
                                 reverse=case.get("reverse", False), **opts)
    tdt = gc.tdtype(dtype)
    cast = lambda t: None if t is None else t.to(tdt).contiguous()  # noqa: E731
    def run():
        return gc.run_engine(spec, x=cast(x), h0=cast(h0),
                             c0=cast(c0) if mode == "lstm" else None, params=cast(params),
                             lengths=lengths, dy=cast(gy), dhn=cast(ghn),
                             dcn=cast(gcn) if mode == "lstm" else None, peephole=cast(peep),
                             mask=cast(mask), mask_per_step=case.get("mask_per_step", False),
                             lengths_on_device=case.get("lengths_on_device", False))

    r = run()
    if case.get("mma") and os.environ.get("TFRNN_CUDA_MMA") == "1":
        _check_mma_vs_cuda_cores(r, run, dtype)
    # The reference sees the same (rounded) inputs, in float64.
    up = lambda t: None if t is None else t.to(tdt).to(f64).requires_grad_()  # noqa: E731
    xr, h0r, c0r, pr, peepr = up(x), up(h0), up(c0), up(params), up(peep)
    maskr = None if mask is None else mask.to(tdt).to(f64)
    y, hn, cn = reference.rnn_reference(
        torch, xr, h0r, c0r, pr, mode=mode, L=L, D=D, I=I, H=H, P=P, skip_input=skip_input,
        lengths=lengths, dropout=case.get("dropout", 0.0), seed=case.get("seed", 0),
        peephole=peepr, mask=maskr, mask_per_step=case.get("mask_per_step", False),
        reverse=case.get("reverse", False), preprojected=preprojected, **opts)
    loss = (y * gy.to(tdt).to(f64)).sum() + (hn * ghn.to(tdt).to(f64)).sum()
    if mode == "lstm":
        loss = loss + (cn * gcn.to(tdt).to(f64)).sum()
    inputs = [xr, h0r, pr] + ([c0r] if mode == "lstm" else []) + ([peepr] if peep is not None
                                                                    else [])
    grads = torch.autograd.grad(loss, inputs, allow_unused=True)
    zero_if_none = lambda g, t: torch.zeros_like(t) if g is None else g  # noqa: E731
    grads = [zero_if_none(g, t) for g, t in zip(grads, inputs)]
    tol = TOL[dtype] * (10 if dtype in ("float32",) else 1)
    gc.assert_close("y", r["y"], y, tol)
    gc.assert_close("hn", r["hn"], hn, tol)
    if mode == "lstm":
        gc.assert_close("cn", r["cn"], cn, tol)
    gc.assert_close("dx", r["dx"], grads[0], 5 * tol)
    gc.assert_close("dh0", r["dh0"], grads[1], 5 * tol)
    gc.assert_close("dparams", r["dparams"], grads[2], 5 * tol)
    if mode == "lstm":
        gc.assert_close("dc0", r["dc0"], grads[3], 5 * tol)
    if peep is not None:
        gc.assert_close("dpeephole", r["dpeephole"], grads[-1], 5 * tol)


# ---------------------------------------------------------------------------------------------
# cuDNN's real opaque weight layout (PyTorch's flattened cuDNN weight buffer)

LAYOUT_CASES = [dict(mode=m, L=L, D=D, P=0) for m in ("lstm", "gru", "rnn_tanh", "rnn_relu")
                for L, D in ((1, 1), (2, 1), (1, 2), (3, 2))]
LAYOUT_CASES += [dict(mode="lstm", L=2, D=2, P=4), dict(mode="lstm", L=1, D=1, P=4)]


def check_cudnn_layout(case):
    """Offsets of every weight view in torch's flat cuDNN buffer == our RnnParamLayout
    (C++ through the C API, and the Python mirror), and the buffer sizes agree."""
    torch = _torch()
    eng = gc.engine()
    gc.need_real_gpu("cuDNN's weight buffer")
    mode, L, D, P = case["mode"], case["L"], case["D"], case["P"]
    I, H = 6, 8
    m = _torch_module(torch, mode, I, H, L, D, P).to("cuda", torch.float32)
    m.flatten_parameters()
    ws = m._flat_weights
    names = m._flat_weights_names
    storages = {w.untyped_storage().data_ptr() for w in ws}
    if len(storages) != 1:
        gc.skip("PyTorch did not flatten the weights into one cuDNN buffer")
    base = next(iter(storages))
    elem = ws[0].element_size()
    observed = {n: (w.data_ptr() - base) // elem for n, w in zip(names, ws)}
    buffer_elems = ws[0].untyped_storage().nbytes() // elem
    spec = cuda_engine.make_spec(mode, T=1, B=1, I=I, H=H, P=P, L=L, D=D)
    mirror = cuda_engine.param_layout(mode, L=L, D=D, I=I, H=H, P=P)
    n_params = eng.sizes(spec)[0]
    assert n_params == mirror[-1]["end"]
    expected = {}
    for l in range(L):
        for d in range(D):
            p = l * D + d
            o = eng.param_offsets(spec, p)
            assert o == mirror[p], (p, o, mirror[p])
            sfx = f"_l{l}" + ("_reverse" if d else "")
            expected["weight_ih" + sfx] = o["w"]
            expected["weight_hh" + sfx] = o["r"]
            expected["bias_ih" + sfx] = o["bw"]
            expected["bias_hh" + sfx] = o["br"]
            if P:
                expected["weight_hr" + sfx] = o["p"]
    assert set(expected) == set(observed), (sorted(expected), sorted(observed))
    diffs = {k: (expected[k], observed[k]) for k in expected if expected[k] != observed[k]}
    assert not diffs, f"ours != cuDNN (name: (ours, cuDNN)): {diffs}"
    assert buffer_elems >= n_params, (buffer_elems, n_params)


# ---------------------------------------------------------------------------------------------

def check_deterministic(case=None):
    """Two backward runs give bitwise equal results (no atomics anywhere)."""
    torch = _torch()
    T, B, I, H, L, D = 20, 16, 24, 32, 2, 2
    dev = gc.device()
    gen = torch.Generator().manual_seed(5)
    lay = cuda_engine.param_layout("lstm", L=L, D=D, I=I, H=H)
    params = _rand(torch, (lay[-1]["end"],), 0.3, gen).float().to(dev)
    x = _rand(torch, (T, B, I), gen=gen).float().to(dev)
    h0 = torch.zeros(L * D, B, H, device=dev)
    gy = _rand(torch, (T, B, D * H), gen=gen).float().to(dev)
    spec = cuda_engine.make_spec("lstm", T=T, B=B, I=I, H=H, L=L, D=D)
    runs = [gc.run_engine(spec, x=x, h0=h0, c0=h0, params=params, dy=gy, dhn=h0, dcn=h0,
                          lengths=[T - b % 5 for b in range(B)]) for _ in range(2)]
    for k in ("y", "dx", "dh0", "dc0", "dparams"):
        assert torch.equal(runs[0][k], runs[1][k]), k


def _expect_invalid_argument(text, fn, *args, **kwargs):
    """fn(*args, **kwargs) fails with the engine's INVALID_ARGUMENT, its message naming text."""
    try:
        fn(*args, **kwargs)
    except cuda_engine.EngineError as e:
        assert e.code == 1 and text in e.message, e
        return
    raise AssertionError("no error")


def check_bad_input(case=None):
    """Invalid specs and arguments give INVALID_ARGUMENT with a message, never a crash."""
    gc.engine()
    eng = gc.engine()
    torch = _torch()
    bad = cuda_engine.make_spec("gru", T=2, B=2, I=3, H=4, P=2)  # projection needs lstm
    _expect_invalid_argument("projection", eng.sizes, bad)
    spec = cuda_engine.make_spec("lstm", T=2, B=2, I=3, H=4)
    x = torch.zeros(2, 2, 3, device=gc.device())
    _expect_invalid_argument("NULL", eng.forward_raw, spec, dict(x=x.data_ptr()), None, 0, None)
    every = {k: x.data_ptr() for k in ("x", "h0", "c0", "params", "y", "hn", "cn", "reserve")}
    _expect_invalid_argument("lengths[0]", eng.forward_raw, spec, every, x.data_ptr(), 1, None,
                             lengths=[3, 1])
    _expect_invalid_argument("workspace", eng.forward_raw, spec, every, x.data_ptr(), 1, None)
