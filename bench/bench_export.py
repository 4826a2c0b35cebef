"""ONNX export: file size and onnxruntime latency of an LSTM and a GRU model exported
(a) from our layers (tf_rnn_ops/onnx_export.py: native LSTM / GRU nodes) and (b) from
``tf_rnn_ops.keras.to_stock(model)`` (stock Keras 3 layers: tf2onnx gives an LSTM node for
the LSTM, a Loop for the GRU). B=1, T=100, I=64, H=128, float32; the median of 50 runs after
5 warm-up runs, one onnxruntime thread (intra_op_num_threads=1).

    .venv/bin/python bench/bench_export.py [--runs 50] [--threads 1]
"""
import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tf_rnn_ops  # noqa: E402,F401
import tf_rnn_ops.keras as K  # noqa: E402
import keras  # noqa: E402
import onnxruntime as ort  # noqa: E402
import tf2onnx  # noqa: E402

B, T, I, H = 1, 100, 64, 128


def log(msg):
    print(msg, flush=True)


def export(model):
    spec = [tf.TensorSpec((B, T, I), tf.float32, name="x")]
    fn = tf.function(lambda x: model(x, training=False))
    proto, _ = tf2onnx.convert.from_function(fn, input_signature=spec, opset=17)
    return proto


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    x = np.random.default_rng(0).standard_normal((B, T, I)).astype(np.float32)
    rows = []
    for name, layer in (("LSTM", K.LSTM), ("GRU", K.GRU)):
        inp = keras.Input((T, I), batch_size=B)
        ours = keras.Model(inp, layer(H, return_sequences=True)(inp))
        want = np.asarray(ours(x))
        for variant, model in (("ours", ours), ("to_stock", K.to_stock(ours))):
            log(f"{name} {variant}: exporting")
            proto = export(model)
            ops = sorted({n.op_type for n in proto.graph.node}
                         & {"LSTM", "GRU", "RNN", "Loop", "Scan"})
            data = proto.SerializeToString()
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = args.threads
            sess = ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])
            feed = {sess.get_inputs()[0].name: x}
            got = sess.run(None, feed)[0]
            err = float(np.abs(got - want).max())
            for _ in range(5):
                sess.run(None, feed)
            times = []
            for _ in range(args.runs):
                t0 = time.perf_counter()
                sess.run(None, feed)
                times.append(time.perf_counter() - t0)
            ms = 1e3 * float(np.median(times))
            rows.append((name, variant, "+".join(ops), len(data), ms, err))
            log(f"{name} {variant}: nodes {'+'.join(ops)}, {len(data)} bytes, {ms:.3f} ms, "
                f"max |ort - ours| {err:.2e}")
    log("\n| model | from | recurrent node | file (bytes) | ms / inference | max abs err |")
    log("| --- | --- | --- | ---: | ---: | ---: |")
    for name, variant, ops, size, ms, err in rows:
        log(f"| {name} | {variant} | {ops} | {size} | {ms:.3f} | {err:.1e} |")


if __name__ == "__main__":
    main()
