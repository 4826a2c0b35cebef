"""Independent float64 reference for the MPSGraph-style LSTM (docs/SEMANTICS.md §8).

Written straight from the equations, with eager float64 TensorFlow ops and a Python loop over
time, so that ``tf.GradientTape`` gives the true gradients (``reference_vjp``).

Notation: T time, N batch, I input, H hidden, D = 2 if bidirectional else 1.

Per direction and step t (forward direction t = 0..T-1; reverse / backward direction
t = T-1..0)::

    x'[t]  = x[t]·Wᵀ + b                (no W: x'[t] = source[t] (own 4H columns) + b)
    pre    = x'[t] + (h_prev ⊙ m[t])·Rᵀ + p ⊙ [c_prev, c_prev, c_prev, c_prev]
    gate_g = act_g(pre_g)               gates in the descriptor's order:
                                        i,f,z,o (default) or i,z,f,o (forget_gate_last)
    c[t]   = f ⊙ c_prev + i ⊙ z
    h[t]   = o ⊙ act(c[t])

Outputs: state [T,N,DH], cell [T,N,DH], z_state [T,N,D·4H] (activated gates, descriptor order),
each direction's values at their own time index, forward direction first on the channel axis;
h_final / c_final [N,DH]: the state after the last step each direction processed.

hard_sigmoid is MPS's clamp(0.2·x + 0.5, 0, 1).
"""

import dataclasses

import numpy as np
import tensorflow as tf

ACTIVATION_NAMES = ("none", "relu", "tanh", "sigmoid", "hard_sigmoid")

# Optional operands in the order MPSGraph returns their gradients (after source, R).
GRAD_ORDER = ("source", "recurrent_weight", "input_weight", "bias", "peephole",
              "init_state", "init_cell")
OPERAND_NAMES = ("source", "recurrent_weight", "input_weight", "bias", "init_state",
                 "init_cell", "mask", "peephole")


@dataclasses.dataclass(frozen=True)
class Desc:
    """The fields of the LSTM descriptor (same names and defaults as mps.LSTMDescriptor)."""
    reverse: bool = False
    bidirectional: bool = False
    produce_cell: bool = False
    training: bool = False
    forget_gate_last: bool = False
    input_gate_activation: str = "sigmoid"
    forget_gate_activation: str = "sigmoid"
    cell_gate_activation: str = "tanh"
    output_gate_activation: str = "sigmoid"
    activation: str = "tanh"

    def kwargs(self):
        return dataclasses.asdict(self)


def activate(name, x):
    if name == "none":
        return x
    if name == "relu":
        return tf.maximum(x, tf.zeros_like(x))
    if name == "tanh":
        return tf.tanh(x)
    if name == "sigmoid":
        return 1.0 / (1.0 + tf.exp(-x))
    if name == "hard_sigmoid":
        return tf.minimum(tf.maximum(0.2 * x + 0.5, tf.zeros_like(x)), tf.ones_like(x))
    raise ValueError(f"unknown activation {name!r}")


def gate_positions(forget_gate_last):
    """Block index (in units of H) of each gate within a 4H row."""
    if forget_gate_last:
        return {"i": 0, "z": 1, "f": 2, "o": 3}
    return {"i": 0, "f": 1, "z": 2, "o": 3}


def _f64(a):
    if a is None:
        return None
    if isinstance(a, (tf.Tensor, tf.Variable)):
        return a if a.dtype == tf.float64 else tf.cast(a, tf.float64)
    return tf.constant(np.asarray(a, dtype=np.float64))


def _direction(xp, R, p, h, c, mask_at, desc, backward):
    """One direction.  xp [T,N,4H] projected source incl. bias; R [4H,H]; p [4H] or None;
    h, c [N,H]; mask_at(t) -> [N,H] or None.  Returns per-time lists and the final h, c."""
    T = xp.shape[0]
    H = R.shape[1]
    pos = gate_positions(desc.forget_gate_last)
    act = {"i": desc.input_gate_activation, "f": desc.forget_gate_activation,
           "z": desc.cell_gate_activation, "o": desc.output_gate_activation}
    hs, cs, zs = [None] * T, [None] * T, [None] * T
    steps = range(T - 1, -1, -1) if backward else range(T)
    for t in steps:
        hm = h
        m = mask_at(t)
        if m is not None:
            hm = h * m
        pre = xp[t] + tf.matmul(hm, R, transpose_b=True)
        if p is not None:
            pre = pre + p[None, :] * tf.concat([c, c, c, c], axis=1)
        g = {}
        for name, k in pos.items():
            g[name] = activate(act[name], pre[:, k * H:(k + 1) * H])
        c = g["f"] * c + g["i"] * g["z"]
        h = g["o"] * activate(desc.activation, c)
        hs[t], cs[t] = h, c
        zs[t] = tf.concat([g[name] for name in sorted(pos, key=pos.get)], axis=1)
    return hs, cs, zs, h, c


def lstm_forward(source, recurrent_weight, input_weight=None, bias=None, init_state=None,
                 init_cell=None, mask=None, peephole=None, desc=Desc()):
    """Returns a dict with state, cell, z_state ([T,...]) and h_final, c_final ([N, DH])."""
    x = _f64(source)
    R = _f64(recurrent_weight)
    W, b = _f64(input_weight), _f64(bias)
    h0, c0, m, P = _f64(init_state), _f64(init_cell), _f64(mask), _f64(peephole)
    D = 2 if desc.bidirectional else 1
    H = R.shape[-1]
    G = 4 * H
    T, N = x.shape[0], x.shape[1]
    assert R.shape == ((2, G, H) if D == 2 else (G, H)), R.shape
    outs = {"state": [], "cell": [], "z_state": [], "h_final": [], "c_final": []}
    for d in range(D):
        Rd = R[d] if D == 2 else R
        if W is not None:
            assert W.shape == (D * G, x.shape[2]), W.shape
            xp = tf.einsum("tni,gi->tng", x, W[d * G:(d + 1) * G])
        else:
            assert x.shape[2] == D * G, x.shape
            xp = x[:, :, d * G:(d + 1) * G]
        if b is not None:
            assert b.shape == (D * G,), b.shape
            xp = xp + b[d * G:(d + 1) * G]
        p = None
        if P is not None:
            assert P.shape == ((2, G) if D == 2 else (G,)), P.shape
            p = P[d] if D == 2 else P
        cols = slice(d * H, (d + 1) * H)
        h = h0[:, cols] if h0 is not None else tf.zeros([N, H], tf.float64)
        c = c0[:, cols] if c0 is not None else tf.zeros([N, H], tf.float64)
        if m is None:
            mask_at = lambda t: None  # noqa: E731
        elif len(m.shape) == 2:
            assert m.shape == (N, D * H), m.shape
            md = m[:, cols]
            mask_at = lambda t, md=md: md  # noqa: E731
        else:
            assert m.shape == (T, N, D * H), m.shape
            md = m[:, :, cols]
            mask_at = lambda t, md=md: md[t]  # noqa: E731
        backward = (d == 1) or (D == 1 and desc.reverse)
        hs, cs, zs, hf, cf = _direction(xp, Rd, p, h, c, mask_at, desc, backward)
        outs["state"].append(tf.stack(hs))
        outs["cell"].append(tf.stack(cs))
        outs["z_state"].append(tf.stack(zs))
        outs["h_final"].append(hf)
        outs["c_final"].append(cf)
    return {k: tf.concat(v, axis=-1) for k, v in outs.items()}


def forward_outputs(operands, desc):
    """The list mps.lstm returns: [state] + [cell if produce_cell] + [z_state if training]."""
    r = lstm_forward(desc=desc, **operands)
    outs = [r["state"]]
    if desc.produce_cell:
        outs.append(r["cell"])
    if desc.training:
        outs.append(r["z_state"])
    return outs


def reference_vjp(operands, desc, state_cot=None, cell_cot=None, final_state_cot=None,
                  final_cell_cot=None):
    """Gradient of  L = Σ state_cot⊙state + Σ cell_cot⊙cell + Σ final_state_cot⊙h_final
    + Σ final_cell_cot⊙c_final  w.r.t. every given operand except mask.

    operands: dict name -> array (None or absent = not given).  Returns (grads, names) in
    GRAD_ORDER (only the given operands)."""
    given = {k: _f64(v) for k, v in operands.items() if v is not None}
    names = [n for n in GRAD_ORDER if n in given]
    with tf.GradientTape() as tape:
        for n in names:
            tape.watch(given[n])
        r = lstm_forward(desc=desc, **given)
        loss = tf.constant(0.0, tf.float64)
        for cot, key in ((state_cot, "state"), (cell_cot, "cell"),
                         (final_state_cot, "h_final"), (final_cell_cot, "c_final")):
            if cot is not None:
                loss = loss + tf.reduce_sum(_f64(cot) * r[key])
    grads = tape.gradient(loss, [given[n] for n in names],
                          unconnected_gradients=tf.UnconnectedGradients.ZERO)
    return [g.numpy() for g in grads], names


def loss_value(operands, desc, state_cot=None, cell_cot=None, final_state_cot=None,
               final_cell_cot=None):
    """The scalar L of reference_vjp (for numeric differentiation)."""
    r = lstm_forward(desc=desc, **{k: v for k, v in operands.items() if v is not None})
    total = 0.0
    for cot, key in ((state_cot, "state"), (cell_cot, "cell"),
                     (final_state_cot, "h_final"), (final_cell_cot, "c_final")):
        if cot is not None:
            total += float(np.sum(np.asarray(cot) * r[key].numpy()))
    return total
