"""What the float64 references of the MPSGraph-style LSTM (mps_reference.py) and GRU
(mps_gru_reference.py) share: the activations, float64 conversion, the descriptor record,
each direction's inputs (projected source, recurrent weight, initial state, mask), and the
tape gradient and value of a weighted sum of outputs.

Written from the equations (docs/SEMANTICS.md §8), like the references; it does not use tf_rnn_ops.
"""

import dataclasses

import numpy as np
import tensorflow as tf

ACTIVATION_NAMES = ("none", "relu", "tanh", "sigmoid", "hard_sigmoid")


def descriptor(doc, **defaults):
    """A frozen dataclass Desc with the given fields and defaults; ``kwargs()`` gives the fields
    as a dict (the op's descriptor keywords)."""
    fields = [(k, type(v), dataclasses.field(default=v)) for k, v in defaults.items()]
    return dataclasses.make_dataclass(
        "Desc", fields, frozen=True,
        namespace={"__doc__": doc, "kwargs": lambda self: dataclasses.asdict(self)})


def activate(name, x):
    if name == "none":
        return x
    if name == "relu":
        return tf.maximum(x, tf.zeros_like(x))
    if name == "tanh":
        return tf.tanh(x)
    if name == "sigmoid":
        return tf.math.sigmoid(x)  # exact where exp(-x) overflows, and so is its gradient
    if name == "hard_sigmoid":
        return tf.minimum(tf.maximum(0.2 * x + 0.5, tf.zeros_like(x)), tf.ones_like(x))
    raise ValueError(f"unknown activation {name!r}")


def f64(a):
    if a is None:
        return None
    if isinstance(a, (tf.Tensor, tf.Variable)):
        return a if a.dtype == tf.float64 else tf.cast(a, tf.float64)
    return tf.constant(np.asarray(a, dtype=np.float64))


def check_recurrent_weight(R, D, G, H):
    assert R.shape == ((2, G, H) if D == 2 else (G, H)), R.shape


def direction_inputs(d, D, x, R, W, b, h0, m, reverse):
    """Direction d's inputs: R_d [G,H]; xp [T,B,G] = x·W_dᵀ + b_d (no W: source's own G
    columns + b_d); cols, its slice of the DH channel axis; h [B,H], its initial state (zeros
    when h0 is None); mask_at(t) -> [B,H] or None; whether it runs from the last step."""
    H = R.shape[-1]
    G = R.shape[-2]
    T, B = x.shape[0], x.shape[1]
    Rd = R[d] if D == 2 else R
    if W is not None:
        assert W.shape == (D * G, x.shape[2]), W.shape
        xp = tf.einsum("tbi,gi->tbg", x, W[d * G:(d + 1) * G])
    else:
        assert x.shape[2] == D * G, x.shape
        xp = x[:, :, d * G:(d + 1) * G]
    if b is not None:
        assert b.shape == (D * G,), b.shape
        xp = xp + b[d * G:(d + 1) * G]
    cols = slice(d * H, (d + 1) * H)
    h = h0[:, cols] if h0 is not None else tf.zeros([B, H], tf.float64)
    if m is None:
        mask_at = lambda t: None  # noqa: E731
    elif len(m.shape) == 2:
        assert m.shape == (B, D * H), m.shape
        md = m[:, cols]
        mask_at = lambda t, md=md: md  # noqa: E731
    else:
        assert m.shape == (T, B, D * H), m.shape
        md = m[:, :, cols]
        mask_at = lambda t, md=md: md[t]  # noqa: E731
    backward = (d == 1) or (D == 1 and reverse)
    return Rd, xp, cols, h, mask_at, backward


def vjp(forward, grad_order, operands, desc, cotangents):
    """Gradient of  L = Σ_key cotangents[key] ⊙ forward(...)[key]  (None = no term) w.r.t. every
    given operand except mask.

    operands: dict name -> array (None or absent = not given).  Returns (grads, names) in
    grad_order (only the given operands)."""
    given = {k: f64(v) for k, v in operands.items() if v is not None}
    names = [n for n in grad_order if n in given]
    with tf.GradientTape() as tape:
        for n in names:
            tape.watch(given[n])
        r = forward(desc=desc, **given)
        loss = tf.constant(0.0, tf.float64)
        for key, cot in cotangents.items():
            if cot is not None:
                loss = loss + tf.reduce_sum(f64(cot) * r[key])
    grads = tape.gradient(loss, [given[n] for n in names],
                          unconnected_gradients=tf.UnconnectedGradients.ZERO)
    return [g.numpy() for g in grads], names


def loss_value(forward, operands, desc, cotangents):
    """The scalar L of vjp (for numeric differentiation)."""
    r = forward(desc=desc, **{k: v for k, v in operands.items() if v is not None})
    total = 0.0
    for key, cot in cotangents.items():
        if cot is not None:
            total += float(np.sum(np.asarray(cot) * r[key].numpy()))
    return total
