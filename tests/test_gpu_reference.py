"""The float64 reference and weight packing used by tests/gpu (which run on GPU machines
without TensorFlow) checked here on CPU: reference.py against our CPU CudnnRNNV3 (same engine
semantics: lengths, zero lengths, skip input, dropout hash masks, projection) and the
torch.nn weight packing against torch.nn itself.  Skips without PyTorch."""

import os
import sys

import numpy as np
import pytest
import tensorflow as tf

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu"))

import cuda_engine  # noqa: E402
import gpu_reference as reference  # noqa: E402


CASES = [
    dict(mode="lstm", L=2, D=2, lengths=[6, 0, 3, 1]),
    dict(mode="gru", L=2, D=1, lengths=[6, 4, 0, 2]),
    dict(mode="rnn_relu", L=1, D=2),
    dict(mode="rnn_tanh", L=2, D=2, skip=True, lengths=[1, 6, 5, 2]),
    dict(mode="lstm", L=3, D=2, dropout=0.4, seed=5, seed2=9),
    dict(mode="lstm", L=2, D=2, P=3, lengths=[6, 2, 0, 5]),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_reference_matches_cpu_engine(ours, case):
    mode, L, D, P = case["mode"], case["L"], case["D"], case.get("P", 0)
    T, B, H = 6, 4, 5
    I = H if case.get("skip") else 3
    Hs = P or H
    rng = np.random.default_rng(0)
    lay = cuda_engine.param_layout(mode, L=L, D=D, I=I, H=H, P=P, skip_input=case.get("skip",
                                                                                    False))
    params = rng.normal(size=lay[-1]["end"]) * 0.4
    x = rng.normal(size=(T, B, I))
    h0 = rng.normal(size=(L * D, B, Hs)) * 0.5
    c0 = rng.normal(size=(L * D, B, H)) * 0.5
    lengths = case.get("lengths", [T] * B)
    seed, seed2 = case.get("seed", 0), case.get("seed2", 0)
    y, hn, cn, *_ = ours.CudnnRNNV3(
        input=x, input_h=h0, input_c=c0, params=params, sequence_lengths=np.int32(lengths),
        rnn_mode=mode, direction="bidirectional" if D == 2 else "unidirectional",
        input_mode="skip_input" if case.get("skip") else "linear_input", num_proj=P,
        dropout=case.get("dropout", 0.0), seed=seed, seed2=seed2, is_training=True)
    t = lambda a: torch.tensor(a, dtype=torch.float64)  # noqa: E731
    ry, rhn, rcn = reference.rnn_reference(
        torch, t(x), t(h0), t(c0), t(params), mode=mode, L=L, D=D, I=I, H=H, P=P,
        skip_input=case.get("skip", False), lengths=lengths, dropout=case.get("dropout", 0.0),
        seed=(seed << 32) ^ seed2)
    np.testing.assert_allclose(y.numpy(), ry.numpy(), atol=1e-10)
    np.testing.assert_allclose(hn.numpy(), rhn.numpy(), atol=1e-10)
    if mode == "lstm":
        np.testing.assert_allclose(cn.numpy(), rcn.numpy(), atol=1e-10)


@pytest.mark.parametrize("mode", ["lstm", "gru", "rnn_tanh"])
def test_torch_packing_matches_torch_nn(mode):
    import gpu_checks
    L, D, P, T, B, I, H = 2, 2, (3 if mode == "lstm" else 0), 5, 3, 4, 6
    Hs = P or H
    m = gpu_checks._torch_module(torch, mode, I, H, L, D, P).double()
    params = gpu_checks._pack(torch, mode, gpu_checks._module_params(m, mode, L, D), L=L, D=D,
                              I=I, H=H, P=P, dtype=torch.float64, device="cpu")
    x = torch.randn(T, B, I, dtype=torch.float64)
    h0 = torch.randn(L * D, B, Hs, dtype=torch.float64)
    c0 = torch.randn(L * D, B, H, dtype=torch.float64)
    lengths = [5, 2, 4]
    packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, enforce_sorted=False)
    out, st = m(packed, (h0, c0) if mode == "lstm" else h0)
    y, _ = torch.nn.utils.rnn.pad_packed_sequence(out, total_length=T)
    hn = st[0] if mode == "lstm" else st
    ry, rhn, _ = reference.rnn_reference(torch, x, h0, c0, params, mode=mode, L=L, D=D, I=I,
                                         H=H, P=P, lengths=lengths)
    torch.testing.assert_close(ry, y.detach(), atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(rhn, hn.detach(), atol=1e-10, rtol=1e-10)


GRU_OPTION_CASES = [
    dict(),
    dict(reset_gate_first=True),
    dict(reset_after=True),
    dict(reset_after=True, flip_z=True, reset_gate_first=True),
    dict(flip_z=True, mask="step", reverse=True),
    dict(reset_after=True, mask="row", update_gate_activation="hard_sigmoid",
         output_gate_activation="relu"),
    dict(mask="row", reset_gate_activation="hard_sigmoid"),
]


@pytest.mark.parametrize("case", GRU_OPTION_CASES,
                         ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()) or "default")
def test_reference_gru_options_match_mps_gru(case):
    """The reference's MPSGraph GRU options (gate blocks and activations, reset before the
    recurrent product, z_new, recurrent mask) that tests/gpu checks the CUDA engine with,
    against our CPU TfRnn>GRU (whose own tests use an independent float64 reference)."""
    from tf_rnn_ops import mps
    T, B, I, H = 5, 3, 4, 6
    rng = np.random.default_rng(1)
    x = rng.normal(size=(T, B, I))
    W = rng.normal(size=(3 * H, I)) * 0.4
    R = rng.normal(size=(3 * H, H)) * 0.4
    b = rng.normal(size=3 * H) * 0.3
    h0 = rng.normal(size=(B, H)) * 0.5
    b2 = rng.normal(size=H) * 0.3 if case.get("reset_after") else None
    mask = None
    if case.get("mask"):
        shape = (T, B, H) if case["mask"] == "step" else (B, H)
        mask = (rng.random(shape) > 0.3) * 1.25
    desc_kw = {k: v for k, v in case.items() if k != "mask"}
    desc = mps.GRUDescriptor(**desc_kw)
    (state,) = mps.gru(x, R, input_weight=W, bias=b, init_state=h0, mask=mask,
                       secondary_bias=b2, descriptor=desc)
    rf = case.get("reset_gate_first", False)
    gate_pos = (0, 1, 2, 3) if rf else (1, 0, 2, 3)
    gate_act = (desc.reset_gate_activation, desc.update_gate_activation,
                desc.output_gate_activation, "sigmoid")
    lay = cuda_engine.param_layout("gru", L=1, D=1, I=I, H=H)[0]
    params = np.zeros(lay["end"])
    params[lay["w"]:lay["r"]] = W.ravel()
    params[lay["r"]:lay["p"]] = R.ravel()
    params[lay["bw"]:lay["br"]] = b
    if b2 is not None:
        params[lay["br"] + 2 * H:lay["end"]] = b2
    t = lambda a: torch.tensor(a, dtype=torch.float64)  # noqa: E731
    ry, rhn, _ = reference.rnn_reference(
        torch, t(x), t(h0[None]), None, t(params), mode="gru", L=1, D=1, I=I, H=H,
        gate_pos=gate_pos, gate_act=gate_act,
        mask=None if mask is None else t(mask if mask.ndim == 3 else mask[None]),
        mask_per_step=case.get("mask") == "step", reverse=case.get("reverse", False),
        gru_reset_before=not case.get("reset_after", False),
        gru_z_new=not case.get("flip_z", False))
    np.testing.assert_allclose(state.numpy(), ry.numpy(), atol=1e-10)


@pytest.mark.parametrize("v2,peephole,clip,slm", [(False, False, 0.0, 5), (True, True, 0.7, 3),
                                                  (False, True, 0.0, 0)])
def test_lstm_block_reference_matches_cpu_block_lstm(ours, v2, peephole, clip, slm):
    """tests/gpu/lstm_block_checks.py's float64 reference (the CUDA LSTM block engine's test
    oracle) against our CPU BlockLSTM / BlockLSTMV2."""
    import lstm_block_checks
    T, B, I, H = 5, 3, 4, 6
    rng = np.random.default_rng(3)
    x = rng.normal(size=(T, B, I))
    cs0, h0 = rng.normal(size=(B, H)) * 0.5, rng.normal(size=(B, H)) * 0.5
    w, b = rng.normal(size=(I + H, 4 * H)) * 0.4, rng.normal(size=4 * H) * 0.3
    wci, wcf, wco = (rng.normal(size=H) * 0.5 for _ in range(3))
    kw = dict(seq_len_max=np.int64(slm), x=x, cs_prev=cs0, h_prev=h0, w=w, wci=wci, wcf=wcf,
              wco=wco, b=b, cell_clip=clip, use_peephole=peephole)
    outs = ours.BlockLSTMV2(**kw) if v2 else ours.BlockLSTM(forget_bias=1.0, **kw)
    t = lambda a: torch.tensor(a, dtype=torch.float64)  # noqa: E731
    ref = lstm_block_checks.lstm_block_reference(
        torch, t(x), t(cs0), t(h0), t(w), t(wci), t(wcf), t(wco), t(b),
        gate_order="ifco" if v2 else "icfo", forget_bias=0.0 if v2 else 1.0, cell_clip=clip,
        use_peephole=peephole, seq_len_max=slm)
    for name, got in zip(("i", "cs", "f", "o", "ci", "co", "h"), outs):
        np.testing.assert_allclose(got.numpy(), ref[name].numpy(), atol=1e-8, err_msg=name)


@pytest.mark.parametrize("exact", [False, True])
def test_gru_cell_reference_matches_cpu_gru_block_cell(ours, exact):
    """tests/gpu/lstm_block_checks.py's GRU cell reference (the CUDA GRU cell's test oracle)
    against our CPU GRUBlockCell and GRUBlockCellGrad(Exact)."""
    import lstm_block_checks
    B, I, H = 3, 4, 5
    rng = np.random.default_rng(5)
    x, h_prev = rng.normal(size=(B, I)), rng.normal(size=(B, H)) * 0.5
    w_ru, w_c = rng.normal(size=(I + H, 2 * H)) * 0.4, rng.normal(size=(I + H, H)) * 0.4
    b_ru, b_c = rng.normal(size=2 * H) * 0.3, rng.normal(size=H) * 0.3
    d_h = rng.normal(size=(B, H))
    gg = {k: rng.normal(size=(B, H)) for k in ("r", "u", "c")} if exact else {}
    r, u, c, h = ours.GRUBlockCell(x=x, h_prev=h_prev, w_ru=w_ru, w_c=w_c, b_ru=b_ru, b_c=b_c)
    kw = dict(x=x, h_prev=h_prev, w_ru=w_ru, w_c=w_c, b_ru=b_ru, b_c=b_c, r=r, u=u, c=c, d_h=d_h)
    if exact:
        from tf_rnn_ops import load_library
        got = load_library().tf_rnn_gru_block_cell_grad_exact(
            r_grad=gg["r"], u_grad=gg["u"], c_grad=gg["c"], **kw)
    else:
        got = ours.GRUBlockCellGrad(**kw)
    t = lambda a: torch.tensor(np.asarray(a), dtype=torch.float64)  # noqa: E731
    ref, rg = lstm_block_checks.gru_cell_reference_grads(
        torch, t(x), t(h_prev), t(w_ru), t(w_c), t(b_ru), t(b_c), t(d_h),
        {k: t(v) for k, v in gg.items()})
    for name, v in zip(("r", "u", "c", "h"), (r, u, c, h)):
        np.testing.assert_allclose(v.numpy(), ref[name].numpy(), atol=1e-8, err_msg=name)
    for name, v in zip(("d_x", "d_h_prev", "d_c_bar", "d_r_bar_u_bar"), got):
        np.testing.assert_allclose(v.numpy(), rg[name].numpy(), atol=1e-8, err_msg=name)
