"""TensorFlow's start-up lines, once: TF 2.21 prints its INFO start-up lines ("oneDNN custom
operations are on", with absl's "before absl::InitializeLog()" notice) once per copy of its
logging library, and `import tensorflow` loads two (the core and the profiler plugin). For the
main job (`python -m tf_rnn_ops.report`), whose first screen they fill, the package imports
TensorFlow through `import_tensorflow_deduplicated`: everything TensorFlow writes to stderr while
it is imported is kept, each line once (a log line's time stamp and thread id are not compared).
"""
import os
import re
import sys
import tempfile

_LOG_PREFIX = re.compile(r"^([IWEF])\d{4} \S+\s+\d+ ")


def deduplicate(text):
    """The lines of `text` (kept ends) without repeats of an earlier line; log lines compare
    without their time stamp and thread id."""
    seen, out = set(), []
    for line in text.splitlines(keepends=True):
        key = _LOG_PREFIX.sub(r"\1 ", line)
        if key not in seen:
            seen.add(key)
            out.append(line)
    return "".join(out)


def import_tensorflow_deduplicated():
    """Imports TensorFlow with its stderr (the C++ logs and Python's) written afterwards, each
    line once. Does nothing when TensorFlow is already imported."""
    if "tensorflow" in sys.modules:
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            import tensorflow  # noqa: F401
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            sys.stderr.write(deduplicate(captured.read().decode("utf-8", "replace")))
            sys.stderr.flush()
