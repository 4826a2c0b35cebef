"""When a bad input is reported, in graph mode and eagerly (issue #37): the tested form of the
table "When a bad input is reported" in docs/DIFFERENCES.md.

Eagerly every bad input of the catalogue (test_catalogue.py) is an InvalidArgumentError from
the kernel. In a graph (tf.compat.v1 graph and Session, inputs of known static shapes) a shape
function reports what it can see while the graph is built, a ValueError naming the input;
the rest is the kernel's InvalidArgumentError when the graph runs. The rules:

* a shape function never rejects a graph that runs: every valid case of the catalogue
  (free axes, valid zero sizes) builds and runs;
* both errors name the same first input as the eager one (the first input that is wrong);
* which cases a shape function reports is BUILD_TIME below, one entry per op family, the same
  as the table of docs/DIFFERENCES.md.
"""

import numpy as np
import pytest
import tensorflow as tf

import lstm_util as U
import op_specs as S
import test_catalogue as C

SPECS = S.all_specs()
IDS = [S.spec_id(s) for s in SPECS]

LSTM_GRU = {"LSTMBlockCell", "LSTMBlockCellGrad", "BlockLSTM", "BlockLSTMV2", "BlockLSTMGrad",
            "BlockLSTMGradV2", "BlockLSTMGradExact", "GRUBlockCell", "GRUBlockCellGrad",
            "GRUBlockCellGradExact"}


def _rank(*names):
    """The rank cases of the named inputs."""
    return lambda spec, mut: mut[0] in ("rank_up", "rank_down") and mut[1] in names


def _attr_outside_its_list(spec, mut):
    """An attr value the op definition does not allow (checked when the node is built)."""
    return mut == ("value", "rnn_mode=bogus")


def _cudnn_forward(spec, mut):
    lstm_v3 = spec.name == "CudnnRNNV3" and spec.attrs["rnn_mode"] == "lstm"
    return _attr_outside_its_list(spec, mut) or _rank(
        "input", "input_h", "params", "sequence_lengths",
        *(("input_c",) if lstm_v3 else ()))(spec, mut)


def _cudnn_sizes(spec, mut):
    """The scalar sizes' ranks (and params'); CanonicalToParams (V1) checks in Python that its
    two lists have one length (stock: the op definition, a ValueError)."""
    lists_v1 = spec.name == "CudnnRNNCanonicalToParams" and (
        mut[0] == "list_len" or mut in (("value", "weights one short"),
                                        ("value", "biases one extra")))
    return lists_v1 or _rank("num_layers", "num_units", "input_size", "params")(spec, mut)


# Family -> which catalogue cases (spec, mutation) the shape function reports while the graph
# is built. The LSTM and GRU block ops: every rank and every size that disagrees with another
# input's (and LSTMBlockCell's empty batch or cell); the cuDNN and MPS families: the ranks their
# shape functions check. Everything else, and every value (seq_len_max, sequence_lengths,
# params sizes, ...), is reported when the graph runs.
BUILD_TIME = {
    "lstm_gru": lambda spec, mut: mut[0] in ("rank_up", "rank_down", "resize", "empty"),
    "cudnn": _cudnn_forward,
    "cudnn_backprop": _rank("input", "input_h", "params", "sequence_lengths"),
    "cudnn_sizes": _cudnn_sizes,
    "mps": _rank("source", "recurrent_weight"),
}


def family(spec):
    if spec.name in LSTM_GRU:
        return "lstm_gru"
    if spec.name.startswith("CudnnRNNBackprop"):
        return "cudnn_backprop"
    if spec.name in ("CudnnRNN", "CudnnRNNV2", "CudnnRNNV3"):
        return "cudnn"
    if spec.name.startswith("CudnnRNN"):
        return "cudnn_sizes"
    if spec.name.startswith(("LSTM", "GRU")):
        return "mps"
    return None  # KerasRNN (internal ops behind the Keras layers): the consistency rules only


def run_in_graph(spec, kw, attrs):
    """('build', error) | ('run', InvalidArgumentError) | ('ok', None): the call in a
    tf.compat.v1 graph whose inputs are constants of static shape, then a Session run. At
    build time the error is a shape function's or the op definition's ValueError, or the
    InvalidArgumentError of our Python wrapper's checks (dtypes, canonical lists)."""
    g = tf.Graph()
    with g.as_default():
        consts = tf.nest.map_structure(lambda t: tf.constant(t.numpy()), kw)
        try:
            outs = S.call_spec(spec, consts, attrs)
        except (ValueError, tf.errors.InvalidArgumentError) as e:
            return "build", e
        with tf.compat.v1.Session(graph=g) as sess:
            try:
                sess.run(outs)
            except tf.errors.InvalidArgumentError as e:
                return "run", e
    return "ok", None


def _cases(spec):
    """The catalogue's cases that a graph can hold (huge empty tensors cannot be constants),
    and the zero-size cases."""
    out = [(cid, mut, expect) for cid, mut, expect, _ in C.catalogue(spec) if mut[0] != "huge"]
    out += [(f"{sym}=0", ("zero", sym), "ok" if ok else "error")
            for sym, ok in spec.zero_ok.items()]
    return out


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_bad_inputs_in_a_graph(ours, spec):
    fam = family(spec)
    failures = []
    for cid, mut, expect in _cases(spec):
        rng = np.random.default_rng(U.seed_for(S.spec_id(spec) + cid))
        if mut[0] == "zero":
            try:
                kw, attrs, _ = S.base_call(spec, rng, dims=dict(spec.dims, **{mut[1]: 0}))
            except tf.errors.InvalidArgumentError:
                continue  # an attr minimum (num_params 0): no call to build
        else:
            kw, attrs, dims = S.base_call(spec, rng)
            kw, attrs = S.apply_mutation(spec, kw, attrs, dims, mut, rng)
        when, err = run_in_graph(spec, kw, attrs)
        if expect == "ok":
            if when != "ok":
                failures.append(f"{cid}: valid call fails in a graph ({when}): {err}")
            continue
        if when == "ok":
            failures.append(f"{cid}: no error in a graph")
            continue
        message = err.message if isinstance(err, tf.errors.OpError) else str(err)
        first = S.first_for(spec, mut) if mut[0] != "zero" else None
        if first is not None and S.first_named(spec, message) not in first:
            failures.append(f"{cid}: {when} error names {S.first_named(spec, message)!r} "
                            f"first, not one of {sorted(first)}: {message[:300]!r}")
        if fam is not None and mut[0] != "zero":
            want = "build" if BUILD_TIME[fam](spec, mut) else "run"
            if when != want:
                failures.append(f"{cid}: reported at {when} time, the table says {want}: "
                                f"{message[:200]!r}")
    assert not failures, "\n".join(failures)
