"""Float64 reference of the stacked RNN (cc/engine/rnn.h semantics) written with plain PyTorch
ops, step by step, so that autograd gives the reference gradients.  Independent of cuDNN and of
our engine; TF-free (the GPU machines have no TensorFlow).  Covers what torch.nn cannot:
skip input, dropout with our hash masks, zero-length sequences, and the MPSGraph-style LSTM
options (gate order, per-gate activations, peephole, recurrent mask, reverse, preprojected).
"""

import numpy as np

import cuda_engine

_M64 = (1 << 64) - 1


def _mix(z):
    """SplitMix64 finaliser on uint64 numpy arrays (wraps like the C++)."""
    with np.errstate(over="ignore"):
        z = (z + np.uint64(0x9E3779B97F4A7C15)) & np.uint64(_M64)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def dropout_mask(seed, layer, n, p):
    """Layer `layer`'s mask of n elements: 0 or 1/(1-p) (MakeMask in rnn_cpu.cc; the engine
    holds p as a float32)."""
    p = float(np.float32(p))
    key = _mix(np.uint64(seed) ^ _mix(np.uint64(layer + 0x5BD1E995)))
    u = (_mix(key ^ np.arange(n, dtype=np.uint64)) >> np.uint64(11)).astype(np.float64) * (
        1.0 / 9007199254740992.0)
    scale = 1.0 / (1.0 - p) if p < 1.0 else 0.0
    return np.where(u >= p, scale, 0.0)


def _act(torch, name, v):
    if name == "none":
        return v
    if name == "relu":
        return torch.relu(v)
    if name == "tanh":
        return torch.tanh(v)
    if name == "sigmoid":
        return torch.sigmoid(v)
    if name == "hard_sigmoid":
        return torch.clamp(0.2 * v + 0.5, 0.0, 1.0)
    raise ValueError(name)


def rnn_reference(torch, x, h0, c0, params, *, mode, L, D, I, H, P=0, skip_input=False,
                  lengths=None, training=True, dropout=0.0, seed=0, gate_pos=(0, 1, 2, 3),
                  gate_act=("sigmoid", "sigmoid", "tanh", "sigmoid"), cell_act="tanh",
                  peephole=None, mask=None, mask_per_step=False, reverse=False,
                  preprojected=False, gru_reset_before=False, gru_z_new=False,
                  mask_gates=False):
    """Forward in the dtype of the inputs (use float64).  x [T, B, I], h0 [L*D, B, Hs],
    c0 [L*D, B, H] (lstm), params flat (our layout).  mask [T or 1, B, D*Hs], or with
    mask_gates [T or 1, B, D*K*Hs]: gate block k's product R_k·h takes h * mask_k.  Returns
    (y, hn, cn or None)."""
    K = cuda_engine.GATES[mode]
    Hs = P if P else H
    T, B = x.shape[0], x.shape[1]
    lay = cuda_engine.param_layout(mode, L=L, D=D, I=I, H=H, P=P,
                                   skip_input=skip_input or preprojected)
    lens = [T] * B if lengths is None else [int(v) for v in lengths]
    inp = x
    hs, cs = [], []
    for l in range(L):
        in_l = (0 if (skip_input or preprojected) else I) if l == 0 else D * Hs
        outs = []
        for d in range(D):
            p = l * D + d
            o = lay[p]
            W = params[o["w"]:o["r"]].reshape(K * H, in_l)
            R = params[o["r"]:o["p"]].reshape(K * H, Hs)
            Pm = params[o["p"]:o["p"] + P * H].reshape(P, H) if P else None
            bW = params[o["bw"]:o["br"]]
            bR = params[o["br"]:o["end"]]
            peep = peephole[p] if peephole is not None else None
            rev = d == 1 or (D == 1 and reverse)
            h = h0[p]
            c = c0[p] if mode == "lstm" else None
            out = [None] * T
            for t in range(T):
                # Sequence b visits time index tau_b(t); gather per row.
                taus = [(lens[b] - 1 - t if rev else t) if t < lens[b] else -1
                        for b in range(B)]
                valid = torch.tensor([tau >= 0 for tau in taus], dtype=torch.bool,
                                     device=x.device)
                idx = torch.tensor([max(tau, 0) for tau in taus], dtype=torch.long,
                                   device=x.device)
                xt = inp[idx, torch.arange(B, device=x.device)]          # [B, in]
                if l == 0 and preprojected:
                    gx = xt[:, d * K * H:(d + 1) * K * H] + bW
                elif l == 0 and skip_input:
                    gx = xt.repeat(1, K) + bW
                else:
                    gx = xt @ W.T + bW
                h_rec = h
                if mask is not None:
                    mw = (K if mask_gates else 1) * Hs  # this direction's mask columns
                    mrow = mask[idx if mask_per_step else torch.zeros_like(idx),
                                torch.arange(B, device=x.device)][:, d * mw:(d + 1) * mw]
                if mask is not None and mask_gates:
                    hr = torch.cat([(h * mrow[:, k * Hs:(k + 1) * Hs]) @ R[k * H:(k + 1) * H].T
                                    for k in range(K)], dim=1) + bR
                else:
                    if mask is not None:
                        h_rec = h * mrow
                    hr = h_rec @ R.T + bR
                blk = lambda v, k: v[:, k * H:(k + 1) * H]  # noqa: E731
                if mode == "lstm":
                    pre = [blk(gx, gate_pos[q]) + blk(hr, gate_pos[q]) for q in range(4)]
                    if peep is not None:
                        pre = [pre[q] + peep[gate_pos[q] * H:(gate_pos[q] + 1) * H] * c
                               for q in range(4)]
                    ig, fg, cg, og = [_act(torch, gate_act[q], pre[q]) for q in range(4)]
                    c_new = fg * c + ig * cg
                    h_new = og * _act(torch, cell_act, c_new)
                    if Pm is not None:
                        h_new = h_new @ Pm.T
                elif mode == "gru":
                    # Logical gates r, z, n in blocks gate_pos[0..2] with gate_act[0..2].
                    pr, pz, pn = gate_pos[0], gate_pos[1], gate_pos[2]
                    r = _act(torch, gate_act[0], blk(gx, pr) + blk(hr, pr))
                    z = _act(torch, gate_act[1], blk(gx, pz) + blk(hr, pz))
                    if gru_reset_before:
                        Rn = R[pn * H:(pn + 1) * H]
                        nrec = (r * h_rec) @ Rn.T + bR[pn * H:(pn + 1) * H]
                        n = _act(torch, gate_act[2], blk(gx, pn) + nrec)
                    else:
                        n = _act(torch, gate_act[2], blk(gx, pn) + r * blk(hr, pn))
                    if gru_z_new:
                        h_new = z * n + (1.0 - z) * h
                    else:
                        h_new = (1.0 - z) * n + z * h
                    c_new = None
                else:
                    pre = gx + hr
                    h_new = torch.tanh(pre) if mode == "rnn_tanh" else torch.relu(pre)
                    c_new = None
                v = valid.reshape(B, 1)
                h = torch.where(v, h_new, h)
                if c is not None:
                    c = torch.where(v, c_new, c)
                out[t] = (idx, valid, h_new)
            # Scatter step outputs back to time indices (zeros past each length).
            y_d = torch.zeros(T, B, Hs, dtype=x.dtype, device=x.device)
            for t in range(T):
                idx, valid, hv = out[t]
                if bool(valid.any()):
                    rows = torch.nonzero(valid).flatten()
                    y_d = y_d.index_put((idx[rows], rows), hv[rows])
            outs.append(y_d)
            hs.append(h)
            cs.append(c)
        inp = outs[0] if D == 1 else torch.cat(outs, dim=2)
        if l + 1 < L and training and dropout > 0.0:
            m = dropout_mask(seed, l, T * B * D * Hs, dropout)
            inp = inp * torch.tensor(m, dtype=x.dtype, device=x.device).reshape(T, B, D * Hs)
    hn = torch.stack(hs, 0)
    cn = torch.stack(cs, 0) if mode == "lstm" else None
    return inp, hn, cn
