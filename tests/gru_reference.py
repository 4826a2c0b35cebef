"""Independent float64 NumPy reference for the GRU block ops.

Written from docs/SEMANTICS.md §2.6, §2.7 (not from any kernel source).

Notation: B batch, I input size, H cell size (docs/SEMANTICS.md's C).
``w_ru`` is ``[I+H, 2H]`` and ``w_c`` is ``[I+H, H]``: rows 0..I-1 multiply x, rows I.. multiply
h_prev (or h_prev ⊙ r for w_c).  Column blocks of ``r_u_bar = [x, h_prev]·w_ru + b_ru``:

    | r (reset) | u (update) |

* ``gru_cell_fwd``: GRUBlockCell, returns ``(r, u, c, h)``.
* ``gru_cell_grad``: GRUBlockCellGrad, returns ``(d_x, d_h_prev, d_c_bar, d_r_bar_u_bar)``.  Like
  the op, it uses the given r, u, c (it does not recompute them) and only d_h = dL/dh.
* ``gru_weight_grads``: the weight/bias gradients of §2.7 (not produced by the op):
  ``(d_w_ru, d_w_c, d_b_ru, d_b_c)``.
* ``gru_cell_backprop``: the TRUE gradient of a loss that depends on all four outputs, given
  dL/dr, dL/du, dL/dc and dL/dh; returns the gradients of the six inputs in op order.  With
  dL/dr = dL/du = dL/dc = 0 it is gru_cell_grad + gru_weight_grads.
"""

import numpy as np

FWD_NAMES = ("r", "u", "c", "h")
GRAD_OP_NAMES = ("d_x", "d_h_prev", "d_c_bar", "d_r_bar_u_bar")
INPUT_NAMES = ("x", "h_prev", "w_ru", "w_c", "b_ru", "b_c")
GRAD_OP_INPUTS = INPUT_NAMES + ("r", "u", "c", "d_h")
WEIGHT_GRAD_NAMES = ("d_w_ru", "d_w_c", "d_b_ru", "d_b_c")


def _f64(*arrays):
    return [np.asarray(a, dtype=np.float64) for a in arrays]


def sigmoid(z):
    """Logistic sigmoid, overflow-free."""
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def gru_cell_fwd(x, h_prev, w_ru, w_c, b_ru, b_c):
    """GRUBlockCell (§2.6): (r, u, c, h), each [B, H]."""
    x, h_prev, w_ru, w_c, b_ru, b_c = _f64(x, h_prev, w_ru, w_c, b_ru, b_c)
    H = h_prev.shape[1]
    r_u_bar = np.concatenate([x, h_prev], axis=1) @ w_ru + b_ru        # [B, 2H]
    r = sigmoid(r_u_bar[:, :H])
    u = sigmoid(r_u_bar[:, H:])
    c = np.tanh(np.concatenate([x, h_prev * r], axis=1) @ w_c + b_c)  # reset before the matmul
    h = u * (h_prev - c) + c
    return r, u, c, h


def _backprop(x, h_prev, w_ru, w_c, r, u, c, d_h, d_r, d_u, d_c):
    """Shared core: (d_x, d_h_prev, d_c_bar, d_r_bar_u_bar) given dL/d{r,u,c,h}."""
    I = x.shape[1]
    d_c_bar = (d_c + d_h * (1.0 - u)) * (1.0 - c * c)
    d_u_bar = (d_u + d_h * (h_prev - c)) * u * (1.0 - u)
    dxhr = d_c_bar @ w_c.T                                   # d[x, h_prev ⊙ r]
    dx2, d_hr = dxhr[:, :I], dxhr[:, I:]
    d_r_bar = (d_r + d_hr * h_prev) * r * (1.0 - r)
    d_r_bar_u_bar = np.concatenate([d_r_bar, d_u_bar], axis=1)
    dxh = d_r_bar_u_bar @ w_ru.T
    d_x = dxh[:, :I] + dx2
    d_h_prev = dxh[:, I:] + d_hr * r + d_h * u
    return d_x, d_h_prev, d_c_bar, d_r_bar_u_bar


def gru_cell_grad(x, h_prev, w_ru, w_c, b_ru, b_c, r, u, c, d_h):
    """GRUBlockCellGrad (§2.7): (d_x, d_h_prev, d_c_bar, d_r_bar_u_bar).  b_ru, b_c are unused,
    exactly like the op."""
    x, h_prev, w_ru, w_c, r, u, c, d_h = _f64(x, h_prev, w_ru, w_c, r, u, c, d_h)
    zero = np.zeros_like(d_h)
    return _backprop(x, h_prev, w_ru, w_c, r, u, c, d_h, zero, zero, zero)


def gru_weight_grads(x, h_prev, r, d_c_bar, d_r_bar_u_bar):
    """§2.7 (TF1 contrib _GRUBlockCellGrad): (d_w_ru, d_w_c, d_b_ru, d_b_c)."""
    x, h_prev, r, d_c_bar, d_r_bar_u_bar = _f64(x, h_prev, r, d_c_bar, d_r_bar_u_bar)
    d_w_ru = np.concatenate([x, h_prev], axis=1).T @ d_r_bar_u_bar
    d_w_c = np.concatenate([x, h_prev * r], axis=1).T @ d_c_bar
    return d_w_ru, d_w_c, d_r_bar_u_bar.sum(axis=0), d_c_bar.sum(axis=0)


def gru_cell_backprop(x, h_prev, w_ru, w_c, b_ru, b_c, d_r, d_u, d_c, d_h):
    """True gradient of L(r, u, c, h) w.r.t. (x, h_prev, w_ru, w_c, b_ru, b_c), given dL/dr,
    dL/du, dL/dc, dL/dh at the forward point (r, u, c recomputed here)."""
    x, h_prev, w_ru, w_c, d_r, d_u, d_c, d_h = _f64(x, h_prev, w_ru, w_c, d_r, d_u, d_c, d_h)
    r, u, c, _ = gru_cell_fwd(x, h_prev, w_ru, w_c, b_ru, b_c)
    d_x, d_h_prev, d_c_bar, d_rubar = _backprop(x, h_prev, w_ru, w_c, r, u, c, d_h, d_r, d_u,
                                                d_c)
    d_w_ru, d_w_c, d_b_ru, d_b_c = gru_weight_grads(x, h_prev, r, d_c_bar, d_rubar)
    return d_x, d_h_prev, d_w_ru, d_w_c, d_b_ru, d_b_c


# ---------------------------------------------------------------------------------------------
# Keras GRU(reset_after=False) weight mapping (§2.6)
# ---------------------------------------------------------------------------------------------

def keras_to_block(kernel, recurrent_kernel, bias, concat=np.concatenate, split=np.split):
    """Keras [W_z W_r W_h] kernel [I, 3H], recurrent kernel [H, 3H], bias [3H] ->
    (w_ru, w_c, b_ru, b_c).  `concat`/`split` may be TF functions (tf.concat, tf.split) so the
    mapping is differentiable by a tape."""
    Wz, Wr, Wh = split(kernel, 3, axis=1)
    Rz, Rr, Rh = split(recurrent_kernel, 3, axis=1)
    bz, br, bh = split(bias, 3, axis=0)
    w_ru = concat([concat([Wr, Wz], axis=1), concat([Rr, Rz], axis=1)], axis=0)
    w_c = concat([Wh, Rh], axis=0)
    b_ru = concat([br, bz], axis=0)
    return w_ru, w_c, b_ru, bh


def gru_sequence_fwd(x_bti, h0, w_ru, w_c, b_ru, b_c):
    """Steps gru_cell_fwd over x [B, T, I] (batch-major, like Keras); returns h for every step,
    [B, T, H]."""
    h = np.asarray(h0, dtype=np.float64)
    hs = []
    for t in range(x_bti.shape[1]):
        h = gru_cell_fwd(x_bti[:, t], h, w_ru, w_c, b_ru, b_c)[3]
        hs.append(h)
    return np.stack(hs, axis=1)
