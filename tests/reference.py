"""Independent float64 references for the LSTM block ops.

Written from docs/SEMANTICS.md §2 (not from any kernel source).  Two flavours:

* NumPy, float64 (``lstm_cell_fwd``, ``block_lstm_fwd``, ``lstm_cell_grad``,
  ``lstm_cell_param_grads``, ``block_lstm_grad``).  The ``*_grad`` functions compute what the
  raw ``*Grad`` ops compute: the clip is straight-through and only cs/h gradients enter.
* TensorFlow ops (``tf_lstm_cell_fwd``, ``tf_block_lstm_fwd``): the same forward written with
  differentiable TF ops, so ``tf.GradientTape`` gives the TRUE gradient of the forward function
  (exact clip derivative via ``tf.clip_by_value``, gradients flow into all seven outputs).

Notation (docs/SEMANTICS.md): B batch, T time, I input size, C cell size.
``w`` is ``[I+C, 4C]`` (rows 0..I-1 multiply x, rows I.. multiply h_prev), ``b`` is ``[4C]``.
Gate column blocks of ``gates = [x, h_prev]·w + b``:

    ICFO (LSTMBlockCell, BlockLSTM, BlockLSTMGrad):       | i | ci | f | o |
    IFCO (BlockLSTMV2, BlockLSTMGradV2):                  | i | f | ci | o |

Every function returns the seven forward outputs in op order ``(i, cs, f, o, ci, co, h)``.
"""

import numpy as np

ICFO = "ICFO"
IFCO = "IFCO"

# Column-block index (in units of C) of each gate, per layout.
GATE_BLOCK = {
    ICFO: {"i": 0, "c": 1, "f": 2, "o": 3},
    IFCO: {"i": 0, "f": 1, "c": 2, "o": 3},
}

OUTPUT_NAMES = ("i", "cs", "f", "o", "ci", "co", "h")
BLOCK_GRAD_NAMES = ("x_grad", "cs_prev_grad", "h_prev_grad", "w_grad",
                    "wci_grad", "wcf_grad", "wco_grad", "b_grad")
CELL_GRAD_NAMES = ("cs_prev_grad", "dicfo", "wci_grad", "wcf_grad", "wco_grad")


def _f64(*arrays):
    return [np.asarray(a, dtype=np.float64) for a in arrays]


def sigmoid(z):
    """Logistic sigmoid, overflow-free."""
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def split_gates(gates, layout):
    """[..., 4C] -> dict gate -> [..., C] (keys 'i', 'c', 'f', 'o')."""
    C = gates.shape[-1] // 4
    return {g: gates[..., k * C:(k + 1) * C] for g, k in GATE_BLOCK[layout].items()}


def place_gates(di, dci, df, do, layout):
    """Inverse of split_gates: builds [..., 4C] with the blocks in `layout` order."""
    blocks = [None] * 4
    for g, arr in (("i", di), ("c", dci), ("f", df), ("o", do)):
        blocks[GATE_BLOCK[layout][g]] = arr
    return np.concatenate(blocks, axis=-1)


# ---------------------------------------------------------------------------------------------
# NumPy forward (§2.2, §2.4)
# ---------------------------------------------------------------------------------------------

def lstm_cell_fwd(x, cs_prev, h_prev, w, wci, wcf, wco, b, *, forget_bias=1.0, cell_clip=3.0,
                  use_peephole=False, layout=ICFO, return_pre_clip=False):
    """One LSTM step (§2.2).  Returns (i, cs, f, o, ci, co, h) [+ cs before clipping]."""
    x, cs_prev, h_prev, w, wci, wcf, wco, b = _f64(x, cs_prev, h_prev, w, wci, wcf, wco, b)
    xh = np.concatenate([x, h_prev], axis=1)            # [B, I+C]
    g = split_gates(xh @ w + b, layout)                 # each [B, C]
    pi, pf = (cs_prev * wci, cs_prev * wcf) if use_peephole else (0.0, 0.0)
    i = sigmoid(g["i"] + pi)
    ci = np.tanh(g["c"])
    f = sigmoid(g["f"] + forget_bias + pf)
    cs_pre = i * ci + f * cs_prev
    cs = np.clip(cs_pre, -cell_clip, cell_clip) if cell_clip > 0 else cs_pre
    co = np.tanh(cs)
    o = sigmoid(g["o"] + (cs * wco if use_peephole else 0.0))   # output peephole: new clipped cs
    h = o * co
    out = (i, cs, f, o, ci, co, h)
    return out + (cs_pre,) if return_pre_clip else out


def block_lstm_fwd(seq_len_max, x, cs_prev, h_prev, w, wci, wcf, wco, b, *, forget_bias=1.0,
                   cell_clip=3.0, use_peephole=False, layout=ICFO, return_pre_clip=False):
    """BlockLSTM(V2) forward over x [T,B,I] (§2.4).

    Steps t < seq_len_max are computed; ALL outputs are exactly zero for t >= seq_len_max
    (the plugin's documented behaviour; stock zeroes only cs and h there).
    Returns seven [T,B,C] arrays (i, cs, f, o, ci, co, h) [+ pre-clip cs, zero in the tail].
    """
    x, cs_prev, h_prev = _f64(x, cs_prev, h_prev)
    T, B = x.shape[0], x.shape[1]
    C = cs_prev.shape[1]
    seq_len_max = int(seq_len_max)
    assert 0 <= seq_len_max <= T
    outs = [np.zeros((T, B, C)) for _ in range(8)]
    cs_t, h_t = cs_prev, h_prev
    for t in range(seq_len_max):
        step = lstm_cell_fwd(x[t], cs_t, h_t, w, wci, wcf, wco, b, forget_bias=forget_bias,
                             cell_clip=cell_clip, use_peephole=use_peephole, layout=layout,
                             return_pre_clip=True)
        for k in range(8):
            outs[k][t] = step[k]
        cs_t, h_t = step[1], step[6]
    return tuple(outs) if return_pre_clip else tuple(outs[:7])


# ---------------------------------------------------------------------------------------------
# NumPy backward, as the raw *Grad ops compute it (§2.3, §2.5, §3.2)
# ---------------------------------------------------------------------------------------------

def _cell_bprop(cs_prev, i, cs, f, o, ci, co, cs_grad, h_grad, wci, wcf, wco, use_peephole):
    """Pointwise part of §2.3.  Returns do, dcs, dci, df, di, cs_prev_grad."""
    do = o * (1.0 - o) * h_grad * co
    dcs = (1.0 - co * co) * h_grad * o + cs_grad
    if use_peephole:
        dcs = dcs + do * wco
    dci = (1.0 - ci * ci) * dcs * i
    df = f * (1.0 - f) * dcs * cs_prev
    di = i * (1.0 - i) * dcs * ci
    cs_prev_grad = dcs * f
    if use_peephole:
        cs_prev_grad = cs_prev_grad + di * wci + df * wcf
    return do, dcs, dci, df, di, cs_prev_grad


def lstm_cell_grad(x, cs_prev, h_prev, w, wci, wcf, wco, b, i, cs, f, o, ci, co, cs_grad, h_grad,
                   *, use_peephole, layout=ICFO):
    """LSTMBlockCellGrad (§2.3): (cs_prev_grad, dicfo, wci_grad, wcf_grad, wco_grad).

    Uses the given forward activations (it does not recompute them); x, h_prev, w, b are
    unused, exactly like the op.  Peephole grads are zero without peephole.
    """
    (cs_prev, wci, wcf, wco, i, cs, f, o, ci, co, cs_grad, h_grad) = _f64(
        cs_prev, wci, wcf, wco, i, cs, f, o, ci, co, cs_grad, h_grad)
    do, _, dci, df, di, cs_prev_grad = _cell_bprop(cs_prev, i, cs, f, o, ci, co, cs_grad, h_grad,
                                                   wci, wcf, wco, use_peephole)
    dicfo = place_gates(di, dci, df, do, layout)
    C = cs_prev.shape[1]
    if use_peephole:
        wci_grad = (di * cs_prev).sum(axis=0)
        wcf_grad = (df * cs_prev).sum(axis=0)
        wco_grad = (do * cs).sum(axis=0)
    else:
        wci_grad = wcf_grad = wco_grad = np.zeros(C)
    return cs_prev_grad, dicfo, wci_grad, wcf_grad, wco_grad


def lstm_cell_param_grads(x, h_prev, w, dicfo):
    """The Python half of the cell gradient (§3.2): (x_grad, h_prev_grad, w_grad, b_grad)."""
    x, h_prev, w, dicfo = _f64(x, h_prev, w, dicfo)
    I = x.shape[1]
    xh_grad = dicfo @ w.T
    w_grad = np.concatenate([x, h_prev], axis=1).T @ dicfo
    return xh_grad[:, :I], xh_grad[:, I:], w_grad, dicfo.sum(axis=0)


def block_lstm_grad(seq_len_max, x, cs_prev, h_prev, w, wci, wcf, wco, b, i, cs, f, o, ci, co, h,
                    cs_grad, h_grad, *, use_peephole, layout=ICFO):
    """BlockLSTMGrad(V2) (§2.5).  Returns the 8 grads in op order (see BLOCK_GRAD_NAMES).

    Straight-through clip, cs_grad/h_grad at t >= seq_len_max ignored, x_grad zero there.
    """
    (x, cs_prev, h_prev, w, wci, wcf, wco, b, i, cs, f, o, ci, co, cs_grad, h_grad) = _f64(
        x, cs_prev, h_prev, w, wci, wcf, wco, b, i, cs, f, o, ci, co, cs_grad, h_grad)
    T, B, I = x.shape
    C = cs_prev.shape[1]
    seq_len_max = int(seq_len_max)
    x_grad = np.zeros_like(x)
    cs_carry = np.zeros((B, C))
    h_carry = np.zeros((B, C))
    w_grad = np.zeros_like(w)
    b_grad = np.zeros_like(b)
    wci_grad, wcf_grad, wco_grad = np.zeros(C), np.zeros(C), np.zeros(C)
    for t in reversed(range(seq_len_max)):
        cs_prev_t = cs_prev if t == 0 else cs[t - 1]
        h_prev_t = h_prev if t == 0 else h[t - 1]
        dcs_in = cs_grad[t] + cs_carry
        dh = h_grad[t] + h_carry
        do, _, dci, df, di, cs_carry = _cell_bprop(cs_prev_t, i[t], cs[t], f[t], o[t], ci[t],
                                                   co[t], dcs_in, dh, wci, wcf, wco,
                                                   use_peephole)
        dgates = place_gates(di, dci, df, do, layout)
        xh_grad = dgates @ w.T
        x_grad[t] = xh_grad[:, :I]
        h_carry = xh_grad[:, I:]
        w_grad += np.concatenate([x[t], h_prev_t], axis=1).T @ dgates
        b_grad += dgates.sum(axis=0)
        if use_peephole:
            wci_grad += (di * cs_prev_t).sum(axis=0)
            wcf_grad += (df * cs_prev_t).sum(axis=0)
            wco_grad += (do * cs[t]).sum(axis=0)
    return x_grad, cs_carry, h_carry, w_grad, wci_grad, wcf_grad, wco_grad, b_grad


# ---------------------------------------------------------------------------------------------
# TensorFlow-ops forward (differentiable; exact derivative of the clip)
# ---------------------------------------------------------------------------------------------

def tf_lstm_cell_fwd(x, cs_prev, h_prev, w, wci, wcf, wco, b, *, forget_bias=1.0, cell_clip=3.0,
                     use_peephole=False, layout=ICFO):
    """Same maths as lstm_cell_fwd with TF ops.  Inputs: tensors of one float dtype."""
    import tensorflow as tf

    xh = tf.concat([x, h_prev], axis=1)
    gates = tf.matmul(xh, w) + b
    C = gates.shape[-1] // 4
    blk = {g: gates[:, k * C:(k + 1) * C] for g, k in GATE_BLOCK[layout].items()}
    fb = tf.constant(forget_bias, dtype=gates.dtype)
    if use_peephole:
        i = tf.sigmoid(blk["i"] + cs_prev * wci)
        f = tf.sigmoid(blk["f"] + fb + cs_prev * wcf)
    else:
        i = tf.sigmoid(blk["i"])
        f = tf.sigmoid(blk["f"] + fb)
    ci = tf.tanh(blk["c"])
    cs = i * ci + f * cs_prev
    if cell_clip > 0:
        cs = tf.clip_by_value(cs, -cell_clip, cell_clip)
    co = tf.tanh(cs)
    o = tf.sigmoid(blk["o"] + cs * wco) if use_peephole else tf.sigmoid(blk["o"])
    h = o * co
    return i, cs, f, o, ci, co, h


def tf_block_lstm_fwd(seq_len_max, x, cs_prev, h_prev, w, wci, wcf, wco, b, *, forget_bias=1.0,
                      cell_clip=3.0, use_peephole=False, layout=ICFO):
    """BlockLSTM(V2) with TF ops, all seven outputs zero for t >= seq_len_max (python int)."""
    import tensorflow as tf

    T = x.shape[0]
    seq_len_max = int(seq_len_max)
    steps = [[] for _ in range(7)]
    cs_t, h_t = cs_prev, h_prev
    for t in range(seq_len_max):
        out = tf_lstm_cell_fwd(x[t], cs_t, h_t, w, wci, wcf, wco, b, forget_bias=forget_bias,
                               cell_clip=cell_clip, use_peephole=use_peephole, layout=layout)
        for k in range(7):
            steps[k].append(out[k])
        cs_t, h_t = out[1], out[6]
    zero = tf.zeros_like(cs_prev)
    return tuple(tf.stack(s + [zero] * (T - seq_len_max), axis=0) for s in steps)
