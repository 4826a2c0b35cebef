"""Lazy loading of the op library, with a clear error on a TensorFlow version mismatch."""
import ctypes
import os
import threading

import tensorflow as tf

_LIB_NAME = "_tf_rnn_ops.so"
_XLA_LIB_NAME = "_tf_rnn_ops_xla.so"
_lock = threading.Lock()
_lib = None
_xla_status = None  # "" once the XLA kernels are loaded, else why they are not


def _package_dir():
    return os.path.dirname(os.path.abspath(__file__))


def library_path():
    """Path of the op library inside the package."""
    return os.path.join(_package_dir(), _LIB_NAME)


def built_tf_version():
    """The TensorFlow version the op library was built against, or None if unknown."""
    try:
        with open(os.path.join(_package_dir(), "_build_info.txt")) as f:
            for line in f:
                key, _, value = line.strip().partition("=")
                if key == "tensorflow":
                    return value
    except OSError:
        pass
    return None


def _major_minor(version):
    return tuple(version.split(".")[:2]) if version else None


def _mismatch_message(built, installed, detail=""):
    return (
        f"tf_rnn_ops: the op library {library_path()} was built for TensorFlow {built}, "
        f"but TensorFlow {installed} is installed. Rebuild it against the installed "
        f"TensorFlow: `pip install --no-build-isolation .` from the checkout (or `./configure.sh`)."
        + (f" Loader error: {detail}" if detail else "")
    )


def load_library():
    """Loads the op library once (thread-safe) and returns the generated ops module."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        path = library_path()
        if not os.path.exists(path):
            raise ImportError(
                f"tf_rnn_ops: op library not found at {path}. Build it with ./configure.sh, "
                "or install the package with `pip install --no-build-isolation .`."
            )
        built, installed = built_tf_version(), tf.__version__
        # Custom ops use TensorFlow's C++ ABI, which changes between minor releases: refuse
        # to load a mismatched build instead of risking a crash inside TensorFlow.
        if built and _major_minor(built) != _major_minor(installed):
            raise ImportError(_mismatch_message(built, installed))
        try:
            lib = tf.load_op_library(path)
        except (tf.errors.NotFoundError, OSError) as e:
            raise ImportError(_mismatch_message(built or "an unknown version", installed, e)) from e
        _load_xla_kernels()
        _lib = lib
        return _lib


def _load_xla_kernels():
    """Loads the XLA kernels (_tf_rnn_ops_xla.so), which register with TensorFlow's XLA
    compiler. Optional: a build without them, or a TensorFlow whose XLA they do not fit, leaves
    the ops without XLA kernels (xla_status() says why); the ops themselves still work."""
    global _xla_status
    path = os.path.join(_package_dir(), _XLA_LIB_NAME)
    if os.environ.get("TF_RNN_OPS_XLA", "1") == "0":
        _xla_status = "disabled by TF_RNN_OPS_XLA=0"
    elif not os.path.exists(path):
        _xla_status = (f"{path} was not built (configure.sh builds it where TensorFlow's XLA "
                       "headers and libtensorflow_cc are present)")
    else:
        try:
            tf.load_op_library(path)
            # Its XLA kernels become kernels of the JIT devices in TensorFlow's one pass at the
            # first XLA compilation; if that already ran, the library registers them itself.
            ctypes.CDLL(path).tfrnn_xla_register_late()
            _xla_status = ""
        except (tf.errors.NotFoundError, OSError, AttributeError) as e:
            _xla_status = f"{path} did not load: {e}"


def xla_status():
    """"" when the ops' XLA kernels are loaded (tf.function(jit_compile=True) compiles them),
    else why not."""
    load_library()
    return _xla_status


def has_xla():
    """True when the Keras layers' and the CudnnRNN ops' XLA kernels are loaded."""
    return xla_status() == ""
