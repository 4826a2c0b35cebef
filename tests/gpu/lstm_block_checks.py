"""Checks of the CUDA LSTM block engine (tfrnn_cuda_lstm_*: BlockLSTM / BlockLSTMV2 and their
gradients) and of the GRU block cell (tfrnn_cuda_gru_cell_*: GRUBlockCell / GRUBlockCellGrad)
against float64 PyTorch references written from cc/engine/lstm.h's and types.h's equations
(autograd for the gradients).  Needs PyTorch with CUDA and the built engine (see gpu_common).
"""

import gpu_common as gc
import cuda_engine

TOL = {"float64": 1e-9, "float32": 2e-4, "float16": 2e-2, "bfloat16": 8e-2}
BLOCKS = {"icfo": dict(i=0, c=1, f=2, o=3), "ifco": dict(i=0, f=1, c=2, o=3)}


def lstm_block_reference(torch, x, cs_prev, h_prev, w, wci, wcf, wco, b, *, gate_order,
                         forget_bias, cell_clip, use_peephole, seq_len_max, gate_delta=None):
    """lstm.h forward in the inputs' dtype: dict of i, cs, f, o, ci, co, h [T, B, H] (zeros
    for steps >= seq_len_max)."""
    T, B, _ = x.shape
    H = h_prev.shape[1]
    blk = BLOCKS[gate_order]
    outs = {k: [] for k in ("i", "cs", "f", "o", "ci", "co", "h")}
    cp, hp = cs_prev, h_prev
    for t in range(seq_len_max):
        g = torch.cat([x[t], hp], 1) @ w + b
        if gate_delta is not None:  # zeros whose gradient is dL/d(gate pre-activations)
            g = g + gate_delta[t]
        gate = lambda k: g[:, blk[k] * H:(blk[k] + 1) * H]  # noqa: E731
        if use_peephole:
            i = torch.sigmoid(gate("i") + cp * wci)
            f = torch.sigmoid(gate("f") + forget_bias + cp * wcf)
        else:
            i = torch.sigmoid(gate("i"))
            f = torch.sigmoid(gate("f") + forget_bias)
        ci = torch.tanh(gate("c"))
        cs = i * ci + f * cp
        if cell_clip > 0:
            cs = torch.clamp(cs, -cell_clip, cell_clip)
        co = torch.tanh(cs)
        o = torch.sigmoid(gate("o") + cs * wco) if use_peephole else torch.sigmoid(gate("o"))
        h = o * co
        for k, v in (("i", i), ("cs", cs), ("f", f), ("o", o), ("ci", ci), ("co", co),
                     ("h", h)):
            outs[k].append(v)
        cp, hp = cs, h
    res = {}
    for k, v in outs.items():
        z = torch.zeros(T - seq_len_max, B, H, dtype=x.dtype, device=x.device)
        res[k] = torch.cat([torch.stack(v, 0), z], 0) if v else z
    return res


LSTM_BLOCK_CASES = [
    dict(gate_order="icfo"),
    dict(gate_order="ifco"),
    dict(gate_order="icfo", use_peephole=True, forget_bias=0.5),
    dict(gate_order="ifco", use_peephole=True, cell_clip=0.6, exact_clip_grad=True),
    dict(gate_order="icfo", seq_len_max=3),
    dict(gate_order="ifco", seq_len_max=0),
    dict(gate_order="icfo", gate_grads=True, use_peephole=True),
    dict(gate_order="icfo", T=0),
    dict(gate_order="ifco", B=0),
    dict(gate_order="icfo", T=1, use_peephole=True, dgates=True),   # LSTMBlockCellGrad's use
    dict(gate_order="ifco", seq_len_max=4, dgates=True),
]
for _dt in ("float32", "float16", "bfloat16"):
    LSTM_BLOCK_CASES.append(dict(gate_order="ifco", use_peephole=True, seq_len_max=4,
                                 dtype=_dt))


def case_id(c):
    return "-".join(f"{k}={v}" for k, v in c.items())


def check_lstm_block(case):
    torch = gc.torch_cuda()
    eng = gc.engine()
    gc.no_tf32()
    T, B, I, H = case.get("T", 6), case.get("B", 3), case.get("I", 5), case.get("H", 4)
    L = min(case.get("seq_len_max", T), T)
    dtype = case.get("dtype", "float64")
    tdt, f64, dev = gc.tdtype(dtype), torch.float64, gc.device()
    gen = torch.Generator().manual_seed(7)
    rnd = lambda *shape, scale=1.0: (torch.randn(*shape, generator=gen, dtype=f64) * scale  # noqa: E731
                                     ).to(tdt).to(dev)
    opts = dict(gate_order=case["gate_order"], forget_bias=case.get("forget_bias", 1.0),
                cell_clip=case.get("cell_clip", 0.0),
                use_peephole=case.get("use_peephole", False))
    spec = cuda_engine.make_lstm_spec(T=T, B=B, I=I, H=H, seq_len_max=L, dtype=dtype,
                                      exact_clip_grad=case.get("exact_clip_grad", False), **opts)
    x, cs_prev, h_prev = rnd(T, B, I), rnd(B, H, scale=0.5), rnd(B, H, scale=0.5)
    w, b = rnd(I + H, 4 * H, scale=0.4), rnd(4 * H, scale=0.3)
    wci, wcf, wco = rnd(H, scale=0.5), rnd(H, scale=0.5), rnd(H, scale=0.5)
    cs_grad, h_grad = rnd(T, B, H), rnd(T, B, H)
    gate_grads = {k: rnd(T, B, H) for k in ("i", "f", "o", "ci", "co")} \
        if case.get("gate_grads") else {}
    fwd_ws, bwd_ws = cuda_engine.lstm_sizes(eng, spec)
    nan = lambda *shape: torch.full(shape, float("nan"), dtype=tdt, device=dev)  # noqa: E731
    out = {k: nan(T, B, H) for k in ("i", "cs", "f", "o", "ci", "co", "h")}
    stream = gc.stream(dev)
    ptr = lambda t: None if t is None or t.numel() == 0 else t.data_ptr()  # noqa: E731
    ws = torch.empty(max(1, fwd_ws), dtype=torch.uint8, device=dev)
    fptrs = dict(x=ptr(x), cs_prev=ptr(cs_prev), h_prev=ptr(h_prev), w=ptr(w), wci=ptr(wci),
                 wcf=ptr(wcf), wco=ptr(wco), b=ptr(b), **{k: ptr(v) for k, v in out.items()})
    cuda_engine.lstm_forward_raw(eng, spec, fptrs, ws.data_ptr(), fwd_ws, stream)
    grads = dict(x_grad=nan(T, B, I), cs_prev_grad=nan(B, H), h_prev_grad=nan(B, H),
                 w_grad=nan(I + H, 4 * H), wci_grad=nan(H), wcf_grad=nan(H), wco_grad=nan(H),
                 b_grad=nan(4 * H))
    if case.get("dgates"):
        grads["dgates"] = nan(T, B, 4 * H)
    ws = torch.empty(max(1, bwd_ws), dtype=torch.uint8, device=dev)
    bptrs = dict(x=ptr(x), cs_prev=ptr(cs_prev), h_prev=ptr(h_prev), w=ptr(w), wci=ptr(wci),
                 wcf=ptr(wcf), wco=ptr(wco), cs_grad=ptr(cs_grad), h_grad=ptr(h_grad),
                 **{k: ptr(v) for k, v in out.items()},
                 **{k + "_grad": ptr(v) for k, v in gate_grads.items()},
                 **{k: ptr(v) for k, v in grads.items()})
    cuda_engine.lstm_backward_raw(eng, spec, bptrs, ws.data_ptr(), bwd_ws, stream)
    gc.sync(dev)
    # Reference on the same (rounded) inputs in float64.
    up = lambda t: t.to(f64).requires_grad_()  # noqa: E731
    xr, cpr, hpr, wr, wcir, wcfr, wcor, br = (up(t) for t in (x, cs_prev, h_prev, w, wci, wcf,
                                                            wco, b))
    delta = torch.zeros(T, B, 4 * H, dtype=f64, device=dev, requires_grad=True)
    # forget_bias and cell_clip are float attributes: the op sees them rounded to float32.
    f32 = lambda v: torch.tensor(v, dtype=torch.float32).item()  # noqa: E731
    ref_opts = dict(opts, forget_bias=f32(opts["forget_bias"]), cell_clip=f32(opts["cell_clip"]))
    ref = lstm_block_reference(torch, xr, cpr, hpr, wr, wcir, wcfr, wcor, br,
                               seq_len_max=L, gate_delta=delta, **ref_opts)
    tol = TOL[dtype] * (10 if dtype == "float32" else 1)
    for k in out:
        gc.assert_close(k, out[k], ref[k], tol)
    loss = (ref["cs"] * cs_grad.to(f64)).sum() + (ref["h"] * h_grad.to(f64)).sum()
    for k, v in gate_grads.items():
        loss = loss + (ref[k] * v.to(f64)).sum()
    inputs = [xr, cpr, hpr, wr, wcir, wcfr, wcor, br, delta]
    if loss.requires_grad:
        g = torch.autograd.grad(loss, inputs, allow_unused=True)
    else:  # nothing computed (T = 0 or seq_len_max = 0): every gradient is zero
        g = [None] * len(inputs)
    g = [torch.zeros_like(t) if d is None else d for d, t in zip(g, inputs)]
    if not opts["use_peephole"]:
        g[4:7] = [torch.zeros_like(t) for t in g[4:7]]
    names = ("x_grad", "cs_prev_grad", "h_prev_grad", "w_grad", "wci_grad", "wcf_grad",
             "wco_grad", "b_grad") + (("dgates",) if "dgates" in grads else ())
    for name, ref_g in zip(names, g):
        gc.assert_close(name, grads[name], ref_g, 5 * tol)


def check_lstm_block_deterministic(case=None):
    """Two backward runs give bitwise equal gradients (no atomics)."""
    torch = gc.torch_cuda()
    eng = gc.engine()
    T, B, I, H = 20, 16, 24, 32
    spec = cuda_engine.make_lstm_spec(T=T, B=B, I=I, H=H, use_peephole=True)
    dev = gc.device()
    r = lambda *s: torch.randn(*s, device=dev) * 0.3  # noqa: E731
    x, cp, hp, w, b = r(T, B, I), r(B, H), r(B, H), r(I + H, 4 * H), r(4 * H)
    wc = [r(H) for _ in range(3)]
    out = {k: torch.empty(T, B, H, device=dev) for k in ("i", "cs", "f", "o", "ci", "co", "h")}
    fws, bws = cuda_engine.lstm_sizes(eng, spec)
    stream = gc.stream(dev)
    ws = torch.empty(max(fws, bws, 1), dtype=torch.uint8, device=dev)
    base = dict(x=x.data_ptr(), cs_prev=cp.data_ptr(), h_prev=hp.data_ptr(), w=w.data_ptr(),
                wci=wc[0].data_ptr(), wcf=wc[1].data_ptr(), wco=wc[2].data_ptr())
    cuda_engine.lstm_forward_raw(eng, spec, dict(base, b=b.data_ptr(),
                                                 **{k: v.data_ptr() for k, v in out.items()}),
                                 ws.data_ptr(), fws, stream)
    gh, gcs = r(T, B, H), r(T, B, H)
    runs = []
    for _ in range(2):
        gr = dict(x_grad=torch.empty(T, B, I, device=dev),
                  cs_prev_grad=torch.empty(B, H, device=dev),
                  h_prev_grad=torch.empty(B, H, device=dev),
                  w_grad=torch.empty(I + H, 4 * H, device=dev),
                  wci_grad=torch.empty(H, device=dev), wcf_grad=torch.empty(H, device=dev),
                  wco_grad=torch.empty(H, device=dev), b_grad=torch.empty(4 * H, device=dev))
        cuda_engine.lstm_backward_raw(
            eng, spec, dict(base, cs_grad=gcs.data_ptr(), h_grad=gh.data_ptr(),
                            **{k: v.data_ptr() for k, v in out.items()},
                            **{k: v.data_ptr() for k, v in gr.items()}),
            ws.data_ptr(), bws, stream)
        runs.append(gr)
    gc.sync(dev)
    for k in runs[0]:
        assert torch.equal(runs[0][k], runs[1][k]), k


def gru_cell_reference_grads(torch, x, h_prev, w_ru, w_c, b_ru, b_c, d_h, gate_grads):
    """(outputs, grads): GRUBlockCellGrad's d_x, d_h_prev, d_c_bar, d_r_bar_u_bar by autograd
    of L = Σ h ⊙ d_h (+ r ⊙ g_r + u ⊙ g_u + c ⊙ g_c); the pre-activation gradients are those
    of per-row copies of the biases."""
    B, H = h_prev.shape
    xr, hr = x.clone().requires_grad_(), h_prev.clone().requires_grad_()
    bru = b_ru.expand(B, 2 * H).clone().requires_grad_()
    bc = b_c.expand(B, H).clone().requires_grad_()
    ref = gru_cell_reference(torch, xr, hr, w_ru, w_c, bru, bc)
    loss = (ref["h"] * d_h).sum()
    for k, v in gate_grads.items():
        loss = loss + (ref[k] * v).sum()
    d_x, d_hp, d_rbub, d_cbar = torch.autograd.grad(loss, [xr, hr, bru, bc])
    return ({k: v.detach() for k, v in ref.items()},
            dict(d_x=d_x, d_h_prev=d_hp, d_c_bar=d_cbar, d_r_bar_u_bar=d_rbub))


def gru_cell_reference(torch, x, h_prev, w_ru, w_c, b_ru, b_c):
    """GRUBlockCell (types.h, GruCellFwdArgs): r, u, c, h."""
    H = h_prev.shape[1]
    ru = torch.sigmoid(torch.cat([x, h_prev], 1) @ w_ru + b_ru)
    r, u = ru[:, :H], ru[:, H:]
    c = torch.tanh(torch.cat([x, h_prev * r], 1) @ w_c + b_c)
    return dict(r=r, u=u, c=c, h=u * h_prev + (1.0 - u) * c)


GRU_CELL_CASES = [dict(), dict(gate_grads=True), dict(I=0), dict(B=1, H=1),
                  dict(dtype="float32", gate_grads=True), dict(dtype="float16"),
                  dict(dtype="bfloat16")]


def check_gru_cell(case):
    """Forward outputs, and GRUBlockCellGrad's d_x, d_h_prev, d_c_bar, [d_r_bar, d_u_bar]:
    d_c_bar and d_r_bar_u_bar are the gradients of the pre-activations, d_x / d_h_prev those
    of L = Σ h ⊙ d_h (+ r ⊙ g_r + u ⊙ g_u + c ⊙ g_c) through this cell."""
    torch = gc.torch_cuda()
    eng = gc.engine()
    gc.no_tf32()
    B, I, H = case.get("B", 3), case.get("I", 4), case.get("H", 5)
    dtype = case.get("dtype", "float64")
    tdt, f64, dev = gc.tdtype(dtype), torch.float64, gc.device()
    gen = torch.Generator().manual_seed(11)
    rnd = lambda *shape, scale=1.0: (torch.randn(*shape, generator=gen, dtype=f64) * scale  # noqa: E731
                                     ).to(tdt).to(dev)
    x, h_prev = rnd(B, I), rnd(B, H, scale=0.5)
    w_ru, w_c = rnd(I + H, 2 * H, scale=0.4), rnd(I + H, H, scale=0.4)
    b_ru, b_c = rnd(2 * H, scale=0.3), rnd(H, scale=0.3)
    d_h = rnd(B, H)
    gg = {k: rnd(B, H) for k in ("r", "u", "c")} if case.get("gate_grads") else {}
    spec = cuda_engine.make_gru_cell_spec(B=B, I=I, H=H, dtype=dtype)
    fws, bws = cuda_engine.gru_cell_sizes(eng, spec)
    nan = lambda *shape: torch.full(shape, float("nan"), dtype=tdt, device=dev)  # noqa: E731
    ptr = lambda t: None if t is None or t.numel() == 0 else t.data_ptr()  # noqa: E731
    out = {k: nan(B, H) for k in ("r", "u", "c", "h")}
    stream = gc.stream(dev)
    ws = torch.empty(max(1, fws, bws), dtype=torch.uint8, device=dev)
    ins = dict(x=ptr(x), h_prev=ptr(h_prev), w_ru=ptr(w_ru), w_c=ptr(w_c))
    cuda_engine.gru_cell_forward_raw(eng, spec, dict(ins, b_ru=ptr(b_ru), b_c=ptr(b_c),
                                                     **{k: ptr(v) for k, v in out.items()}),
                                     ws.data_ptr(), fws, stream)
    grads = dict(d_x=nan(B, I), d_h_prev=nan(B, H), d_c_bar=nan(B, H),
                 d_r_bar_u_bar=nan(B, 2 * H))
    cuda_engine.gru_cell_backward_raw(
        eng, spec, dict(ins, r=ptr(out["r"]), u=ptr(out["u"]), c=ptr(out["c"]), d_h=ptr(d_h),
                        **{"g_" + k: ptr(v) for k, v in gg.items()},
                        **{k: ptr(v) for k, v in grads.items()}),
        ws.data_ptr(), bws, stream)
    gc.sync(dev)
    ref, rg = gru_cell_reference_grads(torch, *(t.to(f64) for t in (x, h_prev, w_ru, w_c,
                                                                    b_ru, b_c, d_h)),
                                       {k: v.to(f64) for k, v in gg.items()})
    tol = TOL[dtype] * (10 if dtype == "float32" else 1)
    for k in out:
        gc.assert_close(k, out[k], ref[k], tol)
    for k in grads:
        gc.assert_close(k, grads[k], rg[k], 5 * tol)
