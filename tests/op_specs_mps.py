"""Catalogue specs (op_specs.py) of the MPSGraph-style ops TfRnn>LSTM / LSTMGradients and
TfRnn>GRU / GRUGradients, both families built from one description (_MpsFamily)."""
import dataclasses

import op_specs as S

@dataclasses.dataclass(frozen=True)
class _MpsFamily:
    """What the MPSGraph LSTM and GRU specs differ in."""
    fwd: str                 # forward op name (and the gradients op's)
    grad: str
    descriptor: str          # tf_rnn_ops.mps class and functions
    fwd_fn: str
    grad_fn: str
    K: int                   # gates
    optional: tuple          # optional operands, in input order
    fwd_out: str             # the forward output the gradients op takes after z_state
    final_grads: tuple       # optional final-state gradients of the gradients op
    with_grad: tuple         # optional operands with a gradient output, in output order
    base_attrs: dict         # attrs of the fixed specs
    bool_attrs: tuple        # descriptor booleans the attr space draws
    act_attrs: tuple         # descriptor activations the attr space draws


MPS_LSTM = _MpsFamily(
    fwd="LSTM", grad="LSTMGradients", descriptor="LSTMDescriptor", fwd_fn="lstm",
    grad_fn="lstm_gradients", K=4,
    optional=("input_weight", "bias", "init_state", "init_cell", "mask", "peephole"),
    fwd_out="cell_output_fwd", final_grads=("state_gradient", "cell_gradient"),
    with_grad=("input_weight", "bias", "peephole", "init_state", "init_cell"),
    base_attrs={"training": True, "produce_cell": True},
    bool_attrs=("bidirectional", "reverse", "produce_cell", "training", "forget_gate_last"),
    act_attrs=("input_gate_activation", "forget_gate_activation", "cell_gate_activation",
               "output_gate_activation", "activation"))
MPS_GRU = _MpsFamily(
    fwd="GRU", grad="GRUGradients", descriptor="GRUDescriptor", fwd_fn="gru",
    grad_fn="gru_gradients", K=3,
    optional=("input_weight", "bias", "init_state", "mask", "secondary_bias"),
    fwd_out="output_fwd", final_grads=("state_gradient",),
    with_grad=("input_weight", "bias", "init_state", "secondary_bias"),
    base_attrs={"training": True, "reset_after": True},
    bool_attrs=("bidirectional", "reverse", "training", "reset_gate_first", "reset_after",
                "flip_z"),
    act_attrs=("update_gate_activation", "reset_gate_activation", "output_gate_activation"))


def _mps_derive(dims, attrs):
    d = dict(dims)
    d["D"] = 2 if attrs.get("bidirectional") else 1
    return d


def _mps_operand_shape(fam, name, bidirectional):
    """Shape (expressions) of an optional operand, which is also its gradient's shape."""
    kh = f"{fam.K}*H"
    return {"input_weight": (f"D*{kh}", "I"), "bias": (f"D*{kh}",),
            "init_state": ("B", "D*H"), "init_cell": ("B", "D*H"), "mask": ("B", "D*H"),
            "peephole": ("D", kh) if bidirectional else (kh,),
            "secondary_bias": ("D*H",)}[name]


def _mps_family_inputs(fam, grad, bidirectional):
    kh = f"{fam.K}*H"
    r = ("D", kh, "H") if bidirectional else (kh, "H")
    ins = [S.Input("source", ("T", "B", "I")), S.Input("recurrent_weight", r)]
    if grad:
        ins += [S.Input("source_gradient", ("T", "B", "D*H")),
                S.Input("z_state", ("T", "B", f"D*{kh}")),
                S.Input(fam.fwd_out, ("T", "B", "D*H"))]
        ins += [S.Input(n, ("B", "D*H"), "opt") for n in fam.final_grads]
    ins += [S.Input(n, _mps_operand_shape(fam, n, bidirectional), "opt") for n in fam.optional]
    return ins


def _mps_family_specs(fam):
    from tf_rnn_ops import mps
    desc_cls = getattr(mps, fam.descriptor)
    desc_keys = [f.name for f in dataclasses.fields(desc_cls)]
    all_opt = fam.optional + fam.final_grads
    specs = []

    for grad in (False, True):
        def call(kw, attrs, grad=grad):
            d = desc_cls(**{k: v for k, v in attrs.items() if k in desc_keys})
            fn = getattr(mps, fam.grad_fn if grad else fam.fwd_fn)
            return S.flatten(fn(**kw, descriptor=d))

        def make(rng, dims, attrs, dtype, grad=grad):
            kw = {}
            present = attrs.get("present", all_opt)
            for inp in _mps_family_inputs(fam, grad, bool(attrs.get("bidirectional"))):
                if inp.kind == "opt" and inp.name not in present:
                    continue
                shape = tuple(int(eval(e, {}, _mps_derive(dims, attrs))) for e in inp.shape)
                kw[inp.name] = S._t(rng, shape, dtype,
                                  *((0.5, 1.0) if inp.name == "mask" else (None, None)))
            return kw

        def out_shapes(dims, attrs, grad=grad):
            d = _mps_derive(dims, attrs)
            T, B, I, H, D = (d[k] for k in ("T", "B", "I", "H", "D"))
            present = attrs.get("present", all_opt)
            if not grad:
                out = [(T, B, D * H)]
                if fam.fwd == "LSTM" and attrs.get("produce_cell"):
                    out.append((T, B, D * H))
                if attrs.get("training"):
                    out.append((T, B, D * fam.K * H))
                return out
            r = (D, fam.K * H, H) if D == 2 else (fam.K * H, H)
            out = [(T, B, I if "input_weight" in present else D * fam.K * H), r]
            for n in fam.with_grad:
                if n in present:
                    out.append(tuple(int(eval(e, {}, d))
                                     for e in _mps_operand_shape(fam, n, D == 2)))
            return out

        for bidi in (False, True):
            attrs = dict(fam.base_attrs, bidirectional=bidi)
            spec = S.OpSpec(
                name=fam.grad if grad else fam.fwd,
                inputs=_mps_family_inputs(fam, grad, bidi), call=call, make=make,
                out_shapes=out_shapes, dims={"T": 3, "B": 2, "I": 5, "H": 2}, attrs=attrs,
                derive=_mps_derive, zero_ok={"T": True, "B": True, "I": True, "H": False},
                free=frozenset({("source", 0)} if not grad else set()),
                empty_ok=frozenset({"z_state", fam.fwd_out}), values=None,
                attr_space=_mps_family_space(fam, grad), nan_input="source")
            spec.variant = "bidirectional" if bidi else ""
            specs.append(spec)
    return specs


def _mps_family_space(fam, grad):
    def space(draw, dims):
        from tf_rnn_ops import mps
        attrs = {k: draw.booleans() for k in fam.bool_attrs}
        if draw.booleans():
            for k in fam.act_attrs:
                attrs[k] = draw.sampled_from(mps.ACTIVATIONS)
        opts = fam.optional + (fam.final_grads if grad else ())
        # secondary_bias is only valid with reset_after.
        attrs["present"] = tuple(o for o in opts if draw.booleans() and
                                 (o != "secondary_bias" or attrs["reset_after"]))
        if "input_weight" not in attrs["present"]:   # source is projected already
            dims = dict(dims, I=(2 if attrs["bidirectional"] else 1) * fam.K * dims["H"])
        return dims, attrs
    return space


def mps_specs():
    return _mps_family_specs(MPS_LSTM)


def mps_gru_specs():
    return _mps_family_specs(MPS_GRU)
