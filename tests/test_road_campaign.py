"""tools/road_campaign.py, a small budget: a few random mid-size cases of every family agree
with their references (stock ops and layers, the float64 references), and the campaign reports
an op that computes a wrong gradient and a layer that ran stock's loop (so that a long
campaign's "0 failed" means something)."""
import importlib.util
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load():
    spec = importlib.util.spec_from_file_location(
        "road_campaign", os.path.join(REPO, "tools", "road_campaign.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CAMPAIGN = _load()  # imports numpy only; TensorFlow and the ops load in main()


@pytest.fixture(scope="module")
def campaign():
    return CAMPAIGN


def first_output_off(real):
    """real, with its first output moved by 1e-3 of that output's largest magnitude."""
    import tensorflow as tf

    def op(*args, **kw):
        out = list(real(*args, **kw))
        out[0] = out[0] + tf.reduce_max(tf.abs(out[0])) * 1e-3
        return tuple(out)
    return op


def run(campaign, monkeypatch, capsys, *argv):
    import tf_rnn_ops.keras as K
    monkeypatch.setattr("sys.argv", ["road_campaign.py", *argv])
    # main() wraps the layers' op with its call counter: the test ends with the op as it was
    monkeypatch.setattr(K, "_keras_rnn", K._keras_rnn)
    status = campaign.main()
    return status, capsys.readouterr().out


@pytest.mark.parametrize("family", CAMPAIGN.FAMILIES)
def test_cases_agree(campaign, monkeypatch, capsys, family):
    status, out = run(campaign, monkeypatch, capsys, "--cases", "6", "--seed", "3",
                      "--families", family)
    assert status == 0, out
    assert "6 cases" in out and "0 failed" in out, out


def test_a_wrong_gradient_fails(campaign, monkeypatch, capsys):
    from tf_rnn_ops import raw_ops

    for name in ("BlockLSTMGrad", "BlockLSTMGradV2"):  # x's gradient off
        monkeypatch.setattr(raw_ops, name, first_output_off(getattr(raw_ops, name)))
    status, out = run(campaign, monkeypatch, capsys, "--cases", "6", "--seed", "3",
                      "--families", "block")
    assert status == 1, out
    assert "FAILED BlockLSTM" in out and "6 failed" in out, out


def test_only_reruns_one_case(campaign, monkeypatch, capsys):
    status, out = run(campaign, monkeypatch, capsys, "--cases", "40", "--seed", "3",
                      "--families", "block", "--only", "7")
    assert status == 0, out
    assert "1 cases" in out and "[8/40" in out, out
    assert "BlockLSTM" in out, out


def test_a_layer_on_the_stock_loop_fails(campaign, monkeypatch, capsys):
    """A 'layer of ours' that runs stock Keras's loop matches stock exactly, and must still
    fail: the campaign checks that our layers called the fused op."""
    def stock_twice(keras, kind, units, **kw):
        if kind == "gru_reset_before":
            kw["reset_after"] = False
        cls = {"lstm": keras.layers.LSTM, "simple": keras.layers.SimpleRNN}.get(
            kind, keras.layers.GRU)
        return [cls(units, **kw), cls(units, **kw)]

    monkeypatch.setattr(campaign, "layer_pair", stock_twice)
    status, out = run(campaign, monkeypatch, capsys, "--cases", "4", "--seed", "3",
                      "--families", "keras", "stream")
    assert status == 1, out
    assert "4 failed" in out and "did not call the fused op" in out, out


def test_a_wrong_mps_gradient_fails(campaign, monkeypatch, capsys):
    """The kink rule (an MPS gradient case that agrees once its source is nudged is skipped)
    does not hide a wrong gradient: it is wrong after the nudge too."""
    from tf_rnn_ops import mps

    for name in ("lstm_gradients", "gru_gradients"):  # the source's gradient off
        monkeypatch.setattr(mps, name, first_output_off(getattr(mps, name)))
    status, out = run(campaign, monkeypatch, capsys, "--cases", "12", "--seed", "3",
                      "--families", "mps")
    assert status == 1, out
    assert "FAILED mps " in out and "_gradients" in out and "0 skipped" in out, out


def test_a_relu_kink_under_bf16_products(campaign, monkeypatch, capsys):
    """Seed 65 case 579, a bfloat16 rnn_relu CudnnRNN gradient case: where the bf16 products
    (AVX512_BF16) put a pre-activation across relu's kink, it is skipped because it agrees with
    the reference that rounds the products' operands as they do; without that reference, or
    with an input gradient 1.5x off, it fails."""
    import contextlib

    import tensorflow as tf
    from tf_rnn_ops import raw_ops

    argv = ("--seed", "65", "--only", "579")
    status, out = run(campaign, monkeypatch, capsys, *argv)
    assert status == 0 and "0 failed" in out, out
    if "1 skipped" not in out:
        pytest.skip("no relu kink on this CPU (float products, or other sums)")
    assert "relu kink under bf16 products" in out, out

    with monkeypatch.context() as m:
        m.setattr(campaign, "bf16_product_operands", contextlib.nullcontext)
        status, out = run(campaign, monkeypatch, capsys, *argv)
    assert status == 1 and "1 failed" in out, out

    real = raw_ops.CudnnRNNBackprop

    def dx_off(*args, **kw):
        out = list(real(*args, **kw))
        out[0] = out[0] * tf.constant(1.5, out[0].dtype)
        return tuple(out)
    monkeypatch.setattr(raw_ops, "CudnnRNNBackprop", dx_off)
    status, out = run(campaign, monkeypatch, capsys, *argv)
    assert status == 1 and "1 failed" in out, out


@pytest.mark.parametrize("case", ["841", "1463"])
def test_wide_input_weight_gradients(campaign, monkeypatch, capsys, case):
    """Seed 68 cases 841 (a Keras LSTM under XLA, I = 1428, H = 68) and 1463 (BlockLSTMV2,
    I = 1300, H = 15) at --scale big: on AVX-512 the pipelined backward's dW of so wide an input
    runs in K slabs (packed::GemmTN), and the dR after it reused that call's last slab of the
    gate gradients' packing as if it were all of it (errors of 1e20-1e34)."""
    status, out = run(campaign, monkeypatch, capsys, "--cases", "1500", "--seed", "68",
                      "--scale", "big", "--only", case)
    assert status == 0 and "1 agree" in out, out
