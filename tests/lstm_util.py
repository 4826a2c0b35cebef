"""Shared helpers of the tests: for the LSTM block op tests (inputs, dtype conversion,
tolerances, op specs), and the pairwise case generator of the MPSGraph-style op tests.

Imported by the test modules (pytest puts tests/ on sys.path); fixtures live in conftest.py.
"""

import collections
import inspect
import itertools
import random
import zlib

import numpy as np
import tensorflow as tf

import reference as ref

# ---------------------------------------------------------------------------------------------
# dtypes and tolerances
# ---------------------------------------------------------------------------------------------

DTYPES = {
    "float16": tf.float16,
    "bfloat16": tf.bfloat16,
    "float32": tf.float32,
    "float64": tf.float64,
}

Tol = collections.namedtuple("Tol", "rtol atol")

# Ours vs stock (float32, half) or vs the float64 reference computed from inputs rounded to the
# dtype (all dtypes).  Outputs of the forward ops are O(1); gradients are compared with atol
# scaled by max(1, max|expected|) (see assert_close(scale=True)).
TOL = {
    tf.float64: Tol(1e-10, 1e-10),
    tf.float32: Tol(1e-5, 1e-5),
    tf.float16: Tol(2e-2, 2e-2),
    tf.bfloat16: Tol(6e-2, 6e-2),
}

# Dtypes stock tf.raw_ops supports for these ops (CPU).
STOCK_DTYPES = (tf.float16, tf.float32)

# Gate layout of each op (docs/SEMANTICS.md §2.1).
LAYOUT = {
    "LSTMBlockCell": ref.ICFO,
    "LSTMBlockCellGrad": ref.ICFO,
    "BlockLSTM": ref.ICFO,
    "BlockLSTMGrad": ref.ICFO,
    "BlockLSTMV2": ref.IFCO,
    "BlockLSTMGradV2": ref.IFCO,
}

ALL_OPS = ("LSTMBlockCell", "LSTMBlockCellGrad", "BlockLSTM", "BlockLSTMGrad",
           "BlockLSTMV2", "BlockLSTMGradV2")
FWD_FOR_GRAD = {"LSTMBlockCellGrad": "LSTMBlockCell", "BlockLSTMGrad": "BlockLSTM",
                "BlockLSTMGradV2": "BlockLSTMV2"}

PARAM_NAMES = ("x", "cs_prev", "h_prev", "w", "wci", "wcf", "wco", "b")
ACT_NAMES = ("i", "cs", "f", "o", "ci", "co")           # activations fed to LSTMBlockCellGrad
BLOCK_ACT_NAMES = ACT_NAMES + ("h",)                    # ... and to BlockLSTMGrad(V2)

# Ordered tensor inputs of each op.
OP_INPUTS = {
    "LSTMBlockCell": PARAM_NAMES,
    "LSTMBlockCellGrad": PARAM_NAMES + ACT_NAMES + ("cs_grad", "h_grad"),
    "BlockLSTM": ("seq_len_max",) + PARAM_NAMES,
    "BlockLSTMV2": ("seq_len_max",) + PARAM_NAMES,
    "BlockLSTMGrad": ("seq_len_max",) + PARAM_NAMES + BLOCK_ACT_NAMES + ("cs_grad", "h_grad"),
    "BlockLSTMGradV2": ("seq_len_max",) + PARAM_NAMES + BLOCK_ACT_NAMES + ("cs_grad", "h_grad"),
}


def is_block(op_name):
    return op_name.startswith("Block")


def is_grad(op_name):
    return op_name.endswith("Grad") or op_name.endswith("GradV2")


def input_shapes(op_name, T, B, I, C):
    """Expected shape of every tensor input of `op_name`."""
    seq = (T,) if is_block(op_name) else ()
    shapes = {
        "seq_len_max": (),
        "x": seq + (B, I),
        "cs_prev": (B, C),
        "h_prev": (B, C),
        "w": (I + C, 4 * C),
        "wci": (C,),
        "wcf": (C,),
        "wco": (C,),
        "b": (4 * C,),
    }
    for n in BLOCK_ACT_NAMES + ("cs_grad", "h_grad"):
        shapes[n] = seq + (B, C)
    return {n: shapes[n] for n in OP_INPUTS[op_name]}


# ---------------------------------------------------------------------------------------------
# random inputs
# ---------------------------------------------------------------------------------------------

def seed_for(text):
    """A stable seed derived from a string (e.g. a test node id)."""
    return zlib.crc32(text.encode("utf-8"))


def make_params(rng, T, B, I, C, *, cs_scale=1.0, w_scale=1.0):
    """Random float64 x, cs_prev, h_prev, w, wci, wcf, wco, b (dict).

    x is [T,B,I] when T is not None, else [B,I].  Gate pre-activations are O(1) so that every
    nonlinearity is exercised away from saturation.
    """
    xshape = (B, I) if T is None else (T, B, I)
    return {
        "x": rng.normal(size=xshape),
        "cs_prev": cs_scale * rng.normal(size=(B, C)),
        "h_prev": rng.uniform(-1.0, 1.0, size=(B, C)),
        "w": w_scale * rng.normal(size=(I + C, 4 * C)) / np.sqrt(I + C),
        "wci": 0.5 * rng.normal(size=(C,)),
        "wcf": 0.5 * rng.normal(size=(C,)),
        "wco": 0.5 * rng.normal(size=(C,)),
        "b": 0.5 * rng.normal(size=(4 * C,)),
    }


# ---------------------------------------------------------------------------------------------
# conversions and comparisons
# ---------------------------------------------------------------------------------------------

def to_tensor(a, dtype):
    """float64 array -> tensor of `dtype` (round to nearest)."""
    return tf.cast(tf.constant(np.asarray(a, dtype=np.float64)), dtype)


def to_numpy(t):
    """Float tensor of any dtype -> float64 numpy array."""
    return tf.cast(t, tf.float64).numpy()


def round_to(a, dtype):
    """float64 array rounded through `dtype` and back to float64."""
    if dtype == tf.float64:
        return np.asarray(a, dtype=np.float64)
    return to_numpy(to_tensor(a, dtype))


def round_scalar(v, dtype):
    """An attr value (forget_bias, cell_clip) as the kernel sees it: a `float` attr is stored
    as float32, then converted to T.  (So for float64, 0.3 means float32(0.3).)"""
    return float(round_to(np.array(np.float32(v), dtype=np.float64), dtype))


def tensors(arrays, dtype):
    return {k: to_tensor(v, dtype) for k, v in arrays.items()}


def assert_close(actual, expected, tol, *, name="", scale=False):
    """assert_allclose in float64.  With scale=True atol is multiplied by max(1, max|expected|)."""
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, (
        f"{name}: shape {actual.shape} != expected {expected.shape}")
    atol = tol.atol
    if scale and expected.size:
        atol *= max(1.0, float(np.abs(expected).max()))
    np.testing.assert_allclose(actual, expected, rtol=tol.rtol, atol=atol, err_msg=name)


def assert_all_close(actuals, expecteds, names, tol, *, scale=False, prefix=""):
    assert len(actuals) == len(expecteds) == len(names)
    for a, e, n in zip(actuals, expecteds, names):
        assert_close(a, e, tol, name=f"{prefix}{n}", scale=scale)


# ---------------------------------------------------------------------------------------------
# calling the ops
# ---------------------------------------------------------------------------------------------

def slm_tensor(seq_len_max):
    return tf.constant(seq_len_max, dtype=tf.int64)


def fwd_attrs(op_name, forget_bias, cell_clip, use_peephole):
    attrs = {"cell_clip": cell_clip, "use_peephole": use_peephole}
    if op_name != "BlockLSTMV2":
        attrs["forget_bias"] = forget_bias
    return attrs


def call_fwd(mod, op_name, params_t, seq_len_max=None, **attrs):
    """Calls mod.<op_name> (a forward op) with tensors; returns the 7 outputs as tensors."""
    kwargs = dict(params_t)
    if is_block(op_name):
        kwargs["seq_len_max"] = slm_tensor(seq_len_max)
    return tuple(getattr(mod, op_name)(**kwargs, **attrs))


def ref_fwd(op_name, params, seq_len_max=None, *, forget_bias=1.0, cell_clip=3.0,
            use_peephole=False, return_pre_clip=False):
    """NumPy reference for forward op `op_name` (float64 params dict)."""
    if op_name == "BlockLSTMV2":
        forget_bias = 0.0
    kw = dict(forget_bias=forget_bias, cell_clip=cell_clip, use_peephole=use_peephole,
              layout=LAYOUT[op_name], return_pre_clip=return_pre_clip)
    p = [params[n] for n in PARAM_NAMES]
    if is_block(op_name):
        return ref.block_lstm_fwd(seq_len_max, *p, **kw)
    return ref.lstm_cell_fwd(*p, **kw)


def grad_inputs(op_name, params, acts, cs_grad, h_grad):
    """float64 dict of all tensor inputs (except seq_len_max) of grad op `op_name`."""
    names = BLOCK_ACT_NAMES if is_block(op_name) else ACT_NAMES
    d = dict(params)
    for k, n in enumerate(ref.OUTPUT_NAMES):
        if n in names:
            d[n] = acts[k]
    d["cs_grad"] = cs_grad
    d["h_grad"] = h_grad
    return d


def ref_grad(op_name, inputs, seq_len_max=None, *, use_peephole):
    """NumPy reference for grad op `op_name` (float64 dict as from grad_inputs)."""
    if is_block(op_name):
        args = [inputs[n] for n in PARAM_NAMES + BLOCK_ACT_NAMES + ("cs_grad", "h_grad")]
        return ref.block_lstm_grad(seq_len_max, *args, use_peephole=use_peephole,
                                   layout=LAYOUT[op_name])
    args = [inputs[n] for n in PARAM_NAMES + ACT_NAMES + ("cs_grad", "h_grad")]
    return ref.lstm_cell_grad(*args, use_peephole=use_peephole, layout=LAYOUT[op_name])


def call_grad(mod, op_name, inputs_t, seq_len_max=None, *, use_peephole):
    kwargs = dict(inputs_t)
    if is_block(op_name):
        kwargs["seq_len_max"] = slm_tensor(seq_len_max)
    return tuple(getattr(mod, op_name)(**kwargs, use_peephole=use_peephole))


def grad_output_names(op_name):
    return ref.BLOCK_GRAD_NAMES if is_block(op_name) else ref.CELL_GRAD_NAMES


def make_clean_params(rng, op_name, T, B, I, C, *, seq_len_max=None, forget_bias=1.0,
                      cell_clip=3.0, use_peephole=False, margin=0.05, binding=None,
                      cs_scale=1.0, tries=500):
    """make_params, redrawn until no pre-clip cell value is within `margin` of +-cell_clip.

    binding=True also requires at least two clipped and two unclipped cell values (over the
    computed steps, if any); binding=False requires none clipped.  This keeps numeric differentiation
    clean (the clip has a kink at +-cell_clip) and makes "binding"/"non-binding" mean what the
    test says.
    """
    for _ in range(tries):
        p = make_params(rng, T if is_block(op_name) else None, B, I, C, cs_scale=cs_scale)
        if cell_clip <= 0:
            assert not binding
            return p
        outs = ref_fwd(op_name, p, seq_len_max, forget_bias=forget_bias, cell_clip=cell_clip,
                       use_peephole=use_peephole, return_pre_clip=True)
        cs_pre = outs[7]
        if is_block(op_name):
            cs_pre = cs_pre[:seq_len_max]
        a = np.abs(cs_pre).ravel()
        if a.size and np.abs(a - cell_clip).min() < margin:
            continue
        n_clipped = int((a > cell_clip).sum())
        if binding is True and a.size and (n_clipped < 2 or a.size - n_clipped < 2):
            continue
        if binding is False and n_clipped:
            continue
        return p
    raise AssertionError("could not draw inputs with a clean clip margin; adjust the test")


def weighted_loss(outs, weights, only=None):
    """sum_k <weights_k, out_k> over the outputs (or only output `only`), in float32 for
    half/bfloat16 outputs and in the outputs' dtype otherwise."""
    total = []
    for k, o in enumerate(outs):
        if only is not None and k != only:
            continue
        if o.dtype in (tf.float16, tf.bfloat16):
            o = tf.cast(o, tf.float32)
        total.append(tf.reduce_sum(o * tf.constant(weights[k], dtype=o.dtype)))
    return tf.add_n(total)


class WeightedLossProblem:
    """An op's inputs (``params``, float64 arrays by ``input_names``) and random loss weights
    (``weights``, one per output): L = sum_k <weights_k, out_k>.  A subclass says how to call
    the op: ``call(ours, inputs)`` -> its outputs."""
    input_names = ()

    def call(self, ours, inputs):
        raise NotImplementedError

    def xs(self, dtype):
        return [to_tensor(self.params[n], dtype) for n in self.input_names]

    def loss_of(self, outs, only=None):
        """sum_k <weights_k, out_k> over all outputs (or only output `only`)."""
        return weighted_loss(outs, self.weights, only)

    def ours_loss(self, ours, only=None):
        def f(*xs):
            return self.loss_of(self.call(ours, dict(zip(self.input_names, xs))), only)
        return f


def numeric_grads(fn, arrays, delta):
    """Central differences of a float64 scalar fn(*arrays) w.r.t. each array."""
    grads = []
    for k, a in enumerate(arrays):
        g = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            plus = [v.copy() for v in arrays]
            minus = [v.copy() for v in arrays]
            plus[k][idx] += delta
            minus[k][idx] -= delta
            g[idx] = (fn(*plus) - fn(*minus)) / (2 * delta)
        grads.append(g)
    return grads


def pairwise(factors, seed=1234, tries=40):
    """A deterministic list of dicts covering every pair of values of every two factors
    (AETG-style greedy construction)."""
    names = list(factors)
    sizes = [len(factors[n]) for n in names]
    nf = len(names)

    def key(a, va, b, vb):
        return (a, va, b, vb) if a < b else (b, vb, a, va)

    uncovered = {(a, va, b, vb)
                 for a, b in itertools.combinations(range(nf), 2)
                 for va in range(sizes[a]) for vb in range(sizes[b])}
    r = random.Random(seed)

    def covered_by(row):
        return {(a, row[a], b, row[b]) for a, b in itertools.combinations(range(nf), 2)}

    rows = []
    while uncovered:
        best, best_new = None, -1
        pool = sorted(uncovered)
        for _ in range(tries):
            a, va, b, vb = r.choice(pool)
            row = [None] * nf
            row[a], row[b] = va, vb
            done = [a, b]
            order = [k for k in range(nf) if k not in (a, b)]
            r.shuffle(order)
            for k in order:
                scores = [(sum(key(k, v, j, row[j]) in uncovered for j in done), r.random(), v)
                          for v in range(sizes[k])]
                row[k] = max(scores)[2]
                done.append(k)
            new = len(covered_by(row) & uncovered)
            if new > best_new:
                best, best_new = row, new
        rows.append(best)
        uncovered -= covered_by(best)
    return [{n: factors[n][v] for n, v in zip(names, row)} for row in rows]


def assert_signature_matches_stock(mine, op_name):
    """`mine` takes the parameters of tf.raw_ops.<op_name>, in its order with its defaults, each
    callable by keyword as there."""
    def desc(fn):
        return [(p.name, p.default) for p in inspect.signature(fn).parameters.values()]
    assert desc(mine) == desc(getattr(tf.raw_ops, op_name))
    for p in inspect.signature(mine).parameters.values():
        assert p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY), p
