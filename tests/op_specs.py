"""The op table of the hardening tests (test_catalogue.py, test_fuzz.py / fuzz_ops.py,
tools/leak_check.py): one OpSpec per op of the library, describing its inputs with symbolic
shapes, how to build a valid call, and the shapes a valid call must return.

To cover a new op, add one OpSpec to its family's list (here, op_specs_cudnn.py,
op_specs_keras.py or op_specs_mps.py; see the GRU/MPS entries for the pattern); the catalogue,
the fuzzer and the leak check pick it up.

Shape expressions are Python expressions over the spec's dimension symbols (evaluated with
``dims``). Input kinds:
  "T"    a float tensor of the op's attr T;
  "i64"  an int64 tensor (seq_len_max), "i32" an int32 tensor, "i8" an int8 tensor;
  "list" a list of T tensors (canonical weights/biases: shape None, built by ``make``);
  "opt"  an optional operand of the MPSGraph ops (absent = None).
"""

import dataclasses
import re
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf

import cudnn_reference as cref  # noqa: F401 (the catalogue reads S.cref)

F16, BF16, F32, F64 = tf.float16, tf.bfloat16, tf.float32, tf.float64
FLOATS = (F16, BF16, F32, F64)
INT32_MAX = 2**31 - 1


@dataclasses.dataclass
class Input:
    name: str
    shape: Optional[Tuple[str, ...]]
    kind: str = "T"


@dataclasses.dataclass
class OpSpec:
    name: str                      # the op's name without the TfRnn> prefix
    inputs: List[Input]
    call: Callable                 # call(kwargs, attrs) -> flat list of output tensors
    make: Callable                 # make(rng, dims, attrs, dtype) -> kwargs of a valid call
    out_shapes: Callable           # out_shapes(dims, attrs) -> list of expected output shapes
    dims: Dict[str, int]           # default dimensions
    attrs: Dict[str, object] = dataclasses.field(default_factory=dict)
    derive: Callable = None        # derive(dims, attrs) -> dims with derived symbols added
    zero_ok: Dict[str, bool] = dataclasses.field(default_factory=dict)  # symbol -> valid at 0?
    free: frozenset = frozenset()  # (input, axis) whose size may change alone; ("rank", input)
    empty_ok: frozenset = frozenset()  # inputs that may be empty tensors
    links: Dict[str, str] = dataclasses.field(default_factory=dict)  # derived -> source symbols
    values: Callable = None        # values(dims, attrs) -> [(id, mutate(kw, attrs), names)]
    attr_space: Callable = None    # attr_space(draw, dims) -> (dims, attrs) for the fuzzer
    wrapper: bool = True           # called through a Python wrapper that checks dtypes
    nan_input: str = None          # an input whose NaN must reach some output
    grad_of: str = None            # not used by the tests; documentation of the pairing

    def full_dims(self, dims, attrs):
        d = dict(dims)
        if self.derive is not None:
            d = self.derive(d, attrs)
        return d

    def shape(self, inp, dims, attrs):
        d = self.full_dims(dims, attrs)
        return tuple(int(eval(e, {}, d)) for e in inp.shape)  # noqa: S307 (own expressions)

    def input(self, name):
        return next(i for i in self.inputs if i.name == name)

    def symbols(self, expr):
        """Primary symbols an expression depends on (derived symbols expanded)."""
        out = set()
        for s in re.findall(r"[A-Za-z_]\w*", expr):
            out.add(s)
            out.update(self.links.get(s, ""))
        return out

    def related(self, name, axes=None):
        """Inputs whose size depends on the given axes of `name` (including `name`)."""
        inp = self.input(name)
        if inp.shape is None:
            return {name}
        axes = range(len(inp.shape)) if axes is None else axes
        syms = set()
        for a in axes:
            syms |= self.symbols(inp.shape[a])
        names = {name}
        for other in self.inputs:
            if other.shape is None:
                continue
            if any(self.symbols(e) & syms for e in other.shape):
                names.add(other.name)
        return names


def _t(rng, shape, dtype, lo=None, hi=None, scale=0.5):
    if lo is not None:
        a = rng.uniform(lo, hi, size=shape)
    else:
        a = scale * rng.normal(size=shape)
    return tf.cast(tf.constant(a, tf.float64), dtype)


def flatten(outs):
    flat = []
    for o in outs if isinstance(outs, (list, tuple)) else [outs]:
        if isinstance(o, (list, tuple)):
            flat.extend(flatten(o))
        else:
            flat.append(o)
    return flat


def _ours():
    from tf_rnn_ops import raw_ops
    return raw_ops


def _lib():
    from tf_rnn_ops._loader import load_library
    return load_library()


def _raw(op_name):
    def call(kw, attrs):
        return flatten(getattr(_ours(), op_name)(**kw, **attrs))
    return call


# ---------------------------------------------------------------------------------------------
# LSTM block family
# ---------------------------------------------------------------------------------------------

LSTM_PARAMS = [Input("x", None), Input("cs_prev", ("B", "H")), Input("h_prev", ("B", "H")),
               Input("w", ("I+H", "4*H")), Input("wci", ("H",)), Input("wcf", ("H",)),
               Input("wco", ("H",)), Input("b", ("4*H",))]
ACTS = ("i", "cs", "f", "o", "ci", "co")


def _lstm_inputs(seq, grad, exact=False):
    ins = [Input(i.name, i.shape) for i in LSTM_PARAMS]
    ins[0] = Input("x", ("T", "B", "I") if seq else ("B", "I"))
    act = ("T", "B", "H") if seq else ("B", "H")
    if seq:
        ins.insert(0, Input("seq_len_max", (), "i64"))
    if grad:
        names = ACTS + (("h",) if seq else ()) + ("cs_grad", "h_grad")
        if exact:
            names += ("i_grad", "f_grad", "o_grad", "ci_grad", "co_grad")
        ins += [Input(n, act) for n in names]
    return ins


def _lstm_make(spec):
    def make(rng, dims, attrs, dtype):
        kw = {}
        for inp in spec.inputs:
            if inp.kind == "i64":
                kw[inp.name] = tf.constant(dims["T"], tf.int64)
            elif inp.name in ACTS + ("h",):
                kw[inp.name] = _t(rng, spec.shape(inp, dims, attrs), dtype, 0.05, 0.95)
            else:
                kw[inp.name] = _t(rng, spec.shape(inp, dims, attrs), dtype)
        return kw
    return make


def _slm_values(dims, attrs):
    T = dims["T"]
    def set_slm(v):
        return lambda kw, a: (dict(kw, seq_len_max=tf.constant(v, tf.int64)), a)
    return [(f"seq_len_max={v}", set_slm(v), {"seq_len_max"}) for v in (-1, T + 1, 2**62, -2**63)]


def _lstm_space(seq):
    def space(draw, dims):
        attrs = {"use_peephole": draw.booleans()}
        return dims, attrs
    return space


def lstm_block_specs():
    specs = []
    dims_cell = {"B": 2, "I": 3, "H": 5}
    dims_seq = {"T": 4, "B": 2, "I": 3, "H": 5}
    # batch_size or cell_size 0: an empty (or zero) result, as in stock, except LSTMBlockCell,
    # which stock rejects ("cs_prev_tensor is empty").
    zero_cell = {"B": True, "I": True, "H": True}
    zero_seq = dict(zero_cell, T=True)

    def add(name, seq, grad, out_shapes, attrs, call=None, exact=False, wrapper=True):
        s = OpSpec(name=name, inputs=_lstm_inputs(seq, grad, exact), call=call or _raw(name),
                   make=None, out_shapes=out_shapes, dims=dict(dims_seq if seq else dims_cell),
                   attrs=attrs, zero_ok=dict(zero_seq if seq else zero_cell),
                   free=frozenset({("x", 0)}) if seq and not grad else frozenset(),
                   values=_slm_values if seq else None, attr_space=_lstm_space(seq),
                   wrapper=wrapper, nan_input="x" if not grad else "cs_prev")
        if name == "LSTMBlockCell":
            s.zero_ok.update(B=False, H=False)
        s.make = _lstm_make(s)
        specs.append(s)

    cell_out = lambda d, a: [(d["B"], d["H"])] * 7
    seq_out = lambda d, a: [(d["T"], d["B"], d["H"])] * 7
    cell_grad_out = lambda d, a: [(d["B"], d["H"]), (d["B"], 4 * d["H"])] + [(d["H"],)] * 3
    seq_grad_out = lambda d, a: [(d["T"], d["B"], d["I"]), (d["B"], d["H"]), (d["B"], d["H"]),
                                 (d["I"] + d["H"], 4 * d["H"])] + [(d["H"],)] * 3 + [(4 * d["H"],)]
    add("LSTMBlockCell", False, False, cell_out, {"use_peephole": True})
    add("LSTMBlockCellGrad", False, True, cell_grad_out, {"use_peephole": True})
    add("BlockLSTM", True, False, seq_out, {"use_peephole": True})
    add("BlockLSTMV2", True, False, seq_out, {"use_peephole": True})
    add("BlockLSTMGrad", True, True, seq_grad_out, {"use_peephole": True})
    add("BlockLSTMGradV2", True, True, seq_grad_out, {"use_peephole": True})

    def exact_call(kw, attrs):
        return flatten(_lib().tf_rnn_block_lstm_grad_exact(**kw, **attrs))
    add("BlockLSTMGradExact", True, True, seq_grad_out,
        {"use_peephole": True, "cell_clip": 1.0, "gate_order": "ifco"}, call=exact_call,
        exact=True, wrapper=False)
    specs[-1].attr_space = lambda draw, dims: (dims, {
        "use_peephole": draw.booleans(), "cell_clip": draw.sampled_from([0.0, 0.5, 3.0]),
        "gate_order": draw.sampled_from(["icfo", "ifco"])})
    return specs


# ---------------------------------------------------------------------------------------------
# GRU block family
# ---------------------------------------------------------------------------------------------

def gru_specs():
    params = [Input("x", ("B", "I")), Input("h_prev", ("B", "H")), Input("w_ru", ("I+H", "2*H")),
              Input("w_c", ("I+H", "H")), Input("b_ru", ("2*H",)), Input("b_c", ("H",))]
    specs = []

    def add(name, acts, out_shapes, call, wrapper=True):
        s = OpSpec(name=name, inputs=params + [Input(n, ("B", "H")) for n in acts], call=call,
                   make=None, out_shapes=out_shapes, dims={"B": 2, "I": 3, "H": 4},
                   zero_ok={"B": True, "I": True, "H": True}, wrapper=wrapper,
                   attr_space=lambda draw, dims: (dims, {}),
                   nan_input="x" if not acts else "h_prev")

        def make(rng, dims, attrs, dtype, s=s):
            kw = {}
            for inp in s.inputs:
                lo = (0.05, 0.95) if inp.name in ("r", "u", "c") else (None, None)
                kw[inp.name] = _t(rng, s.shape(inp, dims, attrs), dtype, *lo)
            return kw
        s.make = make
        specs.append(s)

    add("GRUBlockCell", (), lambda d, a: [(d["B"], d["H"])] * 4, _raw("GRUBlockCell"))
    grad_out = lambda d, a: [(d["B"], d["I"]), (d["B"], d["H"]), (d["B"], d["H"]),
                             (d["B"], 2 * d["H"])]
    add("GRUBlockCellGrad", ("r", "u", "c", "d_h"), grad_out, _raw("GRUBlockCellGrad"))
    add("GRUBlockCellGradExact", ("r", "u", "c", "d_h", "r_grad", "u_grad", "c_grad"), grad_out,
        lambda kw, a: flatten(_lib().tf_rnn_gru_block_cell_grad_exact(**kw)), wrapper=False)
    return specs


def attrs_for(spec, dims, attrs):
    """The spec's attrs completed with the ones that depend on dims (list lengths)."""
    fn = getattr(spec, "attrs_fn", None)
    return dict(attrs, **fn(dims, attrs)) if fn is not None else dict(attrs)


# ---------------------------------------------------------------------------------------------

def all_specs():
    """Every op spec, in a stable order (ids: name or name[variant])."""
    if not hasattr(all_specs, "_cache"):
        from op_specs_cudnn import cudnn_specs  # noqa: PLC0415 (they import this module)
        from op_specs_keras import keras_specs  # noqa: PLC0415
        from op_specs_mps import mps_gru_specs, mps_specs  # noqa: PLC0415
        specs = (lstm_block_specs() + gru_specs() + cudnn_specs() + keras_specs()
                 + keras_specs(mixed=True) + mps_specs() + mps_gru_specs())
        for s in specs:
            if not hasattr(s, "variant"):
                s.variant = ""
        all_specs._cache = specs
    return all_specs._cache


def spec_id(spec):
    return spec.name + (f"[{spec.variant}]" if spec.variant else "")


def by_id(ident):
    return next(s for s in all_specs() if spec_id(s) == ident)


def call_spec(spec, kw, attrs):
    """Calls the op; the MPS ops need the 'present' pseudo-attr removed."""
    attrs = {k: v for k, v in attrs.items() if k != "present"}
    return spec.call(kw, attrs)


# ---------------------------------------------------------------------------------------------
# Mutations (plain tuples, so that the fuzzer can send them to its child process)
# ---------------------------------------------------------------------------------------------
#   ("rank_up", name)              prepend an axis of size 1
#   ("rank_down", name)            drop the first axis
#   ("resize", name, axis, size)   one axis to another size (random values)
#   ("empty", name)                an empty tensor of the same rank
#   ("huge", name, axis, zero_axis, size)  an empty tensor with one axis huge
#   ("dtype", name, dtype_name)    the input cast to another dtype
#   ("poison", name, value, index) one element set to nan / inf / -inf / 1e30
#   ("int", name, value)           an integer input (every element) set to a value
#   ("value", case_id)             one of the spec's value cases
#   ("list_len", name, delta)      a list input one element shorter / longer

def base_call(spec, rng, dims=None, attrs=None, dtype=F32):
    """(kwargs, attrs, dims) of a valid call."""
    dims = dict(spec.dims if dims is None else dims)
    attrs = attrs_for(spec, dims, spec.attrs if attrs is None else attrs)
    return spec.make(rng, dims, attrs, dtype), attrs, dims


def _random_like(rng, shape, dtype):
    if dtype.is_integer:
        return tf.constant(rng.integers(0, 3, size=shape), dtype)
    return _t(rng, shape, dtype)


def apply_mutation(spec, kw, attrs, dims, mut, rng):
    kind, name = mut[0], mut[1]
    kw = dict(kw)
    if kind == "value":            # by id (the catalogue) or by position (the fuzzer)
        cases = spec.values(dims, attrs) if spec.values else []
        for k, (cid, fn, _) in enumerate(cases):
            if cid == name or (isinstance(name, int) and k == name % len(cases)):
                return fn(kw, attrs)
        raise KeyError(name)
    if name not in kw:
        return kw, attrs
    t = kw[name]
    if kind == "list_len":
        if not isinstance(t, list):
            return kw, attrs
        lst = list(t)
        kw[name] = lst[:-1] if mut[2] < 0 else lst + lst[:1]
        return kw, attrs
    if isinstance(t, list):            # list inputs: mutate the first element
        if not t:
            return kw, attrs
        sub_kw, attrs = apply_mutation(spec, {"_": t[0]}, attrs, dims, (kind, "_") + mut[2:], rng)
        kw[name] = [sub_kw["_"]] + t[1:]
        return kw, attrs
    shape = list(t.shape)
    if kind == "rank_up":
        kw[name] = tf.expand_dims(t, 0)
    elif kind == "rank_down":
        if shape and shape[0] > 0:
            kw[name] = t[0]
        elif shape:  # empty: drop an axis so that the result stays empty (a huge-but-empty
            # tensor from a "huge" mutation must not become a huge non-empty one)
            zero_axes = [k for k, v in enumerate(shape) if v == 0]
            drop = next((k for k in range(len(shape)) if k != zero_axes[0]), None)
            if drop is None:
                kw[name] = tf.zeros([], t.dtype)
            else:
                kw[name] = tf.zeros(shape[:drop] + shape[drop + 1:], t.dtype)
    elif kind == "resize":
        if shape:
            shape[mut[2] % len(shape)] = mut[3]
            n = int(np.prod(shape, dtype=object))
            if n == 0:                  # still empty (a "huge" mutation zeroed another axis)
                try:
                    kw[name] = tf.zeros(shape, t.dtype)
                except tf.errors.InvalidArgumentError:
                    pass                # more than 2^63 elements counting only non-zero axes
            elif n <= 10**6:            # not after a "huge" mutation
                kw[name] = _random_like(rng, shape, t.dtype)
    elif kind == "empty":
        kw[name] = tf.zeros([0] * len(shape), t.dtype)
    elif kind == "huge":
        big, zero = mut[2] % max(len(shape), 1), mut[3] % max(len(shape), 1)
        if len(shape) >= 2 and big != zero:
            shape[zero] = 0
            # TensorFlow refuses shapes whose running product (before the 0) exceeds int64
            before = int(np.prod([d for k, d in enumerate(shape[:zero]) if k != big] or [1]))
            shape[big] = min(mut[4], (2**63 - 1) // max(before, 1)) if big < zero else mut[4]
            kw[name] = tf.zeros(shape, t.dtype)
    elif kind == "dtype":
        kw[name] = tf.cast(t, tf.as_dtype(mut[2]))
    elif kind == "poison":
        if t.dtype.is_floating and t.shape.num_elements():
            flat = tf.reshape(t, [-1])
            k = int(mut[3] * flat.shape[0]) % flat.shape[0]
            flat = tf.tensor_scatter_nd_update(flat, [[k]], tf.constant([mut[2]], t.dtype))
            kw[name] = tf.reshape(flat, t.shape)
    elif kind == "int":
        if t.dtype.is_integer:
            kw[name] = tf.fill(tf.shape(t), tf.constant(mut[2], t.dtype))
    return kw, attrs


def check_outputs(spec, outs, dims, attrs):
    """None if the outputs have the shapes a valid call must give, else a message."""
    want = spec.out_shapes(dims, attrs)
    got = [tuple(o.shape) for o in outs]
    if len(got) != len(want):
        return f"{len(got)} outputs, expected {len(want)}: {got}"
    for k, (g, w) in enumerate(zip(got, want)):
        if w is not None and tuple(g) != tuple(w):
            return f"output {k} has shape {g}, expected {tuple(w)} (all: {got})"
    return None


def check_plausible(outs, bound=1e6, opaque=()):
    """None if every float output of a call on moderate inputs is finite and below `bound`
    (catches uninitialised memory in outputs), else a message. Outputs listed in `opaque`
    (reserve_space: compute-type values packed into a tensor of T) are checked only when T is
    the compute type (float32, float64)."""
    for k, o in enumerate(outs):
        if k in opaque and o.dtype not in (F32, F64):
            continue
        if o.dtype.is_floating and o.shape.num_elements():
            a = np.abs(tf.cast(o, tf.float64).numpy())
            if not np.all(a < bound):
                return f"output {k} has implausible values (max |x| {np.nanmax(a):.3g}, " \
                       f"{int(np.sum(~np.isfinite(a)))} non-finite): uninitialised memory?"
    return None


def opaque_outputs(spec, dims, attrs):
    """Positions of outputs whose shape the spec leaves open (reserve_space, host_reserved)."""
    return {k for k, w in enumerate(spec.out_shapes(dims, attrs)) if w is None}


def names_message(message, names):
    """True if the message names one of `names` (regexes allowed) as a word."""
    return any(re.search(rf"(?<![\w]){n}(?![\w])", message) for n in names)


def first_named(spec, message):
    """The input of `spec` that `message` names first (as a word), or None."""
    hits = [(m.start(), inp.name) for inp in spec.inputs
            for m in [re.search(rf"(?<![\w]){inp.name}(?![\w])", message)] if m]
    return min(hits)[1] if hits else None


def expected_first(spec, name, axes=None):
    """The inputs an error about a change to `name` (on `axes`, default all) may name first:
    `name` itself, and, when `name` is the first input whose shape carries one of the changed
    sizes (it sets that size, e.g. x sets batch_size), the later inputs that repeat it. Inputs
    are checked in op order against the sizes the inputs before them set, so an error never
    names an earlier input or an unrelated one."""
    inp = spec.input(name)
    if inp.shape is None:
        return {name}
    axes = range(len(inp.shape)) if axes is None else axes
    k = spec.inputs.index(inp)
    earlier = set()
    for other in spec.inputs[:k]:
        for e in other.shape or ():
            earlier |= spec.symbols(e)
    sets = set()
    for a in axes:
        sets |= spec.symbols(inp.shape[a]) - earlier
    later = {o.name for o in spec.inputs[k + 1:] if o.shape is not None and
             any(spec.symbols(e) & sets for e in o.shape)}
    return {name} | later


def first_for(spec, mut):
    """The inputs an error about a shape mutation (see apply_mutation) may name first
    (expected_first); None for value and list cases."""
    if mut[0] in ("rank_up", "rank_down", "empty", "huge"):
        return expected_first(spec, mut[1])
    if mut[0] == "resize":
        return expected_first(spec, mut[1], [mut[2]])
    return None


def first_with(spec, symbol):
    """The first input (in op order) whose shape carries `symbol`, or None."""
    return next((i.name for i in spec.inputs if i.shape is not None and
                 any(symbol in spec.symbols(e) for e in i.shape)), None)
