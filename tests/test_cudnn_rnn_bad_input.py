"""CudnnRNN op family: malformed inputs are InvalidArgumentError naming the input (never a crash),
and empty sizes (T = 0, B = 0) give correctly shaped results.

Every call runs in this process: an abort (CHECK failure, segfault) kills pytest and fails the
suite.
"""

import re

import numpy as np
import pytest
import tensorflow as tf

import cudnn_reference as cref
import lstm_util as U
import test_cudnn_rnn as C
import test_cudnn_rnn_grads as G

F32, F64 = tf.float32, tf.float64
IAE = tf.errors.InvalidArgumentError
MODES = cref.MODES
VERSIONS = ("", "V2", "V3")

# a valid base model: lstm, 2 layers, bidirectional
T0, B0, I0, H0, L0 = 4, 3, 5, 3, 2


def base(rng, mode="lstm", direction="bidirectional", input_mode="linear_input", I=I0,
         num_proj=0, T=T0, B=B0, L=L0):
    kw = C.model_kw(mode, L, H0, I, input_mode, direction, num_proj)
    return kw, C.make_inputs(rng, kw, T, B)


def fwd_args(version, x, h0, c0, params, kw, *, lens=None, dtype=F32, time_major=True):
    t = lambda a: a if isinstance(a, tf.Tensor) else U.to_tensor(a, dtype)
    args = dict(input=t(x), input_h=t(h0), input_c=t(c0), params=t(params), **C.attrs_of(kw))
    if version == "V3":
        B = np.shape(x)[1] if time_major else np.shape(x)[0]
        T = np.shape(x)[0] if time_major else np.shape(x)[1]
        args["sequence_lengths"] = tf.constant(np.full([B], T) if lens is None else lens,
                                               tf.int32)
        args.update(num_proj=kw["num_proj"], time_major=time_major)
    return args


def run_fwd(ours, version, args):
    return tuple(getattr(ours, "CudnnRNN" + version)(**args))


def expect_error(fn, *names):
    """fn() raises InvalidArgumentError whose message names one of `names`."""
    with pytest.raises(IAE) as info:
        fn()
    msg = info.value.message
    assert any(re.search(rf"\b{re.escape(n)}\b", msg) for n in names), (
        f"message does not name any of {names}: {msg!r}")
    return msg


# ---------------------------------------------------------------------------------------------
# forward ops
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS, ids=["V1", "V2", "V3"])
@pytest.mark.parametrize("mode", MODES)
def test_params_wrong_size(ours, rng, version, mode):
    kw, (x, h0, c0, params) = base(rng, mode)
    n = cref.params_size(**kw)
    for bad in (params[:-1], np.concatenate([params, [0.0]]), params[:0]):
        msg = expect_error(lambda: run_fwd(ours, version, fwd_args(version, x, h0, c0, bad, kw)),
                           "params")
        assert str(n) in msg, f"message does not state the expected size {n}: {msg!r}"
    # params of rank 2
    expect_error(lambda: run_fwd(ours, version, fwd_args(version, x, h0, c0,
                                                         params.reshape(1, -1), kw)), "params")


@pytest.mark.parametrize("version", VERSIONS, ids=["V1", "V2", "V3"])
def test_input_wrong_rank(ours, rng, version):
    kw, (x, h0, c0, params) = base(rng)
    for bad in (x[0], x[None]):
        expect_error(lambda: run_fwd(ours, version, fwd_args(version, bad, h0, c0, params, kw)),
                     "input")


@pytest.mark.parametrize("version", VERSIONS, ids=["V1", "V2", "V3"])
@pytest.mark.parametrize("mode", MODES)
def test_input_h_wrong(ours, rng, version, mode):
    kw, (x, h0, c0, params) = base(rng, mode)
    bads = [
        h0[0],                                                  # rank 2
        h0[None],                                               # rank 4
        np.concatenate([h0, h0[:, :1]], axis=1),                # batch B+1
        h0[:3],                                                 # L*D = 3 with bidirectional
    ]
    for bad in bads:
        expect_error(lambda: run_fwd(ours, version, fwd_args(version, x, bad, c0, params, kw)),
                     "input_h")


@pytest.mark.parametrize("version", VERSIONS, ids=["V1", "V2", "V3"])
def test_input_c_wrong_lstm(ours, rng, version):
    kw, (x, h0, c0, params) = base(rng)
    bads = [c0[0], np.concatenate([c0, c0[:, :1]], axis=1), c0[:2],
            np.concatenate([c0, c0[:, :, :1]], axis=2), np.zeros(())]
    for bad in bads:
        expect_error(lambda: run_fwd(ours, version, fwd_args(version, x, h0, bad, params, kw)),
                     "input_c")


def test_input_c_wrong_with_num_proj(ours, rng):
    kw, (x, h0, c0, params) = base(rng, num_proj=2)
    assert h0.shape[2] == 2 and c0.shape[2] == H0
    for bad in (c0[:, :, :2], c0[:, :2], c0[0]):
        expect_error(lambda: run_fwd(ours, "V3", fwd_args("V3", x, h0, bad, params, kw)),
                     "input_c")


def test_num_proj_invalid(ours, rng):
    kw, (x, h0, c0, params) = base(rng, num_proj=2)
    # num_proj > num_units
    kwb = dict(kw, num_proj=H0 + 1)
    h_big = np.zeros((4, B0, H0 + 1))
    expect_error(lambda: run_fwd(ours, "V3", fwd_args("V3", x, h_big, c0, params, kwb)),
                 "num_proj", "input_h", "params")
    # negative
    kwn = dict(kw, num_proj=-1)
    expect_error(lambda: run_fwd(ours, "V3", fwd_args("V3", x, h0, c0, params, kwn)),
                 "num_proj")
    # h width != num_proj
    expect_error(lambda: run_fwd(ours, "V3", fwd_args("V3", x, np.zeros((4, B0, 1)), c0,
                                                      params, kw)),
                 "input_h", "num_proj")


@pytest.mark.parametrize("version", VERSIONS, ids=["V1", "V2", "V3"])
def test_skip_input_needs_input_size_equal_num_units(ours, rng, version):
    for mode in MODES:
        kw, (x, h0, c0, _) = base(rng, mode)
        kws = dict(kw, input_mode="skip_input")
        # a params buffer of the size skip would have with I == H
        params = np.zeros(cref.params_size(**dict(kws, input_size=H0)))
        expect_error(lambda: run_fwd(ours, version, fwd_args(version, x, h0, c0, params, kws)),
                     "input_size", "skip_input", "num_units")


@pytest.mark.parametrize("time_major", [True, False], ids=["tm", "bm"])
def test_sequence_lengths_invalid(ours, rng, time_major):
    kw = C.model_kw("gru", 1, H0, I0, direction="bidirectional")
    x, h0, c0, params = C.make_inputs(rng, kw, T0, B0, time_major=time_major)
    for lens in ([T0] * (B0 - 1), [T0] * (B0 + 1), [T0, -1, 0], [T0, T0 + 1, 0],
                 [[T0] * B0]):
        expect_error(lambda: run_fwd(ours, "V3", fwd_args("V3", x, h0, c0, params, kw,
                                                          lens=np.array(lens),
                                                          time_major=time_major)),
                     "sequence_lengths")


@pytest.mark.parametrize("version", VERSIONS, ids=["V1", "V2", "V3"])
def test_dtype_mismatch(ours, rng, version):
    kw, (x, h0, c0, params) = base(rng)
    args = fwd_args(version, x, h0, c0, params, kw)
    args["input_h"] = tf.cast(args["input_h"], F64)
    expect_error(lambda: run_fwd(ours, version, args), "input_h")


def test_bad_attrs(ours, rng):
    kw, (x, h0, c0, params) = base(rng)
    for attr, value in (("rnn_mode", "lstm2"), ("input_mode", "skip"), ("direction", "both")):
        args = fwd_args("", x, h0, c0, params, kw)
        args[attr] = value
        with pytest.raises((IAE, ValueError, TypeError)):
            run_fwd(ours, "", args)
    # dropout = 1 drops every inter-layer value: finite, layer 1 sees zeros
    kw1 = C.model_kw("lstm", 2, H0, I0)
    x1, h1, c1, p1 = C.make_inputs(rng, kw1, T0, B0)
    out = C.call_fwd(ours, "", x1, h1, c1, p1, kw1, F64, dropout=1.0, seed=1, seed2=2)
    layers = cref.unpack_params(p1, **kw1)
    layers[1]["W"] = [tf.zeros_like(w) for w in layers[1]["W"]]
    want = C.ref_fwd(x1, h1, c1, cref.pack_params(layers).numpy(), kw1)
    C.assert_fwd(out, want, "lstm", 1e-10)
    for dropout in (-0.1, 1.5):
        args = fwd_args("", x, h0, c0, params, kw)
        args["dropout"] = dropout
        expect_error(lambda: run_fwd(ours, "", args), "dropout")


# ---------------------------------------------------------------------------------------------
# backprop ops
# ---------------------------------------------------------------------------------------------

def _bp_setup(ours, rng, version, mode="lstm"):
    kw, (x, h0, c0, params) = base(rng, mode)
    outs = C.call_fwd(ours, version, x, h0, c0, params, kw, F32)
    dy, dh, dc = G.upstream(rng, outs, mode)
    return kw, (x, h0, c0, params), outs, (dy, dh, dc)


def _bp_args(version, kw, inputs, outs, ups):
    x, h0, c0, params = inputs
    t = lambda a: U.to_tensor(a, F32)
    args = dict(input=t(x), input_h=t(h0), input_c=t(c0), params=t(params), output=outs[0],
                output_h=outs[1], output_c=outs[2], output_backprop=t(ups[0]),
                output_h_backprop=t(ups[1]), output_c_backprop=t(ups[2]),
                reserve_space=outs[3], **C.attrs_of(kw))
    if version in ("V2", "V3"):
        args["host_reserved"] = outs[4]
    if version == "V3":
        args.update(sequence_lengths=tf.constant([T0] * B0, tf.int32), num_proj=kw["num_proj"],
                    time_major=True)
    return args


def run_bp(ours, version, args):
    return tuple(getattr(ours, "CudnnRNNBackprop" + version)(**args))


@pytest.mark.parametrize("version", VERSIONS, ids=["V1", "V2", "V3"])
def test_backprop_valid_base(ours, rng, version):
    kw, inputs, outs, ups = _bp_setup(ours, rng, version)
    got = run_bp(ours, version, _bp_args(version, kw, inputs, outs, ups))
    assert [tuple(g.shape) for g in got] == [np.shape(a) for a in inputs]


@pytest.mark.parametrize("version", VERSIONS, ids=["V1", "V2", "V3"])
def test_backprop_reserve_space_wrong(ours, rng, version):
    kw, inputs, outs, ups = _bp_setup(ours, rng, version)
    rs = outs[3]
    assert rs.shape.rank == 1 and rs.shape[0] > 0
    for bad in (rs[:-1], tf.concat([rs, rs[:1]], 0), rs[:0], tf.reshape(rs, [1, -1])):
        args = _bp_args(version, kw, inputs, outs, ups)
        args["reserve_space"] = bad
        expect_error(lambda: run_bp(ours, version, args), "reserve_space")


@pytest.mark.parametrize("version", VERSIONS, ids=["V1", "V2", "V3"])
def test_backprop_after_inference_forward(ours, rng, version):
    """is_training=False gives a dummy reserve_space that Backprop rejects."""
    kw, (x, h0, c0, params) = base(rng)
    outs = C.call_fwd(ours, version, x, h0, c0, params, kw, F32, is_training=False)
    dy, dh, dc = G.upstream(rng, outs, "lstm")
    expect_error(lambda: G.call_backprop(ours, version, x, h0, c0, params, outs, dy, dh, dc, kw,
                                         F32), "reserve_space")


def test_backprop_reserve_space_from_other_model(ours, rng):
    """A reserve_space from a forward with other sizes is rejected."""
    kw, inputs, outs, ups = _bp_setup(ours, rng, "")
    kw2, (x2, h2, c2, p2) = base(rng, T=T0 + 1)
    other = C.call_fwd(ours, "", x2, h2, c2, p2, kw2, F32)[3]
    args = _bp_args("", kw, inputs, outs, ups)
    args["reserve_space"] = other
    expect_error(lambda: run_bp(ours, "", args), "reserve_space")


@pytest.mark.parametrize("version", VERSIONS, ids=["V1", "V2", "V3"])
@pytest.mark.parametrize("name", ["output", "output_h", "output_c", "output_backprop",
                                  "output_h_backprop", "output_c_backprop"])
def test_backprop_wrong_shapes(ours, rng, version, name):
    kw, inputs, outs, ups = _bp_setup(ours, rng, version)
    args = _bp_args(version, kw, inputs, outs, ups)
    good = args[name]
    for bad in (good[:-1], good[..., :-1], good[0]):
        a = dict(args)
        a[name] = bad
        expect_error(lambda: run_bp(ours, version, a), name)


@pytest.mark.parametrize("version", VERSIONS, ids=["V1", "V2", "V3"])
def test_backprop_bad_inputs(ours, rng, version):
    kw, inputs, outs, ups = _bp_setup(ours, rng, version)
    args = _bp_args(version, kw, inputs, outs, ups)
    for name, bad in (("params", args["params"][:-1]), ("input", args["input"][0]),
                      ("input_h", args["input_h"][:, :-1]), ("input_c", args["input_c"][:-1])):
        a = dict(args)
        a[name] = bad
        expect_error(lambda: run_bp(ours, version, a), name)
    if version == "V3":
        for lens in ([T0] * (B0 - 1), [-1] * B0, [T0 + 1] * B0):
            a = dict(args, sequence_lengths=tf.constant(lens, tf.int32))
            expect_error(lambda: run_bp(ours, version, a), "sequence_lengths")


# ---------------------------------------------------------------------------------------------
# ParamsSize / ParamsToCanonical / CanonicalToParams
# ---------------------------------------------------------------------------------------------

def _sizes(L=2, H=3, I=4):
    return dict(num_layers=tf.constant(L), num_units=tf.constant(H), input_size=tf.constant(I))


BAD_SIZES = [("num_layers", dict(L=0)), ("num_layers", dict(L=-1)), ("num_units", dict(H=0)),
             ("num_units", dict(H=-2)), ("input_size", dict(I=0)), ("input_size", dict(I=-1))]


@pytest.mark.parametrize("name,bad", BAD_SIZES, ids=[f"{n}{list(b.values())[0]}"
                                                     for n, b in BAD_SIZES])
def test_params_size_bad_sizes(ours, name, bad):
    expect_error(lambda: ours.CudnnRNNParamsSize(**_sizes(**bad), T=F32, S=tf.int32), name)
    expect_error(lambda: ours.CudnnRNNParamsSize(**_sizes(**bad), T=F32, S=tf.int64,
                                                 rnn_mode="gru", direction="bidirectional"), name)


def test_params_size_bad_rank_and_proj(ours):
    expect_error(lambda: ours.CudnnRNNParamsSize(num_layers=tf.constant([2]), num_units=3,
                                                 input_size=4, T=F32, S=tf.int32), "num_layers")
    expect_error(lambda: ours.CudnnRNNParamsSize(**_sizes(), T=F32, S=tf.int32, num_proj=-1),
                 "num_proj")
    expect_error(lambda: ours.CudnnRNNParamsSize(**_sizes(H=3), T=F32, S=tf.int32, num_proj=4),
                 "num_proj")


def test_params_size_skip_input_mismatch(ours):
    expect_error(lambda: ours.CudnnRNNParamsSize(**_sizes(H=3, I=4), T=F32, S=tf.int32,
                                                 input_mode="skip_input"),
                 "input_size", "skip_input", "num_units")
    kw = C.model_kw("lstm", 2, 3, 3, "skip_input")
    params = tf.constant(cref.params_size(**kw) * [0.0], F32)
    expect_error(lambda: ours.CudnnRNNParamsToCanonical(**_sizes(H=3, I=4), params=params,
                                                        num_params=16, input_mode="skip_input"),
                 "input_size", "skip_input", "num_units")


def test_num_proj_needs_lstm(ours, rng):
    for mode in ("gru", "rnn_tanh", "rnn_relu"):
        expect_error(lambda: ours.CudnnRNNParamsSize(**_sizes(), T=F32, S=tf.int32,
                                                     rnn_mode=mode, num_proj=2), "num_proj")
        kw, (x, h0, c0, params) = base(rng, mode)
        args = fwd_args("V3", x, h0, c0, params, kw)
        args["num_proj"] = 2
        expect_error(lambda: run_fwd(ours, "V3", args), "num_proj")


@pytest.mark.parametrize("name,bad", BAD_SIZES, ids=[f"{n}{list(b.values())[0]}"
                                                     for n, b in BAD_SIZES])
def test_canonical_bad_sizes(ours, rng, name, bad):
    kw = C.model_kw("lstm", 2, 3, 4)
    params = tf.constant(cref.random_params(rng, **kw), F32)
    nw, nb = cref.num_canonical(mode="lstm", num_layers=2)
    expect_error(lambda: ours.CudnnRNNParamsToCanonical(**_sizes(**bad), params=params,
                                                        num_params=nb), name)
    expect_error(lambda: ours.CudnnRNNParamsToCanonicalV2(
        **_sizes(**bad), params=params, num_params_weights=nw, num_params_biases=nb), name)
    w, b = cref.to_canonical(params, **kw)
    expect_error(lambda: ours.CudnnRNNCanonicalToParams(**_sizes(**bad), weights=w, biases=b),
                 name)
    expect_error(lambda: ours.CudnnRNNCanonicalToParamsV2(**_sizes(**bad), weights=w, biases=b),
                 name)


def test_params_to_canonical_wrong_params(ours, rng):
    kw = C.model_kw("gru", 2, 3, 4, direction="bidirectional")
    params = cref.random_params(rng, **kw)
    nw, nb = cref.num_canonical(mode="gru", num_layers=2, direction="bidirectional")
    a = dict(**_sizes(), rnn_mode="gru", direction="bidirectional")
    n = cref.params_size(**kw)
    for bad in (params[:-1], np.concatenate([params, [1.0]]), params.reshape(2, -1)):
        msg = expect_error(lambda: ours.CudnnRNNParamsToCanonical(
            **a, params=tf.constant(bad, F32), num_params=nb), "params")
        if bad.ndim == 1:
            assert str(n) in msg, msg
        expect_error(lambda: ours.CudnnRNNParamsToCanonicalV2(
            **a, params=tf.constant(bad, F32), num_params_weights=nw, num_params_biases=nb),
            "params")


def test_params_to_canonical_wrong_num_params(ours, rng):
    kw = C.model_kw("lstm", 2, 3, 4, direction="bidirectional", num_proj=2)
    params = tf.constant(cref.random_params(rng, **kw), F32)
    nw, nb = cref.num_canonical(mode="lstm", num_layers=2, direction="bidirectional",
                                num_proj=2)
    a = dict(**_sizes(), direction="bidirectional")
    for w_, b_ in ((nw - 1, nb), (nw + 1, nb), (nw, nb - 1), (nw, nb + 1), (nb, nb)):
        expect_error(lambda: ours.CudnnRNNParamsToCanonicalV2(
            **a, params=params, num_params_weights=w_, num_params_biases=b_, num_proj=2),
            "num_params_weights", "num_params_biases", "weights", "biases")
    kw1 = C.model_kw("lstm", 2, 3, 4, direction="bidirectional")
    p1 = tf.constant(cref.random_params(rng, **kw1), F32)
    for n in (nb - 1, nb + 1):
        expect_error(lambda: ours.CudnnRNNParamsToCanonical(**a, params=p1, num_params=n),
                     "num_params", "weights", "biases")


@pytest.mark.parametrize("v2", [False, True], ids=["V1", "V2"])
def test_canonical_to_params_wrong_lists(ours, rng, v2):
    kw = C.model_kw("rnn_tanh", 2, 3, 4, direction="bidirectional")
    w, b = cref.to_canonical(cref.random_params(rng, **kw), **kw)
    w = [tf.cast(t, F32) for t in w]
    b = [tf.cast(t, F32) for t in b]
    op = ours.CudnnRNNCanonicalToParamsV2 if v2 else ours.CudnnRNNCanonicalToParams
    a = dict(**_sizes(), rnn_mode="rnn_tanh", direction="bidirectional")
    assert op(**a, weights=w, biases=b).shape == (cref.params_size(**kw),)
    if v2:    # V1 needs len(weights) == len(biases) (one attr)
        expect_error(lambda: op(**a, weights=w[:-1], biases=b), "weights", "num_params_weights")
        expect_error(lambda: op(**a, weights=w, biases=b[:-1]), "biases", "num_params_biases")
    else:
        expect_error(lambda: op(**a, weights=w[:-1], biases=b[:-1]), "weights", "biases",
                     "num_params")
    expect_error(lambda: op(**a, weights=w + w[:1], biases=b + b[:1]), "weights", "biases",
                 "num_params", "num_params_weights")
    # an element of the wrong size
    for k in (0, 1, len(w) - 1):
        w2 = list(w)
        w2[k] = w2[k][:, :-1]
        expect_error(lambda: op(**a, weights=w2, biases=b), "weights")
        b2 = list(b)
        b2[k] = tf.concat([b2[k], [0.0]], 0)
        expect_error(lambda: op(**a, weights=w, biases=b2), "biases")


# ---------------------------------------------------------------------------------------------
# empty sizes
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS, ids=["V1", "V2", "V3"])
@pytest.mark.parametrize("mode", MODES)
def test_empty_time(ours, rng, version, mode):
    """T = 0: empty output, states unchanged, backprop passes the state gradients through."""
    kw, (x, h0, c0, params) = base(rng, mode, T=0)
    outs = C.call_fwd(ours, version, x, h0, c0, params, kw, F64)
    assert outs[0].shape == (0, B0, 2 * H0)
    np.testing.assert_array_equal(outs[1].numpy(), h0)
    if mode == "lstm":
        np.testing.assert_array_equal(outs[2].numpy(), c0)
    dy, dh, dc = G.upstream(rng, outs, mode)
    got = G.call_backprop(ours, version, x, h0, c0, params, outs, dy, dh, dc, kw, F64)
    assert got[0].shape == x.shape
    np.testing.assert_array_equal(got[1].numpy(), dh)
    if mode == "lstm":
        np.testing.assert_array_equal(got[2].numpy(), dc)
    np.testing.assert_array_equal(got[3].numpy(), np.zeros_like(params))


@pytest.mark.parametrize("version", VERSIONS, ids=["V1", "V2", "V3"])
@pytest.mark.parametrize("mode", MODES)
def test_empty_batch(ours, rng, version, mode):
    kw, (x, h0, c0, params) = base(rng, mode, B=0)
    outs = C.call_fwd(ours, version, x, h0, c0, params, kw, F32)
    assert outs[0].shape == (T0, 0, 2 * H0)
    assert outs[1].shape == (2 * L0, 0, H0)
    if mode == "lstm":
        assert outs[2].shape == (2 * L0, 0, H0)
    dy, dh, dc = G.upstream(rng, outs, mode)
    got = G.call_backprop(ours, version, x, h0, c0, params, outs, dy, dh, dc, kw, F32)
    assert got[0].shape == x.shape and got[1].shape == h0.shape
    np.testing.assert_array_equal(got[3].numpy(), np.zeros_like(params))


def test_empty_v3_batch_major(ours, rng):
    kw = C.model_kw("lstm", 1, H0, I0, num_proj=2)
    for T, B in ((0, 2), (3, 0)):
        x, h0, c0, params = C.make_inputs(rng, kw, T, B, time_major=False)
        outs = C.call_fwd(ours, "V3", x, h0, c0, params, kw, F32, time_major=False)
        assert outs[0].shape == (B, T, 2)
        assert outs[1].shape == (B, 1, 2) and outs[2].shape == (B, 1, H0)
