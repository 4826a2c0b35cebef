"""Drop-in mirror of ``tf.raw_ops`` for the ops of this library.

``tf_rnn_ops.raw_ops.BlockLSTM(...)`` takes exactly the keyword arguments of
``tf.raw_ops.BlockLSTM(...)`` (keyword-only, like ``tf.raw_ops``) and runs ``TfRnn>BlockLSTM``.
Differences from stock, on purpose (see docs/DIFFERENCES.md):

* dtypes half, bfloat16, float32 and float64 (stock: half and float32);
* GRUBlockCell / GRUBlockCellGrad also run in half, bfloat16 and float64 (stock: float32);
* BlockLSTM / BlockLSTMV2 zero all seven outputs past ``seq_len_max`` (stock: only cs, h);
* ``seq_len_max`` outside ``[0, timelen]`` and wci/wcf/wco of the wrong length are
  ``InvalidArgumentError`` (stock aborts the process or reads out of bounds);
* LSTMBlockCellGrad never reuses an input buffer as an output before reading it;
* inputs whose dtype does not match raise ``InvalidArgumentError`` naming the input.
"""
import functools

import tensorflow as tf

from tf_rnn_ops._loader import load_library

__all__ = [
    "LSTMBlockCell",
    "LSTMBlockCellGrad",
    "BlockLSTM",
    "BlockLSTMV2",
    "BlockLSTMGrad",
    "BlockLSTMGradV2",
    "GRUBlockCell",
    "GRUBlockCellGrad",
]


def _keyword_only(fn):
    """Like tf.raw_ops: positional arguments are rejected."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if args:
            raise TypeError(f"{fn.__name__} only takes keyword args (possible keys: "
                            f"{list(fn.__code__.co_varnames[:fn.__code__.co_argcount])}). "
                            "Please pass these args as kwargs instead.")
        return fn(**kwargs)

    return wrapper


# Eager fast path of the single-step ops, which decoding loops call thousands of times: the
# inputs go straight to TensorFlow's eager executor (what the generated op function does
# first, without its Python layers). Anything unusual (not eager, inputs that are not tensors
# of one dtype, a kernel error) goes the validating way instead, which converts the inputs,
# names a wrong input and raises the kernel's own error.
try:
    from tensorflow.python import pywrap_tfe as _pywrap_tfe
    from tensorflow.python.eager import context as _context
    _fast_execute = _pywrap_tfe.TFE_Py_FastPathExecute
except (ImportError, AttributeError):  # a TensorFlow without them: always the validating way
    _fast_execute = None


def _try_fast(op, name, *flat):
    """Runs TfRnn>`op` with `flat` (inputs in op order, then attr name/value pairs) on the
    eager fast path and returns the op's output namedtuple; None when not executing eagerly or
    when the fast path raises (the caller then takes the validating way)."""
    if _fast_execute is not None:
        ctx = _context.context()
        if ctx._thread_local_data.is_eager:  # noqa: SLF001 (what generated op code reads)
            try:
                return _OUT[op]._make(_fast_execute(ctx, op, name, *flat))
            except Exception:  # noqa: BLE001 (the validating way raises the right error)
                pass
    return None


def _as_float(v):
    return float(v) if type(v) is int else v  # noqa: E721 (not bool)


def _outputs(op):
    """The output namedtuple class of the generated op function of `op` (TfRnn>Name)."""
    return getattr(load_library(), f"_TfRnn_{op.split('>', 1)[1]}Output")


def _invalid(op, message):
    return tf.errors.InvalidArgumentError(None, None, f"TfRnn>{op}: {message}")


_ALLOWED = frozenset((tf.float16, tf.bfloat16, tf.float32, tf.float64))


def _dtype(t):
    """The dtype of a tensor or variable; a reference (a graph-mode variable made with
    use_resource=False, or the result of tf.compat.v1.assign) counts as its base dtype, as
    stock op wrappers take it."""
    return t.dtype.base_dtype


def _is_tensor(value):
    return isinstance(value, (tf.Tensor, tf.Variable))


def _same_dtype(op, **tensors):
    """Converts tensors of attr T and checks they share one dtype; names the first mismatch."""
    # Fast path: all already tensors of one allowed dtype.
    if all(_is_tensor(t) for t in tensors.values()):
        dtypes = {_dtype(t) for t in tensors.values()}
        if len(dtypes) == 1 and next(iter(dtypes)) in _ALLOWED:
            return tensors
    out, first = {}, None
    for name, value in tensors.items():
        t = value if _is_tensor(value) else tf.convert_to_tensor(
            value, dtype=first[1] if first else None)
        if first is None:
            first = (name, _dtype(t))
        elif _dtype(t) != first[1]:
            raise _invalid(op, f"input '{name}' has dtype {_dtype(t).name} but '{first[0]}' has "
                               f"{first[1].name}; all of them must have one dtype T")
        out[name] = t
    if first[1] not in _ALLOWED:
        raise _invalid(op, f"input '{first[0]}' has dtype {first[1].name}; T must be one of "
                           "half, bfloat16, float32, float64")
    return out


def _of_dtype(op, name, value, dtype):
    """An integer input: a tensor must have `dtype` (else InvalidArgumentError naming it);
    anything else is converted to it."""
    if _is_tensor(value):
        if _dtype(value) != dtype:
            raise _invalid(op, f"input '{name}' must be {dtype.name}, got {_dtype(value).name}")
        return value
    return tf.convert_to_tensor(value, dtype=dtype)


def _int64_scalar(op, name, value):
    return _of_dtype(op, name, value, tf.int64)


# The four single-step ops take the eager fast path first (_try_fast); keyword-only through
# the signature (a positional argument is Python's TypeError) rather than the _keyword_only
# wrapper, one Python call less per step.
def LSTMBlockCell(*, x, cs_prev, h_prev, w, wci, wcf, wco, b, forget_bias=1, cell_clip=3,
                  use_peephole=False, name=None):
    # The fast path takes a float attr only as a Python float (the default 1 is an int).
    out = _try_fast("TfRnn>LSTMBlockCell", name, x, cs_prev, h_prev, w, wci, wcf, wco, b,
                    "forget_bias", _as_float(forget_bias), "cell_clip", _as_float(cell_clip),
                    "use_peephole", use_peephole)
    if out is not None:
        return out
    t = _same_dtype("LSTMBlockCell", x=x, cs_prev=cs_prev, h_prev=h_prev, w=w, wci=wci, wcf=wcf,
                    wco=wco, b=b)
    return load_library().tf_rnn_lstm_block_cell(
        **t, forget_bias=forget_bias, cell_clip=cell_clip, use_peephole=use_peephole, name=name)


def LSTMBlockCellGrad(*, x, cs_prev, h_prev, w, wci, wcf, wco, b, i, cs, f, o, ci, co,
                      cs_grad, h_grad, use_peephole, name=None):
    out = _try_fast("TfRnn>LSTMBlockCellGrad", name, x, cs_prev, h_prev, w, wci, wcf, wco, b, i,
                    cs, f, o, ci, co, cs_grad, h_grad, "use_peephole", use_peephole)
    if out is not None:
        return out
    t = _same_dtype("LSTMBlockCellGrad", x=x, cs_prev=cs_prev, h_prev=h_prev, w=w, wci=wci,
                    wcf=wcf, wco=wco, b=b, i=i, cs=cs, f=f, o=o, ci=ci, co=co, cs_grad=cs_grad,
                    h_grad=h_grad)
    return load_library().tf_rnn_lstm_block_cell_grad(**t, use_peephole=use_peephole, name=name)


@_keyword_only
def BlockLSTM(seq_len_max, x, cs_prev, h_prev, w, wci, wcf, wco, b, forget_bias=1, cell_clip=3,
              use_peephole=False, name=None):
    slm = _int64_scalar("BlockLSTM", "seq_len_max", seq_len_max)
    t = _same_dtype("BlockLSTM", x=x, cs_prev=cs_prev, h_prev=h_prev, w=w, wci=wci, wcf=wcf,
                    wco=wco, b=b)
    return load_library().tf_rnn_block_lstm(
        seq_len_max=slm, **t, forget_bias=forget_bias, cell_clip=cell_clip,
        use_peephole=use_peephole, name=name)


@_keyword_only
def BlockLSTMV2(seq_len_max, x, cs_prev, h_prev, w, wci, wcf, wco, b, cell_clip=0,
                use_peephole=False, name=None):
    slm = _int64_scalar("BlockLSTMV2", "seq_len_max", seq_len_max)
    t = _same_dtype("BlockLSTMV2", x=x, cs_prev=cs_prev, h_prev=h_prev, w=w, wci=wci, wcf=wcf,
                    wco=wco, b=b)
    return load_library().tf_rnn_block_lstmv2(
        seq_len_max=slm, **t, cell_clip=cell_clip, use_peephole=use_peephole, name=name)


def _block_lstm_grad(op, fn, seq_len_max, x, cs_prev, h_prev, w, wci, wcf, wco, b, i, cs, f, o,
                     ci, co, h, cs_grad, h_grad, use_peephole, name):
    slm = _int64_scalar(op, "seq_len_max", seq_len_max)
    t = _same_dtype(op, x=x, cs_prev=cs_prev, h_prev=h_prev, w=w, wci=wci, wcf=wcf, wco=wco, b=b,
                    i=i, cs=cs, f=f, o=o, ci=ci, co=co, h=h, cs_grad=cs_grad, h_grad=h_grad)
    return getattr(load_library(), fn)(seq_len_max=slm, **t, use_peephole=use_peephole,
                                       name=name)


@_keyword_only
def BlockLSTMGrad(seq_len_max, x, cs_prev, h_prev, w, wci, wcf, wco, b, i, cs, f, o, ci, co, h,
                  cs_grad, h_grad, use_peephole, name=None):
    return _block_lstm_grad("BlockLSTMGrad", "tf_rnn_block_lstm_grad", seq_len_max, x, cs_prev,
                            h_prev, w, wci, wcf, wco, b, i, cs, f, o, ci, co, h, cs_grad, h_grad,
                            use_peephole, name)


@_keyword_only
def BlockLSTMGradV2(seq_len_max, x, cs_prev, h_prev, w, wci, wcf, wco, b, i, cs, f, o, ci, co,
                    h, cs_grad, h_grad, use_peephole, name=None):
    return _block_lstm_grad("BlockLSTMGradV2", "tf_rnn_block_lstm_grad_v2", seq_len_max, x,
                            cs_prev, h_prev, w, wci, wcf, wco, b, i, cs, f, o, ci, co, h,
                            cs_grad, h_grad, use_peephole, name)


def GRUBlockCell(*, x, h_prev, w_ru, w_c, b_ru, b_c, name=None):
    out = _try_fast("TfRnn>GRUBlockCell", name, x, h_prev, w_ru, w_c, b_ru, b_c)
    if out is not None:
        return out
    t = _same_dtype("GRUBlockCell", x=x, h_prev=h_prev, w_ru=w_ru, w_c=w_c, b_ru=b_ru, b_c=b_c)
    return load_library().tf_rnn_gru_block_cell(**t, name=name)


def GRUBlockCellGrad(*, x, h_prev, w_ru, w_c, b_ru, b_c, r, u, c, d_h, name=None):
    out = _try_fast("TfRnn>GRUBlockCellGrad", name, x, h_prev, w_ru, w_c, b_ru, b_c, r, u, c,
                    d_h)
    if out is not None:
        return out
    t = _same_dtype("GRUBlockCellGrad", x=x, h_prev=h_prev, w_ru=w_ru, w_c=w_c, b_ru=b_ru,
                    b_c=b_c, r=r, u=u, c=c, d_h=d_h)
    return load_library().tf_rnn_gru_block_cell_grad(**t, name=name)


class _OutputClasses(dict):
    """op -> output namedtuple class, looked up once (the library loads on first use)."""

    def __missing__(self, op):
        cls = self[op] = _outputs(op)
        return cls


_OUT = _OutputClasses()


# --- cuDNN RNN family (CPU kernels; stock TensorFlow has none) -----------------------------

def _cudnn_attrs(dropout, seed, seed2, rnn_mode, input_mode, direction):
    return dict(dropout=dropout, seed=seed, seed2=seed2, rnn_mode=rnn_mode,
                input_mode=input_mode, direction=direction)


def _int32(op, name, value):
    return _of_dtype(op, name, value, tf.int32)


@_keyword_only
def CudnnRNN(input, input_h, input_c, params, rnn_mode="lstm", input_mode="linear_input",
             direction="unidirectional", dropout=0, seed=0, seed2=0, is_training=True, name=None):
    t = _same_dtype("CudnnRNN", input=input, input_h=input_h, input_c=input_c, params=params)
    return load_library().tf_rnn_cudnn_rnn(
        **t, **_cudnn_attrs(dropout, seed, seed2, rnn_mode, input_mode, direction),
        is_training=is_training, name=name)


@_keyword_only
def CudnnRNNV2(input, input_h, input_c, params, rnn_mode="lstm", input_mode="linear_input",
               direction="unidirectional", dropout=0, seed=0, seed2=0, is_training=True,
               name=None):
    t = _same_dtype("CudnnRNNV2", input=input, input_h=input_h, input_c=input_c, params=params)
    return load_library().tf_rnn_cudnn_rnnv2(
        **t, **_cudnn_attrs(dropout, seed, seed2, rnn_mode, input_mode, direction),
        is_training=is_training, name=name)


@_keyword_only
def CudnnRNNV3(input, input_h, input_c, params, sequence_lengths, rnn_mode="lstm",
               input_mode="linear_input", direction="unidirectional", dropout=0, seed=0, seed2=0,
               num_proj=0, is_training=True, time_major=True, name=None):
    t = _same_dtype("CudnnRNNV3", input=input, input_h=input_h, input_c=input_c, params=params)
    lengths = _int32("CudnnRNNV3", "sequence_lengths", sequence_lengths)
    return load_library().tf_rnn_cudnn_rnnv3(
        **t, sequence_lengths=lengths,
        **_cudnn_attrs(dropout, seed, seed2, rnn_mode, input_mode, direction),
        num_proj=num_proj, is_training=is_training, time_major=time_major, name=name)


def _backprop_tensors(op, input, input_h, input_c, params, output, output_h, output_c,
                      output_backprop, output_h_backprop, output_c_backprop, reserve_space):
    return _same_dtype(op, input=input, input_h=input_h, input_c=input_c, params=params,
                       output=output, output_h=output_h, output_c=output_c,
                       output_backprop=output_backprop, output_h_backprop=output_h_backprop,
                       output_c_backprop=output_c_backprop, reserve_space=reserve_space)


@_keyword_only
def CudnnRNNBackprop(input, input_h, input_c, params, output, output_h, output_c, output_backprop,
                     output_h_backprop, output_c_backprop, reserve_space, rnn_mode="lstm",
                     input_mode="linear_input", direction="unidirectional", dropout=0, seed=0,
                     seed2=0, name=None):
    t = _backprop_tensors("CudnnRNNBackprop", input, input_h, input_c, params, output, output_h,
                          output_c, output_backprop, output_h_backprop, output_c_backprop,
                          reserve_space)
    return load_library().tf_rnn_cudnn_rnn_backprop(
        **t, **_cudnn_attrs(dropout, seed, seed2, rnn_mode, input_mode, direction), name=name)


@_keyword_only
def CudnnRNNBackpropV2(input, input_h, input_c, params, output, output_h, output_c,
                       output_backprop, output_h_backprop, output_c_backprop, reserve_space,
                       host_reserved, rnn_mode="lstm", input_mode="linear_input",
                       direction="unidirectional", dropout=0, seed=0, seed2=0, name=None):
    t = _backprop_tensors("CudnnRNNBackpropV2", input, input_h, input_c, params, output,
                          output_h, output_c, output_backprop, output_h_backprop,
                          output_c_backprop, reserve_space)
    return load_library().tf_rnn_cudnn_rnn_backprop_v2(
        **t, host_reserved=_int8("CudnnRNNBackpropV2", "host_reserved", host_reserved),
        **_cudnn_attrs(dropout, seed, seed2, rnn_mode, input_mode, direction), name=name)


@_keyword_only
def CudnnRNNBackpropV3(input, input_h, input_c, params, sequence_lengths, output, output_h,
                       output_c, output_backprop, output_h_backprop, output_c_backprop,
                       reserve_space, host_reserved, rnn_mode="lstm", input_mode="linear_input",
                       direction="unidirectional", dropout=0, seed=0, seed2=0, num_proj=0,
                       time_major=True, name=None):
    t = _backprop_tensors("CudnnRNNBackpropV3", input, input_h, input_c, params, output,
                          output_h, output_c, output_backprop, output_h_backprop,
                          output_c_backprop, reserve_space)
    lengths = _int32("CudnnRNNBackpropV3", "sequence_lengths", sequence_lengths)
    return load_library().tf_rnn_cudnn_rnn_backprop_v3(
        **t, sequence_lengths=lengths,
        host_reserved=_int8("CudnnRNNBackpropV3", "host_reserved", host_reserved),
        **_cudnn_attrs(dropout, seed, seed2, rnn_mode, input_mode, direction),
        num_proj=num_proj, time_major=time_major, name=name)


def _canonical_lists(op, weights, biases, same_length):
    """The canonical lists as tensors of one allowed dtype; names the offending element."""
    lists = {}
    first = None
    for name, values in (("weights", weights), ("biases", biases)):
        values = list(values)
        if not values:
            raise _invalid(op, f"{name} must be a non-empty list of tensors (one per canonical "
                               "parameter)")
        out = []
        for k, v in enumerate(values):
            t = v if _is_tensor(v) else tf.convert_to_tensor(
                v, dtype=first[1] if first else None)
            if first is None:
                first = (f"{name}[{k}]", _dtype(t))
                if first[1] not in _ALLOWED:
                    raise _invalid(op, f"{name}[{k}] has dtype {first[1].name}; T must be one of "
                                       "half, bfloat16, float32, float64")
            elif _dtype(t) != first[1]:
                raise _invalid(op, f"{name}[{k}] has dtype {_dtype(t).name} but {first[0]} has "
                                   f"{first[1].name}; all of them must have one dtype T")
            out.append(t)
        lists[name] = out
    if same_length and len(lists["weights"]) != len(lists["biases"]):
        raise _invalid(op, f"weights and biases must both have num_params elements, got "
                           f"{len(lists['weights'])} weights and {len(lists['biases'])} biases")
    return lists


def _int8(op, name, value):
    return _of_dtype(op, name, value, tf.int8)


def _sizes(op, num_layers, num_units, input_size):
    return dict(num_layers=_int32(op, "num_layers", num_layers),
                num_units=_int32(op, "num_units", num_units),
                input_size=_int32(op, "input_size", input_size))


@_keyword_only
def CudnnRNNParamsSize(num_layers, num_units, input_size, T, S, rnn_mode="lstm",
                       input_mode="linear_input", direction="unidirectional", dropout=0, seed=0,
                       seed2=0, num_proj=0, name=None):
    return load_library().tf_rnn_cudnn_rnn_params_size(
        **_sizes("CudnnRNNParamsSize", num_layers, num_units, input_size), T=T, S=S,
        **_cudnn_attrs(dropout, seed, seed2, rnn_mode, input_mode, direction),
        num_proj=num_proj, name=name)


@_keyword_only
def CudnnRNNParamsToCanonical(num_layers, num_units, input_size, params, num_params,
                              rnn_mode="lstm", input_mode="linear_input",
                              direction="unidirectional", dropout=0, seed=0, seed2=0, name=None):
    return load_library().tf_rnn_cudnn_rnn_params_to_canonical(
        **_sizes("CudnnRNNParamsToCanonical", num_layers, num_units, input_size),
        **_same_dtype("CudnnRNNParamsToCanonical", params=params), num_params=num_params,
        **_cudnn_attrs(dropout, seed, seed2, rnn_mode, input_mode, direction), name=name)


@_keyword_only
def CudnnRNNParamsToCanonicalV2(num_layers, num_units, input_size, params, num_params_weights,
                                num_params_biases, rnn_mode="lstm", input_mode="linear_input",
                                direction="unidirectional", dropout=0, seed=0, seed2=0, num_proj=0,
                                name=None):
    return load_library().tf_rnn_cudnn_rnn_params_to_canonical_v2(
        **_sizes("CudnnRNNParamsToCanonicalV2", num_layers, num_units, input_size),
        **_same_dtype("CudnnRNNParamsToCanonicalV2", params=params),
        num_params_weights=num_params_weights, num_params_biases=num_params_biases,
        **_cudnn_attrs(dropout, seed, seed2, rnn_mode, input_mode, direction),
        num_proj=num_proj, name=name)


@_keyword_only
def CudnnRNNCanonicalToParams(num_layers, num_units, input_size, weights, biases, rnn_mode="lstm",
                              input_mode="linear_input", direction="unidirectional", dropout=0,
                              seed=0, seed2=0, name=None):
    op = "CudnnRNNCanonicalToParams"
    return load_library().tf_rnn_cudnn_rnn_canonical_to_params(
        **_sizes(op, num_layers, num_units, input_size),
        **_canonical_lists(op, weights, biases, same_length=True),
        **_cudnn_attrs(dropout, seed, seed2, rnn_mode, input_mode, direction), name=name)


@_keyword_only
def CudnnRNNCanonicalToParamsV2(num_layers, num_units, input_size, weights, biases,
                                rnn_mode="lstm", input_mode="linear_input",
                                direction="unidirectional", dropout=0, seed=0, seed2=0, num_proj=0,
                                name=None):
    op = "CudnnRNNCanonicalToParamsV2"
    return load_library().tf_rnn_cudnn_rnn_canonical_to_params_v2(
        **_sizes(op, num_layers, num_units, input_size),
        **_canonical_lists(op, weights, biases, same_length=False),
        **_cudnn_attrs(dropout, seed, seed2, rnn_mode, input_mode, direction),
        num_proj=num_proj, name=name)


__all__ += [
    "CudnnRNN", "CudnnRNNV2", "CudnnRNNV3", "CudnnRNNBackprop", "CudnnRNNBackpropV2",
    "CudnnRNNBackpropV3", "CudnnRNNParamsSize", "CudnnRNNParamsToCanonical",
    "CudnnRNNParamsToCanonicalV2", "CudnnRNNCanonicalToParams", "CudnnRNNCanonicalToParamsV2",
]
