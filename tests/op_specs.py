"""The op table of the hardening tests (test_catalogue.py, test_fuzz.py / fuzz_ops.py,
tools/leak_check.py): one OpSpec per op of the library, describing its inputs with symbolic
shapes, how to build a valid call, and the shapes a valid call must return.

To cover a new op, add one OpSpec to SPECS (see the GRU/MPS entries for the pattern); the
catalogue, the fuzzer and the leak check pick it up.

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

import cudnn_reference as cref

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


# ---------------------------------------------------------------------------------------------
# cuDNN RNN family
# ---------------------------------------------------------------------------------------------

CUDNN_ATTRS = {"rnn_mode": "lstm", "input_mode": "linear_input", "direction": "bidirectional"}


def _kw_of(dims, attrs):
    return dict(mode=attrs["rnn_mode"], num_layers=dims["L"], num_units=dims["N"],
                input_size=dims["I"], input_mode=attrs["input_mode"],
                direction=attrs["direction"], num_proj=attrs.get("num_proj", 0))


def _cudnn_derive(dims, attrs):
    d = dict(dims)
    d["D"] = cref.num_dirs(attrs["direction"])
    d["Hs"] = attrs.get("num_proj", 0) or d["N"]
    d["P"] = cref.params_size(**_kw_of(d, attrs)) if d["L"] > 0 and d["N"] > 0 else 0
    return d


def _tm(attrs):
    return attrs.get("time_major", True)


def _cudnn_inputs(v3, backprop):
    def x_shape(tm):
        return ("T", "B", "I") if tm else ("B", "T", "I")
    ins = [Input("input", ("T", "B", "I")), Input("input_h", ("L*D", "B", "Hs")),
           Input("input_c", ("L*D", "B", "N")), Input("params", ("P",))]
    if v3:
        ins.append(Input("sequence_lengths", ("B",), "i32"))
    if backprop:
        ins += [Input("output", ("T", "B", "D*Hs")), Input("output_h", ("L*D", "B", "Hs")),
                Input("output_c", ("L*D", "B", "N")), Input("output_backprop", ("T", "B", "D*Hs")),
                Input("output_h_backprop", ("L*D", "B", "Hs")),
                Input("output_c_backprop", ("L*D", "B", "N")), Input("reserve_space", ("R",))]
        if v3 is not None:
            ins.append(Input("host_reserved", ("HR",), "i8"))
    return ins


def _cudnn_fwd_kw(rng, dims, attrs, dtype, v3):
    d = _cudnn_derive(dims, attrs)
    T, B, I, N, L, D, Hs = (d[k] for k in ("T", "B", "I", "N", "L", "D", "Hs"))
    tm = _tm(attrs)
    kw = {"input": _t(rng, (T, B, I) if tm else (B, T, I), dtype, scale=1.0),
          "input_h": _t(rng, (L * D, B, Hs) if tm else (B, L * D, Hs), dtype),
          "input_c": _t(rng, (L * D, B, N) if tm else (B, L * D, N), dtype),
          "params": _t(rng, (d["P"],), dtype, scale=0.3)}
    if v3:
        kw["sequence_lengths"] = tf.constant(rng.integers(0, T + 1, size=B) if T else
                                             np.zeros(B, np.int32), tf.int32)
    return kw


FWD_OPS = {"": "CudnnRNN", "V2": "CudnnRNNV2", "V3": "CudnnRNNV3"}


def _cudnn_fwd_attrs(attrs, version):
    keys = ("rnn_mode", "input_mode", "direction", "dropout", "seed", "seed2", "is_training")
    if version == "V3":
        keys += ("num_proj", "time_major")
    return {k: v for k, v in attrs.items() if k in keys}


def _cudnn_space(version, backprop):
    def space(draw, dims):
        attrs = {"rnn_mode": draw.sampled_from(cref.MODES),
                 "input_mode": draw.sampled_from(cref.INPUT_MODES),
                 "direction": draw.sampled_from(cref.DIRECTIONS),
                 "dropout": draw.sampled_from([0.0, 0.0, 0.5]),
                 "seed": draw.integers(0, 3)}
        if not backprop:
            attrs["is_training"] = draw.booleans()
        if version == "V3":
            attrs["time_major"] = draw.booleans()
            attrs["num_proj"] = 0
            if attrs["rnn_mode"] == "lstm" and dims["N"] > 1 and draw.booleans():
                attrs["num_proj"] = draw.integers(1, dims["N"] - 1)
        if attrs["input_mode"] == "skip_input":
            dims = dict(dims, I=dims["N"])
        return dims, attrs
    return space


def _cudnn_shapes(d, attrs, time_major=True):
    T, B, I, N, L, D, Hs = (d[k] for k in ("T", "B", "I", "N", "L", "D", "Hs"))
    tm = time_major
    x = (T, B, I) if tm else (B, T, I)
    h = (L * D, B, Hs) if tm else (B, L * D, Hs)
    c = (L * D, B, N) if tm else (B, L * D, N)
    y = (T, B, D * Hs) if tm else (B, T, D * Hs)
    return x, h, c, y


def cudnn_specs():
    specs = []
    base_dims = {"T": 4, "B": 2, "I": 5, "N": 3, "L": 2}
    zero = {"T": True, "B": True, "I": True, "N": False, "L": False}
    links = {"P": "INLD", "Hs": "N", "R": "TBINLD", "HR": ""}

    for version in ("", "V2", "V3"):
        name = FWD_OPS[version]
        v3 = version == "V3"

        def call(kw, attrs, name=name, version=version):
            return flatten(getattr(_ours(), name)(**kw, **_cudnn_fwd_attrs(attrs, version)))

        def make(rng, dims, attrs, dtype, v3=v3):
            return _cudnn_fwd_kw(rng, dims, attrs, dtype, v3)

        def out_shapes(dims, attrs, version=version):
            d = _cudnn_derive(dims, attrs)
            x, h, c, y = _cudnn_shapes(d, attrs, _tm(attrs) if version == "V3" else True)
            lstm = attrs["rnn_mode"] == "lstm"
            shapes = [y, h, c if lstm else (), None]
            if version:
                shapes.append(None)
            return shapes

        def values(dims, attrs, v3=v3):
            out = [("dropout=1.5", lambda kw, a: (kw, dict(a, dropout=1.5)), {"dropout"}),
                   ("rnn_mode=bogus", lambda kw, a: (kw, dict(a, rnn_mode="bogus")),
                    {"rnn_mode"})]
            if v3:
                T, B = dims["T"], dims["B"]
                for v in (-1, T + 1, INT32_MAX, -2**31):
                    out.append((f"sequence_lengths[-1]={v}",
                                lambda kw, a, v=v: (dict(kw, sequence_lengths=tf.constant(
                                    [T] * (B - 1) + [v], tf.int32)), a), {"sequence_lengths"}))
                out.append(("num_proj=-1", lambda kw, a: (kw, dict(a, num_proj=-1)),
                            {"num_proj"}))
                out.append(("num_proj>num_units",
                            lambda kw, a: (kw, dict(a, num_proj=dims["N"] + 1)),
                            {"num_proj", "input_h"}))
            return out

        specs.append(OpSpec(
            name=name, inputs=_cudnn_inputs(v3, False), call=call, make=make,
            out_shapes=out_shapes, dims=dict(base_dims), attrs=dict(CUDNN_ATTRS),
            derive=_cudnn_derive, zero_ok=dict(zero), free=frozenset({("input", 0)}),
            links=links, values=values, attr_space=_cudnn_space(version, False),
            nan_input="input"))

    for version in ("", "V2", "V3"):
        name = "CudnnRNNBackprop" + version
        v3 = version == "V3"

        def make(rng, dims, attrs, dtype, version=version, v3=v3):
            fa = _cudnn_fwd_attrs(dict(attrs, is_training=True), version)
            kw = _cudnn_fwd_kw(rng, dims, attrs, dtype, v3)
            outs = getattr(_ours(), FWD_OPS[version])(**kw, **fa)
            y, hn, cn, reserve = outs[:4]
            kw.update(output=y, output_h=hn, output_c=cn, reserve_space=reserve,
                      output_backprop=_t(rng, y.shape, dtype),
                      output_h_backprop=_t(rng, hn.shape, dtype),
                      output_c_backprop=_t(rng, cn.shape, dtype))
            if version:
                kw["host_reserved"] = outs[4]
            return kw

        def call(kw, attrs, name=name, version=version):
            a = _cudnn_fwd_attrs(attrs, version)
            a.pop("is_training", None)
            return flatten(getattr(_ours(), name)(**kw, **a))

        def out_shapes(dims, attrs, version=version):
            d = _cudnn_derive(dims, attrs)
            x, h, c, y = _cudnn_shapes(d, attrs, _tm(attrs) if version == "V3" else True)
            lstm = attrs["rnn_mode"] == "lstm"
            return [x, h, c if lstm else None, (d["P"],)]

        def values(dims, attrs, v3=v3):
            out = []
            if v3:
                T, B = dims["T"], dims["B"]
                for v in (-1, T + 1, INT32_MAX):
                    out.append((f"sequence_lengths[0]={v}",
                                lambda kw, a, v=v: (dict(kw, sequence_lengths=tf.constant(
                                    [v] + [T] * (B - 1), tf.int32)), a), {"sequence_lengths"}))
                # lengths that differ from the forward's: the reserve no longer matches, but
                # valid lengths are not detectable; only the size is checked.
            return out

        ins = _cudnn_inputs(v3 if version else None, True)
        free = {("input", 0)} - {("input", 0)}
        free |= {("host_reserved", 0), ("rank", "host_reserved")}
        specs.append(OpSpec(
            name=name, inputs=ins, call=call, make=make, out_shapes=out_shapes,
            dims=dict(base_dims), attrs=dict(CUDNN_ATTRS), derive=_cudnn_derive,
            zero_ok=dict(zero), free=frozenset(free), empty_ok=frozenset({"host_reserved"}),
            links=links, values=values, attr_space=_cudnn_space(version, True),
            nan_input="input"))

    # --- sizes given as scalars -------------------------------------------------------------
    scalars = [Input("num_layers", (), "i32"), Input("num_units", (), "i32"),
               Input("input_size", (), "i32")]

    def size_kw(dims):
        return {"num_layers": tf.constant(dims["L"], tf.int32),
                "num_units": tf.constant(dims["N"], tf.int32),
                "input_size": tf.constant(dims["I"], tf.int32)}

    def size_values(dims, attrs, extra=()):
        out = []
        for n in ("num_layers", "num_units", "input_size"):
            for v in (0, -1, -2**31):
                out.append((f"{n}={v}", lambda kw, a, n=n, v=v: (
                    dict(kw, **{n: tf.constant(v, tf.int32)}), a), {n}))
        for n in ("num_units", "input_size"):
            out.append((f"{n}=INT32_MAX", lambda kw, a, n=n: (
                dict(kw, **{n: tf.constant(INT32_MAX, tf.int32)}), a), {n} | set(extra)))
        out.append(("all=INT32_MAX", lambda kw, a: (dict(kw, **{
            n: tf.constant(INT32_MAX, tf.int32) for n in ("num_layers", "num_units",
                                                          "input_size")}), a),
                    {"num_layers", "num_units", "input_size"}))
        out.append(("num_layers=INT32_MAX", lambda kw, a: (
            dict(kw, num_layers=tf.constant(INT32_MAX, tf.int32)), a),
            {"num_layers"} | set(extra)))
        return out

    def ps_space(draw, dims):
        dims, attrs = _cudnn_space("V3", False)(draw, dims)
        return dims, dict(attrs, T=F32, S=draw.sampled_from([tf.int32, tf.int64]))

    def ps_call(kw, attrs):
        keys = ("T", "S", "rnn_mode", "input_mode", "direction", "dropout", "seed", "seed2",
                "num_proj")
        return flatten(_ours().CudnnRNNParamsSize(
            **kw, **{k: v for k, v in attrs.items() if k in keys}))

    def ps_values(dims, attrs):
        out = size_values(dims, attrs)
        out.append(("num_proj=-1", lambda kw, a: (kw, dict(a, num_proj=-1)), {"num_proj"}))
        out.append(("num_proj>num_units", lambda kw, a: (kw, dict(a, num_proj=dims["N"] + 1)),
                    {"num_proj"}))
        # 32-bit overflow: 2^15 units and inputs give about 2^35 params, too many for S=int32
        out.append(("params_size>INT32_MAX,S=int32", lambda kw, a: (dict(
            kw, num_units=tf.constant(2**15, tf.int32), input_size=tf.constant(2**15, tf.int32)),
            dict(a, S=tf.int32)), {"S", "int32"}))
        # valid but large sizes are not errors for ParamsSize itself (the count fits in 2^50)
        drop = ("num_layers=INT32_MAX", "input_size=INT32_MAX")
        return [o for o in out if o[0] not in drop]

    specs.append(OpSpec(
        name="CudnnRNNParamsSize", inputs=scalars, call=ps_call,
        make=lambda rng, dims, attrs, dtype: size_kw(dims),
        out_shapes=lambda d, a: [(1,)], dims={"L": 2, "N": 3, "I": 5},
        attrs=dict(CUDNN_ATTRS, T=F32, S=tf.int64), zero_ok={"L": False, "N": False, "I": False},
        values=ps_values, nan_input=None, attr_space=ps_space))

    def canon_shapes(dims, attrs):
        specs_ = cref.layer_specs(**_kw_of(dims, attrs))
        w, b = [], []
        for sp in specs_:
            K, N, Hs, P = sp["K"], sp["N"], sp["Hs"], sp["P"]
            w += [(N, sp["in"])] * K + [(N, Hs)] * K + ([(P, N)] if P else [])
            b += [(N,)] * (2 * K)
        return w, b

    for v2 in (False, True):
        name = "CudnnRNNParamsToCanonical" + ("V2" if v2 else "")

        def num_attrs(dims, attrs, v2=v2):
            w, b = canon_shapes(dims, attrs)
            if v2:
                return {"num_params_weights": len(w), "num_params_biases": len(b)}
            return {"num_params": len(w)}

        def call(kw, attrs, name=name, v2=v2):
            a = {k: v for k, v in attrs.items() if k != "num_proj" or v2}
            return flatten(getattr(_ours(), name)(**kw, **a))

        def make(rng, dims, attrs, dtype):
            d = _cudnn_derive(dims, attrs)
            return dict(size_kw(dims), params=_t(rng, (d["P"],), dtype))

        def out_shapes(dims, attrs):
            w, b = canon_shapes(dims, attrs)
            return w + b

        def p2c_values(dims, attrs, v2=v2):
            out = size_values(dims, attrs, extra=("params",))
            key = "num_params_weights" if v2 else "num_params"
            out.append((f"{key}+1", lambda kw, a, key=key: (kw, dict(a, **{key: a[key] + 1})),
                        {key}))
            return out

        spec = OpSpec(
            name=name, inputs=scalars + [Input("params", ("P",))], call=call, make=make,
            out_shapes=out_shapes, dims={"L": 2, "N": 3, "I": 5}, attrs=dict(CUDNN_ATTRS),
            derive=_cudnn_derive, zero_ok={"L": False, "N": False, "I": False},
            links={"P": "INLD"}, values=p2c_values, nan_input="params",
            attr_space=lambda draw, dims, v2=v2: _canon_space(draw, dims, v2))
        spec.attrs_fn = num_attrs
        specs.append(spec)

    for v2 in (False, True):
        name = "CudnnRNNCanonicalToParams" + ("V2" if v2 else "")

        def call(kw, attrs, name=name, v2=v2):
            a = {k: v for k, v in attrs.items() if k != "num_proj" or v2}
            return flatten(getattr(_ours(), name)(**kw, **a))

        def make(rng, dims, attrs, dtype):
            w, b = canon_shapes(dims, attrs)
            return dict(size_kw(dims), weights=[_t(rng, s, dtype) for s in w],
                        biases=[_t(rng, s, dtype) for s in b])

        def c2p_values(dims, attrs):
            out = size_values(dims, attrs, extra=("weights", "biases", "num_params",
                                                  "num_params_weights"))
            out += [
                ("weights one short", lambda kw, a: (dict(kw, weights=kw["weights"][:-1]), a),
                 {"num_params", "num_params_weights", "weights"}),
                ("biases one extra", lambda kw, a: (dict(kw, biases=kw["biases"] +
                                                         kw["biases"][:1]), a),
                 {"num_params", "num_params_biases", "biases"}),
                ("weights[1] wrong size", lambda kw, a: (dict(kw, weights=kw["weights"][:1] + [
                    tf.concat([w, w[:1]], 0) for w in kw["weights"][1:2]] + kw["weights"][2:]), a),
                 {r"weights\[1\]"}),
                ("biases[0] empty", lambda kw, a: (dict(kw, biases=[
                    b[:0] for b in kw["biases"][:1]] + kw["biases"][1:]), a),
                 {r"biases\[0\]"}),
            ]
            return out

        spec = OpSpec(
            name=name, inputs=scalars + [Input("weights", None, "list"),
                                         Input("biases", None, "list")],
            call=call, make=make, out_shapes=lambda d, a: [(_cudnn_derive(d, a)["P"],)],
            dims={"L": 2, "N": 3, "I": 5}, attrs=dict(CUDNN_ATTRS), derive=_cudnn_derive,
            zero_ok={"L": False, "N": False, "I": False}, values=c2p_values,
            nan_input="weights", attr_space=lambda draw, dims, v2=v2: _canon_space(draw, dims, v2))
        specs.append(spec)
    return specs


def _canon_space(draw, dims, v2):
    attrs = {"rnn_mode": draw.sampled_from(cref.MODES),
             "input_mode": draw.sampled_from(cref.INPUT_MODES),
             "direction": draw.sampled_from(cref.DIRECTIONS)}
    if v2 and attrs["rnn_mode"] == "lstm" and dims["N"] > 1 and draw.booleans():
        attrs["num_proj"] = draw.integers(1, dims["N"] - 1)
    if attrs["input_mode"] == "skip_input":
        dims = dict(dims, I=dims["N"])
    return dims, attrs


def attrs_for(spec, dims, attrs):
    """The spec's attrs completed with the ones that depend on dims (list lengths)."""
    fn = getattr(spec, "attrs_fn", None)
    return dict(attrs, **fn(dims, attrs)) if fn is not None else dict(attrs)


# ---------------------------------------------------------------------------------------------

def all_specs():
    """Every op spec, in a stable order (ids: name or name[variant])."""
    if not hasattr(all_specs, "_cache"):
        from op_specs_keras import keras_specs  # noqa: PLC0415 (they import this module)
        from op_specs_mps import mps_gru_specs, mps_specs  # noqa: PLC0415
        specs = (lstm_block_specs() + gru_specs() + cudnn_specs() + keras_specs() + mps_specs()
                 + mps_gru_specs())
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
