"""What the MPSGraph LSTM and GRU tests (test_mps_lstm.py, test_mps_gru.py) share.

* helpers: the rng and mps fixtures, dtype casts, assert_close, operand and mask makers;
* ``MpsOp``: one op family (mps.lstm / mps.gru and their gradients) as the shared checks see it;
  each test module subclasses it (its reference module, gate count, descriptor, case lists);
* ``shared_tests(op)``: the tests whose logic is the same for both ops (forward against the
  reference, <op>_gradients against tape autodiff and central differences, the registered
  gradient, malformed operands), parametrised with the op's own cases, under the names the
  test module gives them: ``globals().update(shared_tests(OP))``.

Only the test modules import this; the float64 references (mps_reference.py,
mps_gru_reference.py) stay independent of it and of tf_rnn_ops.
"""
import itertools
import zlib

import numpy as np
import pytest
import tensorflow as tf

from lstm_util import Tol, pairwise

F16, BF16, F32, F64 = tf.float16, tf.bfloat16, tf.float32, tf.float64
DTYPE_IDS = {F64: "f64", F32: "f32", F16: "f16", BF16: "bf16"}
NUMERIC_DELTA = 1e-6


# ---------------------------------------------------------------------------------------------
# fixtures and small helpers
# ---------------------------------------------------------------------------------------------

@pytest.fixture
def rng(request):
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


@pytest.fixture(scope="session")
def mps():
    try:
        from tf_rnn_ops import mps as module
    except Exception as e:
        pytest.fail(f"tf_rnn_ops.mps could not be imported: {type(e).__name__}: {e}",
                    pytrace=False)
    missing = [n for n in ("lstm", "lstm_gradients", "gru", "gru_gradients")
               if not hasattr(module, n)]
    if missing:
        pytest.fail(f"tf_rnn_ops.mps has no {missing}", pytrace=False)
    return module


_ABBR = {"none": "n", "relu": "r", "tanh": "t", "sigmoid": "s", "hard_sigmoid": "h"}


def _mask(rng, shape):
    m = rng.uniform(0.2, 1.5, size=shape)
    m[rng.uniform(size=shape) < 0.25] = 0.0
    return m


def to_t(a, dtype):
    if a is None:
        return None
    return tf.cast(tf.constant(np.asarray(a, dtype=np.float64)), dtype)


def round_to(a, dtype):
    if a is None:
        return None
    return tf.cast(to_t(a, dtype), tf.float64).numpy()


def np64(t):
    return tf.cast(t, tf.float64).numpy()


def assert_close(actual, expected, tol, name, scale=True):
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, f"{name}: shape {actual.shape} != {expected.shape}"
    atol = tol.atol
    if scale and expected.size:
        atol *= max(1.0, float(np.abs(expected).max()))
    np.testing.assert_allclose(actual, expected, rtol=tol.rtol, atol=atol, err_msg=name)


def _apply(rng, ops, changes):
    ops = dict(ops)
    for k, shape in changes.items():
        ops[k] = None if shape is None else rng.normal(size=shape)
    return ops


def finals_from_sequences(seq, desc):
    """The final [B, DH] of a [T, B, DH] sequence: the last step of each direction."""
    if desc.bidirectional:
        H = seq.shape[-1] // 2
        return np.concatenate([seq[-1, :, :H], seq[0, :, H:]], axis=-1)
    return seq[0] if desc.reverse else seq[-1]


def central_differences(loss, ops, name, delta=NUMERIC_DELTA):
    """d loss(ops) / d ops[name] by float64 central differences (loss takes an operand dict)."""
    num = np.zeros_like(ops[name])
    for idx in np.ndindex(*ops[name].shape):
        o = dict(ops)
        a = ops[name].copy()
        a[idx] += delta
        o[name] = a
        up = loss(o)
        a[idx] -= 2 * delta
        down = loss(o)
        num[idx] = (up - down) / (2 * delta)
    return num


def check_activations(ref):
    """The reference's activations (hard_sigmoid is MPS's clamp(0.2·x + 0.5, 0, 1))."""
    x = tf.constant([-3.0, -2.5, -1.0, 0.0, 0.7, 2.5, 4.0], tf.float64)
    hs = ref.activate("hard_sigmoid", x).numpy()
    np.testing.assert_allclose(hs, [0.0, 0.0, 0.3, 0.5, 0.64, 1.0, 1.0], atol=1e-15)
    np.testing.assert_allclose(ref.activate("relu", x).numpy(), np.maximum(x.numpy(), 0))
    np.testing.assert_allclose(ref.activate("none", x).numpy(), x.numpy())
    # sigmoid and tanh, and their tape gradients, stay finite where exp(|x|) overflows float64
    # (a cell far past ±709 feeds them in a deep or unbounded LSTM)
    big = tf.constant([-1e4, -800.0, -3.0, 0.0, 2.0, 800.0, 1e4], tf.float64)

    def sig(v):
        e = np.exp(-np.abs(v))
        return np.where(v >= 0, 1 / (1 + e), e / (1 + e))

    for name, f, df in (("sigmoid", sig, lambda v: sig(v) * sig(-v)),
                        ("tanh", np.tanh, lambda v: 1 / np.cosh(v) ** 2)):
        with tf.GradientTape() as tape:
            tape.watch(big)
            y = ref.activate(name, big)
        with np.errstate(over="ignore"):
            np.testing.assert_allclose(y.numpy(), f(big.numpy()), rtol=1e-14, atol=1e-300)
            np.testing.assert_allclose(tape.gradient(y, big).numpy(), df(big.numpy()),
                                       rtol=1e-12, atol=1e-300, err_msg=f"d {name}")


# ---------------------------------------------------------------------------------------------
# Keras layers as the references' own reference
# ---------------------------------------------------------------------------------------------

def keras_case(rng, T, B, I, G, H):
    """Weights for one Keras layer direction: x [T,B,I], W [G,I], R [G,H], b [G], h0, c0 [B,H]
    and a GRU's recurrent bias b2 [H]."""
    return dict(x=rng.normal(size=(T, B, I)), W=rng.normal(size=(G, I)) / np.sqrt(I),
                R=rng.normal(size=(G, H)) / np.sqrt(H), b=0.5 * rng.normal(size=(G,)),
                h0=rng.uniform(-1, 1, size=(B, H)), c0=rng.normal(size=(B, H)),
                b2=0.5 * rng.normal(size=(H,)))


def run_keras(rng, layer, k, bias, init_state, go_backwards=False):
    """Runs a float64 Keras RNN layer on k's x (time major) with weights W, R, bias.  Returns
    its sequence and the cotangent wh of the loss Σ wh⊙sequence (both time major, in time
    order), its final states, and the loss's gradients w.r.t. the layer's weights."""
    T, B, I = k["x"].shape
    layer.build((B, T, I))
    layer.set_weights([k["W"].T, k["R"].T, bias])
    wh = rng.normal(size=(B, T, k["R"].shape[1]))
    with tf.GradientTape() as tape:
        seq, *finals = layer(tf.constant(np.transpose(k["x"], (1, 0, 2))),
                             initial_state=[tf.constant(s) for s in init_state])
        loss = tf.reduce_sum(seq * wh)
    grads = [g.numpy() for g in tape.gradient(loss, layer.weights)]
    seq, wh = np.transpose(seq.numpy(), (1, 0, 2)), np.transpose(wh, (1, 0, 2))
    if go_backwards:                  # Keras returns the sequence in processing order
        seq, wh = seq[::-1], wh[::-1]
    return seq, wh, [f.numpy() for f in finals], grads


def run_keras_bidirectional(layer, kf, kb, bias_f, bias_b, init_state):
    """Runs a float64 Bidirectional Keras layer on kf's x (time major); returns its time-major
    sequence and its final states."""
    T, B, I = kf["x"].shape
    layer.build((B, T, I))
    layer.forward_layer.set_weights([kf["W"].T, kf["R"].T, bias_f])
    layer.backward_layer.set_weights([kb["W"].T, kb["R"].T, bias_b])
    out = layer(tf.constant(np.transpose(kf["x"], (1, 0, 2))),
                initial_state=[tf.constant(s) for s in init_state])
    seq, *finals = [o.numpy() for o in out]
    return np.transpose(seq, (1, 0, 2)), finals


# ---------------------------------------------------------------------------------------------
# the op family
# ---------------------------------------------------------------------------------------------

# Malformed-operand tests: the valid base sizes.
T0, B0, I0, H0 = 3, 2, 4, 2


def base_factors(sizes, layout, act_fields, acts, operands):
    """The pairwise factors of both ops, in one order: size, direction, the op's layout
    switches (a dict), every activation field, which optional operands are given
    (input_weight, bias, init_state, then the op's own), the mask."""
    factors = {"size": sizes, "bidirectional": [False, True], "reverse": [False, True]}
    factors.update(layout)
    factors.update({f: list(acts) for f in act_fields})
    factors.update({k: [False, True] for k in ("input_weight", "bias", "init_state") + operands})
    factors["mask"] = [None, "nh", "tnh"]
    return factors


class MpsOp:
    """One MPSGraph-style op family (the op, its gradients op, its registered gradient) as the
    shared tests see it.  A test module subclasses it with its reference and cases."""
    name = None         # mps.<name>, mps.<name>_gradients
    descriptor = None   # mps.<descriptor>
    ref = None          # the float64 reference module
    gates = None        # gate blocks in every G = gates·H axis
    cell = False        # the forward has a cell output (and <name>_gradients a cell_gradient)
    act_fields = ()
    outputs = {}        # descriptor fields that make the forward return every output
    valid_desc = {}     # ... and that make the malformed-operand tests' base valid
    fwd_output = None   # the gradients op's input that takes a forward sequence output ...
    fwd_index = None    # ... the position of that output with every output returned
    full = {}           # the op's own fields of full_case
    fwd_tol = grad_tol = None
    numeric_tol = Tol(1e-6, 1e-6)
    sizes = ()          # (T, B, I, H) of the pairwise cases
    layout = {}         # the op's descriptor switches as pairwise factors
    operands = ()       # the op's own optional operands as pairwise factors
    output_factors = {}     # the pairwise factors choosing the forward's outputs ...
    gradient_factors = {}   # ... and the gradients op's optional gradient inputs
    every = {}          # the step through the cases of the tests that run on a subset
    numeric_cases = extra_cases = bad_forward = bad_gradients = ()
    unknown_sizes = None   # (H, I, [(T, B), ...]) of test_tf_function_unknown_time_and_batch

    def __init__(self):
        """The pairwise cases: forward (fwd_cases), <name>_gradients (grad_cases), registered
        gradient (reg_cases), and the subsets every[...] picks of them."""
        self.factors = base_factors(self.sizes, self.layout, self.act_fields,
                                    self.ref.ACTIVATION_NAMES, self.operands)
        self.fwd_cases = pairwise(dict(self.factors, **self.output_factors), seed=1)
        self.grad_cases = pairwise(dict(self.factors, **self.gradient_factors), seed=2)
        self.reg_cases = pairwise(dict(self.factors, **self.output_factors), seed=3)
        self.tf_function_cases = self.fwd_cases[::self.every["tf_function"]]
        self.half_grad_cases = self.grad_cases[::self.every["half_grad"]]
        self.reg_function_cases = self.reg_cases[1::self.every["reg_function"]]
        self.reg_low_cases = self.reg_cases[2::self.every["reg_low"]]

    # --- per op -------------------------------------------------------------------------------
    def layout_id(self, c):
        """The part of a case id between the direction and the activations."""
        raise NotImplementedError

    def desc_of(self, case, **over):
        raise NotImplementedError

    def extra_operands(self, rng, case, B, D, G, H):
        """The op's own optional operands of a case (name -> array), drawn after init_state."""
        raise NotImplementedError

    def extra_valid(self, rng, D, G):
        """The op's own optional operands of the malformed-operand tests' valid base."""
        raise NotImplementedError

    def check_numeric_case(self, ops, desc):
        """Asserts that a central-differences case is fit for it (e.g. away from kinks)."""

    # --- shared -------------------------------------------------------------------------------
    def case_id(self, c):
        T, B, I, H = c["size"]
        s = f"T{T}B{B}I{I}H{H}-"
        s += "bi" if c["bidirectional"] else ("rev" if c["reverse"] else "fwd")
        if c["bidirectional"] and c["reverse"]:
            s += "+rev"
        s += self.layout_id(c)
        s += "-" + "".join(_ABBR[c[f]] for f in self.act_fields)
        for k, a in (("input_weight", "W"), ("bias", "b"), ("init_state", "h0"),
                     ("init_cell", "c0"), ("peephole", "p"), ("produce_cell", "C"),
                     ("training", "Z"), ("state_gradient", "gh"), ("cell_gradient", "gc")):
            if c.get(k):
                s += "-" + a
        if c["mask"]:
            s += "-m" + c["mask"]
        return s

    def full_case(self, size, bidirectional, **over):
        """Every optional operand and gradient given, mask [T,B,DH], default activations."""
        defaults = self.ref.Desc()
        c = dict(size=size, bidirectional=bidirectional, reverse=False, input_weight=True,
                 bias=True, init_state=True, mask="tnh", state_gradient=True,
                 **{f: getattr(defaults, f) for f in self.act_fields}, **self.full)
        c.update(over)
        return c

    def make_operands(self, rng, case):
        """float64 numpy operands (None = not given) for a case.  Gate pre-activations are
        O(0.5): enough to exercise every nonlinearity, small enough that unbounded gates
        ('none', 'relu') do not blow the state up over T steps."""
        T, B, I, H = case["size"]
        D = 2 if case["bidirectional"] else 1
        G = self.gates * H
        ops = dict.fromkeys(self.ref.OPERAND_NAMES)
        if case["input_weight"]:
            ops["source"] = rng.normal(size=(T, B, I))
            ops["input_weight"] = 0.5 * rng.normal(size=(D * G, I)) / np.sqrt(max(I, 1))
        else:
            ops["source"] = 0.5 * rng.normal(size=(T, B, D * G))
        R_shape = (2, G, H) if D == 2 else (G, H)
        ops["recurrent_weight"] = 0.5 * rng.normal(size=R_shape) / np.sqrt(H)
        if case["bias"]:
            ops["bias"] = 0.3 * rng.normal(size=(D * G,))
        if case["init_state"]:
            ops["init_state"] = rng.uniform(-1.0, 1.0, size=(B, D * H))
        ops.update(self.extra_operands(rng, case, B, D, G, H))
        if case["mask"] == "nh":
            ops["mask"] = _mask(rng, (B, D * H))
        elif case["mask"] == "tnh":
            ops["mask"] = _mask(rng, (T, B, D * H))
        return ops

    def _descriptor(self, mps, desc):
        return getattr(mps, self.descriptor)(**desc.kwargs())

    def call(self, mps, ops_t, desc):
        """mps.<name> on an operand dict (None or absent = not given)."""
        rest = {k: v for k, v in ops_t.items() if k not in ("source", "recurrent_weight")}
        return getattr(mps, self.name)(ops_t["source"], ops_t["recurrent_weight"],
                                       descriptor=self._descriptor(mps, desc), **rest)

    def call_grads(self, mps, ops_t, desc, **grad_inputs):
        """mps.<name>_gradients on an operand dict and the gradient inputs (by name)."""
        rest = {k: v for k, v in ops_t.items() if k not in ("source", "recurrent_weight")}
        return getattr(mps, self.name + "_gradients")(
            ops_t["source"], ops_t["recurrent_weight"], descriptor=self._descriptor(mps, desc),
            **grad_inputs, **rest)

    def output_names(self, desc):
        return ["state"] + (["cell"] if getattr(desc, "produce_cell", False) else []) + (
            ["z_state"] if desc.training else [])

    def cotangents(self, rng, case):
        """The cotangents of a gradients case, as reference_vjp's keywords (None = not given):
        the state sequence's, the final state's (state_gradient), the final cell's."""
        T, B, _, H = case["size"]
        D = 2 if case["bidirectional"] else 1
        cots = dict(state_cot=rng.normal(size=(T, B, D * H)))
        cots["final_state_cot"] = (rng.normal(size=(B, D * H)) if case.get("state_gradient")
                                   else None)
        if self.cell:
            cots["final_cell_cot"] = (rng.normal(size=(B, D * H)) if case.get("cell_gradient")
                                      else None)
        return cots

    def gradients_of(self, mps, ops_t, desc, outs, cots, dtype):
        """<name>_gradients after the forward outs (every output), for the cotangents."""
        inputs = {"state_cot": "source_gradient", "final_state_cot": "state_gradient",
                  "final_cell_cot": "cell_gradient"}
        return self.call_grads(mps, ops_t, desc, z_state=outs[-1],
                               **{self.fwd_output: outs[self.fwd_index]},
                               **{inputs[k]: to_t(v, dtype) for k, v in cots.items()})

    def run_gradients(self, mps, rng, case, dtype, ops=None, cots=None):
        """A gradients case run: its operands and cotangents (drawn, unless given), the
        descriptor with every output, the operands as dtype tensors, the forward's outputs
        and the gradients."""
        ops = self.make_operands(rng, case) if ops is None else ops
        cots = self.cotangents(rng, case) if cots is None else cots
        desc = self.desc_of(case, **self.outputs)
        ops_t = {k: to_t(v, dtype) for k, v in ops.items()}
        outs = self.call(mps, ops_t, desc)
        return ops, cots, desc, ops_t, outs, self.gradients_of(mps, ops_t, desc, outs, cots,
                                                               dtype)

    def valid(self, rng, bi):
        """Operands of the malformed-operand tests ([T0, B0, I0, H0], every one given)."""
        D = 2 if bi else 1
        G = self.gates * H0
        ops = dict(
            source=rng.normal(size=(T0, B0, I0)),
            recurrent_weight=rng.normal(size=(2, G, H0) if bi else (G, H0)),
            input_weight=rng.normal(size=(D * G, I0)),
            bias=rng.normal(size=(D * G,)),
            init_state=rng.normal(size=(B0, D * H0)),
            mask=np.ones((T0, B0, D * H0)),
        )
        ops.update(self.extra_valid(rng, D, G))
        return ops

    def valid_grad_inputs(self, rng, bi):
        D = 2 if bi else 1
        gin = {"source_gradient": rng.normal(size=(T0, B0, D * H0)),
               "z_state": rng.uniform(size=(T0, B0, D * self.gates * H0)),
               self.fwd_output: rng.normal(size=(T0, B0, D * H0)),
               "state_gradient": rng.normal(size=(B0, D * H0))}
        if self.cell:
            gin["cell_gradient"] = rng.normal(size=(B0, D * H0))
        return gin

    def bad_desc(self, bi):
        return self.ref.Desc(bidirectional=bi, **self.outputs, **self.valid_desc)


def bad_forward_cases(G0):
    """(id, bidirectional, {operand: new shape or None (= drop)}, regex the message must match)
    for the operands both ops have; G0 = gates·H0."""
    return [
        ("R_rank3_uni", False, {"recurrent_weight": (2, G0, H0)}, "recurrent_weight"),
        ("R_rank2_bi", True, {"recurrent_weight": (G0, H0)}, "recurrent_weight"),
        ("R_rows", False, {"recurrent_weight": (G0 - 1, H0)}, "recurrent_weight"),
        ("R_cols_H_mismatch", False, {"recurrent_weight": (G0, H0 + 1)}, "recurrent_weight"),
        ("R_rank1", False, {"recurrent_weight": (G0,)}, "recurrent_weight"),
        ("R_bi_dim0", True, {"recurrent_weight": (3, G0, H0)}, "recurrent_weight"),
        ("R_bi_rows", True, {"recurrent_weight": (2, G0 + G0 // 2, H0)}, "recurrent_weight"),
        ("W_rows", False, {"input_weight": (G0 - 1, I0)}, "input_weight"),
        ("W_rows_bi", True, {"input_weight": (G0, I0)}, "input_weight"),
        ("W_rows_uni_given_bi", False, {"input_weight": (2 * G0, I0)}, "input_weight"),
        ("W_cols", False, {"input_weight": (G0, I0 + 1)}, "input_weight|source"),
        ("W_rank3", False, {"input_weight": (1, G0, I0)}, "input_weight"),
        ("src_noW_width", False, {"input_weight": None, "source": (T0, B0, G0 + 1)}, "source"),
        ("src_noW_width_bi", True, {"input_weight": None, "source": (T0, B0, G0)}, "source"),
        ("src_rank2", False, {"source": (T0, I0)}, "source"),
        ("src_rank4", False, {"source": (T0, B0, 1, I0)}, "source"),
        ("bias_size", False, {"bias": (G0 - 1,)}, "bias"),
        ("bias_size_bi", True, {"bias": (G0,)}, "bias"),
        ("bias_rank2", False, {"bias": (1, G0)}, "bias"),
        ("init_state_width", False, {"init_state": (B0, H0 + 1)}, "init_state"),
        ("init_state_width_bi", True, {"init_state": (B0, H0)}, "init_state"),
        ("init_state_batch", False, {"init_state": (B0 + 1, H0)}, "init_state"),
        ("init_state_rank3", False, {"init_state": (1, B0, H0)}, "init_state"),
        ("mask_width", False, {"mask": (B0, H0 + 1)}, "mask"),
        ("mask_width_bi", True, {"mask": (B0, H0)}, "mask"),
        ("mask_time", False, {"mask": (T0 + 1, B0, H0)}, "mask"),
        ("mask_batch", False, {"mask": (T0, B0 + 1, H0)}, "mask"),
        ("mask_rank1", False, {"mask": (H0,)}, "mask"),
        ("mask_rank4", False, {"mask": (1, T0, B0, H0)}, "mask"),
    ]


def bad_gradient_cases(G0):
    """As bad_forward_cases, for the gradients op's inputs both ops have."""
    return [
        ("source_gradient_width", False, {"source_gradient": (T0, B0, H0 + 1)},
         "source_gradient"),
        ("source_gradient_time", True, {"source_gradient": (T0 - 1, B0, 2 * H0)},
         "source_gradient"),
        ("source_gradient_batch", False, {"source_gradient": (T0, B0 + 1, H0)},
         "source_gradient"),
        ("source_gradient_rank2", False, {"source_gradient": (B0, H0)}, "source_gradient"),
        ("z_state_width", False, {"z_state": (T0, B0, G0 - 1)}, "z_?state"),
        ("z_state_width_bi", True, {"z_state": (T0, B0, G0)}, "z_?state"),
        ("z_state_rank2", False, {"z_state": (T0, B0 * G0)}, "z_?state"),
        ("state_gradient_shape", False, {"state_gradient": (B0, H0 + 1)}, "state_gradient"),
        ("state_gradient_bi", True, {"state_gradient": (B0, H0)}, "state_gradient"),
        ("state_gradient_rank3", False, {"state_gradient": (1, B0, H0)}, "state_gradient"),
        ("R_in_gradients", True, {"recurrent_weight": (G0, H0)}, "recurrent_weight"),
        ("W_in_gradients", False, {"input_weight": (G0 + 1, I0)}, "input_weight"),
        ("bias_in_gradients", False, {"bias": (G0 + 1,)}, "bias"),
        ("init_state_in_gradients", True, {"init_state": (B0, H0)}, "init_state"),
        ("mask_in_gradients", False, {"mask": (B0, 2 * H0)}, "mask"),
        ("src_noW_in_gradients", False, {"input_weight": None}, "source"),
    ]


# ---------------------------------------------------------------------------------------------
# the checks
# ---------------------------------------------------------------------------------------------

def check_forward(op, mps, rng, case, dtype):
    ops = op.make_operands(rng, case)
    desc = op.desc_of(case)
    ops_t = {k: to_t(v, dtype) for k, v in ops.items()}
    outs = op.call(mps, ops_t, desc)
    names = op.output_names(desc)
    assert len(outs) == len(names), f"{len(outs)} outputs, expected {names}"
    expected = op.ref.forward_outputs({k: round_to(v, dtype) for k, v in ops.items()}, desc)
    for o, e, n in zip(outs, expected, names):
        assert o.dtype == dtype, n
        assert_close(np64(o), e.numpy(), op.fwd_tol[dtype], n)


def check_gradients(op, mps, rng, case, dtype):
    """<name>_gradients vs tape autodiff of the reference (inputs rounded to dtype)."""
    ops, cots, desc, _, _, grads = op.run_gradients(mps, rng, case, dtype)
    r = lambda a: round_to(a, dtype)  # noqa: E731
    expected, names = op.ref.reference_vjp({k: r(v) for k, v in ops.items()}, desc,
                                           **{k: r(v) for k, v in cots.items()})
    assert len(grads) == len(names), f"{len(grads)} gradients, expected {names}"
    for g, e, n in zip(grads, expected, names):
        assert g.dtype == dtype, n
        assert_close(np64(g), e, op.grad_tol[dtype], "d_" + n)


def check_gradients_numeric(op, mps, rng, case):
    """Float64 central differences of L computed from the op's own forward, against the op's
    gradients and the reference's."""
    ops, cots, desc, _, _, grads = op.run_gradients(mps, rng, case, F64)
    op.check_numeric_case(ops, desc)
    seqs = {"final_state_cot": 0, "final_cell_cot": 1}

    def loss(o):
        outs = [t.numpy() for t in op.call(mps, {k: to_t(v, F64) for k, v in o.items()}, desc)]
        total = np.sum(cots["state_cot"] * outs[0])
        for k, i in seqs.items():
            if cots.get(k) is not None:
                total += np.sum(cots[k] * finals_from_sequences(outs[i], desc))
        return total

    expected_ref, names = op.ref.reference_vjp(ops, desc, **cots)
    assert len(grads) == len(names)
    for g, gr, n in zip(grads, expected_ref, names):
        num = central_differences(loss, ops, n)
        assert_close(g.numpy(), num, op.numeric_tol, "op d_" + n)
        assert_close(gr, num, op.numeric_tol, "reference d_" + n)


def check_registered(op, mps, rng, case, dtype, use_function):
    """The registered gradient of mps.<name> (loss on state, and on cell when produced) vs the
    reference's."""
    ops = op.make_operands(rng, case)
    desc = op.desc_of(case)
    T, B, _, H = case["size"]
    D = 2 if case["bidirectional"] else 1
    cot = {"state_cot": rng.normal(size=(T, B, D * H))}
    if getattr(desc, "produce_cell", False):
        cot["cell_cot"] = rng.normal(size=(T, B, D * H))
    ops_t = {k: to_t(v, dtype) for k, v in ops.items()}
    names = [n for n in op.ref.GRAD_ORDER if ops_t.get(n) is not None]

    def grads_of(ops_t):
        with tf.GradientTape() as tape:
            for n in names:
                tape.watch(ops_t[n])
            outs = op.call(mps, ops_t, desc)
            loss = sum(tf.reduce_sum(tf.cast(o, F64) * c) for o, c in zip(outs, cot.values()))
        return tape.gradient(loss, [ops_t[n] for n in names])

    if use_function:
        given = {k: v for k, v in ops_t.items() if v is not None}
        grads = tf.function(lambda **kw: grads_of(kw))(**given)
    else:
        grads = grads_of(ops_t)
    expected, enames = op.ref.reference_vjp({k: round_to(v, dtype) for k, v in ops.items()},
                                            desc, **cot)
    assert enames == names
    for g, e, n in zip(grads, expected, names):
        assert g is not None, f"no gradient for {n}"
        assert g.dtype == dtype, n
        assert_close(np64(g), e, op.grad_tol[dtype], "d_" + n)


# ---------------------------------------------------------------------------------------------
# the tests
# ---------------------------------------------------------------------------------------------

def shared_tests(op):
    """The tests both ops have, parametrised with op's cases: {test name: test function}."""
    acts = op.ref.ACTIVATION_NAMES
    G0 = op.gates * H0

    def test_pairwise_covers_every_activation():
        for cases in (op.fwd_cases, op.grad_cases, op.reg_cases):
            for f, values in op.factors.items():
                assert {c[f] for c in cases} == set(values), f
            for a, b in itertools.combinations(op.act_fields, 2):
                assert {(c[a], c[b]) for c in cases} == set(itertools.product(acts, acts))

    @pytest.mark.parametrize("case,dtype", [
        pytest.param(c, dt, id=f"{op.case_id(c)}-{DTYPE_IDS[dt]}")
        for c in op.fwd_cases for dt in (F64, F32, F16, BF16)])
    def test_forward(mps, rng, case, dtype):
        check_forward(op, mps, rng, case, dtype)

    @pytest.mark.parametrize("case", op.tf_function_cases, ids=op.case_id)
    def test_forward_tf_function(mps, rng, case):
        ops = op.make_operands(rng, case)
        desc = op.desc_of(case, **op.outputs)
        ops_t = {k: to_t(v, F64) for k, v in ops.items()}
        given = {k: v for k, v in ops_t.items() if v is not None}
        outs = tf.function(lambda **kw: op.call(mps, kw, desc))(**given)
        expected = op.ref.forward_outputs(ops, desc)
        for o, e, n in zip(outs, expected, op.output_names(desc)):
            assert o.shape == e.shape, n
            assert_close(o.numpy(), e.numpy(), op.fwd_tol[F64], n)

    @pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
    def test_reverse_ignored_when_bidirectional_and_reverse_differs(mps, rng, bidirectional):
        case = op.full_case((4, 2, 3, 2), bidirectional)
        ops_t = {k: to_t(v, F64) for k, v in op.make_operands(rng, case).items()}
        a = op.call(mps, ops_t, op.desc_of(case, reverse=False))[0].numpy()
        b = op.call(mps, ops_t, op.desc_of(case, reverse=True))[0].numpy()
        if bidirectional:
            np.testing.assert_array_equal(a, b)
        else:
            assert np.abs(a - b).max() > 1e-3

    def test_tf_function_unknown_time_and_batch(mps, rng):
        """Traced once with [None, None, I] / [None, DH] signatures, run at two (T, B)."""
        H, I, sizes = op.unknown_sizes
        G = op.gates * H
        desc = op.ref.Desc(bidirectional=True, **op.outputs, **op.valid_desc)
        fixed = dict(recurrent_weight=0.5 * rng.normal(size=(2, G, H)),
                     input_weight=0.5 * rng.normal(size=(2 * G, I)))
        if "secondary_bias" in op.ref.OPERAND_NAMES:
            fixed["secondary_bias"] = 0.3 * rng.normal(size=(2 * H,))
        shapes = dict(source=[None, None, I], init_state=[None, 2 * H],
                      mask=[None, None, 2 * H], **{k: v.shape for k, v in fixed.items()})

        @tf.function(input_signature=[tf.TensorSpec(s, F64) for s in shapes.values()])
        def f(*args):
            return op.call(mps, dict(zip(shapes, args)), desc)

        for T, B in sizes:
            ops = dict(source=rng.normal(size=(T, B, I)), init_state=rng.normal(size=(B, 2 * H)),
                       mask=_mask(rng, (T, B, 2 * H)), **fixed)
            outs = f(*[tf.constant(ops[k]) for k in shapes])
            expected = op.ref.forward_outputs(ops, desc)
            for o, e, n in zip(outs, expected, op.output_names(desc)):
                assert_close(o.numpy(), e.numpy(), op.fwd_tol[F64], n)
        assert f.experimental_get_tracing_count() == 1

    @pytest.mark.parametrize("case", op.grad_cases, ids=op.case_id)
    @pytest.mark.parametrize("dtype", [F64, F32], ids=DTYPE_IDS.get)
    def test_gradients(mps, rng, case, dtype):
        check_gradients(op, mps, rng, case, dtype)

    @pytest.mark.parametrize("case", op.half_grad_cases, ids=op.case_id)
    @pytest.mark.parametrize("dtype", [F16, BF16], ids=DTYPE_IDS.get)
    def test_gradients_half(mps, rng, case, dtype):
        check_gradients(op, mps, rng, case, dtype)

    @pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
    def test_gradients_accept_empty_z_state_and_output(mps, rng, bidirectional):
        """z_state / the forward output are only shape-checked: empty tensors give the same
        gradients."""
        case = op.full_case((3, 2, 3, 2), bidirectional)
        _, cots, desc, ops_t, outs, full = op.run_gradients(mps, rng, case, F64)
        empty = tf.zeros([0], F64)
        got = op.gradients_of(mps, ops_t, desc, [empty] * len(outs), cots, F64)
        assert len(full) == len(got) == len(op.ref.GRAD_ORDER)
        for a, b in zip(full, got):
            np.testing.assert_array_equal(a.numpy(), b.numpy())

    @pytest.mark.parametrize("case", op.numeric_cases, ids=op.case_id)
    def test_gradients_numeric(mps, rng, case):
        """Float64 central differences of L computed from the op's own forward."""
        check_gradients_numeric(op, mps, rng, case)

    @pytest.mark.parametrize("case", op.extra_cases, ids=op.case_id)
    @pytest.mark.parametrize("dtype", [F64, F32], ids=DTYPE_IDS.get)
    def test_extra_shapes_forward_and_gradients(mps, rng, case, dtype):
        ops = op.make_operands(rng, case)
        desc = op.desc_of(case, **op.outputs)
        outs = op.call(mps, {k: to_t(v, dtype) for k, v in ops.items()}, desc)
        expected = op.ref.forward_outputs({k: round_to(v, dtype) for k, v in ops.items()}, desc)
        for o, e, n in zip(outs, expected, op.output_names(desc)):
            assert_close(np64(o), e.numpy(), op.fwd_tol[dtype], n)
        check_gradients(op, mps, rng, case, dtype)

    @pytest.mark.parametrize("case", op.reg_cases, ids=op.case_id)
    def test_registered_gradient_eager(mps, rng, case):
        check_registered(op, mps, rng, case, F64, False)

    @pytest.mark.parametrize("case", op.reg_function_cases, ids=op.case_id)
    def test_registered_gradient_tf_function(mps, rng, case):
        check_registered(op, mps, rng, case, F64, True)

    @pytest.mark.parametrize("case", op.reg_low_cases, ids=op.case_id)
    @pytest.mark.parametrize("dtype", [F32, F16], ids=DTYPE_IDS.get)
    def test_registered_gradient_low_precision(mps, rng, case, dtype):
        check_registered(op, mps, rng, case, dtype, False)

    @pytest.mark.parametrize("use_function", [False, True], ids=["eager", "tf_function"])
    def test_registered_gradient_into_z_state_raises(mps, rng, use_function):
        case = op.full_case((3, 2, 3, 2), False, **op.outputs)
        ops_t = {k: to_t(v, F64) for k, v in op.make_operands(rng, case).items()}
        desc = op.desc_of(case)

        def run(src, rw):
            with tf.GradientTape() as tape:
                tape.watch([src, rw])
                outs = op.call(mps, dict(ops_t, source=src, recurrent_weight=rw), desc)
                loss = tf.reduce_sum(outs[0]) + tf.reduce_sum(outs[-1] * outs[-1])
            return tape.gradient(loss, [src, rw])

        fn = tf.function(run) if use_function else run
        with pytest.raises(tf.errors.InvalidArgumentError, match="z_state"):
            g = fn(ops_t["source"], ops_t["recurrent_weight"])
            [t.numpy() for t in g]

    bad_fwd = bad_forward_cases(G0) + op.bad_forward
    bad_grad = bad_gradient_cases(G0) + op.bad_gradients

    @pytest.mark.parametrize("bi,changes,pattern", [c[1:] for c in bad_fwd],
                             ids=[c[0] for c in bad_fwd])
    def test_bad_input_forward(mps, rng, bi, changes, pattern):
        ops = _apply(rng, op.valid(rng, bi), changes)
        with pytest.raises(tf.errors.InvalidArgumentError, match=pattern):
            outs = op.call(mps, {k: to_t(v, F32) for k, v in ops.items()}, op.bad_desc(bi))
            [o.numpy() for o in outs]

    @pytest.mark.parametrize("bi,changes,pattern", [c[1:] for c in bad_grad],
                             ids=[c[0] for c in bad_grad])
    def test_bad_input_gradients(mps, rng, bi, changes, pattern):
        ops = op.valid(rng, bi)
        gin = op.valid_grad_inputs(rng, bi)
        gin = _apply(rng, gin, {k: v for k, v in changes.items() if k in gin})
        ops = _apply(rng, ops, {k: v for k, v in changes.items() if k not in gin})
        with pytest.raises(tf.errors.InvalidArgumentError, match=pattern):
            grads = op.call_grads(mps, {k: to_t(v, F32) for k, v in ops.items()},
                                  op.bad_desc(bi), **{k: to_t(v, F32) for k, v in gin.items()})
            [g.numpy() for g in grads]

    @pytest.mark.parametrize("bi", [False, True], ids=["uni", "bi"])
    def test_valid_operands_are_accepted(mps, rng, bi):
        """The base of the bad-input tables is itself valid (so each failure is the change)."""
        ops_t = {k: to_t(v, F32) for k, v in op.valid(rng, bi).items()}
        desc = op.bad_desc(bi)
        outs = op.call(mps, ops_t, desc)
        gin = {k: to_t(v, F32) for k, v in op.valid_grad_inputs(rng, bi).items()}
        grads = op.call_grads(mps, ops_t, desc, **gin)
        assert len(outs) == len(op.output_names(desc))
        assert len(grads) == len(op.ref.GRAD_ORDER)

    tests = dict(locals())
    names = {"test_gradients": f"test_{op.name}_gradients",
             "test_gradients_half": f"test_{op.name}_gradients_half",
             "test_gradients_accept_empty_z_state_and_output":
                 f"test_{op.name}_gradients_accept_empty_z_state_and_output",
             "test_gradients_numeric": f"test_{op.name}_gradients_numeric"}
    return {names.get(k, k): v for k, v in tests.items() if k.startswith("test_")}
