"""Child script of test_parallel_for.py: runs the sequence ops at sizes whose engine loops go
through ParallelFor (cc/engine/cpu_device.h: the input projections, packing, the bf16 pool
products' tiles, conversions and zeroing of half a million elements and more, column sums,
unit blocks of the steps that are not on the step loop) and writes every output to the .npz
file named by PARALLEL_FOR_OUT, for the parent to compare bit for bit between settings of
TF_RNN_OPS_CPU_PARALLEL_FOR. The intra-op pool size comes from PARALLEL_FOR_THREADS."""
import os
import sys

import numpy as np
import tensorflow as tf

from child_run import intra_op_threads_from

# (name, mode, dtype, T, B, I, H): off the 64-grid and on it, 16-bit inputs of more than 2^19
# elements (converted on the pool), batches above the pipelined chain's rows.
CASES = [
    ("lstm_f32", "lstm", tf.float32, 20, 128, 256, 300),
    ("lstm_bf16", "lstm", tf.bfloat16, 24, 96, 240, 256),
    ("gru_f32", "gru", tf.float32, 16, 80, 200, 200),
    ("gru_bf16", "gru", tf.bfloat16, 30, 64, 300, 136),
    ("tanh_f32", "rnn_tanh", tf.float32, 12, 72, 64, 520),
]


def _outputs(ours, mode, dtype, T, B, I, H, seed):
    rng = np.random.default_rng(seed)
    size = int(ours.CudnnRNNParamsSize(num_layers=1, num_units=H, input_size=I, T=tf.float32,
                                       S=tf.int32, rnn_mode=mode)[0])

    def t(shape, scale=1.0):
        return tf.cast(rng.standard_normal(shape) * scale, dtype)
    x, h0, c0 = t((T, B, I)), t((1, B, H)), t((1, B, H))
    params = t((size,), 1 / np.sqrt(I + H))
    dy, dh, dc = t((T, B, H)), t((1, B, H)), t((1, B, H))
    common = dict(input=x, input_h=h0, input_c=c0, params=params, rnn_mode=mode)
    y, hn, cn, reserve = ours.CudnnRNN(**common, is_training=True)
    grads = ours.CudnnRNNBackprop(**common, output=y, output_h=hn, output_c=cn,
                                  output_backprop=dy, output_h_backprop=dh,
                                  output_c_backprop=dc, reserve_space=reserve)
    infer = ours.CudnnRNN(**common, is_training=False)[:3]
    names = ["y", "hn", "cn", "dx", "dh0", "dc0", "dparams", "y_infer", "hn_infer", "cn_infer"]
    outs = [y, hn, cn] + list(grads) + list(infer)
    return {n: tf.cast(o, tf.float32).numpy() for n, o in zip(names, outs)}


def main():
    intra_op_threads_from("PARALLEL_FOR_THREADS")
    import tf_rnn_ops.raw_ops as ours
    result = {}
    for k, (name, mode, dtype, T, B, I, H) in enumerate(CASES):
        for key, value in _outputs(ours, mode, dtype, T, B, I, H, seed=k).items():
            result[f"{name}/{key}"] = value
        print("ran", name, flush=True)
    np.savez(os.environ["PARALLEL_FOR_OUT"], **result)
    print("THREADS", tf.config.threading.get_intra_op_parallelism_threads(), "CASES",
          len(CASES), "FAILURES 0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
