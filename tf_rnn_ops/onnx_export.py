"""ONNX export of the Keras layers: tf2onnx handlers that turn ``TfRnn>KerasRNN`` into ONNX
``LSTM``, ``GRU`` and ``RNN`` nodes.

    import tf_rnn_ops, tf2onnx
    proto, _ = tf2onnx.convert.from_function(tf.function(model), input_signature=[...])

``import tf_rnn_ops`` calls ``install()``: it registers the handlers in tf2onnx's global
registry (``tf2onnx.handler.tf_op``) at once if tf2onnx is already imported, else when it is
first imported (a ``sys.meta_path`` hook; tf2onnx is not imported until then).

One op becomes one node (``direction="forward"``; ``go_backwards`` reverses the input before
the op, as in TF). The two ops of a ``keras.layers.Bidirectional`` become one node with
``direction="bidirectional"``: the backward op's input is the forward op's input reversed in
time, along whole rows (``ReverseV2``) without a mask, within each row's length
(``ReverseSequence`` of the one compaction both layers share, keras.py ``_compact``) with one,
and then both ops take the same lengths; the handler recognises either form before or after
tf2onnx has converted it. The layouts are converted here: the ONNX nodes
run time-major (``layout=0``, which every runtime has), W/R/B in ONNX gate order (LSTM i o f c,
GRU z r h), ``sequence_lens`` from the op's ``sequence_lengths``. A row whose length is 0 keeps
its initial state (``Where``; onnxruntime gives zeros). Steps past a row's length are zeros in
both.

No ONNX equivalent, so the handler raises ``ValueError`` naming the node and why (tf2onnx's
``from_function`` / ``from_keras`` convert with ``continue_on_error=True``: they log it and leave
the op unconverted in the model): a non-empty
``recurrent_mask`` (Keras recurrent dropout in a training call), ``preprojected`` input (input
dropout with ``implementation=1`` in a training call), an activation ONNX has no name for.
"""
import importlib.abc
import importlib.util
import sys
import threading

import numpy as np

OP = "TfRnn>KerasRNN"

_GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}
_ONNX_OP = {"lstm": "LSTM", "gru": "GRU", "rnn_tanh": "RNN", "rnn_relu": "RNN"}
# ONNX block k is Keras block _ORDER[k]: Keras LSTM i f c o -> ONNX i o f c; GRU z r h both.
_ORDER = {"lstm": (0, 3, 1, 2), "gru": (0, 1, 2), "rnn_tanh": (0,), "rnn_relu": (0,)}
# The op's activation names as ONNX RNN activations (name, alpha, beta). Keras 3's
# hard_sigmoid is relu6(x + 3) / 6 = clip(x / 6 + 0.5, 0, 1).
_ACTS = {"tanh": ("Tanh",), "sigmoid": ("Sigmoid",), "relu": ("Relu",),
         "linear": ("Affine", 1.0, 0.0), "hard_sigmoid": ("HardSigmoid", 1.0 / 6.0, 0.5)}

_INT64 = 7   # onnx.TensorProto.INT64
_lock = threading.Lock()
_registered = False


def _attr(node, name, default=None):
    value = node.get_attr_value(name, default)
    return value.decode() if isinstance(value, bytes) else value


def _fail(node, what):
    raise ValueError(f"tf_rnn_ops ONNX export: {OP} node '{node.name}': {what} has no ONNX "
                     "equivalent (ONNX LSTM/GRU/RNN cannot express it), so the layer cannot be "
                     "exported; export the model for inference (training=False) with the "
                     "supported activations (tanh, sigmoid, relu, linear, hard_sigmoid).")


def _check(ctx, node):
    """(rnn_mode, ONNX activations) of a node the handler can convert, else ValueError."""
    mode = _attr(node, "rnn_mode")
    if mode not in _GATES:
        _fail(node, f"rnn_mode {mode!r}")
    if _attr(node, "preprojected", False):
        _fail(node, "preprojected input (Keras input dropout with implementation=1 in a "
                    "training call: a different input mask per gate)")
    shape = ctx.get_shape(node.input[7])
    if shape is None or len(shape) != 1 or shape[0] != 0:
        _fail(node, "a recurrent_mask (Keras recurrent dropout in a training call: a mask on "
                    "h_prev per gate)")
    if mode == "rnn_tanh":
        return mode, [_ACTS["tanh"]]
    if mode == "rnn_relu":
        return mode, [_ACTS["relu"]]
    act, ract = _attr(node, "activation", "tanh"), _attr(node, "recurrent_activation", "sigmoid")
    for name, value in (("activation", act), ("recurrent_activation", ract)):
        if value not in _ACTS:
            _fail(node, f"{name} {value!r}")
    acts = [ract, act, act] if mode == "lstm" else [ract, act]
    return mode, [_ACTS[a] for a in acts]


def _hidden(ctx, node):
    for inp, axis in ((4, 0), (1, 1)):
        shape = ctx.get_shape(node.input[inp])
        if shape and len(shape) == 2 and shape[axis] > 0:
            return shape[axis]
    _fail(node, "an unknown number of units (recurrent_kernel and input_h have no static shape)")
    return None


def _has_lengths(ctx, node):
    """False where sequence_lengths is [0] (every row runs every step)."""
    return ctx.get_shape(node.input[6]) != [0]


def _weights(ctx, node, mode, units):
    """W [1, K·H, I], R [1, K·H, H], B [1, 2·K·H] in ONNX gate order: numpy arrays where the
    weights are constants (frozen variables), else tensor names of ONNX ops computing them."""
    from tf2onnx.graph_builder import GraphBuilder
    k = _GATES[mode]
    idx = np.concatenate([np.arange(j * units, (j + 1) * units) for j in _ORDER[mode]])
    kernel, recurrent, bias = (node.inputs[i] for i in (3, 4, 5))
    if all(n.is_const() for n in (kernel, recurrent, bias)):
        w = kernel.get_tensor_value(as_list=False)[:, idx].T[None]
        r = recurrent.get_tensor_value(as_list=False)[:, idx].T[None]
        b = bias.get_tensor_value(as_list=False).reshape(-1, k * units)[:, idx]
        if b.shape[0] == 1:   # the input bias only: no recurrent bias
            b = np.concatenate([b, np.zeros_like(b)])
        return w, r, b.reshape(1, -1)
    gb = GraphBuilder(ctx)
    index = _const(ctx, f"{node.name}_gate_order", idx.astype(np.int64)).output[0]

    def reorder(name, transpose):
        out = ctx.make_node("Gather", [name, index], attr={"axis": 1}).output[0]
        if transpose:
            out = ctx.make_node("Transpose", [out], attr={"perm": [1, 0]}).output[0]
        return gb.make_unsqueeze({"data": out, "axes": [0]}) if transpose else out

    w, r = reorder(node.input[3], True), reorder(node.input[4], True)
    shape = _const(ctx, f"{node.name}_bias_shape", np.array([-1, k * units], np.int64))
    b = reorder(ctx.make_node("Reshape", [node.input[5], shape.output[0]]).output[0], False)
    if len(ctx.get_shape(node.input[5]) or [0]) == 1:
        zeros = ctx.make_node("Mul", [b, ctx.make_const(
            f"{node.name}_zero", np.zeros([], _np_dtype(ctx, node))).output[0]]).output[0]
        b = ctx.make_node("Concat", [b, zeros], attr={"axis": 0}).output[0]
    flat = _const(ctx, f"{node.name}_b_shape", np.array([1, -1], np.int64)).output[0]
    return w, r, ctx.make_node("Reshape", [b, flat]).output[0]


def _const(ctx, tag, value):
    from tf2onnx import utils
    return ctx.make_const(utils.make_name(tag), value)


def _np_dtype(ctx, node):
    from tf2onnx import utils
    return utils.map_onnx_to_numpy_type(ctx.get_dtype(node.output[0]))


def _tensor(ctx, node, value, tag):
    if isinstance(value, np.ndarray):
        return _const(ctx, f"{node.name}_{tag}", value.astype(_np_dtype(ctx, node))).output[0]
    return value


def _stack(ctx, node, values, tag):
    """One tensor: the directions' values concatenated along axis 0."""
    if len(values) == 1 or all(isinstance(v, np.ndarray) for v in values):
        return _tensor(ctx, node, np.concatenate(values) if len(values) > 1 else values[0], tag)
    names = [_tensor(ctx, node, v, f"{tag}{d}") for d, v in enumerate(values)]
    return ctx.make_node("Concat", names, attr={"axis": 0}).output[0]


def _convert(ctx, nodes):
    """nodes: [op] (forward) or [forward op, backward op] (one bidirectional node)."""
    from tf2onnx.graph_builder import GraphBuilder
    gb = GraphBuilder(ctx)
    fw = nodes[0]
    mode, acts = _check(ctx, fw)
    units = _hidden(ctx, fw)
    for other in nodes[1:]:
        if _check(ctx, other) != (mode, acts) or _hidden(ctx, other) != units:
            return False
    weights = [_weights(ctx, n, mode, units) for n in nodes]
    w, r, b = (_stack(ctx, fw, [ws[i] for ws in weights], "WRB"[i]) for i in range(3))
    lstm = mode == "lstm"
    lengths = fw.input[6] if _has_lengths(ctx, fw) else ""
    x = ctx.make_node("Transpose", [fw.input[0]], attr={"perm": [1, 0, 2]}).output[0]
    h0 = [gb.make_unsqueeze({"data": n.input[1], "axes": [0]}) for n in nodes]
    inputs = [x, w, r, b, lengths, _stack(ctx, fw, h0, "h0")]
    if lstm:
        c0 = [gb.make_unsqueeze({"data": n.input[2], "axes": [0]}) for n in nodes]
        inputs.append(_stack(ctx, fw, c0, "c0"))
    attr = {"hidden_size": units, "direction": "bidirectional" if len(nodes) == 2 else "forward",
            "activations": [a[0] for a in acts] * len(nodes)}
    params = [a for a in acts if len(a) == 3] * len(nodes)
    if params:   # onnxruntime reads alpha/beta for the activations that take them, in order
        attr["activation_alpha"] = [a[1] for a in params]
        attr["activation_beta"] = [a[2] for a in params]
    if mode == "gru":
        attr["linear_before_reset"] = 1 if _attr(fw, "reset_after", True) else 0
    outs = [(list(n.output), [ctx.get_shape(o) for o in n.output],
             [ctx.get_dtype(o) for o in n.output]) for n in nodes]
    h_in = [(n.input[1], n.input[2]) for n in nodes]
    for n in nodes:
        ctx.remove_node(n.name)
    rnn = ctx.make_node(_ONNX_OP[mode], inputs, attr=attr, output_count=3 if lstm else 2,
                        name=fw.name + "_onnx")
    zero_len = None
    if lengths:
        zero = _const(ctx, f"{fw.name}_zero_len", np.zeros([], np.int32)).output[0]
        zero_len = gb.make_unsqueeze({"data": ctx.make_node("Equal", [lengths, zero]).output[0],
                                      "axes": [1]})
    for d, (names, shapes, dtypes) in enumerate(outs):
        def pick(tensor, axis):
            index = _const(ctx, f"{fw.name}_dir{d}_{axis}", np.array(d, np.int64)).output[0]
            return ctx.make_node("Gather", [tensor, index], attr={"axis": axis}).output[0]

        y = pick(rnn.output[0], 1)              # [T, B, H]
        if d == 1 and lengths:   # the backward op's outputs in its own (processing) order:
            # each row's first `length` steps reversed (zeros past them stay in place)
            lens64 = ctx.make_node("Cast", [lengths], attr={"to": _INT64}).output[0]
            y = ctx.make_node("ReverseSequence", [y, lens64],
                              attr={"batch_axis": 1, "time_axis": 0}).output[0]
        elif d == 1:
            y = gb.make_slice({"data": y, "starts": [-1], "ends": [-(2 ** 62)], "axes": [0],
                               "steps": [-1]})
        ctx.make_node("Transpose", [y], attr={"perm": [1, 0, 2]}, outputs=[names[0]],
                      shapes=[shapes[0]], dtypes=[dtypes[0]])
        for i, src in ((1, 1), (2, 2)):
            if i == 2 and not lstm:
                if ctx.find_output_consumers(names[2]):
                    ctx.make_const(names[2], np.zeros([0], _np_dtype(ctx, fw)))
                continue
            state = pick(rnn.output[src], 0)
            if zero_len is None:
                ctx.make_node("Identity", [state], outputs=[names[i]], shapes=[shapes[i]],
                              dtypes=[dtypes[i]])
            else:   # a row of length 0 keeps its initial state (onnxruntime gives zeros)
                ctx.make_node("Where", [zero_len, h_in[d][i - 1], state], outputs=[names[i]],
                              shapes=[shapes[i]], dtypes=[dtypes[i]])
        if ctx.find_output_consumers(names[3]):
            ctx.make_const(names[3], np.zeros([0], _np_dtype(ctx, fw)))
    return True


# --- Bidirectional: which two ops are one layer's directions --------------------------------

def _perm_is(node, perm):
    return node is not None and node.type == "Transpose" and list(
        node.get_attr_value("perm", [])) == perm


def _dim_of(ctx, tensor, source, index):
    """Whether tensor is Gather(Shape(source), [index]) (a dimension of source)."""
    node = ctx.get_node_by_output(tensor)
    return (node is not None and node.type == "Gather" and node.get_attr_value("axis", 0) == 0
            and node.inputs[0].type == "Shape" and node.inputs[0].input[0] == source
            and _const_is(ctx, node.input[1], index))


def _reverse_of(ctx, node):
    """The tensor that node reverses along axis 1 (time) of [B, T, ...], else None: a
    ReverseV2 not yet converted, or as tf2onnx converts it (Transpose, ReverseSequence of
    every row's full length, Transpose)."""
    if node.type == "ReverseV2":
        ok = node.inputs[1].is_const() and _const_is(ctx, node.input[1], 1)
        return node.input[0] if ok and np.size(node.inputs[1].get_tensor_value()) == 1 else None
    if not _perm_is(node, [1, 0, 2]):
        return None
    rs = node.inputs[0]
    if (rs.type != "ReverseSequence" or rs.get_attr_value("batch_axis") != 1
            or rs.get_attr_value("time_axis") != 0 or not _perm_is(rs.inputs[0], [1, 0, 2])):
        return None
    x, seq = rs.inputs[0].input[0], rs.inputs[1]
    full = (seq.type == "Expand" and _dim_of(ctx, seq.input[0], x, 1)
            and _dim_of(ctx, seq.input[1], rs.input[0], 1))
    return x if full else None


def _same(ctx, a, b, depth=12):
    """Whether tensors a and b compute the same value: one tensor, equal constants, or one op
    (type and attributes) over the same inputs."""
    if a == b:
        return True
    na, nb = ctx.get_node_by_output(a), ctx.get_node_by_output(b)
    if depth == 0 or na is None or nb is None or na.type != nb.type:
        return False
    if na.is_const() and nb.is_const():
        va, vb = na.get_tensor_value(as_list=False), nb.get_tensor_value(as_list=False)
        return va.dtype == vb.dtype and va.shape == vb.shape and bool(np.all(va == vb))
    if (na.output.index(a) != nb.output.index(b) or len(na.input) != len(nb.input)
            or {k: v for k, v in na.attr.items() if not k.startswith("_")}
            != {k: v for k, v in nb.attr.items() if not k.startswith("_")}):
        return False
    return all(_same(ctx, x, y, depth - 1) for x, y in zip(na.input, nb.input))


def _canon(ctx, tensor):
    """(t, reversed): tensor is t, or t reversed along time, through Identity ops."""
    flip = False
    while True:
        node = ctx.get_node_by_output(tensor)
        if node is None:
            return tensor, flip
        if _reverse_of(ctx, node) is not None:
            tensor, flip = _reverse_of(ctx, node), not flip
        elif node.type == "Identity":
            tensor = node.input[0]
        else:
            return tensor, flip


def _const_is(ctx, tensor, value):
    node = ctx.get_node_by_output(tensor)
    return node is not None and node.is_const() and np.all(
        np.atleast_1d(node.get_tensor_value(as_list=False)) == value)


def _reversed_within(ctx, tensor):
    """(t, lengths) when tensor is t [B, T, ...] with each row's first lengths[b] steps
    reversed (TensorFlow's ReverseSequence, or as tf2onnx converts it), else None."""
    node = ctx.get_node_by_output(tensor)
    if node is None or node.type != "ReverseSequence":
        return None
    if node.get_attr("seq_dim") is not None:      # not converted yet
        ok = node.get_attr_value("seq_dim") == 1 and node.get_attr_value("batch_dim", 0) == 0
        return (node.input[0], node.input[1]) if ok else None
    if node.get_attr_value("time_axis") != 1 or node.get_attr_value("batch_axis") != 0:
        return None
    lengths = node.inputs[1]
    return node.input[0], lengths.input[0] if lengths.type == "Cast" else node.input[1]


def _direction_input(ctx, node):
    """(tensor, flip): what node's op reads, as (t, False) or (t, True) when it reads t
    reversed in time: along the whole row without lengths, within each row's length with
    them (a masked Bidirectional's backward op, keras.py)."""
    if not _has_lengths(ctx, node):
        return _canon(ctx, node.input[0])
    inner = _reversed_within(ctx, node.input[0])
    if inner is None:
        return node.input[0], False
    return inner[0], True


def _partner(ctx, node):
    """The op that is the other direction of node's Bidirectional layer: its input is node's
    input reversed in time (whole rows, or each row's unmasked steps when both have the same
    lengths), with the same attributes."""
    if ctx.get_rank(node.input[0]) != 3:
        return None
    mine = _direction_input(ctx, node)
    keys = ("rnn_mode", "activation", "recurrent_activation", "reset_after")
    for other in ctx.get_nodes():
        if (other is node or other.type != OP or other.need_skip()
                or _has_lengths(ctx, other) != _has_lengths(ctx, node)
                or any(_attr(other, k) != _attr(node, k) for k in keys)
                or ctx.get_shape(other.input[0]) != ctx.get_shape(node.input[0])):
            continue
        if _has_lengths(ctx, node) and not _same(ctx, node.input[6], other.input[6], 32):
            continue
        theirs = _direction_input(ctx, other)
        if _same(ctx, mine[0], theirs[0], 32) and mine[1] != theirs[1]:
            return other
    return None


class KerasRNNHandler:
    """tf2onnx handler of TfRnn>KerasRNN (registered by install())."""

    @classmethod
    def version_10(cls, ctx, node, **kwargs):
        _check(ctx, node)
        other = _partner(ctx, node)
        if other is not None:
            # The op whose input is not reversed is the ONNX forward direction.
            pair = [node, other] if not _direction_input(ctx, node)[1] else [other, node]
            if _convert(ctx, pair):
                # tf2onnx's loop still visits the partner (removed from the graph): skip it,
                # and let it print its debug summary, which reads node.graph.
                other.skip_conversion = True
                other.graph = ctx
                return
        _convert(ctx, [node])


# --- registration --------------------------------------------------------------------------

def register():
    """Registers the handler in tf2onnx's global registry (imports tf2onnx)."""
    global _registered
    with _lock:
        if _registered:
            return
        from tf2onnx.handler import tf_op
        tf_op(OP)(KerasRNNHandler)
        _registered = True


class _Loader(importlib.abc.Loader):
    """tf2onnx's own loader, registering the handler once tf2onnx has executed."""

    def __init__(self, inner):
        self._inner = inner

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        register()

    def __getattr__(self, name):
        return getattr(self._inner, name)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "tf2onnx":
            return None
        _uninstall_finder()
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


_finder = _Finder()


def _uninstall_finder():
    if _finder in sys.meta_path:
        sys.meta_path.remove(_finder)


def install():
    """Registers the handler now if tf2onnx is imported, else when it is first imported."""
    if "tf2onnx" in sys.modules:
        register()
    elif _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
