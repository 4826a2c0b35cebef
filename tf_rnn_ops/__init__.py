"""tf_rnn_ops: TensorFlow's recurrent-network raw ops, reimplemented as a custom-op library.

    import tf_rnn_ops
    from tf_rnn_ops import raw_ops            # same signatures as tf.raw_ops
    i, cs, f, o, ci, co, h = raw_ops.BlockLSTM(seq_len_max=..., x=..., ...)

Importing the package loads the op library (so SavedModels that contain our ops load) and
registers the gradients of the forward ops and the Keras layers ``tf_rnn_ops.keras.LSTM`` /
``tf_rnn_ops.keras.GRU``.
"""
import sys as _sys

# `python -m tf_rnn_ops.report` (the main job; sys.argv[0] is "-m" while the package loads):
# TensorFlow's start-up lines, which TF 2.21 prints twice, once on its first screen.
if _sys.argv[:1] == ["-m"]:
    from tf_rnn_ops._startup import import_tensorflow_deduplicated
    import_tensorflow_deduplicated()

from tf_rnn_ops import _grads  # noqa: F401  (registers gradients)
from tf_rnn_ops import mps, raw_ops
from tf_rnn_ops import keras  # noqa: E402  (loads the op library: SavedModels with our ops load)
from tf_rnn_ops._cudnn_cpu import register_cudnn_rnn_cpu_kernels
from tf_rnn_ops.onnx_export import install as _install_onnx
from tf_rnn_ops._loader import (built_tf_version, has_xla, library_path, load_library,
                                xla_status)

_install_onnx()   # tf2onnx handlers, registered when tf2onnx is imported

__version__ = "0.1.0"

__all__ = ["raw_ops", "mps", "keras", "register_cudnn_rnn_cpu_kernels", "load_library",
           "library_path", "built_tf_version", "has_xla", "xla_status", "__version__"]
