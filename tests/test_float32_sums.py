"""float32 accuracy of the gradients that are sums over all T·B rows (issue #37): the bias
gradients and the peephole gradients. A float32 accumulator's error grows with T·B (about 4x
stock's at T·B in the thousands); ours sum in double (SumAcc in cc/engine/cpu_device.h).
Errors are measured against float64 references of the same float32 inputs: stock tf.raw_ops in
float32 for the block ops, and for CudnnRNN, which stock cannot run on CPU, the weight
gradients of the same call (GEMMs over the same rows). docs/DIFFERENCES.md quotes the measured
errors.
"""

import numpy as np
import pytest
import tensorflow as tf

import cudnn_reference as cref
import lstm_util as U
import reference as ref

SIZES = [(20, 256), (100, 100)]   # T, B: thousands of rows, where the sums dominate the error
I, H = 32, 32


def _rel(got, want):
    return float(np.linalg.norm(np.asarray(got, np.float64) - want) / np.linalg.norm(want))


def _block_lstm_grad_errors(ours, op, T, B, seed):
    """Relative L2 errors of (b_grad, wci_grad, wcf_grad, wco_grad) of stock and ours."""
    rng = np.random.default_rng(seed)
    f32 = lambda *shape, scale=0.5: (scale * rng.normal(size=shape)).astype(np.float32)  # noqa
    a = dict(x=f32(T, B, I), cs_prev=f32(B, H), h_prev=f32(B, H),
             w=f32(I + H, 4 * H, scale=1 / np.sqrt(I + H)), wci=f32(H, scale=0.1),
             wcf=f32(H, scale=0.1), wco=f32(H, scale=0.1), b=f32(4 * H))
    layout = U.LAYOUT[op]
    fwd = [o.astype(np.float32) for o in ref.block_lstm_fwd(
        T, **a, forget_bias=0.0 if op.endswith("V2") else 1.0, cell_clip=0.0,
        use_peephole=True, layout=layout)]
    acts = dict(zip(("i", "cs", "f", "o", "ci", "co", "h"), fwd))
    g = dict(cs_grad=f32(T, B, H, scale=1.0), h_grad=f32(T, B, H, scale=1.0))
    want = ref.block_lstm_grad(T, **a, **acts, **g, use_peephole=True, layout=layout)
    kw = {k: tf.constant(v) for k, v in dict(a, **acts, **g).items()}
    kw["seq_len_max"] = tf.constant(T, tf.int64)
    errors = {}
    for name, mod in (("stock", tf.raw_ops), ("ours", ours)):
        out = getattr(mod, op)(**kw, use_peephole=True)
        errors[name] = [_rel(out[k], want[k]) for k in (7, 4, 5, 6)]
    return np.array(errors["stock"]), np.array(errors["ours"])


@pytest.mark.parametrize("T,B", SIZES)
@pytest.mark.parametrize("op", ["BlockLSTMGrad", "BlockLSTMGradV2"])
def test_block_lstm_bias_and_peephole_grads_no_worse_than_stock(ours, op, T, B):
    """b_grad, wci_grad, wcf_grad, wco_grad (float32) against float64: ours at most stock's
    error (mean over two seeds)."""
    stock, mine = np.mean([_block_lstm_grad_errors(ours, op, T, B, s) for s in (0, 1)], axis=0)
    for name, s, m in zip(("b_grad", "wci_grad", "wcf_grad", "wco_grad"), stock, mine):
        assert m <= s, f"{op} T={T} B={B} {name}: ours {m:.3g} > stock {s:.3g}"


@pytest.mark.parametrize("T,B", SIZES)
@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_cudnn_bias_grads_no_worse_than_weight_grads(ours, mode, T, B):
    """CudnnRNN's params gradient (float32) against float64: the bias part (column sums over
    T·B rows) at most as far off as the weight part (GEMMs over the same rows)."""
    kw = dict(mode=mode, num_layers=1, num_units=H, input_size=I)
    n_bias = 2 * cref.num_gates(mode) * H
    errs = []
    for seed in (0, 1):
        rng = np.random.default_rng(seed)
        p = cref.random_params(rng, **kw).astype(np.float32)
        x = rng.normal(size=(T, B, I)).astype(np.float32)
        h = (0.5 * rng.normal(size=(1, B, H))).astype(np.float32)
        cot = rng.normal(size=(T, B, H)).astype(np.float32)
        p64 = tf.constant(p, tf.float64)
        with tf.GradientTape() as tape:
            tape.watch(p64)
            loss = tf.reduce_sum(cref.cudnn_rnn_ref(x, h, h, p64, **kw)[0] * cot)
        want = tape.gradient(loss, p64).numpy()
        p32 = tf.constant(p)
        with tf.GradientTape() as tape:
            tape.watch(p32)
            y = ours.CudnnRNN(input=x, input_h=h, input_c=h, params=p32, rnn_mode=mode)[0]
            loss = tf.reduce_sum(y * cot)
        got = tape.gradient(loss, p32).numpy()
        errs.append([_rel(got[-n_bias:], want[-n_bias:]), _rel(got[:-n_bias], want[:-n_bias])])
    bias, weights = np.mean(errs, axis=0)
    assert bias <= weights, f"{mode} T={T} B={B}: bias grads {bias:.3g} > weights {weights:.3g}"
