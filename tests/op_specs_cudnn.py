"""Catalogue specs (op_specs.py) of the cuDNN RNN family: CudnnRNN, CudnnRNNV2, CudnnRNNV3, their
backprops, ParamsSize and the canonical conversions (ParamsToCanonical, CanonicalToParams and
their V2)."""
import numpy as np
import tensorflow as tf

import cudnn_reference as cref
from op_specs import F32, INT32_MAX, Input, OpSpec, _ours, _t, flatten

# ---------------------------------------------------------------------------------------------
# cuDNN RNN family
# ---------------------------------------------------------------------------------------------

CUDNN_ATTRS = {"rnn_mode": "lstm", "input_mode": "linear_input", "direction": "bidirectional"}


def _kw_of(dims, attrs):
    return dict(mode=attrs["rnn_mode"], num_layers=dims["L"], num_units=dims["H"],
                input_size=dims["I"], input_mode=attrs["input_mode"],
                direction=attrs["direction"], num_proj=attrs.get("num_proj", 0))


def _cudnn_derive(dims, attrs):
    d = dict(dims)
    d["D"] = cref.num_dirs(attrs["direction"])
    d["Hs"] = attrs.get("num_proj", 0) or d["H"]
    d["P"] = cref.params_size(**_kw_of(d, attrs)) if d["L"] > 0 and d["H"] > 0 else 0
    return d


def _tm(attrs):
    return attrs.get("time_major", True)


def _cudnn_inputs(v3, backprop):
    def x_shape(tm):
        return ("T", "B", "I") if tm else ("B", "T", "I")
    ins = [Input("input", ("T", "B", "I")), Input("input_h", ("L*D", "B", "Hs")),
           Input("input_c", ("L*D", "B", "H")), Input("params", ("P",))]
    if v3:
        ins.append(Input("sequence_lengths", ("B",), "i32"))
    if backprop:
        ins += [Input("output", ("T", "B", "D*Hs")), Input("output_h", ("L*D", "B", "Hs")),
                Input("output_c", ("L*D", "B", "H")), Input("output_backprop", ("T", "B", "D*Hs")),
                Input("output_h_backprop", ("L*D", "B", "Hs")),
                Input("output_c_backprop", ("L*D", "B", "H")), Input("reserve_space", ("R",))]
        if v3 is not None:
            ins.append(Input("host_reserved", ("HR",), "i8"))
    return ins


def _cudnn_fwd_kw(rng, dims, attrs, dtype, v3):
    d = _cudnn_derive(dims, attrs)
    T, B, I, H, L, D, Hs = (d[k] for k in ("T", "B", "I", "H", "L", "D", "Hs"))
    tm = _tm(attrs)
    kw = {"input": _t(rng, (T, B, I) if tm else (B, T, I), dtype, scale=1.0),
          "input_h": _t(rng, (L * D, B, Hs) if tm else (B, L * D, Hs), dtype),
          "input_c": _t(rng, (L * D, B, H) if tm else (B, L * D, H), dtype),
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
            if attrs["rnn_mode"] == "lstm" and dims["H"] > 1 and draw.booleans():
                attrs["num_proj"] = draw.integers(1, dims["H"] - 1)
        if attrs["input_mode"] == "skip_input":
            dims = dict(dims, I=dims["H"])
        return dims, attrs
    return space


def _cudnn_shapes(d, attrs, time_major=True):
    T, B, I, H, L, D, Hs = (d[k] for k in ("T", "B", "I", "H", "L", "D", "Hs"))
    tm = time_major
    x = (T, B, I) if tm else (B, T, I)
    h = (L * D, B, Hs) if tm else (B, L * D, Hs)
    c = (L * D, B, H) if tm else (B, L * D, H)
    y = (T, B, D * Hs) if tm else (B, T, D * Hs)
    return x, h, c, y


def cudnn_specs():
    specs = []
    base_dims = {"T": 4, "B": 2, "I": 5, "H": 3, "L": 2}
    zero = {"T": True, "B": True, "I": True, "H": False, "L": False}
    links = {"P": "IHLD", "Hs": "H", "R": "TBIHLD", "HR": ""}

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
                            lambda kw, a: (kw, dict(a, num_proj=dims["H"] + 1)),
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
                "num_units": tf.constant(dims["H"], tf.int32),
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
        out.append(("num_proj>num_units", lambda kw, a: (kw, dict(a, num_proj=dims["H"] + 1)),
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
        out_shapes=lambda d, a: [(1,)], dims={"L": 2, "H": 3, "I": 5},
        attrs=dict(CUDNN_ATTRS, T=F32, S=tf.int64), zero_ok={"L": False, "H": False, "I": False},
        values=ps_values, nan_input=None, attr_space=ps_space))

    def canon_shapes(dims, attrs):
        specs_ = cref.layer_specs(**_kw_of(dims, attrs))
        w, b = [], []
        for sp in specs_:
            K, H, Hs, P = sp["K"], sp["H"], sp["Hs"], sp["P"]
            w += [(H, sp["in"])] * K + [(H, Hs)] * K + ([(P, H)] if P else [])
            b += [(H,)] * (2 * K)
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
            out_shapes=out_shapes, dims={"L": 2, "H": 3, "I": 5}, attrs=dict(CUDNN_ATTRS),
            derive=_cudnn_derive, zero_ok={"L": False, "H": False, "I": False},
            links={"P": "IHLD"}, values=p2c_values, nan_input="params",
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
            dims={"L": 2, "H": 3, "I": 5}, attrs=dict(CUDNN_ATTRS), derive=_cudnn_derive,
            zero_ok={"L": False, "H": False, "I": False}, values=c2p_values,
            nan_input="weights", attr_space=lambda draw, dims, v2=v2: _canon_space(draw, dims, v2))
        specs.append(spec)
    return specs


def _canon_space(draw, dims, v2):
    attrs = {"rnn_mode": draw.sampled_from(cref.MODES),
             "input_mode": draw.sampled_from(cref.INPUT_MODES),
             "direction": draw.sampled_from(cref.DIRECTIONS)}
    if v2 and attrs["rnn_mode"] == "lstm" and dims["H"] > 1 and draw.booleans():
        attrs["num_proj"] = draw.integers(1, dims["H"] - 1)
    if attrs["input_mode"] == "skip_input":
        dims = dict(dims, I=dims["H"])
    return dims, attrs

