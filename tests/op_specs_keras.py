"""Catalogue specs (op_specs.py) of the Keras layers' ops TfRnn>KerasRNN and KerasRNNBackprop:
CudnnRNNV3 / CudnnRNNBackpropV3 plus recurrent_mask [B, D·K·N] and the Keras attrs. Internal ops
(no raw_ops wrapper): called through the generated op functions."""
import tensorflow as tf

import op_specs as S

KERAS_ATTR_KEYS = ("activation", "recurrent_activation", "reset_after")
_ACTS = ("tanh", "sigmoid", "relu", "linear", "hard_sigmoid")


def _gates(mode):
    return {"lstm": 4, "gru": 3}.get(mode, 1)


def _derive(dims, attrs):
    d = S._cudnn_derive(dims, attrs)
    d["K"] = _gates(attrs["rnn_mode"])
    return d


def _space(backprop):
    def space(draw, dims):
        dims, attrs = S._cudnn_space("V3", backprop)(draw, dims)
        attrs["num_proj"] = 0          # a recurrent mask needs one layer, no projection
        attrs["activation"] = draw.sampled_from(_ACTS)
        attrs["recurrent_activation"] = draw.sampled_from(_ACTS)
        attrs["reset_after"] = draw.booleans()
        return dict(dims, L=1), attrs
    return space


def _attrs(attrs, backprop):
    a = S._cudnn_fwd_attrs(attrs, "V3")
    if backprop:
        a.pop("is_training", None)
    a.update({k: v for k, v in attrs.items() if k in KERAS_ATTR_KEYS})
    return a


def _mask(rng, dims, attrs, dtype):
    d = _derive(dims, attrs)
    return S._t(rng, (d["B"], d["D"] * d["K"] * d["N"]), dtype, lo=0.0, hi=2.0)


def _fwd_kw(rng, dims, attrs, dtype):
    kw = S._cudnn_fwd_kw(rng, dims, attrs, dtype, True)
    kw["recurrent_mask"] = _mask(rng, dims, attrs, dtype)
    return kw


def _values(dims, attrs):
    T, B = dims["T"], dims["B"]
    out = [("activation=softplus", lambda kw, a: (kw, dict(a, activation="softplus")),
            {"activation"}),
           ("recurrent_mask=[B, 1]", lambda kw, a: (dict(
               kw, recurrent_mask=tf.ones([B, 1], kw["input"].dtype)), a), {"recurrent_mask"})]
    for v in (-1, T + 1):
        out.append((f"sequence_lengths[0]={v}", lambda kw, a, v=v: (dict(
            kw, sequence_lengths=tf.constant([v] + [T] * (B - 1), tf.int32)), a),
            {"sequence_lengths"}))
    return out


def keras_specs():
    base_dims = {"T": 4, "B": 2, "I": 5, "N": 3, "L": 1}
    zero = {"T": True, "B": True, "I": True, "N": False, "L": False}
    links = {"P": "INLD", "Hs": "N", "R": "TBINLD", "HR": "", "K": ""}
    mask_in = S.Input("recurrent_mask", ("B", "D*K*N"))
    specs = []

    def fwd_call(kw, attrs):
        return S.flatten(S._lib().tf_rnn_keras_rnn(**kw, **_attrs(attrs, False)))

    def fwd_shapes(dims, attrs):
        d = _derive(dims, attrs)
        x, h, c, y = S._cudnn_shapes(d, attrs, S._tm(attrs))
        return [y, h, c if attrs["rnn_mode"] == "lstm" else (), None, None]

    specs.append(S.OpSpec(
        name="KerasRNN", inputs=S._cudnn_inputs(True, False) + [mask_in], call=fwd_call,
        make=_fwd_kw, out_shapes=fwd_shapes, dims=dict(base_dims),
        attrs=dict(S.CUDNN_ATTRS), derive=_derive, zero_ok=dict(zero),
        free=frozenset({("input", 0)}), links=links, values=_values,
        attr_space=_space(False), wrapper=False, nan_input="input"))

    def bwd_make(rng, dims, attrs, dtype):
        kw = _fwd_kw(rng, dims, attrs, dtype)
        fa = dict(_attrs(attrs, True), is_training=True)
        y, hn, cn, reserve, host = S._lib().tf_rnn_keras_rnn(**kw, **fa)
        kw.update(output=y, output_h=hn, output_c=cn, reserve_space=reserve, host_reserved=host,
                  output_backprop=S._t(rng, y.shape, dtype),
                  output_h_backprop=S._t(rng, hn.shape, dtype),
                  output_c_backprop=S._t(rng, cn.shape, dtype))
        return kw

    def bwd_call(kw, attrs):
        return S.flatten(S._lib().tf_rnn_keras_rnn_backprop(**kw, **_attrs(attrs, True)))

    def bwd_shapes(dims, attrs):
        d = _derive(dims, attrs)
        x, h, c, y = S._cudnn_shapes(d, attrs, S._tm(attrs))
        return [x, h, c if attrs["rnn_mode"] == "lstm" else None, (d["P"],)]

    ins = S._cudnn_inputs(True, True)
    ins.insert(5, mask_in)
    specs.append(S.OpSpec(
        name="KerasRNNBackprop", inputs=ins, call=bwd_call, make=bwd_make,
        out_shapes=bwd_shapes, dims=dict(base_dims), attrs=dict(S.CUDNN_ATTRS), derive=_derive,
        zero_ok=dict(zero), free=frozenset({("host_reserved", 0), ("rank", "host_reserved")}),
        empty_ok=frozenset({"host_reserved"}), links=links, values=_values,
        attr_space=_space(True), wrapper=False, nan_input="input"))
    return specs
