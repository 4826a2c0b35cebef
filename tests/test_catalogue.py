"""Bad-input catalogue of every op (issue #8), generated from the op table in op_specs.py.

For every op and every input: the wrong rank (one more, one less), each dimension off by one,
an empty tensor, an empty tensor with a huge dimension (element counts far beyond 2^50 and
int64), the wrong dtype, NaN and Inf values; for every dimension symbol: zero (valid ones give
correctly shaped results); and each op's value cases (negative / oversized seq_len_max,
sequence_lengths, num_layers, num_units, input_size, params sizes beyond int32, canonical lists
of the wrong length, bad attrs).

A bad input must raise tf.errors.InvalidArgumentError whose message names the input (or one of
the inputs its size is compared with), and names first the first input that is wrong as the user
sees it (S.expected_first: inputs are checked in op order against the sizes the earlier ones
set; issue #37). Everything runs in this process: a crash kills pytest
and fails the suite. The fuzzer (test_fuzz.py) explores the same space randomly, in a child
process.
"""

import re

import numpy as np
import pytest
import tensorflow as tf

import lstm_util as U
import op_specs as S

IAE = tf.errors.InvalidArgumentError
SPECS = S.all_specs()
IDS = [S.spec_id(s) for s in SPECS]
HUGE = 2**62


def _canon_names(spec):
    return {"num_params", "num_params_weights", "num_params_biases", "weights", "biases"} if \
        "Canonical" in spec.name else set()


def catalogue(spec):
    """[(case id, mutation, expect 'error' | 'ok', names the message may name)]."""
    kw, attrs, dims = S.base_call(spec, np.random.default_rng(0))
    cases = []
    for inp in spec.inputs:
        n = inp.name
        if inp.kind == "list":
            cases.append((f"{n}: one element more", ("list_len", n, 1), "error",
                          {n} | _canon_names(spec)))
            continue
        shape = tuple(kw[n].shape)
        rank = len(shape)
        free_rank = ("rank", n) in spec.free
        cases.append((f"{n}: rank + 1", ("rank_up", n), "ok" if free_rank else "error", {n}))
        if rank:
            cases.append((f"{n}: rank - 1", ("rank_down", n), "ok" if free_rank else "error",
                          {n}))
        for a in range(rank):
            ok = (n, a) in spec.free
            cases.append((f"{n}: axis {a} + 1", ("resize", n, a, shape[a] + 1),
                          "ok" if ok else "error", spec.related(n, [a])))
        if rank:
            cases.append((f"{n}: empty", ("empty", n), "ok" if n in spec.empty_ok else "error",
                          spec.related(n)))
        if rank >= 2 and inp.kind == "T" or inp.kind == "opt" and rank >= 2:
            for big, zero in ((0, rank - 1), (rank - 1, 0)):
                cases.append((f"{n}: empty with axis {big} = 2^62", ("huge", n, big, zero, HUGE),
                              "ok" if n in spec.empty_ok else "error", spec.related(n)))
    for cid, _, names in spec.values(dims, attrs) if spec.values else []:
        cases.append((cid, ("value", cid), "error", names))
    return cases


def dtype_cases(spec):
    cases = []
    several = sum(1 for i in spec.inputs if i.kind in ("T", "opt", "list")) > 1
    for inp in spec.inputs:
        if inp.kind in ("T", "opt", "list") and several:
            cases.append((f"{inp.name}: float64", ("dtype", inp.name, "float64"), {inp.name}))
        elif inp.kind == "i64":
            cases.append((f"{inp.name}: int32", ("dtype", inp.name, "int32"), {inp.name}))
        elif inp.kind == "i32":
            cases.append((f"{inp.name}: int64", ("dtype", inp.name, "int64"), {inp.name}))
            cases.append((f"{inp.name}: float32", ("dtype", inp.name, "float32"), {inp.name}))
    first = next((i for i in spec.inputs if i.kind == "T"), None)
    if first is not None:
        cases.append((f"{first.name}: int32", ("dtype", first.name, "int32"), {first.name}))
    return cases


def _run(spec, kw, attrs):
    try:
        return S.call_spec(spec, kw, attrs), None
    except IAE as e:
        return None, e
    except Exception as e:  # noqa: BLE001 - any other exception is a failure, reported
        return None, e


def _judge(spec, cid, expect, names, outs, err, dims, attrs, first=None):
    """None if the call behaved as expected, else a message. `first`: the inputs the error
    message may name first (issue #37: the first input that is wrong as the user sees it)."""
    if expect == "error":
        if err is None:
            return f"{cid}: no error (outputs {[tuple(o.shape) for o in outs]})"
        if not isinstance(err, IAE):
            return f"{cid}: {type(err).__name__} instead of InvalidArgumentError: {err}"
        if not S.names_message(err.message, names):
            return f"{cid}: message names none of {sorted(names)}: {err.message!r}"
        if first is not None and S.first_named(spec, err.message) not in first:
            return (f"{cid}: message names {S.first_named(spec, err.message)!r} first, not one "
                    f"of {sorted(first)}: {err.message!r}")
        return None
    if err is not None:
        return f"{cid}: valid call failed: {type(err).__name__}: {err}"
    problem = S.check_outputs(spec, outs, dims, attrs)
    return f"{cid}: {problem}" if problem else None


def _dims_after(spec, mut, dims):
    """dims after a valid resize of a single-symbol axis."""
    if mut[0] != "resize":
        return dims
    expr = spec.input(mut[1]).shape[mut[2]]
    return dict(dims, **{expr: mut[3]}) if expr in dims else dims


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_catalogue(ours, spec):
    """Ranks, sizes, empty and huge tensors, value cases: eager, every case."""
    failures, n = [], 0
    for cid, mut, expect, names in catalogue(spec):
        rng = np.random.default_rng(U.seed_for(S.spec_id(spec) + cid))
        kw, attrs, dims = S.base_call(spec, rng)
        kw, attrs = S.apply_mutation(spec, kw, attrs, dims, mut, rng)
        outs, err = _run(spec, kw, attrs)
        f = _judge(spec, cid, expect, names, outs, err, _dims_after(spec, mut, dims), attrs,
                   S.first_for(spec, mut))
        n += 1
        if f:
            failures.append(f)
    assert n >= 5
    assert not failures, f"{len(failures)} of {n} cases failed:\n" + "\n".join(failures)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_valid_outputs_are_initialised(ours, spec):
    """Valid calls (several seeds, hence several sequence lengths for V3) give finite outputs
    of plausible size: no uninitialised memory (CudnnRNNV3's reserve_space had some)."""
    for seed in range(6):
        kw, attrs, dims = S.base_call(spec, np.random.default_rng(seed))
        problem = S.check_plausible(S.call_spec(spec, kw, attrs),
                                    opaque=S.opaque_outputs(spec, dims, attrs))
        assert problem is None, f"seed {seed}: {problem}"


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_wrong_dtypes(ours, spec):
    if not spec.wrapper:
        pytest.skip("internal op without a Python wrapper: TensorFlow's own dtype check")
    failures = []
    for cid, mut, names in dtype_cases(spec):
        rng = np.random.default_rng(U.seed_for(cid))
        kw, attrs, dims = S.base_call(spec, rng)
        kw, attrs = S.apply_mutation(spec, kw, attrs, dims, mut, rng)
        outs, err = _run(spec, kw, attrs)
        f = _judge(spec, cid, "error", names, outs, err, dims, attrs)
        if f:
            failures.append(f)
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_zero_size_dimensions(ours, spec):
    """Each dimension symbol at 0: a correctly shaped result, or an InvalidArgumentError
    naming an input with that dimension (batch_size 0 of the block ops, num_units 0, ...)."""
    failures = []
    for sym, ok in spec.zero_ok.items():
        dims = dict(spec.dims, **{sym: 0})
        rng = np.random.default_rng(U.seed_for(sym))
        try:
            kw, attrs, dims = S.base_call(spec, rng, dims=dims)
        except IAE as e:           # num_params 0 (an attr minimum) for the canonical lists
            if ok:
                failures.append(f"{sym}=0: building inputs failed: {e}")
            continue
        outs, err = _run(spec, kw, attrs)
        names = {i.name for i in spec.inputs if i.shape is not None and
                 any(sym in spec.symbols(e) for e in i.shape)} | _canon_names(spec) | {
            "num_layers", "num_units", "input_size"}
        # The first input carrying the size (sizes given as scalar values: not checked).
        scalar_sizes = any(i.shape == () and i.kind == "i32" for i in spec.inputs)
        first = None if scalar_sizes else S.first_with(spec, sym)
        f = _judge(spec, f"{sym}=0", "ok" if ok else "error", names, outs, err, dims, attrs,
                   None if first is None else {first})
        if f:
            failures.append(f)
        if ok and err is None:
            problem = S.check_plausible(outs, opaque=S.opaque_outputs(spec, dims, attrs))
            if problem:
                failures.append(f"{sym}=0: {problem}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf, 1e30], ids=["nan", "inf", "-inf",
                                                                        "1e30"])
@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_non_finite_values(ours, spec, value):
    """NaN / Inf / huge values in any float input: correctly shaped results, never a crash;
    a NaN in the spec's main input reaches the outputs."""
    failures = []
    for inp in spec.inputs:
        if inp.kind not in ("T", "opt", "list"):
            continue
        rng = np.random.default_rng(U.seed_for(inp.name))
        kw, attrs, dims = S.base_call(spec, rng)
        kw, attrs = S.apply_mutation(spec, kw, attrs, dims, ("poison", inp.name, value, 0.37),
                                     rng)
        outs, err = _run(spec, kw, attrs)
        f = _judge(spec, inp.name, "ok", set(), outs, err, dims, attrs)
        if f:
            failures.append(f)
            continue
        if np.isnan(value) and inp.name == spec.nan_input:
            if not any(np.isnan(U.to_numpy(o)).any() for o in outs if o.dtype.is_floating):
                failures.append(f"NaN in {inp.name} reached no output")
    assert not failures, "\n".join(failures)


def _sample(spec):
    """Cases run inside tf.function: the first rank case, the first size case, a value case."""
    cases = catalogue(spec)
    pick = []
    for prefix in (": rank + 1", ": axis"):
        pick += [c for c in cases if prefix in c[0] and c[2] == "error"][:1]
    pick += [c for c in cases if c[1][0] == "value"][:1]
    return pick


def _traced(spec, kw, attrs, signature):
    @tf.function(input_signature=signature)
    def fn(*args):
        return S.call_spec(spec, tf.nest.pack_sequence_as(kw, list(args)), attrs)
    return fn


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_catalogue_in_tf_function(ours, spec):
    """The same errors from a tf.function whose inputs have unknown shapes (so that the
    kernel, not the shape function, sees the bad input)."""
    failures = []
    for cid, mut, expect, names in _sample(spec):
        rng = np.random.default_rng(U.seed_for(cid))
        kw, attrs, dims = S.base_call(spec, rng)
        kw, attrs = S.apply_mutation(spec, kw, attrs, dims, mut, rng)
        flat = tf.nest.flatten(kw)
        if not all(isinstance(t, tf.Tensor) for t in flat):
            continue
        fn = _traced(spec, kw, attrs, [tf.TensorSpec(None, t.dtype) for t in flat])
        try:
            fn(*flat)
            failures.append(f"{cid}: no error in tf.function")
        except IAE as e:
            if not S.names_message(e.message, names):
                failures.append(f"{cid}: message names none of {sorted(names)}: {e.message!r}")
        except (ValueError, TypeError) as e:
            # an attr error is raised while tracing; it must still name the attr / input
            if not S.names_message(str(e), names):
                failures.append(f"{cid}: {type(e).__name__} naming none of {names}: {e}")
    assert not failures, "\n".join(failures)


# ---------------------------------------------------------------------------------------------
# Sizes whose products overflow 32-bit (and 2^50) counts
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("num_layers,num_units,input_size", [
    (1, 2**15, 2**15), (3, 40000, 7), (2**22, 8, 8), (1, 2**20, 1)])
@pytest.mark.parametrize("direction", ["unidirectional", "bidirectional"])
def test_params_size_beyond_int32(ours, num_layers, num_units, input_size, direction):
    """More than 2^31 params: S=int64 gives the exact count (the closed formula computed with
    Python integers), S=int32 an InvalidArgumentError naming S."""
    kw = dict(mode="lstm", num_layers=num_layers, num_units=num_units, input_size=input_size,
              direction=direction)
    expect = S.cref.params_size_formula(**kw)
    assert expect > 2**31
    attrs = dict(rnn_mode="lstm", direction=direction, T=tf.float32)
    got = ours.CudnnRNNParamsSize(num_layers=num_layers, num_units=num_units,
                                  input_size=input_size, S=tf.int64, **attrs)
    assert int(got[0]) == expect
    with pytest.raises(IAE, match=r"\bS\b"):
        ours.CudnnRNNParamsSize(num_layers=num_layers, num_units=num_units,
                                input_size=input_size, S=tf.int32, **attrs)


@pytest.mark.parametrize("num_layers,num_units,input_size", [
    (2**31 - 1, 2**31 - 1, 2**31 - 1), (1, 2**31 - 1, 1), (2**31 - 1, 2**20, 1)])
def test_params_size_beyond_2_50(ours, num_layers, num_units, input_size):
    for S_ in (tf.int32, tf.int64):
        with pytest.raises(IAE, match="sizes too large"):
            ours.CudnnRNNParamsSize(num_layers=num_layers, num_units=num_units,
                                    input_size=input_size, T=tf.float32, S=S_)


@pytest.mark.parametrize("v2", [False, True])
def test_canonical_to_params_huge_num_layers_is_fast_error(ours, v2):
    """num_layers = 2^31 - 1 with a short list: an error naming the lists, computed without
    listing 2^33 regions (which would exhaust memory)."""
    w = [tf.zeros([3, 5])] * 4 + [tf.zeros([3, 3])] * 4
    b = [tf.zeros([3])] * 8
    op = ours.CudnnRNNCanonicalToParamsV2 if v2 else ours.CudnnRNNCanonicalToParams
    with pytest.raises(IAE, match=r"num_params"):
        op(num_layers=2**31 - 1, num_units=3, input_size=5, weights=w, biases=b)


def test_cudnn_huge_layers_from_empty_state_is_fast_error(ours):
    """input_h [2^40, 0, 1] (batch 0: no elements) implies 2^40 layers; the params size is
    compared in closed form (no loop over the layers)."""
    x = tf.zeros([1, 0, 1])
    h = tf.zeros([2**40, 0, 1])
    with pytest.raises(IAE, match=r"\bparams\b"):
        ours.CudnnRNN(input=x, input_h=h, input_c=h, params=tf.zeros([8]))


def test_block_lstm_overflowing_output_shape(ours):
    """x [2^61, 3, 0] has no elements but implies outputs of 2^61 * 3 * H elements (beyond
    int64): building that shape CHECK-fails (process abort); ours is an InvalidArgumentError."""
    H = 2
    args = dict(seq_len_max=tf.constant(0, tf.int64), x=tf.zeros([2**61, 3, 0]),
                cs_prev=tf.zeros([3, H]), h_prev=tf.zeros([3, H]), w=tf.zeros([H, 4 * H]),
                wci=tf.zeros([H]), wcf=tf.zeros([H]), wco=tf.zeros([H]), b=tf.zeros([4 * H]))
    for op in ("BlockLSTM", "BlockLSTMV2"):
        with pytest.raises(IAE, match=r"sizes too large.*\bx\b"):
            getattr(ours, op)(**args)


def test_mps_hidden_size_whose_multiples_overflow(ours):
    """recurrent_weight [0, 2^62]: 4 * hidden wraps to 0 in 64 bits, which made the shape
    comparison itself overflow (undefined behaviour); the dimensions are checked first now."""
    from tf_rnn_ops import mps
    with pytest.raises(IAE, match=r"sizes too large.*\brecurrent_weight\b"):
        mps.lstm(tf.zeros([1, 1, 1]), tf.zeros([0, 2**62]), input_weight=tf.zeros([0, 1]))


# ---------------------------------------------------------------------------------------------
# Valid empty inputs against stock TensorFlow and against their meaning
# ---------------------------------------------------------------------------------------------

STOCK_ZERO = [(op, sym) for op in ("LSTMBlockCellGrad", "BlockLSTM", "BlockLSTMV2",
                                    "BlockLSTMGrad", "BlockLSTMGradV2", "GRUBlockCell",
                                    "GRUBlockCellGrad")
              for sym in ("T", "B", "I", "H") if sym != "T" or op.startswith("Block")]
STOCK_ZERO += [("LSTMBlockCell", "I")]
# Outputs stock leaves uninitialised there (stock allocates them and computes nothing):
# ours are zero, the gradient of an empty sum.
STOCK_UNINITIALISED = {(op, "B"): {3} for op in ("BlockLSTMGrad", "BlockLSTMGradV2")}
STOCK_UNINITIALISED.update({(op, "H"): {0} for op in ("BlockLSTMGrad", "BlockLSTMGradV2",
                                                      "GRUBlockCellGrad")})


@pytest.mark.parametrize("op,sym", STOCK_ZERO, ids=[f"{o}-{s}=0" for o, s in STOCK_ZERO])
def test_zero_size_matches_stock(ours, op, sym):
    """Zero timelen / batch_size / input_size / cell_size, where stock computes a result: the
    same shapes and values as stock tf.raw_ops (float32). BlockLSTM's outputs are compared
    where stock defines them (all of them at T=0; with I=0 every step is computed); outputs
    stock leaves uninitialised (w_grad at batch_size 0, x_grad / d_x at cell_size 0) must be
    zero."""
    spec = S.by_id(op)
    rng = np.random.default_rng(U.seed_for(op + sym))
    dims = dict(spec.dims, **{sym: 0})
    kw, attrs, dims = S.base_call(spec, rng, dims=dims)
    ours_out = S.call_spec(spec, kw, attrs)
    stock_out = getattr(tf.raw_ops, op)(**kw, **attrs)
    assert len(ours_out) == len(stock_out)
    for k, (a, b) in enumerate(zip(ours_out, stock_out)):
        assert tuple(a.shape) == tuple(b.shape), f"output {k}: {a.shape} vs stock {b.shape}"
        want = np.zeros(b.shape) if k in STOCK_UNINITIALISED.get((op, sym), ()) else \
            U.to_numpy(b)
        np.testing.assert_allclose(U.to_numpy(a), want, rtol=2e-5, atol=2e-6,
                                   err_msg=f"{op} {sym}=0 output {k}")


@pytest.mark.parametrize("version", ["", "V2", "V3"])
def test_cudnn_zero_timelen_keeps_state(ours, version):
    """max_time 0: empty output, final state = initial state (no step ran)."""
    spec = S.by_id("CudnnRNN" + version)
    rng = np.random.default_rng(U.seed_for("cudnn-T0" + version))
    kw, attrs, dims = S.base_call(spec, rng, dims=dict(spec.dims, T=0))
    y, hn, cn = S.call_spec(spec, kw, attrs)[:3]
    assert y.shape[0] == 0
    np.testing.assert_array_equal(U.to_numpy(hn), U.to_numpy(kw["input_h"]))
    np.testing.assert_array_equal(U.to_numpy(cn), U.to_numpy(kw["input_c"]))


@pytest.mark.parametrize("spec_id", ["CudnnRNNBackprop", "CudnnRNNBackpropV3"])
def test_cudnn_backprop_zero_batch_gives_zero_params_grad(ours, spec_id):
    spec = S.by_id(spec_id)
    rng = np.random.default_rng(U.seed_for(spec_id))
    kw, attrs, dims = S.base_call(spec, rng, dims=dict(spec.dims, B=0))
    dx, dh, dc, dp = S.call_spec(spec, kw, attrs)
    assert dx.shape.num_elements() == 0 and dh.shape.num_elements() == 0
    np.testing.assert_array_equal(U.to_numpy(dp), np.zeros(dp.shape))


def test_mps_zero_timelen_passes_state_gradient_through(ours):
    """LSTMGradients with T = 0: the state/cell gradients arrive unchanged at init_state /
    init_cell; the weight gradients are zero."""
    spec = S.by_id("LSTMGradients")
    rng = np.random.default_rng(U.seed_for("mps-T0"))
    kw, attrs, dims = S.base_call(spec, rng, dims=dict(spec.dims, T=0))
    out = S.call_spec(spec, kw, attrs)
    d_source, d_R, d_W, d_b, d_p, d_is, d_ic = out
    np.testing.assert_array_equal(U.to_numpy(d_is), U.to_numpy(kw["state_gradient"]))
    np.testing.assert_array_equal(U.to_numpy(d_ic), U.to_numpy(kw["cell_gradient"]))
    for g in (d_R, d_W, d_b, d_p):
        np.testing.assert_array_equal(U.to_numpy(g), np.zeros(g.shape))


@pytest.mark.parametrize("attr", ["activation", "input_gate_activation", "cell_gate_activation"])
def test_mps_unknown_activation_names_the_attr(ours, attr):
    """The raw op (below the Python descriptor, which raises ValueError) rejects an unknown
    activation with an InvalidArgumentError naming the attr."""
    from tf_rnn_ops._loader import load_library
    with pytest.raises(IAE, match=rf"\b{attr}\b"):
        load_library().tf_rnn_lstm(
            source=tf.zeros([2, 1, 8]), recurrent_weight=tf.zeros([8, 2]), input_weight=[],
            bias=[], init_state=[], init_cell=[], mask=[], peephole=[], **{attr: "gelu"})


def test_catalogue_size():
    """Cases per op (printed with -s; the report in the issue quotes them)."""
    total = 0
    for spec in SPECS:
        n = len(catalogue(spec)) + len(dtype_cases(spec)) + len(spec.zero_ok) + 4 * sum(
            1 for i in spec.inputs if i.kind in ("T", "opt", "list"))
        total += n
        print(f"{S.spec_id(spec):40s} {n:4d} cases")
        assert n >= 10, S.spec_id(spec)
    print(f"total {total}")
    assert re.match(r"\w", "x")
