"""Independent float64 reference for the MPSGraph-style GRU (tf_rnn_ops.mps.gru).

Written straight from the equations, with eager float64 TensorFlow ops and a Python loop over
time, so that ``tf.GradientTape`` gives the true gradients (``reference_vjp``).

Notation: T time, B batch, I input, H hidden, D = 2 if bidirectional else 1.

Per direction d and step t (forward direction t = 0..T-1; the backward direction of a
bidirectional op, or reverse with D = 1, t = T-1..0; reverse is ignored when bidirectional)::

    x'[t] = x[t]·W_dᵀ + b_d            (no W: x'[t] = source[t] (own 3H columns) + b_d)
    hm    = h_prev ⊙ m[t]              (m: the mask rows/columns of this direction; none = 1)
    z     = fz(hm·R_zᵀ + x'_z),   r = fr(hm·R_rᵀ + x'_r)
    c     = (r ⊙ hm)·R_oᵀ                        reset_after=False
    c     = (hm·R_oᵀ + b2_d) ⊙ r                 reset_after=True
    o     = fo(c + x'_o)
    h     = (1-z) ⊙ h_prev + z ⊙ o               flip_z=False
    h     = z ⊙ h_prev + (1-z) ⊙ o               flip_z=True    (h_prev unmasked)

Gate blocks in each 3H: z, r, o (default) or r, z, o (reset_gate_first).
Outputs: state [T,B,DH], z_state [T,B,D·3H] (activated gates, descriptor order), each
direction's values at their own time index, forward direction first on the channel axis;
h_final [B,DH]: the state after the last step each direction processed.

hard_sigmoid is MPS's clamp(0.2·x + 0.5, 0, 1).
"""

import numpy as np
import tensorflow as tf

from mps_ref_common import (ACTIVATION_NAMES, activate, check_recurrent_weight,  # noqa: F401
                            descriptor, direction_inputs, f64, loss_value as _loss_value,
                            vjp)

ACT_FIELDS = ("update_gate_activation", "reset_gate_activation", "output_gate_activation")

# Optional operands in the order mps.gru_gradients returns their gradients (after source, R).
GRAD_ORDER = ("source", "recurrent_weight", "input_weight", "bias", "init_state",
              "secondary_bias")
OPERAND_NAMES = ("source", "recurrent_weight", "input_weight", "bias", "init_state", "mask",
                 "secondary_bias")


Desc = descriptor(
    "The fields of the GRU descriptor (same names and defaults as mps.GRUDescriptor).",
    reverse=False, bidirectional=False, training=False, reset_gate_first=False,
    reset_after=False, flip_z=False, update_gate_activation="sigmoid",
    reset_gate_activation="sigmoid", output_gate_activation="tanh")


def gate_positions(reset_gate_first):
    """Block index (in units of H) of each gate within a 3H row."""
    if reset_gate_first:
        return {"r": 0, "z": 1, "o": 2}
    return {"z": 0, "r": 1, "o": 2}


def _direction(xp, R, b2, h, mask_at, desc, backward, preacts):
    """One direction.  xp [T,B,3H] projected source incl. bias; R [3H,H]; b2 [H] or None;
    h [B,H]; mask_at(t) -> [B,H] or None.  Returns per-time lists and the final h; appends
    (activation name, pre-activation) of every gate evaluation to ``preacts``."""
    T = xp.shape[0]
    H = R.shape[1]
    pos = gate_positions(desc.reset_gate_first)
    blk = lambda a, g: a[:, pos[g] * H:(pos[g] + 1) * H]  # noqa: E731
    Rz, Rr, Ro = (R[pos[g] * H:(pos[g] + 1) * H] for g in ("z", "r", "o"))
    hs, zs = [None] * T, [None] * T
    steps = range(T - 1, -1, -1) if backward else range(T)
    for t in steps:
        m = mask_at(t)
        hm = h if m is None else h * m
        x = xp[t]
        pz = tf.matmul(hm, Rz, transpose_b=True) + blk(x, "z")
        pr = tf.matmul(hm, Rr, transpose_b=True) + blk(x, "r")
        z = activate(desc.update_gate_activation, pz)
        r = activate(desc.reset_gate_activation, pr)
        if desc.reset_after:
            c = tf.matmul(hm, Ro, transpose_b=True)
            if b2 is not None:
                c = c + b2[None, :]
            c = c * r
        else:
            c = tf.matmul(r * hm, Ro, transpose_b=True)
        po = c + blk(x, "o")
        o = activate(desc.output_gate_activation, po)
        preacts += [(desc.update_gate_activation, pz), (desc.reset_gate_activation, pr),
                    (desc.output_gate_activation, po)]
        if desc.flip_z:
            h = z * h + (1.0 - z) * o
        else:
            h = (1.0 - z) * h + z * o
        hs[t] = h
        g = {"z": z, "r": r, "o": o}
        zs[t] = tf.concat([g[name] for name in sorted(pos, key=pos.get)], axis=1)
    return hs, zs, h


def gru_forward(source, recurrent_weight, input_weight=None, bias=None, init_state=None,
                mask=None, secondary_bias=None, desc=Desc()):
    """Returns a dict with state, z_state ([T,...]), h_final ([B, DH]) and preacts (a list of
    (activation name, pre-activation tensor) of every gate evaluation)."""
    x, R, W, b = f64(source), f64(recurrent_weight), f64(input_weight), f64(bias)
    h0, m, B2 = f64(init_state), f64(mask), f64(secondary_bias)
    D = 2 if desc.bidirectional else 1
    H = R.shape[-1]
    G = 3 * H
    T, B = x.shape[0], x.shape[1]
    check_recurrent_weight(R, D, G, H)
    if B2 is not None:
        assert desc.reset_after, "secondary_bias requires reset_after"
        assert B2.shape == (D * H,), B2.shape
    outs = {"state": [], "z_state": [], "h_final": []}
    preacts = []
    for d in range(D):
        Rd, xp, cols, h, mask_at, backward = direction_inputs(d, D, x, R, W, b, h0, m,
                                                              desc.reverse)
        b2 = B2[cols] if B2 is not None else None
        hs, zs, hf = _direction(xp, Rd, b2, h, mask_at, desc, backward, preacts)
        if T:
            outs["state"].append(tf.stack(hs))
            outs["z_state"].append(tf.stack(zs))
        else:
            outs["state"].append(tf.zeros([0, B, H], tf.float64))
            outs["z_state"].append(tf.zeros([0, B, G], tf.float64))
        outs["h_final"].append(hf)
    res = {k: tf.concat(v, axis=-1) for k, v in outs.items()}
    res["preacts"] = preacts
    return res


KINKS = {"relu": (0.0,), "hard_sigmoid": (-2.5, 2.5)}


def kink_distance(preacts):
    """The smallest distance of a pre-activation from a kink of its activation (inf if the
    activations are smooth)."""
    best = np.inf
    for name, p in preacts:
        for k in KINKS.get(name, ()):
            if tf.size(p) > 0:
                best = min(best, float(tf.reduce_min(tf.abs(p - k))))
    return best


def forward_outputs(operands, desc):
    """The list mps.gru returns: [state] + [z_state if training]."""
    r = gru_forward(desc=desc, **operands)
    return [r["state"]] + ([r["z_state"]] if desc.training else [])


def reference_vjp(operands, desc, state_cot=None, final_state_cot=None):
    """Gradient of  L = Σ state_cot⊙state + Σ final_state_cot⊙h_final  w.r.t. every given
    operand except mask.

    operands: dict name -> array (None or absent = not given).  Returns (grads, names) in
    GRAD_ORDER (only the given operands)."""
    return vjp(gru_forward, GRAD_ORDER, operands, desc,
               {"state": state_cot, "h_final": final_state_cot})


def loss_value(operands, desc, state_cot=None, final_state_cot=None):
    """The scalar L of reference_vjp (for numeric differentiation)."""
    return _loss_value(gru_forward, operands, desc,
                       {"state": state_cot, "h_final": final_state_cot})
