"""CudnnRNN op family, forward (docs/SEMANTICS.md §1.2, §4).

* the float64 reference (tests/cudnn_reference.py) itself vs Keras 3 layers (LSTM,
  GRU(reset_after=True), SimpleRNN tanh/relu), stacked and reversed for multi-layer and
  bidirectional, and with masks for per-sequence lengths;
* CudnnRNN, CudnnRNNV2, CudnnRNNV3 vs the reference: every rnn_mode x input_mode x direction,
  num_layers 1..4, every dtype;
* V3: sequence_lengths (including 0 and T), time_major=False (with the [B, L*D, H] state quirk),
  num_proj;
* is_training=False, dropout properties and dropout gradients vs central differences;
* CudnnRNNParamsSize, ParamsToCanonical(V2), CanonicalToParams(V2).
"""

import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf

import cudnn_reference as cref
import lstm_util as U

F16, BF16, F32, F64 = tf.float16, tf.bfloat16, tf.float32, tf.float64
MODES = cref.MODES
DIRS = cref.DIRECTIONS
# max |ours - ref| <= tol * max(1, max |ref|)
FWD_TOL = {F64: 1e-10, F32: 1e-5, F16: 1e-2, BF16: 5e-2}


# ---------------------------------------------------------------------------------------------
# helpers shared with the other cudnn test modules
# ---------------------------------------------------------------------------------------------

def model_kw(mode, num_layers, num_units, input_size, input_mode="linear_input",
             direction="unidirectional", num_proj=0):
    return dict(mode=mode, num_layers=num_layers, num_units=num_units, input_size=input_size,
                input_mode=input_mode, direction=direction, num_proj=num_proj)


def make_inputs(rng, kw, T, B, *, time_major=True, c_dummy="full"):
    """Random float64 (x, h0, c0, params) for model kw; c0 for non-lstm is a dummy
    (zeros [L*D, B, H] for c_dummy='full', scalar 0 for 'scalar')."""
    D = cref.num_dirs(kw["direction"])
    LD = kw["num_layers"] * D
    H, I, P = kw["num_units"], kw["input_size"], kw["num_proj"]
    Hs = P if P else H
    x = rng.normal(size=(T, B, I) if time_major else (B, T, I))
    h0 = rng.uniform(-1, 1, size=(LD, B, Hs) if time_major else (B, LD, Hs))
    if kw["mode"] == "lstm":
        c0 = rng.normal(size=(LD, B, H) if time_major else (B, LD, H))
    elif c_dummy == "scalar":
        c0 = np.zeros(())
    else:
        c0 = np.zeros((LD, B, H) if time_major else (B, LD, H))
    params = cref.random_params(rng, **kw)
    return x, h0, c0, params


def attrs_of(kw, **extra):
    a = dict(rnn_mode=kw["mode"], input_mode=kw["input_mode"], direction=kw["direction"])
    a.update(extra)
    return a


def call_fwd(ours, version, x, h0, c0, params, kw, dtype, *, seq_lengths=None, time_major=True,
             **attrs):
    """Calls ours.CudnnRNN{,V2,V3}; returns the tuple of all outputs (tensors)."""
    conv = lambda v: tf.cast(v, dtype) if isinstance(v, tf.Tensor) else U.to_tensor(v, dtype)
    t = {n: conv(v) for n, v in dict(input=x, input_h=h0, input_c=c0, params=params).items()}
    a = attrs_of(kw, **attrs)
    if version == "V3":
        T = x.shape[0] if time_major else x.shape[1]
        B = x.shape[1] if time_major else x.shape[0]
        lens = np.full([B], T) if seq_lengths is None else seq_lengths
        return tuple(ours.CudnnRNNV3(**t, sequence_lengths=tf.constant(lens, tf.int32),
                                     num_proj=kw["num_proj"], time_major=time_major, **a))
    return tuple(getattr(ours, "CudnnRNN" + version)(**t, **a))


def ref_fwd(x, h0, c0, params, kw, dtype=F64, **more):
    """Reference on inputs rounded to dtype; numpy (output, output_h, output_c or None)."""
    r = lambda a: U.round_to(a, dtype)
    out = cref.cudnn_rnn_ref(r(x), r(h0), r(c0) if kw["mode"] == "lstm" else None, r(params),
                             **kw, **more)
    return tuple(None if o is None else o.numpy() for o in out)


def assert_near(actual, expected, tol, name=""):
    actual = U.to_numpy(actual) if isinstance(actual, tf.Tensor) else np.asarray(actual)
    expected = np.asarray(expected, np.float64)
    assert actual.shape == expected.shape, f"{name}: shape {actual.shape} != {expected.shape}"
    if not expected.size:
        return
    scale = max(1.0, float(np.abs(expected).max()))
    err = float(np.abs(actual - expected).max()) if actual.size else 0.0
    assert err <= tol * scale, f"{name}: max error {err:.3g} > {tol * scale:.3g}"


def assert_fwd(outs, ref, mode, tol, prefix=""):
    assert_near(outs[0], ref[0], tol, prefix + "output")
    assert_near(outs[1], ref[1], tol, prefix + "output_h")
    if mode == "lstm":
        assert_near(outs[2], ref[2], tol, prefix + "output_c")


# ---------------------------------------------------------------------------------------------
# 1. the reference vs Keras 3
# ---------------------------------------------------------------------------------------------

def _keras_layer(mode, H, go_backwards):
    common = dict(return_sequences=True, return_state=True, go_backwards=go_backwards,
                  dtype="float64")
    if mode == "lstm":
        return keras.layers.LSTM(H, **common)
    if mode == "gru":
        return keras.layers.GRU(H, reset_after=True, **common)
    return keras.layers.SimpleRNN(H, activation="tanh" if mode == "rnn_tanh" else "relu",
                                  **common)


def _keras_weights(mode, lay):
    """Our per-pseudo-layer dict (tensors) -> Keras [kernel, recurrent_kernel, bias]."""
    W = [w.numpy() for w in lay["W"]]
    R = [w.numpy() for w in lay["R"]]
    bW = [b.numpy() for b in lay["bW"]]
    bR = [b.numpy() for b in lay["bR"]]
    order = [1, 0, 2] if mode == "gru" else list(range(len(W)))    # Keras GRU: z, r, h
    kernel = np.concatenate([W[k].T for k in order], axis=1)
    recurrent = np.concatenate([R[k].T for k in order], axis=1)
    if mode == "gru":
        bias = np.stack([np.concatenate([bW[k] for k in order]),
                         np.concatenate([bR[k] for k in order])])
    else:
        bias = np.concatenate([bW[k] + bR[k] for k in order])
    return [kernel, recurrent, bias]


def keras_stack(mode, x_tm, h0, c0, params, kw, lengths=None):
    """Runs the model with Keras layers (time-major numpy in/out).  With lengths, Keras masks
    right-padded steps; masked outputs are returned as 0 for comparison."""
    H, L = kw["num_units"], kw["num_layers"]
    D = cref.num_dirs(kw["direction"])
    layers = cref.unpack_params(params, **kw)
    T, B = x_tm.shape[:2]
    mask = None if lengths is None else (np.arange(T)[None, :] < np.asarray(lengths)[:, None])
    inp = np.transpose(x_tm, [1, 0, 2])          # batch-major for Keras
    hs, cs = [], []
    for l in range(L):
        outs = []
        for d in range(D):
            p = l * D + d
            layer = _keras_layer(mode, H, go_backwards=(d == 1))
            state = [h0[p], c0[p]] if mode == "lstm" else [h0[p]]
            layer.build(inp.shape)
            layer.set_weights(_keras_weights(mode, layers[p]))
            res = layer(tf.constant(inp), initial_state=[tf.constant(s) for s in state],
                        mask=None if mask is None else tf.constant(mask))
            o = res[0].numpy()
            if d == 1:
                o = o[:, ::-1]               # Keras returns the reversed sequence
            if mask is not None:
                o = np.where(mask[:, :, None], o, 0.0)
            outs.append(o)
            hs.append(res[1].numpy())
            if mode == "lstm":
                cs.append(res[2].numpy())
        inp = np.concatenate(outs, axis=2)
    return (np.transpose(inp, [1, 0, 2]), np.stack(hs),
            np.stack(cs) if mode == "lstm" else None)


KERAS_CASES = [(m, d, L) for m in MODES for d in DIRS for L in (1, 2)]


@pytest.mark.parametrize("mode,direction,num_layers", KERAS_CASES,
                         ids=[f"{m}-{d[:3]}-L{L}" for m, d, L in KERAS_CASES])
def test_reference_vs_keras(rng, mode, direction, num_layers):
    kw = model_kw(mode, num_layers, 3, 4, direction=direction)
    x, h0, c0, params = make_inputs(rng, kw, 5, 3)
    if mode == "rnn_relu":
        h0 = np.abs(h0)
    ref = ref_fwd(x, h0, c0, params, kw)
    ker = keras_stack(mode, x, h0, c0, params, kw)
    for k, name in enumerate(("output", "output_h", "output_c")):
        if ker[k] is not None:
            np.testing.assert_allclose(ref[k], ker[k], rtol=1e-10, atol=1e-10, err_msg=name)
    assert np.abs(ref[0]).max() > 0.05


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("direction", DIRS)
def test_reference_lengths_vs_keras_mask(rng, mode, direction):
    kw = model_kw(mode, 2, 3, 2, direction=direction)
    T, B = 6, 4
    x, h0, c0, params = make_inputs(rng, kw, T, B)
    lengths = np.array([6, 3, 1, 5])
    ref = ref_fwd(x, h0, c0, params, kw, seq_lengths=lengths)
    ker = keras_stack(mode, x, h0, c0, params, kw, lengths=lengths)
    for k, name in enumerate(("output", "output_h", "output_c")):
        if ker[k] is not None:
            np.testing.assert_allclose(ref[k], ker[k], rtol=1e-10, atol=1e-10, err_msg=name)


def test_reference_skip_input_gru_issue_8311():
    """docs/SEMANTICS.md §4.3: x=1, all params 0, skip input -> (1 - sigmoid(1)) * tanh(1)."""
    kw = model_kw("gru", 1, 1, 1, input_mode="skip_input")
    n = cref.params_size(**kw)
    assert n == 3 * 1 + 6        # no input matrices
    out = ref_fwd(np.ones((1, 1, 1)), np.zeros((1, 1, 1)), None, np.zeros(n), kw)
    s = 1.0 / (1.0 + np.exp(-1.0))
    np.testing.assert_allclose(out[0].ravel(), [(1 - s) * np.tanh(1.0)], rtol=1e-14)
    np.testing.assert_allclose(out[0].ravel(), [0.20482421], rtol=1e-7)


def test_reference_skip_input_equals_identity_linear(rng):
    """skip input == linear input with W_k = identity for layer 0."""
    for mode in MODES:
        for direction in DIRS:
            kws = model_kw(mode, 2, 3, 3, input_mode="skip_input", direction=direction)
            kwl = dict(kws, input_mode="linear_input")
            x, h0, c0, params = make_inputs(rng, kws, 4, 2)
            layers = cref.unpack_params(params, **kws)
            for lay in layers:
                if lay["W"] is None:
                    lay["W"] = [tf.eye(3, dtype=F64)] * lay["spec"]["K"]
            lin = cref.pack_params(layers).numpy()
            a = ref_fwd(x, h0, c0, params, kws)
            b = ref_fwd(x, h0, c0, lin, kwl)
            for u, v in zip(a, b):
                if u is not None:
                    np.testing.assert_allclose(u, v, rtol=1e-14, atol=1e-14)


def test_reference_params_size_examples():
    assert cref.params_size(**model_kw("lstm", 2, 5, 3)) == 440
    for kw in _model_grid():
        assert cref.params_size(**kw) == cref.params_size_formula(**kw)


# ---------------------------------------------------------------------------------------------
# signatures
# ---------------------------------------------------------------------------------------------

ALL_CUDNN_OPS = ("CudnnRNN", "CudnnRNNV2", "CudnnRNNV3", "CudnnRNNBackprop",
                 "CudnnRNNBackpropV2", "CudnnRNNBackpropV3", "CudnnRNNParamsSize",
                 "CudnnRNNParamsToCanonical", "CudnnRNNParamsToCanonicalV2",
                 "CudnnRNNCanonicalToParams", "CudnnRNNCanonicalToParamsV2")


@pytest.mark.parametrize("op", ALL_CUDNN_OPS)
def test_signature_matches_stock(ours, op):
    U.assert_signature_matches_stock(getattr(ours, op), op)


def test_positional_call_is_type_error(ours, rng):
    kw = model_kw("lstm", 1, 3, 2)
    x, h0, c0, params = make_inputs(rng, kw, 2, 2)
    with pytest.raises(TypeError):
        ours.CudnnRNN(tf.constant(x), tf.constant(h0), tf.constant(c0), tf.constant(params))


# ---------------------------------------------------------------------------------------------
# 2. forward conformance vs the reference
# ---------------------------------------------------------------------------------------------

# (input_mode, input_size) with num_units = 3
INPUT_CASES = [("linear_input", 4), ("linear_input", 3), ("skip_input", 3), ("auto_select", 3),
               ("auto_select", 4)]
VERSIONS = ("", "V2", "V3")
# (num_layers, T, B)
SHAPES = [(L, T, B) for L in (1, 2) for T in (1, 5) for B in (1, 3)] + [(3, 5, 3), (4, 2, 2)]


def over_models(input_cases):
    """Parametrises a test over mode, (input_mode, input_size) in input_cases and direction."""
    def decorate(test):
        test = pytest.mark.parametrize("mode", MODES)(test)
        test = pytest.mark.parametrize("input_mode,input_size", input_cases,
                                       ids=[f"{m}-I{i}" for m, i in input_cases])(test)
        return pytest.mark.parametrize("direction", DIRS)(test)
    return decorate


def model_runs(rng, shapes, mode, input_mode, input_size, direction):
    """For each (num_layers, T, B) in shapes: the model kw (num_units 3), its random float64
    inputs (x, h0, c0, params) and a label 'L.. T.. B..'."""
    for L, T, B in shapes:
        kw = model_kw(mode, L, 3, input_size, input_mode, direction)
        yield kw, make_inputs(rng, kw, T, B), f"L{L} T{T} B{B}"


@over_models(INPUT_CASES)
def test_forward_float64(ours, rng, mode, input_mode, input_size, direction):
    for kw, (x, h0, c0, params), where in model_runs(rng, SHAPES, mode, input_mode,
                                                      input_size, direction):
        ref = ref_fwd(x, h0, c0, params, kw)
        for version in VERSIONS:
            outs = call_fwd(ours, version, x, h0, c0, params, kw, F64)
            assert len(outs) == (4 if version == "" else 5)
            for o in outs[:3]:
                assert o.dtype == F64
            assert_fwd(outs, ref, mode, FWD_TOL[F64], prefix=f"V{version} {where}: ")


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=["float32", "half", "bfloat16"])
@pytest.mark.parametrize("direction", DIRS)
@pytest.mark.parametrize("mode", MODES)
def test_forward_dtypes(ours, rng, mode, direction, dtype):
    for version, L, im, I in (("", 2, "linear_input", 4), ("V3", 1, "skip_input", 3),
                              ("V2", 3, "auto_select", 3)):
        kw = model_kw(mode, L, 3, I, im, direction)
        x, h0, c0, params = make_inputs(rng, kw, 5, 3)
        outs = call_fwd(ours, version, x, h0, c0, params, kw, dtype)
        for o in outs[:3]:
            assert o.dtype == dtype
        assert_fwd(outs, ref_fwd(x, h0, c0, params, kw, dtype), mode, FWD_TOL[dtype],
                   prefix=f"{version} L{L}: ")


def test_forward_larger_float32(ours, rng):
    """Sizes past SIMD remainders."""
    for mode in MODES:
        kw = model_kw(mode, 2, 37, 19, direction="bidirectional")
        x, h0, c0, params = make_inputs(rng, kw, 7, 5)
        outs = call_fwd(ours, "", x, h0, c0, params, kw, F32)
        assert_fwd(outs, ref_fwd(x, h0, c0, params, kw, F32), mode, FWD_TOL[F32], mode + ": ")


@pytest.mark.parametrize("mode", MODES)
def test_forward_output_shapes(ours, rng, mode):
    """Output shapes (docs/SEMANTICS.md §1.2); non-lstm input_c as a scalar 0 (Keras passes 0)."""
    for direction in DIRS:
        D = cref.num_dirs(direction)
        kw = model_kw(mode, 2, 3, 4, direction=direction)
        x, h0, c0, params = make_inputs(rng, kw, 5, 2, c_dummy="scalar")
        for version in VERSIONS:
            outs = call_fwd(ours, version, x, h0, c0, params, kw, F32)
            assert outs[0].shape == (5, 2, 3 * D)
            assert outs[1].shape == (2 * D, 2, 3)
            if mode == "lstm":
                assert outs[2].shape == (2 * D, 2, 3)
            assert_fwd(outs, ref_fwd(x, h0, c0, params, kw, F32), mode, FWD_TOL[F32])
            if version == "V2":
                assert outs[4].dtype == tf.int8
            if version == "V3":
                assert outs[4].dtype == tf.int8


def test_forward_in_tf_function(ours, rng):
    kw = model_kw("lstm", 2, 3, 4, direction="bidirectional")
    x, h0, c0, params = make_inputs(rng, kw, 5, 3)

    @tf.function
    def f(x, h, c, p):
        return ours.CudnnRNNV3(input=x, input_h=h, input_c=c, params=p,
                               sequence_lengths=tf.constant([5, 2, 0]), direction="bidirectional")

    outs = f(*[tf.constant(a, F32) for a in (x, h0, c0, params)])
    ref = ref_fwd(x, h0, c0, params, kw, F32, seq_lengths=[5, 2, 0])
    assert_fwd(outs, ref, "lstm", FWD_TOL[F32])


# ---------------------------------------------------------------------------------------------
# 3. V3: sequence lengths, time_major=False, num_proj
# ---------------------------------------------------------------------------------------------

def _lengths(rng, B, T):
    """Random lengths in [0, T] with 0 and T present (B >= 2)."""
    lens = rng.integers(0, T + 1, size=B)
    lens[0] = T
    if B > 1:
        lens[1] = 0
    return rng.permutation(lens).astype(np.int32)


def _assert_zero_past_lengths(output, lens, time_major):
    o = U.to_numpy(output)
    if not time_major:
        o = np.transpose(o, [1, 0, 2])
    for b, n in enumerate(lens):
        assert np.all(o[n:, b] == 0.0), f"output not exactly 0 past length {n} (batch {b})"


V3_CASES = [(m, d, tm, L) for m in MODES for d in DIRS for tm in (True, False) for L in (1, 3)]


@pytest.mark.parametrize("mode,direction,time_major,num_layers", V3_CASES,
                         ids=[f"{m}-{d[:3]}-{'tm' if tm else 'bm'}-L{L}"
                              for m, d, tm, L in V3_CASES])
def test_v3_sequence_lengths(ours, rng, mode, direction, time_major, num_layers):
    T, B = 5, 6
    for input_mode, I in (("linear_input", 4), ("skip_input", 3)):
        kw = model_kw(mode, num_layers, 3, I, input_mode, direction)
        x, h0, c0, params = make_inputs(rng, kw, T, B, time_major=time_major)
        lens = _lengths(rng, B, T)
        for dtype in (F64, F32):
            outs = call_fwd(ours, "V3", x, h0, c0, params, kw, dtype, seq_lengths=lens,
                            time_major=time_major)
            ref = ref_fwd(x, h0, c0, params, kw, dtype, seq_lengths=lens, time_major=time_major)
            assert_fwd(outs, ref, mode, FWD_TOL[dtype], prefix=f"{input_mode} {dtype.name}: ")
            _assert_zero_past_lengths(outs[0], lens, time_major)


def test_v3_length_zero_keeps_initial_state(ours, rng):
    for mode in MODES:
        kw = model_kw(mode, 2, 3, 4, direction="bidirectional")
        x, h0, c0, params = make_inputs(rng, kw, 4, 3)
        outs = call_fwd(ours, "V3", x, h0, c0, params, kw, F64, seq_lengths=[0, 0, 0])
        np.testing.assert_array_equal(outs[0].numpy(), 0.0)
        np.testing.assert_array_equal(outs[1].numpy(), h0)
        if mode == "lstm":
            np.testing.assert_array_equal(outs[2].numpy(), c0)


def test_v3_full_lengths_equal_v1(ours, rng):
    for mode in MODES:
        kw = model_kw(mode, 2, 3, 4, direction="bidirectional")
        x, h0, c0, params = make_inputs(rng, kw, 4, 3)
        a = call_fwd(ours, "V3", x, h0, c0, params, kw, F32, seq_lengths=[4, 4, 4])
        b = call_fwd(ours, "", x, h0, c0, params, kw, F32)
        for k in range(3 if mode == "lstm" else 2):
            np.testing.assert_allclose(a[k].numpy(), b[k].numpy(), rtol=1e-6, atol=1e-6)


def test_v3_batch_major_state_quirk(ours, rng):
    """time_major=False: input_h [B, L*D, H] is read as [L*D, B, H] memory (no transpose)."""
    kw = model_kw("gru", 1, 3, 4, direction="bidirectional")
    B, T = 3, 4
    x, h0, c0, params = make_inputs(rng, kw, T, B, time_major=False)
    outs = call_fwd(ours, "V3", x, h0, c0, params, kw, F64, time_major=False)
    tm = call_fwd(ours, "V3", np.transpose(x, [1, 0, 2]), np.reshape(h0, [2, B, 3]), c0.reshape(
        [2, B, 3]), params, kw, F64)
    np.testing.assert_allclose(outs[0].numpy(), np.transpose(tm[0].numpy(), [1, 0, 2]),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(outs[1].numpy(), np.reshape(tm[1].numpy(), [B, 2, 3]),
                               rtol=1e-12, atol=1e-12)


PROJ_CASES = [(d, L, tm) for d in DIRS for L in (1, 2) for tm in (True, False)]


@pytest.mark.parametrize("direction,num_layers,time_major", PROJ_CASES,
                         ids=[f"{d[:3]}-L{L}-{'tm' if tm else 'bm'}" for d, L, tm in PROJ_CASES])
def test_v3_num_proj(ours, rng, direction, num_layers, time_major):
    T, B, H, P, I = 5, 4, 5, 2, 3
    kw = model_kw("lstm", num_layers, H, I, direction=direction, num_proj=P)
    x, h0, c0, params = make_inputs(rng, kw, T, B, time_major=time_major)
    D, LD = cref.num_dirs(direction), num_layers * cref.num_dirs(direction)
    for lens in (None, _lengths(rng, B, T)):
        for dtype in (F64, F32):
            outs = call_fwd(ours, "V3", x, h0, c0, params, kw, dtype, seq_lengths=lens,
                            time_major=time_major)
            assert outs[0].shape == ((T, B, D * P) if time_major else (B, T, D * P))
            assert outs[1].shape == ((LD, B, P) if time_major else (B, LD, P))
            assert outs[2].shape == ((LD, B, H) if time_major else (B, LD, H))
            ref = ref_fwd(x, h0, c0, params, kw, dtype, seq_lengths=lens, time_major=time_major)
            assert_fwd(outs, ref, "lstm", FWD_TOL[dtype], prefix=f"lens={lens} {dtype.name}: ")
            if lens is not None:
                _assert_zero_past_lengths(outs[0], lens, time_major)


def test_v3_num_proj_skip_input(ours, rng):
    """skip input with projection: layer 0 still needs I == H (identity into H gates)."""
    T, B, H, P = 4, 2, 4, 2
    for direction in DIRS:
        kw = model_kw("lstm", 2, H, H, "skip_input", direction, num_proj=P)
        x, h0, c0, params = make_inputs(rng, kw, T, B)
        outs = call_fwd(ours, "V3", x, h0, c0, params, kw, F64)
        assert_fwd(outs, ref_fwd(x, h0, c0, params, kw), "lstm", FWD_TOL[F64])


# ---------------------------------------------------------------------------------------------
# 4. is_training=False
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS, ids=["V1", "V2", "V3"])
def test_inference_mode_same_outputs(ours, rng, version):
    for mode in MODES:
        kw = model_kw(mode, 2, 3, 4, direction="bidirectional")
        x, h0, c0, params = make_inputs(rng, kw, 5, 3)
        a = call_fwd(ours, version, x, h0, c0, params, kw, F64, is_training=True)
        b = call_fwd(ours, version, x, h0, c0, params, kw, F64, is_training=False)
        for k in range(3 if mode == "lstm" else 2):
            np.testing.assert_allclose(a[k].numpy(), b[k].numpy(), rtol=1e-13, atol=1e-13)
        assert_fwd(b, ref_fwd(x, h0, c0, params, kw), mode, FWD_TOL[F64])


@pytest.mark.parametrize("version", VERSIONS, ids=["V1", "V2", "V3"])
def test_inference_mode_gradient_raises(ours, rng, version):
    kw = model_kw("lstm", 1, 3, 4)
    x, h0, c0, params = make_inputs(rng, kw, 3, 2)
    p = tf.constant(params)
    with tf.GradientTape() as tape:
        tape.watch(p)
        outs = call_fwd(ours, version, x, h0, c0, p, kw, F64, is_training=False)
        loss = tf.reduce_sum(outs[0])
    with pytest.raises(Exception, match="is_training must be set to True"):
        tape.gradient(loss, p)


# ---------------------------------------------------------------------------------------------
# 5. dropout
# ---------------------------------------------------------------------------------------------

def _fwd_dropout(ours, version, inputs, kw, dtype=F64, **attrs):
    x, h0, c0, params = inputs
    return call_fwd(ours, version, x, h0, c0, params, kw, dtype, **attrs)


@pytest.mark.parametrize("version", VERSIONS, ids=["V1", "V2", "V3"])
@pytest.mark.parametrize("mode", MODES)
def test_dropout_properties(ours, rng, mode, version):
    for direction in DIRS:
        kw = model_kw(mode, 3, 4, 3, direction=direction)
        inputs = make_inputs(rng, kw, 5, 3)
        ref = ref_fwd(*inputs, kw)
        a = _fwd_dropout(ours, version, inputs, kw, dropout=0.5, seed=7, seed2=11)
        b = _fwd_dropout(ours, version, inputs, kw, dropout=0.5, seed=7, seed2=11)
        c = _fwd_dropout(ours, version, inputs, kw, dropout=0.5, seed=8, seed2=11)
        d = _fwd_dropout(ours, version, inputs, kw, dropout=0.5, seed=7, seed2=12)
        for k in range(3 if mode == "lstm" else 2):
            np.testing.assert_array_equal(a[k].numpy(), b[k].numpy())
        assert not np.allclose(a[0].numpy(), c[0].numpy(), atol=1e-6), "seed ignored"
        assert not np.allclose(a[0].numpy(), d[0].numpy(), atol=1e-6), "seed2 ignored"
        assert not np.allclose(a[0].numpy(), ref[0], atol=1e-6), "dropout had no effect"
        # dropout acts between layers only: layer 0's final states are unaffected
        D = cref.num_dirs(direction)
        np.testing.assert_allclose(a[1].numpy()[:D], ref[1][:D], rtol=1e-10, atol=1e-10)
        # inference ignores dropout
        e = _fwd_dropout(ours, version, inputs, kw, dropout=0.5, seed=7, seed2=11,
                         is_training=False)
        assert_fwd(e, ref, mode, FWD_TOL[F64], prefix="is_training=False: ")
        # dropout = 0 is exact
        f = _fwd_dropout(ours, version, inputs, kw, dropout=0.0, seed=7, seed2=11)
        assert_fwd(f, ref, mode, FWD_TOL[F64], prefix="dropout=0: ")
        # one layer: no dropout anywhere
        kw1 = dict(kw, num_layers=1)
        inputs1 = make_inputs(rng, kw1, 5, 3)
        g = _fwd_dropout(ours, version, inputs1, kw1, dropout=0.5, seed=7, seed2=11)
        assert_fwd(g, ref_fwd(*inputs1, kw1), mode, FWD_TOL[F64], prefix="L=1: ")


def test_dropout_mask_scale(ours, rng):
    """Inverted dropout on layer 0's output: with a linear second layer (rnn_relu with all
    inputs positive, zero recurrent weights) E[output] over many seeds equals no-dropout."""
    H, I, T, B = 4, 4, 1, 64
    kw = model_kw("rnn_relu", 2, H, I)
    layers = cref.unpack_params(cref.random_params(rng, **kw), **kw)
    layers[0]["W"] = [tf.constant(np.abs(rng.normal(size=(H, I))))]
    layers[0]["bW"] = [tf.constant(np.ones(H))]
    layers[1]["W"] = [tf.constant(np.eye(H))]
    for lay in layers:
        lay["R"] = [tf.zeros([H, H], F64)]
        lay["bR"] = [tf.zeros([H], F64)]
    layers[1]["bW"] = [tf.zeros([H], F64)]
    params = cref.pack_params(layers).numpy()
    x = np.abs(rng.normal(size=(T, B, I)))
    h0 = np.zeros((2, B, H))
    ref = ref_fwd(x, h0, h0, params, kw)[0]
    outs = []
    for s in range(1, 41):
        o = call_fwd(ours, "", x, h0, h0, params, kw, F64, dropout=0.25, seed=s, seed2=3)[0]
        o = o.numpy()
        # each element is either 0 or ref / (1 - p)
        kept = o != 0
        np.testing.assert_allclose(o[kept], (ref / 0.75)[kept], rtol=1e-12)
        outs.append(o)
    frac = np.mean([np.mean(o == 0) for o in outs])
    assert 0.2 < frac < 0.3, f"dropped fraction {frac}"


# ---------------------------------------------------------------------------------------------
# 6. ParamsSize, ParamsToCanonical(V2), CanonicalToParams(V2)
# ---------------------------------------------------------------------------------------------

def _model_grid():
    for mode, L, H, I, im, d, P in itertools.product(MODES, (1, 2, 3), (1, 4), (2, 4),
                                                     cref.INPUT_MODES, DIRS, (0, 2)):
        if P and (mode != "lstm" or P >= H):
            continue
        if im == "skip_input" and I != H:
            continue
        yield model_kw(mode, L, H, I, im, d, P)


def _size_args(kw):
    return dict(num_layers=tf.constant(kw["num_layers"]), num_units=tf.constant(kw["num_units"]),
                input_size=tf.constant(kw["input_size"]), rnn_mode=kw["mode"],
                input_mode=kw["input_mode"], direction=kw["direction"])


def test_params_size(ours):
    n = 0
    for kw in _model_grid():
        for S in (tf.int32, tf.int64):
            for T in (F32, F64):
                out = ours.CudnnRNNParamsSize(**_size_args(kw), T=T, S=S, num_proj=kw["num_proj"])
                assert out.dtype == S and out.shape == (1,)
                assert int(out.numpy()[0]) == cref.params_size_formula(**kw), kw
                n += 1
    assert n > 100
    out = ours.CudnnRNNParamsSize(num_layers=2, num_units=5, input_size=3, T=F32, S=tf.int32)
    assert int(out.numpy()[0]) == 440


def _to_canonical_ours(ours, kw, params, dtype, v2):
    p = U.to_tensor(params, dtype)
    nw, nb = cref.num_canonical(mode=kw["mode"], num_layers=kw["num_layers"],
                                direction=kw["direction"], num_proj=kw["num_proj"])
    if v2:
        return ours.CudnnRNNParamsToCanonicalV2(**_size_args(kw), params=p, num_params_weights=nw,
                                               num_params_biases=nb, num_proj=kw["num_proj"])
    assert not kw["num_proj"]
    return ours.CudnnRNNParamsToCanonical(**_size_args(kw), params=p, num_params=nb)


def _to_params_ours(ours, kw, weights, biases, v2):
    if v2:
        return ours.CudnnRNNCanonicalToParamsV2(**_size_args(kw), weights=weights, biases=biases,
                                               num_proj=kw["num_proj"])
    return ours.CudnnRNNCanonicalToParams(**_size_args(kw), weights=weights, biases=biases)


@pytest.mark.parametrize("v2", [False, True], ids=["V1", "V2"])
def test_canonical_round_trip_and_slicing(ours, rng, v2):
    count = 0
    for kw in _model_grid():
        if kw["num_proj"] and not v2:
            continue
        params = cref.random_params(rng, **kw)
        dtype = F64 if count % 2 == 0 else F32
        w, b = _to_canonical_ours(ours, kw, params, dtype, v2)
        nw, nb = cref.num_canonical(mode=kw["mode"], num_layers=kw["num_layers"],
                                    direction=kw["direction"], num_proj=kw["num_proj"] if v2 else 0)
        assert len(w) == nw and len(b) == nb, kw
        rw, rb = cref.to_canonical(U.round_to(params, dtype), v2=v2, **kw)
        for k, (got, want) in enumerate(zip(w, rw)):
            assert got.dtype == dtype
            assert tuple(got.shape) == tuple(want.shape), (kw, "weight", k)
            np.testing.assert_array_equal(U.to_numpy(got), want.numpy(), err_msg=f"{kw} w{k}")
        for k, (got, want) in enumerate(zip(b, rb)):
            assert tuple(got.shape) == tuple(want.shape), (kw, "bias", k)
            np.testing.assert_array_equal(U.to_numpy(got), want.numpy(), err_msg=f"{kw} b{k}")
        back = _to_params_ours(ours, kw, list(w), list(b), v2)
        assert back.dtype == dtype and back.shape == (len(params),)
        np.testing.assert_array_equal(U.to_numpy(back), U.round_to(params, dtype), err_msg=str(kw))
        count += 1
    assert count > 50


def test_canonical_to_params_from_reference_lists(ours, rng):
    """CanonicalToParams of independently built lists equals the reference packing."""
    for mode in MODES:
        for direction in DIRS:
            kw = model_kw(mode, 2, 3, 5, direction=direction)
            params = cref.random_params(rng, **kw)
            w, b = cref.to_canonical(params, **kw)
            for dtype in (F64, F16, BF16):
                got = _to_params_ours(ours, kw, [tf.cast(t, dtype) for t in w],
                                      [tf.cast(t, dtype) for t in b], v2=True)
                np.testing.assert_array_equal(U.to_numpy(got), U.round_to(params, dtype))


@pytest.mark.parametrize("mode", MODES)
def test_keras_style_params_buffer(ours, rng, mode):
    """1 layer unidirectional: the Keras/tf-keras canonical-to-params concatenation
    ([W_0..W_{K-1}, R_0..R_{K-1} flattened row-major [H, in]] ++ [bW..., bR...]) loads as-is;
    the forward equals the Keras layer."""
    T, B, I, H = 5, 3, 4, 3
    layer = _keras_layer(mode, H, go_backwards=False)
    layer.build((B, T, I))
    kernel = rng.normal(size=(I, layer.cell.kernel.shape[1])) * 0.5
    rec = rng.normal(size=(H, kernel.shape[1])) * 0.5
    bias = rng.normal(size=tuple(layer.cell.bias.shape)) * 0.5
    layer.set_weights([kernel, rec, bias])
    K = cref.num_gates(mode)
    order = [1, 0, 2] if mode == "gru" else list(range(K))
    split = lambda m: np.split(m, K, axis=1)
    mats = [split(kernel)[k].T for k in order] + [split(rec)[k].T for k in order]
    if mode == "gru":
        biases = [np.split(bias[0], K)[k] for k in order] + [np.split(bias[1], K)[k]
                                                             for k in order]
    else:
        biases = list(np.split(bias, K)) + [np.zeros(H)] * K
    params = np.concatenate([m.ravel() for m in mats] + biases)
    kw = model_kw(mode, 1, H, I)
    assert params.size == cref.params_size(**kw)
    x = rng.normal(size=(T, B, I))
    h0 = rng.uniform(-1, 1, size=(1, B, H))
    c0 = rng.normal(size=(1, B, H)) if mode == "lstm" else np.zeros(())
    state = [h0[0], c0[0]] if mode == "lstm" else [h0[0]]
    res = layer(tf.constant(np.transpose(x, [1, 0, 2])),
                initial_state=[tf.constant(s) for s in state])
    outs = call_fwd(ours, "", x, h0, c0, params, kw, F64)
    assert_near(outs[0], np.transpose(res[0].numpy(), [1, 0, 2]), 1e-10, "output")
    assert_near(outs[1], res[1].numpy()[None], 1e-10, "output_h")
    if mode == "lstm":
        assert_near(outs[2], res[2].numpy()[None], 1e-10, "output_c")
