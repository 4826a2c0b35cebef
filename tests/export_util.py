"""What the export tests share: the TFLite interpreter (tf.lite's, else ai_edge_litert's)."""
import warnings

import pytest
import tensorflow as tf


def tflite_interpreter(content):
    """An interpreter of the flatbuffer `content`; skips the test where there is none."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # tf.lite.Interpreter's deprecation notice
        cls = getattr(getattr(tf, "lite", None), "Interpreter", None)
        if cls is None:
            try:
                from ai_edge_litert.interpreter import Interpreter as cls
            except ImportError:
                pytest.skip("neither tf.lite.Interpreter nor ai_edge_litert is available")
        return cls(model_content=content)
