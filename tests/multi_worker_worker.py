"""One worker of tests/test_multi_worker.py, run as a script with TF_CONFIG set.

    TF_CONFIG=... python multi_worker_worker.py DATA.npz OUT_DIR

With ``tf.distribute.MultiWorkerMirroredStrategy`` over the workers in TF_CONFIG (gRPC, ring
collectives) it trains

1. the Keras model of ``keras_model()`` (tf_rnn_ops.keras.GRU and LSTM) in a Keras training
   step under ``strategy.run`` (model call, ``tf.nn.compute_average_loss`` over the global
   batch, ``optimizer.apply_gradients``, which sums the gradients over the workers), fed by
   ``strategy.experimental_distribute_dataset`` with a dataset batched to the global batch;
2. for each case in ``RAW_CASES``, the model of ``raw_loss()`` (tf_rnn_ops.raw_ops.CudnnRNNV3)
   in a custom loop: each worker takes its own rows of the global batch, ``strategy.run``
   computes the gradients of its share of the global mean loss, ``all_reduce(SUM)`` adds them,
   and the SGD update is applied to the mirrored variables;
3. ``model.fit`` with our layers and with the stock layers (``fit_model(stock)``), recording
   the error instead of failing: Keras 3.15's ``fit`` cannot run under this strategy at all
   (keras-team/keras#20585; the test checks it is that error, and checks the weights if a
   later Keras runs it).

It writes the weights after training to OUT_DIR/worker<i>.npz (atomically), then waits until
every worker has written its file, so no worker exits while another may still read from it.
The test trains the same models in one process on the whole batch (``keras_model``,
``raw_loss`` and ``raw_sgd_step`` are imported from here) and compares.
"""
import json
import os
import sys
import time

import numpy as np
import tensorflow as tf   # importing does not start the runtime; the strategy must come first

KERAS_LR = 0.5
RAW_LR = 0.3
# (rnn_mode, dtype) of the custom-loop cases.
RAW_CASES = (("lstm", "float64"), ("gru", "float32"))


def keras_model(stock=False):
    """GRU -> LSTM -> Dense with our layers, or the stock ones (weights are set by the caller)."""
    import keras

    import tf_rnn_ops.keras as K
    layers = keras.layers if stock else K
    return keras.Sequential([keras.Input((6, 3)), layers.GRU(5, return_sequences=True),
                             layers.LSTM(4), keras.layers.Dense(2)])


def raw_params_size(mode, input_size, units):
    gates = {"lstm": 4, "gru": 3}[mode]
    return gates * units * (input_size + units) + 2 * gates * units


def raw_loss(mode, params, w_out, x, y, lengths, global_batch):
    """This replica's share of the global mean squared error of a one-layer CudnnRNNV3 (batch
    major, per-sequence lengths) followed by a linear head on the last hidden state."""
    from tf_rnn_ops import raw_ops
    batch, units = tf.shape(x)[0], tf.shape(w_out)[0]
    h0 = tf.zeros(tf.stack([batch, 1, units]), x.dtype)
    c0 = h0 if mode == "lstm" else tf.zeros([], x.dtype)
    _, h, _, _, _ = raw_ops.CudnnRNNV3(
        input=x, input_h=h0, input_c=c0, params=params, sequence_lengths=lengths,
        rnn_mode=mode, time_major=False, is_training=True)
    pred = tf.matmul(tf.squeeze(h, 1), w_out)
    return tf.reduce_sum(tf.square(pred - y)) / tf.cast(global_batch, x.dtype)


def raw_sgd_step(variables, grads, lr=RAW_LR):
    for v, g in zip(variables, grads):
        v.assign_sub(tf.cast(lr, v.dtype) * g)


def _wait_for_files(paths, timeout_s):
    deadline = time.monotonic() + timeout_s
    while not all(os.path.exists(p) for p in paths):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the other workers did not finish: {paths}")
        time.sleep(0.05)


def _keras_dataset(data):
    ds = tf.data.Dataset.from_tensor_slices((data["keras_x"], data["keras_y"]))
    ds = ds.batch(int(data["keras_batch"]))
    opts = tf.data.Options()
    opts.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return ds.with_options(opts)


def _keras_weights(data):
    return [data[f"keras_w{k}"] for k in range(int(data["keras_nw"]))]


def train_keras(strategy, data):
    """1: a Keras model trained by a custom step under strategy.run."""
    import keras
    global_batch = int(data["keras_batch"])
    with strategy.scope():
        model = keras_model()
        model.set_weights(_keras_weights(data))
        optimizer = keras.optimizers.SGD(KERAS_LR)

    def replica_step(x, y):
        with tf.GradientTape() as tape:
            per_example = keras.losses.mean_squared_error(y, model(x, training=True))
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))

    @tf.function
    def train_step(batch):
        strategy.run(replica_step, args=batch)

    for batch in strategy.experimental_distribute_dataset(_keras_dataset(data)):
        train_step(batch)
    return model.get_weights()


def train_raw(strategy, data, mode, dtype, task, workers):
    """2: the raw op in a custom loop; rows [task*n, (task+1)*n) of each batch are ours."""
    pre = f"{mode}_{dtype}_"
    x, y, lengths = data[pre + "x"], data[pre + "y"], data[pre + "lengths"]
    steps, global_batch = x.shape[0], x.shape[1]
    n = global_batch // workers
    with strategy.scope():
        variables = [tf.Variable(data[pre + "params"]), tf.Variable(data[pre + "w_out"])]

    def replica_step(xs, ys, ls):
        with tf.GradientTape() as tape:
            loss = raw_loss(mode, variables[0], variables[1], xs, ys, ls, global_batch)
        grads = tape.gradient(loss, variables)
        return tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, grads)

    @tf.function
    def train_step(xs, ys, ls):
        grads = strategy.run(replica_step, args=(xs, ys, ls))
        raw_sgd_step(variables, [strategy.experimental_local_results(g)[0] for g in grads])

    rows = slice(task * n, (task + 1) * n)
    for s in range(steps):
        train_step(tf.constant(x[s, rows]), tf.constant(y[s, rows]),
                   tf.constant(lengths[s, rows]))
    return [v.numpy() for v in variables]


def try_fit(strategy, data, stock):
    """3: model.fit; (weights, None) or (None, error text)."""
    import keras
    with strategy.scope():
        model = keras_model(stock)
        model.set_weights(_keras_weights(data))
        model.compile(keras.optimizers.SGD(KERAS_LR), "mse")
    try:
        model.fit(_keras_dataset(data), epochs=1, verbose=0)
    except Exception as e:  # noqa: BLE001 (recorded; the test decides)
        return None, f"{type(e).__name__}: {e}"[:3000]
    return model.get_weights(), None


def main(data_path, out_dir):
    cluster = json.loads(os.environ["TF_CONFIG"])
    task = cluster["task"]["index"]
    workers = len(cluster["cluster"]["worker"])

    # The strategy must exist before anything else touches the TensorFlow runtime.
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.RING,
        timeout_seconds=120)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)

    from tf_rnn_ops import raw_ops
    import tf_rnn_ops.keras as K
    calls = []

    def counting(owner, attr):
        real = getattr(owner, attr)

        def count(**kw):
            calls.append(kw["rnn_mode"])
            return real(**kw)
        setattr(owner, attr, count)

    counting(raw_ops, "CudnnRNNV3")   # raw_loss looks the op up on the module
    counting(K, "_keras_rnn")         # the layers' fused op

    data = np.load(data_path)
    out = {"replicas": np.array(strategy.num_replicas_in_sync)}
    for k, w in enumerate(train_keras(strategy, data)):
        out[f"keras_w{k}"] = w
    for mode, dtype in RAW_CASES:
        pre = f"{mode}_{dtype}_"
        out[pre + "params"], out[pre + "w_out"] = train_raw(strategy, data, mode, dtype, task,
                                                            workers)
    out["calls"] = np.array(json.dumps(calls))
    for name, stock in (("fit_ours", False), ("fit_stock", True)):
        weights, error = try_fit(strategy, data, stock)
        out[name + "_error"] = np.array(error or "")
        for k, w in enumerate(weights or []):
            out[f"{name}_w{k}"] = w

    path = os.path.join(out_dir, f"worker{task}.npz")
    np.savez(path + ".tmp.npz", **out)
    os.replace(path + ".tmp.npz", path)
    _wait_for_files([os.path.join(out_dir, f"worker{i}.npz") for i in range(workers)], 120)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
