"""Independent float64 reference for the MPSGraph-style LSTM (docs/SEMANTICS.md §8).

Written straight from the equations, with eager float64 TensorFlow ops and a Python loop over
time, so that ``tf.GradientTape`` gives the true gradients (``reference_vjp``).

Notation: T time, B batch, I input, H hidden, D = 2 if bidirectional else 1.

Per direction and step t (forward direction t = 0..T-1; reverse / backward direction
t = T-1..0)::

    x'[t]  = x[t]·Wᵀ + b                (no W: x'[t] = source[t] (own 4H columns) + b)
    pre    = x'[t] + (h_prev ⊙ m[t])·Rᵀ + p ⊙ [c_prev, c_prev, c_prev, c_prev]
    gate_g = act_g(pre_g)               gates in the descriptor's order:
                                        i,f,z,o (default) or i,z,f,o (forget_gate_last)
    c[t]   = f ⊙ c_prev + i ⊙ z
    h[t]   = o ⊙ act(c[t])

Outputs: state [T,B,DH], cell [T,B,DH], z_state [T,B,D·4H] (activated gates, descriptor order),
each direction's values at their own time index, forward direction first on the channel axis;
h_final / c_final [B,DH]: the state after the last step each direction processed.

hard_sigmoid is MPS's clamp(0.2·x + 0.5, 0, 1).
"""

import tensorflow as tf

from mps_ref_common import (ACTIVATION_NAMES, activate, check_recurrent_weight,  # noqa: F401
                            descriptor, direction_inputs, f64, loss_value as _loss_value,
                            vjp)

# Optional operands in the order MPSGraph returns their gradients (after source, R).
GRAD_ORDER = ("source", "recurrent_weight", "input_weight", "bias", "peephole",
              "init_state", "init_cell")
OPERAND_NAMES = ("source", "recurrent_weight", "input_weight", "bias", "init_state",
                 "init_cell", "mask", "peephole")


Desc = descriptor(
    "The fields of the LSTM descriptor (same names and defaults as mps.LSTMDescriptor).",
    reverse=False, bidirectional=False, produce_cell=False, training=False,
    forget_gate_last=False, input_gate_activation="sigmoid", forget_gate_activation="sigmoid",
    cell_gate_activation="tanh", output_gate_activation="sigmoid", activation="tanh")


def gate_positions(forget_gate_last):
    """Block index (in units of H) of each gate within a 4H row."""
    if forget_gate_last:
        return {"i": 0, "z": 1, "f": 2, "o": 3}
    return {"i": 0, "f": 1, "z": 2, "o": 3}


def _direction(xp, R, p, h, c, mask_at, desc, backward):
    """One direction.  xp [T,B,4H] projected source incl. bias; R [4H,H]; p [4H] or None;
    h, c [B,H]; mask_at(t) -> [B,H] or None.  Returns per-time lists and the final h, c."""
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
    """Returns a dict with state, cell, z_state ([T,...]) and h_final, c_final ([B, DH])."""
    x, R, W, b = f64(source), f64(recurrent_weight), f64(input_weight), f64(bias)
    h0, c0, m, P = f64(init_state), f64(init_cell), f64(mask), f64(peephole)
    D = 2 if desc.bidirectional else 1
    H = R.shape[-1]
    G = 4 * H
    B = x.shape[1]
    check_recurrent_weight(R, D, G, H)
    outs = {"state": [], "cell": [], "z_state": [], "h_final": [], "c_final": []}
    for d in range(D):
        Rd, xp, cols, h, mask_at, backward = direction_inputs(d, D, x, R, W, b, h0, m,
                                                              desc.reverse)
        p = None
        if P is not None:
            assert P.shape == ((2, G) if D == 2 else (G,)), P.shape
            p = P[d] if D == 2 else P
        c = c0[:, cols] if c0 is not None else tf.zeros([B, H], tf.float64)
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


def _cotangents(state_cot, cell_cot, final_state_cot, final_cell_cot):
    return {"state": state_cot, "cell": cell_cot, "h_final": final_state_cot,
            "c_final": final_cell_cot}


def reference_vjp(operands, desc, state_cot=None, cell_cot=None, final_state_cot=None,
                  final_cell_cot=None):
    """Gradient of  L = Σ state_cot⊙state + Σ cell_cot⊙cell + Σ final_state_cot⊙h_final
    + Σ final_cell_cot⊙c_final  w.r.t. every given operand except mask.

    operands: dict name -> array (None or absent = not given).  Returns (grads, names) in
    GRAD_ORDER (only the given operands)."""
    return vjp(lstm_forward, GRAD_ORDER, operands, desc,
               _cotangents(state_cot, cell_cot, final_state_cot, final_cell_cot))


def loss_value(operands, desc, state_cot=None, cell_cot=None, final_state_cot=None,
               final_cell_cot=None):
    """The scalar L of reference_vjp (for numeric differentiation)."""
    return _loss_value(lstm_forward, operands, desc,
                       _cotangents(state_cot, cell_cot, final_state_cot, final_cell_cot))
