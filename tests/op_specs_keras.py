"""Catalogue specs (op_specs.py) of the Keras layers' ops TfRnn>KerasRNN and KerasRNNBackprop,
and of the mixed pair KerasRNNMixed / KerasRNNMixedBackprop (cc/ops/keras_rnn_ops.cc): one
layer, batch-major, the Keras weights kernel [I, K·H], recurrent_kernel [H, K·H] and bias
[K·H], optional sequence_lengths [B] and recurrent_mask [B, K·H] (both may be empty: none).
The mixed pair's sequences, states and mask are bfloat16 (half where a call asks for half),
its weights and reserve float32. Internal ops (no raw_ops wrapper): called through the
generated op functions."""
import tensorflow as tf

import op_specs as S

KERAS_ATTR_KEYS = ("rnn_mode", "activation", "recurrent_activation", "reset_after")
_ACTS = ("tanh", "sigmoid", "relu", "linear", "hard_sigmoid")
_MODES = ("lstm", "gru", "rnn_tanh", "rnn_relu")
KERAS_ATTRS = {"rnn_mode": "lstm"}


def _gates(mode):
    return {"lstm": 4, "gru": 3}.get(mode, 1)


def _derive(dims, attrs):
    d = dict(dims)
    d["K"] = _gates(attrs["rnn_mode"])
    # preprojected: the input holds the K·H input projections, and kernel has no rows
    pre = attrs.get("preprojected", False)
    d["X"] = d["K"] * d["H"] if pre else d["I"]
    d["W"] = 0 if pre else d["I"]
    aux = 1 if attrs["rnn_mode"] in ("lstm", "gru") else 0
    d["R"] = d["T"] * d["B"] * (d["K"] + aux + 1) * d["H"]   # float32 reserve elements
    return d


def _inputs():
    return [S.Input("input", ("B", "T", "X")), S.Input("input_h", ("B", "H")),
            S.Input("input_c", ("B", "H")), S.Input("kernel", ("W", "K*H")),
            S.Input("recurrent_kernel", ("H", "K*H")), S.Input("bias", ("K*H",)),
            S.Input("sequence_lengths", ("B",), "i32"),
            S.Input("recurrent_mask", ("B", "K*H"))]


def _space(draw, dims):
    attrs = {"rnn_mode": draw.sampled_from(_MODES),
             "activation": draw.sampled_from(_ACTS),
             "recurrent_activation": draw.sampled_from(_ACTS),
             "reset_after": draw.booleans(), "preprojected": draw.booleans()}
    return dims, attrs


def _fwd_space(draw, dims):
    dims, attrs = _space(draw, dims)
    attrs["is_training"] = draw.booleans()
    return dims, attrs


def _fwd_kw(rng, dims, attrs, dtype):
    d = _derive(dims, attrs)
    B, T, X, W, H, KH = d["B"], d["T"], d["X"], d["W"], d["H"], d["K"] * d["H"]
    lengths = [T - (b % 2) if T > 0 else 0 for b in range(B)]
    return dict(input=S._t(rng, (B, T, X), dtype), input_h=S._t(rng, (B, H), dtype),
                input_c=S._t(rng, (B, H), dtype), kernel=S._t(rng, (W, KH), dtype),
                recurrent_kernel=S._t(rng, (H, KH), dtype), bias=S._t(rng, (KH,), dtype),
                sequence_lengths=tf.constant(lengths, tf.int32, shape=[B]),
                recurrent_mask=S._t(rng, (B, KH), dtype, lo=0.0, hi=2.0))


# The mixed pair's inputs of its type T (the others are float32, or int32).
_MIXED_T = ("input", "input_h", "input_c", "recurrent_mask", "output_backprop",
            "output_h_backprop", "output_c_backprop")


def _as_mixed(kw, dtype):
    """A call's kwargs for the mixed pair: its T inputs bfloat16 (or half), the rest float32."""
    t = dtype if dtype in (S.F16, S.BF16) else S.BF16
    return {k: v if v.dtype == tf.int32 else tf.cast(v, t if k in _MIXED_T else S.F32)
            for k, v in kw.items()}


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


def keras_specs(mixed=False):
    """The forward and backprop specs of the Keras op pair, or of the mixed pair."""
    fwd_op, bwd_op = (("tf_rnn_keras_rnn_mixed", "tf_rnn_keras_rnn_mixed_backprop") if mixed
                      else ("tf_rnn_keras_rnn", "tf_rnn_keras_rnn_backprop"))
    suffix = "Mixed" if mixed else ""

    def make_fwd(rng, dims, attrs, dtype):
        kw = _fwd_kw(rng, dims, attrs, dtype)
        return _as_mixed(kw, dtype) if mixed else kw
    base_dims = {"T": 4, "B": 2, "I": 5, "H": 3}
    zero = {"T": True, "B": True, "I": True, "H": False}
    links = {"K": "", "R": "TBH", "X": "I", "W": "I"}
    free = frozenset({("input", 1)})          # the time axis: sequence_lengths stay valid
    empty_ok = frozenset({"sequence_lengths"})   # [0]: every row has every step
    specs = []

    def fwd_call(kw, attrs):
        return S.flatten(getattr(S._lib(), fwd_op)(**kw, **attrs))

    def fwd_shapes(dims, attrs):
        d = _derive(dims, attrs)
        lstm = attrs["rnn_mode"] == "lstm"
        return [(d["B"], d["T"], d["H"]), (d["B"], d["H"]), (d["B"], d["H"]) if lstm else (0,),
                None]

    # The forward as the layers call it in training, and a preprojected input at inference
    # (the kernel without rows; the bfloat16 op's words road once read past it).
    for variant, attrs in (("", KERAS_ATTRS),
                           ("preprojected-inference",
                            dict(KERAS_ATTRS, preprojected=True, is_training=False))):
        specs.append(S.OpSpec(
            name="KerasRNN" + suffix, inputs=_inputs(), call=fwd_call, make=make_fwd,
            out_shapes=fwd_shapes, dims=dict(base_dims), attrs=dict(attrs), derive=_derive,
            zero_ok=dict(zero), free=free, empty_ok=empty_ok, links=links, values=_values,
            attr_space=_fwd_space, wrapper=False, nan_input="input"))
        specs[-1].variant = variant

    def bwd_make(rng, dims, attrs, dtype):
        kw = make_fwd(rng, dims, attrs, dtype)
        y, hn, cn, reserve = getattr(S._lib(), fwd_op)(**kw, **attrs, is_training=True)
        kw.update(output_backprop=S._t(rng, y.shape, y.dtype),
                  output_h_backprop=S._t(rng, hn.shape, hn.dtype),
                  output_c_backprop=S._t(rng, hn.shape, hn.dtype), reserve_space=reserve)
        return kw

    def bwd_call(kw, attrs):
        return S.flatten(getattr(S._lib(), bwd_op)(**kw, **attrs))

    def bwd_shapes(dims, attrs):
        d = _derive(dims, attrs)
        B, T, X, W, H, KH = d["B"], d["T"], d["X"], d["W"], d["H"], d["K"] * d["H"]
        return [(B, T, X), (B, H), (B, H), (W, KH), (H, KH), (KH,)]

    ins = _inputs() + [S.Input("output_backprop", ("B", "T", "H")),
                       S.Input("output_h_backprop", ("B", "H")),
                       S.Input("output_c_backprop", ("B", "H")),
                       S.Input("reserve_space", ("R",))]
    specs.append(S.OpSpec(
        name="KerasRNN" + suffix + "Backprop", inputs=ins, call=bwd_call, make=bwd_make,
        out_shapes=bwd_shapes, dims=dict(base_dims), attrs=dict(KERAS_ATTRS), derive=_derive,
        zero_ok=dict(zero), free=frozenset(), empty_ok=empty_ok, links=links, values=_values,
        attr_space=_space, wrapper=False, nan_input="input"))
    return specs
