"""GPU kernels of every TfRnn> op: the CudnnRNN family, the block ops, the MPSGraph-style ops
and the Keras layers' op pair (registered when the library was built with CUDA; not the mixed
pair KerasRNNMixed, which the layers call only where they run on the CPU): they are registered
under our names only, for every dtype, with
the integer inputs in host memory, and the library still loads and computes on CPU in CPU-only
TensorFlow."""

import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.framework import kernels

CUDA_SO = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tf_rnn_ops",
                       "_tfrnn_engine_cuda.so")
OPS = ["CudnnRNN", "CudnnRNNV2", "CudnnRNNV3", "CudnnRNNBackprop", "CudnnRNNBackpropV2",
       "CudnnRNNBackpropV3", "CudnnRNNParamsSize", "CudnnRNNParamsToCanonical",
       "CudnnRNNParamsToCanonicalV2", "CudnnRNNCanonicalToParams", "CudnnRNNCanonicalToParamsV2",
       "GRU", "GRUGradients", "LSTM", "LSTMGradients", "LSTMBlockCell", "LSTMBlockCellGrad",
       "BlockLSTM", "BlockLSTMV2", "BlockLSTMGrad", "BlockLSTMGradV2", "BlockLSTMGradExact",
       "GRUBlockCell", "GRUBlockCellGrad", "GRUBlockCellGradExact", "KerasRNN",
       "KerasRNNBackprop"]


def _gpu_kernels(name):
    return [k for k in kernels.get_registered_kernels_for_op(name).kernel
            if k.device_type == "GPU"]


@pytest.mark.parametrize("op", OPS)
def test_gpu_kernels_registered_with_cuda_build(ours, op):
    ks = _gpu_kernels("TfRnn>" + op)
    if not os.path.exists(CUDA_SO):
        assert not ks, "GPU kernels registered although the CUDA engine was not built"
        return
    dtypes = set()
    for k in ks:
        for c in k.constraint:
            if c.name == "T":
                dtypes.update(c.allowed_values.list.type)
    assert dtypes == {tf.half.as_datatype_enum, tf.bfloat16.as_datatype_enum,
                      tf.float32.as_datatype_enum, tf.float64.as_datatype_enum}, op
    host = set(ks[0].host_memory_arg)
    if op == "CudnnRNNV3" or op == "CudnnRNNBackpropV3":
        assert {"sequence_lengths", "host_reserved"} <= host
    if op.startswith("KerasRNN"):
        assert "sequence_lengths" in host
    if op.startswith("BlockLSTM"):
        assert "seq_len_max" in host
    if op.startswith("CudnnRNNParams") or op.startswith("CudnnRNNCanonical"):
        assert {"num_layers", "num_units", "input_size"} <= host


def test_stock_names_get_no_gpu_kernels(ours):
    # Stock GPU TensorFlow has its own GPU kernels for these; a second one would break them.
    for op in OPS:
        assert all("TfRnn" not in k.op for k in _gpu_kernels(op))


def test_still_runs_on_cpu(ours):
    T, B, I, H = 3, 2, 4, 5
    size = int(ours.CudnnRNNParamsSize(num_layers=1, num_units=H, input_size=I, T=tf.float32,
                                       S=tf.int32, rnn_mode="gru")[0])
    with tf.device("/CPU:0"):
        out = ours.CudnnRNNV3(input=tf.ones([T, B, I]), input_h=tf.zeros([1, B, H]),
                              input_c=tf.zeros([1, B, H]), params=tf.fill([size], 0.1),
                              sequence_lengths=tf.constant([3, 2]), rnn_mode="gru")
    assert np.all(np.isfinite(out[0].numpy()))
