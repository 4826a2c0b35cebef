"""Exported models: file size and latency of LSTM, GRU and SimpleRNN models exported
(a) from our layers and (b) from ``tf_rnn_ops.keras.to_stock(model)`` (the stock Keras 3
layers), to ONNX (tf2onnx; run by onnxruntime) and to TFLite (the stock converter; run by
tf.lite.Interpreter, with its default XNNPACK delegate and without it). B=1, T=100, I=64,
H=128, float32, return_sequences; the median of 50 runs after 5 warm-up runs, one thread.

    .venv/bin/python bench/bench_export.py [--runs 50] [--threads 1] [--targets onnx,tflite]
"""
import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tf_rnn_ops  # noqa: E402,F401
import tf_rnn_ops.keras as K  # noqa: E402
import keras  # noqa: E402
import onnxruntime as ort  # noqa: E402
import tf2onnx  # noqa: E402

from bench_util import median_ms  # noqa: E402

B, T, I, H = 1, 100, 64, 128


def log(msg):
    print(msg, flush=True)


def export(model):
    spec = [tf.TensorSpec((B, T, I), tf.float32, name="x")]
    fn = tf.function(lambda x: model(x, training=False))
    proto, _ = tf2onnx.convert.from_function(fn, input_signature=spec, opset=17)
    return proto


def tflite_rows(models, x, args):
    """(model, from, ops, bytes, ms with XNNPACK, ms without, max |tflite - ours|) rows."""
    import warnings
    rows = []
    for name, variant, model, want in models:
        log(f"{name} {variant}: converting to TFLite")
        conv = tf.lite.TFLiteConverter.from_keras_model(model)
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        data = conv.convert()
        ms, err = [], 0.0
        for resolver in (tf.lite.experimental.OpResolverType.AUTO,
                         tf.lite.experimental.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                interp = tf.lite.Interpreter(model_content=data, num_threads=args.threads,
                                             experimental_op_resolver_type=resolver)
            interp.allocate_tensors()
            index = interp.get_input_details()[0]["index"]
            out = interp.get_output_details()[0]["index"]

            def run():
                interp.reset_all_variables()   # the fused LSTM's states (docs/DEPLOYING.md)
                interp.set_tensor(index, x)
                interp.invoke()

            ms.append(median_ms(run, args.runs, warmup=5))
            err = max(err, float(np.abs(interp.get_tensor(out) - want).max()))
        ops = sorted({o["op_name"] for o in interp._get_ops_details()}  # noqa: SLF001
                     & {"UNIDIRECTIONAL_SEQUENCE_LSTM", "WHILE"})
        rows.append((name, variant, "+".join(ops), len(data), ms[0], ms[1], err))
        log(f"{name} {variant}: {'+'.join(ops)}, {len(data)} bytes, {ms[0]:.3f} ms "
            f"(XNNPACK) / {ms[1]:.3f} ms (builtin kernels), max |tflite - ours| {err:.2e}")
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--targets", default="onnx,tflite")
    args = ap.parse_args()
    x = np.random.default_rng(0).standard_normal((B, T, I)).astype(np.float32)
    models = []
    for name, layer in (("LSTM", K.LSTM), ("GRU", K.GRU), ("SimpleRNN", K.SimpleRNN)):
        inp = keras.Input((T, I), batch_size=B)
        ours = keras.Model(inp, layer(H, return_sequences=True)(inp))
        want = np.asarray(ours(x))
        models += [(name, "ours", ours, want), (name, "to_stock", K.to_stock(ours), want)]
    if "tflite" in args.targets:
        rows = tflite_rows(models, x, args)
        log("\n| model | from | TFLite ops | file (bytes) | ms, XNNPACK | ms, builtin kernels "
            "| max abs err |")
        log("| --- | --- | --- | ---: | ---: | ---: | ---: |")
        for name, variant, ops, size, ms, ms_plain, err in rows:
            log(f"| {name} | {variant} | {ops} | {size} | {ms:.3f} | {ms_plain:.3f} | "
                f"{err:.1e} |")
    if "onnx" not in args.targets:
        return
    rows = []
    for name, variant, model, want in models:
        log(f"{name} {variant}: exporting to ONNX")
        proto = export(model)
        ops = sorted({n.op_type for n in proto.graph.node}
                     & {"LSTM", "GRU", "RNN", "Loop", "Scan"})
        data = proto.SerializeToString()
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = args.threads
        sess = ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])
        feed = {sess.get_inputs()[0].name: x}
        err = float(np.abs(sess.run(None, feed)[0] - want).max())
        ms = median_ms(lambda: sess.run(None, feed), args.runs, warmup=5)
        rows.append((name, variant, "+".join(ops), len(data), ms, err))
        log(f"{name} {variant}: nodes {'+'.join(ops)}, {len(data)} bytes, {ms:.3f} ms, "
            f"max |ort - ours| {err:.2e}")
    log("\n| model | from | recurrent node | file (bytes) | ms / inference | max abs err |")
    log("| --- | --- | --- | ---: | ---: | ---: |")
    for name, variant, ops, size, ms, err in rows:
        log(f"| {name} | {variant} | {ops} | {size} | {ms:.3f} | {err:.1e} |")


if __name__ == "__main__":
    main()
