"""TF1-style programs (issue #37): ``tf.compat.v1`` graphs, reference variables
(``use_resource=False``, dtype ``float32_ref``), ``get_variable``, sessions and
``tf.compat.v1.train`` optimizers, as long-time TensorFlow users and older test programs
write them. Stock ops accept reference tensors wherever a value of their base dtype goes;
so must ours.

* every op of the table in op_specs.py (all families, including the canonical lists of
  CudnnRNNCanonicalToParams(V2) and the MPS optional operands) runs in a graph whose every
  input is a reference variable, with the result of the same call in eager mode;
* an optimizer step per family (LSTM block, GRU block, CudnnRNN with its params/canonical
  converters, MPS LSTM/GRU, the Keras layers' KerasRNN): the gradient ``compute_gradients``
  gives and the step ``apply_gradients`` takes on reference variables, against float64
  references (NumPy, eager float64 TensorFlow ops differentiated by GradientTape, or the stock
  Keras layer in float64).
"""

import numpy as np
import pytest
import tensorflow as tf

import cudnn_reference as cref
import gru_reference as gref
import lstm_util as U
import mps_gru_reference as mgref
import mps_reference as mref
import op_specs as S
import reference as ref

SPECS = S.all_specs()
IDS = [S.spec_id(s) for s in SPECS]
V1 = tf.compat.v1


def _ref_variable(value, name):
    v = V1.Variable(value, use_resource=False, name=name)
    assert v.dtype._is_ref_dtype, v.dtype  # noqa: SLF001 (what the issue is about)
    return v


def _as_ref_variables(kw):
    """Every tensor of a call's kwargs (lists too) as a reference variable of its value."""
    out = {}
    for name, value in kw.items():
        if isinstance(value, list):
            out[name] = [_ref_variable(v.numpy(), f"{name}_{k}") for k, v in enumerate(value)]
        else:
            out[name] = _ref_variable(value.numpy(), name)
    return out


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_reference_variables_as_every_input(ours, spec):
    """Each op in a TF1 graph with every input (float, integer, list elements, optional
    operands) a reference variable: builds, runs in a Session, and gives the eager result."""
    kw, attrs, _ = S.base_call(spec, np.random.default_rng(U.seed_for(S.spec_id(spec))))
    want = S.call_spec(spec, kw, attrs)
    g = tf.Graph()
    with g.as_default():
        outs = S.call_spec(spec, _as_ref_variables(kw), attrs)
        with V1.Session(graph=g) as sess:
            sess.run(V1.global_variables_initializer())
            got = sess.run(outs)
    assert len(got) == len(want)
    for k, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_allclose(np.asarray(a, np.float64), U.to_numpy(b), rtol=1e-6,
                                   atol=1e-7, err_msg=f"output {k}")


def _optimizer_step(values, build, lr=0.5):
    """A TF1 training step: reference variables from get_variable (initialised to `values`),
    loss = build(variables), GradientDescentOptimizer's compute_gradients / apply_gradients in
    a Session. Returns (loss, {name: gradient}, {name: value after the step})."""
    g = tf.Graph()
    with g.as_default():
        with V1.variable_scope("model", use_resource=False):
            var = {n: V1.get_variable(n, initializer=tf.constant(v, tf.float32))
                   for n, v in values.items()}
        assert all(v.dtype._is_ref_dtype for v in var.values())  # noqa: SLF001
        loss = build(var)
        opt = V1.train.GradientDescentOptimizer(lr)
        grads_and_vars = opt.compute_gradients(loss, var_list=list(var.values()))
        assert all(gr is not None for gr, _ in grads_and_vars)
        train = opt.apply_gradients(grads_and_vars)
        with V1.Session(graph=g) as sess:
            sess.run(V1.global_variables_initializer())
            loss_v, grads = sess.run([loss, [gr for gr, _ in grads_and_vars]])
            sess.run(train)
            after = sess.run(var)
    grads = dict(zip(var, grads))
    for n in values:  # the step applied exactly the gradient it computed
        np.testing.assert_allclose(after[n], np.float32(values[n]) - lr * grads[n], rtol=1e-5,
                                   atol=1e-6, err_msg=n)
    return loss_v, grads, after


def _f32(a):
    return np.asarray(a, np.float32)


def _check(got, want, what, tol=2e-5):
    scale = max(1.0, float(np.abs(want).max(initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale, err_msg=what)


@pytest.mark.parametrize("op", ["LSTMBlockCell", "BlockLSTM", "BlockLSTMV2"])
def test_tf1_optimizer_step_lstm_block(ours, rng, op):
    T, B, I, H = 4, 3, 3, 5
    seq = op != "LSTMBlockCell"
    x = _f32(rng.normal(size=(T, B, I)))
    cs0, h0 = _f32(0.5 * rng.normal(size=(B, H))), _f32(0.5 * rng.normal(size=(B, H)))
    values = {"w": _f32(rng.normal(size=(I + H, 4 * H)) / np.sqrt(I + H)),
              "b": _f32(0.3 * rng.normal(size=4 * H)),
              "wci": _f32(0.3 * rng.normal(size=H)), "wcf": _f32(0.3 * rng.normal(size=H)),
              "wco": _f32(0.3 * rng.normal(size=H))}
    Ts = T if seq else 1
    cot_h, cot_cs = _f32(rng.normal(size=(Ts, B, H))), _f32(rng.normal(size=(Ts, B, H)))
    forget_bias = 0.0 if op == "BlockLSTMV2" else 0.7
    attrs = dict(use_peephole=True, cell_clip=0.0)
    if op != "BlockLSTMV2":
        attrs["forget_bias"] = forget_bias

    def build(v):
        if seq:
            out = getattr(ours, op)(seq_len_max=T, x=x, cs_prev=cs0, h_prev=h0, **v, **attrs)
        else:
            out = [tf.expand_dims(t, 0) for t in ours.LSTMBlockCell(
                x=x[0], cs_prev=cs0, h_prev=h0, **v, **attrs)]
        return tf.reduce_sum(out[6] * cot_h) + tf.reduce_sum(out[1] * cot_cs)

    loss, grads, _ = _optimizer_step(values, build)
    layout = U.LAYOUT[op]
    xs = x if seq else x[:1]
    fwd = ref.block_lstm_fwd(Ts, xs, cs0, h0, **values, forget_bias=forget_bias,
                             cell_clip=0.0, use_peephole=True, layout=layout)
    _check(loss, np.sum(fwd[6] * cot_h) + np.sum(fwd[1] * cot_cs), "loss")
    want = ref.block_lstm_grad(Ts, xs, cs0, h0, **values, i=fwd[0], cs=fwd[1], f=fwd[2],
                               o=fwd[3], ci=fwd[4], co=fwd[5], h=fwd[6], cs_grad=cot_cs,
                               h_grad=cot_h, use_peephole=True, layout=layout)
    for k, name in enumerate(("x", "cs_prev", "h_prev", "w", "wci", "wcf", "wco", "b")):
        if name in grads:
            _check(grads[name], want[k], name)


def test_tf1_optimizer_step_gru_block(ours, rng):
    B, I, H = 3, 4, 5
    x, h0 = _f32(rng.normal(size=(B, I))), _f32(rng.normal(size=(B, H)))
    values = {"w_ru": _f32(rng.normal(size=(I + H, 2 * H)) / 3),
              "w_c": _f32(rng.normal(size=(I + H, H)) / 3),
              "b_ru": _f32(0.3 * rng.normal(size=2 * H)), "b_c": _f32(0.3 * rng.normal(size=H))}
    cot = _f32(rng.normal(size=(B, H)))

    def build(v):
        return tf.reduce_sum(ours.GRUBlockCell(x=x, h_prev=h0, **v)[3] * cot)

    loss, grads, _ = _optimizer_step(values, build)
    _check(loss, np.sum(gref.gru_cell_fwd(x, h0, **values)[3] * cot), "loss")
    zero = np.zeros((B, H))
    want = gref.gru_cell_backprop(x, h0, values["w_ru"], values["w_c"], values["b_ru"],
                                  values["b_c"], zero, zero, zero, cot)
    for name, w in zip(("w_ru", "w_c", "b_ru", "b_c"), want[2:]):
        _check(grads[name], w, name)


@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_tf1_optimizer_step_cudnn_with_canonical_variables(ours, rng, mode):
    """The TF1 CudnnLSTM pattern: canonical weights and biases in reference variables, an
    opaque params reference variable initialised from them by CanonicalToParams, a training
    step on it through CudnnRNN, and the trained canonical weights read back with
    ParamsToCanonical."""
    T, B, I, H, L = 4, 3, 5, 4, 2
    kw = dict(mode=mode, num_layers=L, num_units=H, input_size=I, direction="bidirectional")
    attrs = dict(rnn_mode=mode, direction="bidirectional")
    sizes = dict(num_layers=L, num_units=H, input_size=I)
    params0 = _f32(cref.random_params(rng, **kw))
    weights0, biases0 = [[t.numpy() for t in ts] for ts in cref.to_canonical(params0, **kw)]
    x = _f32(rng.normal(size=(T, B, I)))
    h0, c0 = _f32(0.5 * rng.normal(size=(2 * L, B, H))), _f32(0.5 * rng.normal(size=(2 * L, B, H)))
    cot = _f32(rng.normal(size=(T, B, 2 * H)))
    lr = 0.5

    g = tf.Graph()
    with g.as_default():
        with V1.variable_scope("canonical", use_resource=False):
            w_vars = [V1.get_variable(f"w{k}", initializer=tf.constant(w))
                      for k, w in enumerate(weights0)]
            b_vars = [V1.get_variable(f"b{k}", initializer=tf.constant(b))
                      for k, b in enumerate(biases0)]
        opaque = ours.CudnnRNNCanonicalToParams(**sizes, weights=w_vars, biases=b_vars, **attrs)
        params = V1.Variable(opaque, use_resource=False, validate_shape=False, name="params")
        assert params.dtype._is_ref_dtype  # noqa: SLF001
        y = ours.CudnnRNN(input=x, input_h=h0, input_c=c0, params=params, **attrs)[0]
        loss = tf.reduce_sum(y * cot)
        opt = V1.train.GradientDescentOptimizer(lr)
        (grad, _), = opt.compute_gradients(loss, var_list=[params])
        train = opt.apply_gradients([(grad, params)])
        back = ours.CudnnRNNParamsToCanonical(**sizes, params=params, num_params=len(weights0),
                                              **attrs)
        with V1.Session(graph=g) as sess:
            sess.run(V1.variables_initializer(w_vars + b_vars))
            sess.run(params.initializer)
            start = sess.run(params)
            loss_v, grad_v = sess.run([loss, grad])
            sess.run(train)
            w_after, b_after = sess.run(back)

    np.testing.assert_array_equal(start, params0)  # CanonicalToParams of reference variables
    p64 = tf.constant(params0, tf.float64)
    with tf.GradientTape() as tape:
        tape.watch(p64)
        y_ref = cref.cudnn_rnn_ref(x, h0, c0, p64, **kw)[0]
        loss_ref = tf.reduce_sum(y_ref * tf.constant(cot, tf.float64))
    _check(loss_v, loss_ref.numpy(), "loss")
    _check(grad_v, tape.gradient(loss_ref, p64).numpy(), "params gradient")
    want_w, want_b = cref.to_canonical(params0 - lr * np.float64(grad_v), **kw)
    for k, (a, b) in enumerate(zip(w_after + b_after, want_w + want_b)):
        _check(a, b.numpy(), f"canonical {k} after the step", tol=1e-6)


@pytest.mark.parametrize("family", ["lstm", "gru"])
def test_tf1_optimizer_step_mps(ours, rng, family):
    from tf_rnn_ops import mps
    T, B, I, H = 3, 2, 4, 3
    K = 4 if family == "lstm" else 3
    values = {"recurrent_weight": _f32(rng.normal(size=(K * H, H)) / 2),
              "input_weight": _f32(rng.normal(size=(K * H, I)) / 2),
              "bias": _f32(0.3 * rng.normal(size=K * H))}
    source = _f32(rng.normal(size=(T, B, I)))
    cot = _f32(rng.normal(size=(T, B, H)))
    fn = mps.lstm if family == "lstm" else mps.gru
    reference = mref if family == "lstm" else mgref

    def build(v):
        return tf.reduce_sum(fn(source, **v)[0] * cot)

    loss, grads, _ = _optimizer_step(values, build)
    operands = dict(values, source=source)
    desc = reference.Desc()
    _check(loss, float(np.sum(reference.forward_outputs(operands, desc)[0].numpy() * cot)),
           "loss")
    want, names = reference.reference_vjp(operands, desc, state_cot=cot)
    for name, w in zip(names, want):
        if name in grads:
            _check(grads[name], w, name)


@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_tf1_optimizer_step_keras_rnn(ours, rng, mode):
    """The Keras layers' op (TfRnn>KerasRNN, Keras's weight layout; internal, called through
    the generated op function) with kernel, recurrent_kernel and bias in reference variables:
    the step's gradient against the stock Keras layer in float64 with the same weights."""
    import keras
    from tf_rnn_ops._loader import load_library
    B, T, I, H = 3, 4, 5, 4
    cls = keras.layers.LSTM if mode == "lstm" else keras.layers.GRU
    layer = cls(H, return_sequences=True, dtype="float64")
    layer.build((B, T, I))
    values = {w.path.split("/")[-1]: _f32(0.4 * rng.normal(size=w.shape)) for w in layer.weights}
    assert set(values) == {"kernel", "recurrent_kernel", "bias"}
    x = _f32(rng.normal(size=(B, T, I)))
    cot = _f32(rng.normal(size=(B, T, H)))

    def build(v):
        zeros = tf.zeros([B, H])
        out = load_library().tf_rnn_keras_rnn(
            input=x, input_h=zeros, input_c=zeros if mode == "lstm" else tf.zeros([0]),
            kernel=v["kernel"], recurrent_kernel=v["recurrent_kernel"], bias=v["bias"],
            sequence_lengths=tf.zeros([0], tf.int32), recurrent_mask=tf.zeros([0]),
            rnn_mode=mode)[0]
        return tf.reduce_sum(out * cot)

    loss, grads, _ = _optimizer_step(values, build)
    layer.set_weights([np.float64(values[w.path.split("/")[-1]]) for w in layer.weights])
    with tf.GradientTape() as tape:
        loss_ref = tf.reduce_sum(layer(np.float64(x)) * np.float64(cot))
    want = tape.gradient(loss_ref, layer.trainable_weights)
    _check(loss, loss_ref.numpy(), "loss")
    for w, g in zip(layer.trainable_weights, want):
        name = w.path.split("/")[-1]
        _check(grads[name], g.numpy(), name)
