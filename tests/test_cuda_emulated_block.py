"""The CUDA block-op engines (tfrnn_cuda_lstm_*: BlockLSTM(V2) / BlockLSTMGrad(V2) / the exact
gradient / LSTMBlockCellGrad's gate gradients, and tfrnn_cuda_gru_cell_*: GRUBlockCell(Grad))
on the CPU emulation build of cc/gpu/ (tools/build_cuda_emu.sh, see test_cuda_emulated.py),
against this library's CPU ops on the same inputs. The CPU ops are checked against stock
TensorFlow and float64 references elsewhere, so they are an independent reference here. numpy
and TensorFlow only (no PyTorch): runs in CI."""

import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from tf_rnn_ops import raw_ops
from tf_rnn_ops._loader import load_library

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "gpu"))
import cuda_engine as ce  # noqa: E402

# max |ours - ref| / max(1, max |ref|): both sides compute in float (double for float64) from
# the same rounded inputs; they differ by summation order and the outputs' rounding.
TOL = {"float64": 1e-10, "float32": 2e-5, "float16": 4e-3, "bfloat16": 3e-2}
NP = {"float64": np.float64, "float32": np.float32, "float16": np.float16,
      "bfloat16": tf.bfloat16.as_numpy_dtype}


@pytest.fixture(scope="module")
def eng():
    try:
        return ce.Engine(ce.build_emulation())
    except FileNotFoundError as e:
        pytest.skip(str(e))


def _err(ours, ref):
    a, b = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    if a.size == 0:
        return 0.0
    if not np.isfinite(a).all():
        return float("inf")
    return float(np.abs(a - b).max() / max(1.0, np.abs(b).max()))


def _close(name, ours, ref, tol):
    err = _err(ours, ref)
    assert err <= tol, f"{name}: max error {err:.3g} > {tol:.3g}"


def _ptr(a):
    return None if a is None or a.size == 0 else a.ctypes.data


LSTM_CASES = [
    dict(version=1),
    dict(version=2),
    dict(version=1, use_peephole=True, forget_bias=0.5),
    dict(version=2, use_peephole=True, cell_clip=0.6),
    dict(version=1, cell_clip=0.6, exact=True, use_peephole=True),
    dict(version=2, gate_grads=True, use_peephole=True),
    dict(version=1, gate_grads=True, cell_clip=0.5, exact=True),
    dict(version=1, seq_len_max=3),
    dict(version=2, seq_len_max=0),
    dict(version=1, T=1, use_peephole=True, dgates=True),
    dict(version=2, seq_len_max=4, dgates=True),
    dict(version=1, B=0),
    dict(version=2, T=0),
] + [dict(version=2, use_peephole=True, seq_len_max=4, dtype=d)
     for d in ("float32", "float16", "bfloat16")]


def _lstm_id(c):
    return "-".join(f"{k}={v}" for k, v in c.items())


@pytest.mark.parametrize("case", LSTM_CASES, ids=_lstm_id)
def test_lstm_block(eng, case):
    T, B, I, H = case.get("T", 6), case.get("B", 3), case.get("I", 5), case.get("H", 4)
    L = min(case.get("seq_len_max", T), T)
    dtype = case.get("dtype", "float64")
    dt, tdt = NP[dtype], tf.as_dtype(dtype)
    v1 = case["version"] == 1
    order = "icfo" if v1 else "ifco"
    forget_bias = case.get("forget_bias", 1.0) if v1 else 0.0
    clip, peep = case.get("cell_clip", 0.0), case.get("use_peephole", False)
    rng = np.random.default_rng(7)
    r = lambda *shape, s=1.0: (rng.standard_normal(shape) * s).astype(dt)  # noqa: E731
    x, cs_prev, h_prev = r(T, B, I), r(B, H, s=0.5), r(B, H, s=0.5)
    w, b = r(I + H, 4 * H, s=0.4), r(4 * H, s=0.3)
    wci, wcf, wco = r(H, s=0.5), r(H, s=0.5), r(H, s=0.5)
    cs_grad, h_grad = r(T, B, H), r(T, B, H)
    names = ("i", "cs", "f", "o", "ci", "co", "h")
    gate_grads = {k: r(T, B, H) for k in ("i", "f", "o", "ci", "co")} \
        if case.get("gate_grads") else {}

    # The CUDA engine (emulated): forward, then backward, on numpy buffers.
    spec = ce.make_lstm_spec(T=T, B=B, I=I, H=H, seq_len_max=L, dtype=dtype, gate_order=order,
                             forget_bias=forget_bias, cell_clip=clip, use_peephole=peep,
                             exact_clip_grad=case.get("exact", False))
    fws, bws = ce.lstm_sizes(eng, spec)
    nan = lambda *shape: np.full(shape, np.nan, dt)  # noqa: E731
    out = {k: nan(T, B, H) for k in names}
    ws = np.empty(max(1, fws, bws), np.uint8)
    ins = dict(x=_ptr(x), cs_prev=_ptr(cs_prev), h_prev=_ptr(h_prev), w=_ptr(w), wci=_ptr(wci),
               wcf=_ptr(wcf), wco=_ptr(wco))
    ce.lstm_forward_raw(eng, spec, dict(ins, b=_ptr(b), **{k: _ptr(v) for k, v in out.items()}),
                        ws.ctypes.data, fws, 0)
    grads = dict(x_grad=nan(T, B, I), cs_prev_grad=nan(B, H), h_prev_grad=nan(B, H),
                 w_grad=nan(I + H, 4 * H), wci_grad=nan(H), wcf_grad=nan(H), wco_grad=nan(H),
                 b_grad=nan(4 * H))
    if case.get("dgates"):
        grads["dgates"] = nan(T, B, 4 * H)
    ce.lstm_backward_raw(eng, spec, dict(ins, cs_grad=_ptr(cs_grad), h_grad=_ptr(h_grad),
                                         **{k: _ptr(v) for k, v in out.items()},
                                         **{k + "_grad": _ptr(v) for k, v in gate_grads.items()},
                                         **{k: _ptr(v) for k, v in grads.items()}),
                         ws.ctypes.data, bws, 0)

    if B == 0:  # the engine computes nothing (the TF ops return zeros without calling it)
        for k in ("w_grad", "b_grad", "wci_grad", "wcf_grad", "wco_grad"):
            assert np.all(grads[k] == 0), k
        return

    # The CPU ops on the same inputs.
    t = lambda a: tf.constant(a.astype(np.float64), dtype=tdt)  # noqa: E731
    common = dict(seq_len_max=tf.constant(L, tf.int64), x=t(x), cs_prev=t(cs_prev),
                  h_prev=t(h_prev), w=t(w), wci=t(wci), wcf=t(wcf), wco=t(wco), b=t(b),
                  cell_clip=clip, use_peephole=peep)
    fwd = (raw_ops.BlockLSTM(**common, forget_bias=forget_bias) if v1
           else raw_ops.BlockLSTMV2(**common))
    tol = TOL[dtype]
    for k, ref in zip(names, fwd):
        _close(k, out[k], ref.numpy(), tol)
    outs = dict(zip(names, fwd))
    bwd_in = dict(common, cs_grad=t(cs_grad), h_grad=t(h_grad), **outs)
    del bwd_in["cell_clip"]  # BlockLSTMGrad(V2) has none (clipping is straight-through there)
    if case.get("exact") or gate_grads:
        zeros = {k: tf.zeros_like(outs[k]) for k in ("i", "f", "o", "ci", "co")}
        gg = {k + "_grad": t(gate_grads[k]) if k in gate_grads else zeros[k]
              for k in ("i", "f", "o", "ci", "co")}
        ref = load_library().tf_rnn_block_lstm_grad_exact(**bwd_in, **gg, cell_clip=clip,
                                                          gate_order=order)
    else:
        ref = (raw_ops.BlockLSTMGrad if v1 else raw_ops.BlockLSTMGradV2)(**bwd_in)
    gnames = ("x_grad", "cs_prev_grad", "h_prev_grad", "w_grad", "wci_grad", "wcf_grad",
              "wco_grad", "b_grad")
    for k, v in zip(gnames, ref):
        _close(k, grads[k], v.numpy(), 5 * tol)
    if case.get("dgates"):
        # LSTMBlockCellGrad's dicfo of each step (its gate order is icfo, BlockLSTM's).
        assert v1 or L < T or T == 0, "dgates is checked for the icfo order"
        if v1:
            cell = raw_ops.LSTMBlockCellGrad(
                x=t(x[0]), cs_prev=t(cs_prev), h_prev=t(h_prev), w=t(w), wci=t(wci),
                wcf=t(wcf), wco=t(wco), b=t(b),
                **{k: v[0] for k, v in outs.items() if k != "h"},
                cs_grad=t(cs_grad[0]), h_grad=t(h_grad[0]), use_peephole=peep)
            _close("dgates", grads["dgates"][0], cell[1].numpy(), 5 * tol)
        else:  # past seq_len_max the gate gradients are zero
            assert np.all(grads["dgates"][L:] == 0), "dgates past seq_len_max"


GRU_CASES = [dict(), dict(gate_grads=True), dict(I=0), dict(B=1, H=1), dict(B=0),
             dict(dtype="float32", gate_grads=True), dict(dtype="float16"),
             dict(dtype="bfloat16")]


@pytest.mark.parametrize("case", GRU_CASES, ids=_lstm_id)
def test_gru_cell(eng, case):
    B, I, H = case.get("B", 3), case.get("I", 4), case.get("H", 5)
    dtype = case.get("dtype", "float64")
    dt, tdt = NP[dtype], tf.as_dtype(dtype)
    rng = np.random.default_rng(11)
    r = lambda *shape, s=1.0: (rng.standard_normal(shape) * s).astype(dt)  # noqa: E731
    x, h_prev = r(B, I), r(B, H, s=0.5)
    w_ru, w_c = r(I + H, 2 * H, s=0.4), r(I + H, H, s=0.4)
    b_ru, b_c, d_h = r(2 * H, s=0.3), r(H, s=0.3), r(B, H)
    gg = {k: r(B, H) for k in ("r", "u", "c")} if case.get("gate_grads") else {}

    spec = ce.make_gru_cell_spec(B=B, I=I, H=H, dtype=dtype)
    fws, bws = ce.gru_cell_sizes(eng, spec)
    nan = lambda *shape: np.full(shape, np.nan, dt)  # noqa: E731
    out = {k: nan(B, H) for k in ("r", "u", "c", "h")}
    ws = np.empty(max(1, fws, bws), np.uint8)
    ins = dict(x=_ptr(x), h_prev=_ptr(h_prev), w_ru=_ptr(w_ru), w_c=_ptr(w_c))
    ce.gru_cell_forward_raw(eng, spec, dict(ins, b_ru=_ptr(b_ru), b_c=_ptr(b_c),
                                            **{k: _ptr(v) for k, v in out.items()}),
                            ws.ctypes.data, fws, 0)
    grads = dict(d_x=nan(B, I), d_h_prev=nan(B, H), d_c_bar=nan(B, H),
                 d_r_bar_u_bar=nan(B, 2 * H))
    ce.gru_cell_backward_raw(eng, spec, dict(ins, r=_ptr(out["r"]), u=_ptr(out["u"]),
                                             c=_ptr(out["c"]), d_h=_ptr(d_h),
                                             **{"g_" + k: _ptr(v) for k, v in gg.items()},
                                             **{k: _ptr(v) for k, v in grads.items()}),
                             ws.ctypes.data, bws, 0)

    if B == 0:  # the engine must just run (the TF ops return without calling it)
        return
    t = lambda a: tf.constant(a.astype(np.float64), dtype=tdt)  # noqa: E731
    ins_t = dict(x=t(x), h_prev=t(h_prev), w_ru=t(w_ru), w_c=t(w_c), b_ru=t(b_ru), b_c=t(b_c))
    fwd = dict(zip(("r", "u", "c", "h"), raw_ops.GRUBlockCell(**ins_t)))
    tol = TOL[dtype]
    for k, ref in fwd.items():
        _close(k, out[k], ref.numpy(), tol)
    zeros = tf.zeros_like(fwd["h"])
    ref = load_library().tf_rnn_gru_block_cell_grad_exact(
        **ins_t, r=fwd["r"], u=fwd["u"], c=fwd["c"], d_h=t(d_h),
        **{k + "_grad": t(gg[k]) if k in gg else zeros for k in ("r", "u", "c")})
    for k, v in zip(("d_x", "d_h_prev", "d_c_bar", "d_r_bar_u_bar"), ref):
        _close(k, grads[k], v.numpy(), 5 * tol)
