"""tf_rnn_ops.register_cudnn_rnn_cpu_kernels(): CPU kernels under the *stock* CudnnRNN names.

Stock TensorFlow has no CPU kernel for any Cudnn* op (docs/SEMANTICS.md §5 #9), so a graph or a
SavedModel built with them fails on a CPU-only host. Each case runs in a fresh subprocess
(kernel registration is process-wide) and is compared with the float64 reference.
"""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

import cudnn_reference as R

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

KW = dict(mode="lstm", num_layers=2, num_units=5, input_size=3, direction="bidirectional")
T, B = 6, 3


def _run(code, tmp_path):
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(code))
    env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run([sys.executable, str(script)], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"child failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
    return proc.stdout


def _inputs(rng):
    x = rng.normal(size=(T, B, KW["input_size"]))
    h0 = rng.normal(size=(4, B, 5)) * 0.5
    c0 = rng.normal(size=(4, B, 5)) * 0.5
    params = R.random_params(rng, **KW)
    lengths = np.array([6, 2, 0], np.int32)
    return x, h0, c0, params, lengths


def _reference(x, h0, c0, params, lengths):
    xs, h0s, c0s, ps = (tf.constant(a, tf.float64) for a in (x, h0, c0, params))
    with tf.GradientTape() as tape:
        tape.watch([xs, h0s, c0s, ps])
        y, hn, cn = R.cudnn_rnn_ref(xs, h0s, c0s, ps, seq_lengths=lengths, **KW)
        loss = tf.reduce_sum(y * y) + tf.reduce_sum(hn) + 2.0 * tf.reduce_sum(cn)
    grads = tape.gradient(loss, [xs, h0s, c0s, ps])
    return [y.numpy(), hn.numpy(), cn.numpy()], [g.numpy() for g in grads]


def _save_inputs(tmp_path, arrays):
    for name, a in arrays.items():
        np.save(tmp_path / f"{name}.npy", a)


def test_stock_ops_have_no_cpu_kernel_until_registered(tmp_path):
    out = _run("""
        import json
        import numpy as np
        import tensorflow as tf
        res = {}
        def size():
            return tf.raw_ops.CudnnRNNParamsSize(num_layers=1, num_units=4, input_size=3,
                                                 T=tf.float32, S=tf.int32)
        try:
            size()
            res["before"] = "ran"
        except tf.errors.NotFoundError:
            res["before"] = "NotFoundError"
        import tf_rnn_ops
        res["first"] = tf_rnn_ops.register_cudnn_rnn_cpu_kernels()
        res["second"] = tf_rnn_ops.register_cudnn_rnn_cpu_kernels()
        res["size"] = int(size()[0])
        print(json.dumps(res))
    """, tmp_path)
    res = json.loads(out.strip().splitlines()[-1])
    assert res["before"] == "NotFoundError"
    assert res["first"] is True and res["second"] is True
    assert res["size"] == R.params_size_formula(mode="lstm", num_layers=1, num_units=4,
                                                input_size=3)


def test_stock_graph_forward_and_gradient_run_on_cpu(tmp_path, rng):
    x, h0, c0, params, lengths = _inputs(rng)
    _save_inputs(tmp_path, dict(x=x, h0=h0, c0=c0, params=params, lengths=lengths))
    _run("""
        import numpy as np
        import tensorflow as tf
        import tf_rnn_ops
        tf_rnn_ops.register_cudnn_rnn_cpu_kernels()
        x, h0, c0, p, lengths = (np.load(f"{n}.npy") for n in ("x", "h0", "c0", "params",
                                                               "lengths"))
        x, h0, c0, p = (tf.constant(a) for a in (x, h0, c0, p))

        @tf.function
        def step(x, h0, c0, p):
            with tf.GradientTape() as tape:
                tape.watch([x, h0, c0, p])
                y, hn, cn, _, _ = tf.raw_ops.CudnnRNNV3(
                    input=x, input_h=h0, input_c=c0, params=p, sequence_lengths=lengths,
                    rnn_mode="lstm", direction="bidirectional", is_training=True)
                loss = tf.reduce_sum(y * y) + tf.reduce_sum(hn) + 2.0 * tf.reduce_sum(cn)
            return [y, hn, cn] + tape.gradient(loss, [x, h0, c0, p])

        out = step(x, h0, c0, p)
        ops = {o.type for o in step.get_concrete_function(x, h0, c0, p).graph.get_operations()}
        assert "CudnnRNNV3" in ops and "CudnnRNNBackpropV3" in ops, ops
        for k, t in enumerate(out):
            np.save(f"out{k}.npy", t.numpy())
    """, tmp_path)
    want_out, want_grads = _reference(x, h0, c0, params, lengths)
    for k, want in enumerate(want_out + want_grads):
        got = np.load(tmp_path / f"out{k}.npy")
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9, err_msg=f"output {k}")


def test_saved_model_with_stock_ops_loads_and_trains_on_cpu(tmp_path, rng):
    x, h0, c0, params, lengths = _inputs(rng)
    _save_inputs(tmp_path, dict(x=x, h0=h0, c0=c0, params=params, lengths=lengths))

    # Saving only traces the graph: no kernel is needed, exactly as on a GPU training host.
    class Model(tf.Module):
        def __init__(self):
            super().__init__()
            self.params = tf.Variable(params)

        @tf.function(input_signature=[tf.TensorSpec([T, B, 3], tf.float64),
                                      tf.TensorSpec([4, B, 5], tf.float64),
                                      tf.TensorSpec([4, B, 5], tf.float64),
                                      tf.TensorSpec([B], tf.int32)])
        def loss_and_grad(self, x, h0, c0, lengths):
            with tf.GradientTape() as tape:
                tape.watch([x, h0, c0])
                y, hn, cn, _, _ = tf.raw_ops.CudnnRNNV3(
                    input=x, input_h=h0, input_c=c0, params=self.params,
                    sequence_lengths=lengths, rnn_mode="lstm", direction="bidirectional")
                loss = tf.reduce_sum(y * y) + tf.reduce_sum(hn) + 2.0 * tf.reduce_sum(cn)
            gx, gh, gc, gp = tape.gradient(loss, [x, h0, c0, self.params])
            return {"y": y, "hn": hn, "cn": cn, "gx": gx, "gh": gh, "gc": gc, "gp": gp}

    tf.saved_model.save(Model(), str(tmp_path / "model"))
    _run("""
        import numpy as np
        import tensorflow as tf
        import tf_rnn_ops
        tf_rnn_ops.register_cudnn_rnn_cpu_kernels()
        m = tf.saved_model.load("model")
        x, h0, c0, lengths = (np.load(f"{n}.npy") for n in ("x", "h0", "c0", "lengths"))
        out = m.loss_and_grad(x, h0, c0, lengths)
        for k, v in out.items():
            np.save(f"sm_{k}.npy", v.numpy())
    """, tmp_path)
    (y, hn, cn), (gx, gh, gc, gp) = _reference(x, h0, c0, params, lengths)
    want = dict(y=y, hn=hn, cn=cn, gx=gx, gh=gh, gc=gc, gp=gp)
    for k, w in want.items():
        np.testing.assert_allclose(np.load(tmp_path / f"sm_{k}.npy"), w, rtol=1e-9, atol=1e-9,
                                   err_msg=k)


def test_canonical_converters_under_stock_names(tmp_path, rng):
    params = R.random_params(rng, **KW)
    np.save(tmp_path / "params.npy", params)
    _run("""
        import numpy as np
        import tensorflow as tf
        import tf_rnn_ops
        tf_rnn_ops.register_cudnn_rnn_cpu_kernels()
        p = np.load("params.npy")
        sizes = dict(num_layers=2, num_units=5, input_size=3, rnn_mode="lstm",
                     direction="bidirectional")
        w, b = tf.raw_ops.CudnnRNNParamsToCanonical(params=p, num_params=32, **sizes)
        back = tf.raw_ops.CudnnRNNCanonicalToParams(weights=w, biases=b, **sizes)
        np.save("back.npy", back.numpy())
        np.save("w0.npy", w[0].numpy())
    """, tmp_path)
    np.testing.assert_array_equal(np.load(tmp_path / "back.npy"), params)
    weights, _ = R.to_canonical(tf.constant(params), v2=False, **KW)
    np.testing.assert_array_equal(np.load(tmp_path / "w0.npy"), np.asarray(weights[0]))


@pytest.mark.parametrize("mode", ["gru", "rnn_tanh"])
def test_keras_style_single_layer_params_load_as_is(tmp_path, rng, mode):
    """A one-layer buffer laid out the way Keras's canonical-to-params code concatenates it
    (all kernels flattened, then all biases) runs through the stock op name on CPU."""
    kw = dict(mode=mode, num_layers=1, num_units=4, input_size=3)
    K = R.num_gates(mode)
    Ws = [rng.normal(size=(4, 3)) * 0.4 for _ in range(K)]
    Rs = [rng.normal(size=(4, 4)) * 0.4 for _ in range(K)]
    bs = [rng.normal(size=(4,)) * 0.1 for _ in range(2 * K)]
    flat = np.concatenate([m.reshape(-1) for m in Ws + Rs] + bs)
    x = rng.normal(size=(5, 2, 3))
    h0 = np.zeros((1, 2, 4))
    _save_inputs(tmp_path, dict(x=x, h0=h0, p=flat))
    _run(f"""
        import numpy as np
        import tensorflow as tf
        import tf_rnn_ops
        tf_rnn_ops.register_cudnn_rnn_cpu_kernels()
        x, h0, p = (np.load(f"{{n}}.npy") for n in ("x", "h0", "p"))
        y = tf.raw_ops.CudnnRNN(input=x, input_h=h0, input_c=np.zeros((1,), np.float64),
                                params=p, rnn_mode="{mode}")[0]
        np.save("y.npy", y.numpy())
    """, tmp_path)
    want, _, _ = R.cudnn_rnn_ref(x, h0, None, flat, **kw)
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), want.numpy(), rtol=1e-10,
                               atol=1e-10)
