"""CPU kernels for the *stock* CudnnRNN op names (opt-in).

Stock TensorFlow registers the CudnnRNN family for GPU only, so a graph or SavedModel that
was built on a GPU machine (Keras's cuDNN path, tf.compat.v1 CudnnLSTM, ...) fails on a
CPU-only host with "Could not find device for node". ``register_cudnn_rnn_cpu_kernels()``
loads a second small library, ``_tf_rnn_ops_cudnn_cpu.so``, that registers this package's CPU
kernels under those stock names (same attrs, same params layout), after checking that none of
them already has a CPU kernel: a duplicate registration would break the op process-wide, so
in that case nothing is loaded and an error says which op has one.
"""
import os
import threading

import tensorflow as tf

from tf_rnn_ops._loader import _package_dir, load_library

STOCK_OPS = (
    "CudnnRNN", "CudnnRNNV2", "CudnnRNNV3", "CudnnRNNBackprop", "CudnnRNNBackpropV2",
    "CudnnRNNBackpropV3", "CudnnRNNParamsSize", "CudnnRNNParamsToCanonical",
    "CudnnRNNParamsToCanonicalV2", "CudnnRNNCanonicalToParams", "CudnnRNNCanonicalToParamsV2",
)
_LIB_NAME = "_tf_rnn_ops_cudnn_cpu.so"
_lock = threading.Lock()
_loaded = False


def _cpu_kernels(op_name):
    from tensorflow.python.framework import kernels
    found = kernels.get_registered_kernels_for_op(op_name)
    return [k for k in found.kernel if k.device_type == "CPU"]


def register_cudnn_rnn_cpu_kernels():
    """Registers CPU kernels for the stock CudnnRNN* ops (idempotent, thread-safe).

    Returns True when this call or an earlier one registered them. Raises RuntimeError if a
    stock op already has a CPU kernel that this package did not register.
    """
    global _loaded
    with _lock:
        if _loaded:
            return True
        load_library()  # version check and the engine
        taken = [name for name in STOCK_OPS if _cpu_kernels(name)]
        if taken:
            raise RuntimeError(
                "tf_rnn_ops: not registering CPU kernels for the stock CudnnRNN ops: "
                f"{', '.join(taken)} already have a CPU kernel in this TensorFlow "
                "(a second registration would break them)")
        path = os.path.join(_package_dir(), _LIB_NAME)
        if not os.path.exists(path):
            raise ImportError(f"tf_rnn_ops: {path} not found; rebuild with ./configure.sh")
        tf.load_op_library(path)
        _loaded = True
        return True
