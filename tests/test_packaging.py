"""Packaging: the build backend's checks and metadata, the wheel works in a fresh venv, a version
mismatch gives a clear error, every engine variant this CPU supports loads and agrees with stock,
and the report runs."""
import base64
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import time
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "tf_rnn_ops")

# A small conformance check against stock, run in a child process (fresh engine choice).
CHECK = textwrap.dedent("""
    import sys, numpy as np, tensorflow as tf, tf_rnn_ops
    from tf_rnn_ops import raw_ops as ours
    rng = np.random.default_rng(0)
    T, B, I, H = 5, 3, 4, 6
    r = lambda *s: tf.constant(rng.standard_normal(s).astype(np.float32) * 0.4)
    a = dict(x=r(T, B, I), cs_prev=r(B, H), h_prev=r(B, H), w=r(I + H, 4 * H), wci=r(H),
             wcf=r(H), wco=r(H), b=r(4 * H))
    s = tf.raw_ops.BlockLSTM(seq_len_max=tf.constant(T, tf.int64), **a, use_peephole=True)
    o = ours.BlockLSTM(seq_len_max=T, **a, use_peephole=True)
    g = dict(zip("i cs f o ci co h".split(), s), cs_grad=r(T, B, H), h_grad=r(T, B, H))
    gs = tf.raw_ops.BlockLSTMGrad(seq_len_max=tf.constant(T, tf.int64), **a, **g,
                                  use_peephole=True)
    go = ours.BlockLSTMGrad(seq_len_max=T, **a, **g, use_peephole=True)
    err = max(float(np.abs(x.numpy() - y.numpy()).max()) for x, y in zip(list(s) + list(gs),
                                                                        list(o) + list(go)))
    maps = open("/proc/self/maps").read()
    engines = sorted({l.split("/")[-1] for l in maps.splitlines() if "_tfrnn_engine_" in l})
    print("ENGINES", ",".join(engines), "ERR", err, "XLA", repr(tf_rnn_ops.xla_status()))
    sys.exit(0 if err < 1e-5 and tf_rnn_ops.has_xla() else 1)
""")


def _run(args, env=None, cwd=None, timeout=600):
    full_env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    full_env.update(env or {})
    return subprocess.run(args, env=full_env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def _cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def _supported_isas():
    flags = _cpu_flags()
    isas = []
    if "avx" in flags:
        isas.append("avx")
    if {"avx2", "fma"} <= flags:
        isas.append("avx2")
    if {"avx512f", "avx512dq", "avx512bw", "avx512vl", "fma"} <= flags:
        isas.append("avx512")
    return isas


@pytest.mark.parametrize("isa", ["avx", "avx2", "avx512"])
def test_each_engine_variant_loads_and_matches_stock(isa):
    if isa not in _supported_isas():
        pytest.skip(f"this CPU does not support {isa}")
    p = _run([sys.executable, "-c", CHECK], env={"TF_RNN_OPS_ISA": isa}, cwd=ROOT)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"ENGINES _tfrnn_engine_{isa}.so ERR" in p.stdout, p.stdout


def test_default_engine_is_the_best_supported():
    p = _run([sys.executable, "-c", CHECK], cwd=ROOT)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"_tfrnn_engine_{_supported_isas()[-1]}.so" in p.stdout


def test_forced_unknown_isa_is_a_clear_error():
    code = CHECK.replace("import sys,", "import sys,", 1)
    p = _run([sys.executable, "-c", code], env={"TF_RNN_OPS_ISA": "sse9"}, cwd=ROOT)
    assert p.returncode != 0
    assert "TF_RNN_OPS_ISA must be avx, avx2 or avx512" in p.stderr


def test_version_mismatch_names_both_versions(tmp_path):
    import tensorflow as tf

    pkg = tmp_path / "tf_rnn_ops"
    shutil.copytree(PKG, pkg, ignore=shutil.ignore_patterns("__pycache__", "BUILD"))
    (pkg / "_build_info.txt").write_text("tensorflow=2.3.0\n")
    code = ("import tensorflow as tf, tf_rnn_ops\n"
            "tf_rnn_ops.raw_ops.LSTMBlockCell(x=tf.zeros([1, 1]), cs_prev=tf.zeros([1, 1]),"
            " h_prev=tf.zeros([1, 1]), w=tf.zeros([2, 4]), wci=tf.zeros([1]),"
            " wcf=tf.zeros([1]), wco=tf.zeros([1]), b=tf.zeros([4]))\n")
    p = _run([sys.executable, "-c", code], cwd=str(tmp_path))
    assert p.returncode != 0
    assert "ImportError" in p.stderr
    assert "built for TensorFlow 2.3.0" in p.stderr and f"TensorFlow {tf.__version__}" in p.stderr
    assert "configure.sh" in p.stderr
    assert "Segmentation fault" not in p.stderr


def test_report_quick_runs_and_passes():
    p = _run([sys.executable, "-m", "tf_rnn_ops.report", "--quick"], cwd=ROOT)
    assert p.returncode == 0, p.stdout + p.stderr
    for name in ["BlockLSTM ", "BlockLSTMV2", "BlockLSTMGrad ", "BlockLSTMGradV2",
                 "LSTMBlockCell ", "LSTMBlockCellGrad", "GRUBlockCell ", "GRUBlockCellGrad"]:
        assert name in p.stdout


def test_report_first_screen_shows_no_failure():
    """The main job's first screen (issue #37): no NumPy RuntimeWarning and no error-level log
    line before the table. TF_ENABLE_ONEDNN_OPTS=1 makes stock TensorFlow log "oneDNN supports
    DT_HALF only on platforms with AVX-512" at error level on a CPU without AVX-512 FP16 (its
    default turns oneDNN on only on newer CPUs); the report's half rows must not print it."""
    p = _run([sys.executable, "-m", "tf_rnn_ops.report", "--quick"], cwd=ROOT,
             env={"TF_ENABLE_ONEDNN_OPTS": "1", "TF_CPP_MIN_LOG_LEVEL": "0"})
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout + p.stderr
    assert "RuntimeWarning" not in out
    assert "oneDNN supports DT_HALF" not in out
    assert not [line for line in out.splitlines() if line[:1] in "EF" and line[1:5].isdigit()]


def test_report_prints_tensorflow_start_up_lines_once():
    """TF 2.21 prints its start-up lines once per copy of its logging library (two on import);
    the main job's first screen shows them once, and nothing else TensorFlow wrote is lost."""
    p = _run([sys.executable, "-m", "tf_rnn_ops.report", "--help"], cwd=ROOT,
             env={"TF_CPP_MIN_LOG_LEVEL": "0"})
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stderr.count("oneDNN custom operations are on") <= 1, p.stderr
    assert p.stderr.count("before absl::InitializeLog() is called") <= 1, p.stderr
    from tf_rnn_ops._startup import deduplicate
    text = ("I0000 00:00:1.5    9042 port.cc:153] on\nW0000 00:00:2.5   77 a.cc:1] warn\n"
            "I0000 00:00:3.5    9050 port.cc:153] on\nplain\nplain\n")
    assert deduplicate(text) == ("I0000 00:00:1.5    9042 port.cc:153] on\n"
                                 "W0000 00:00:2.5   77 a.cc:1] warn\nplain\n")


def test_readme_quickstart_runs():
    """README's quickstart, as printed: the Keras layer's output shape, and the raw op's gradient
    against the same LSTM written in TensorFlow ops and differentiated by TensorFlow (not
    against stock BlockLSTMV2's registered gradient, which is wrong: docs/DIFFERENCES.md)."""
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    start = readme.index("```python\n") + len("```python\n")
    code = readme[start:readme.index("```", start)]
    check = textwrap.dedent("""
        import sys
        sys.path.insert(0, "tests")
        from reference import IFCO, tf_block_lstm_fwd
        with tf.GradientTape() as tape:
            h = tf_block_lstm_fwd(20, x, z, z, w, zh, zh, zh, tf.zeros([128]), forget_bias=0.0,
                                  cell_clip=0.0, layout=IFCO)[-1]
            loss = tf.reduce_sum(h)
        err = float(tf.reduce_max(tf.abs(tape.gradient(loss, w) - dw)))
        print("SHAPES", y.shape, dw.shape, "ERR", err)
        assert y.shape == (8, 20, 32) and dw.shape == (48, 128) and err < 1e-3, err
    """)
    p = _run([sys.executable, "-c", code + check], cwd=ROOT)
    assert p.returncode == 0, p.stdout + p.stderr


def test_report_error_ignores_stock_uninitialised_tail():
    """Stock BlockLSTM's i, f, o, ci, co past seq_len_max are uninitialised memory; a
    signalling NaN there must not reach a float64 cast (NumPy: "invalid value encountered in
    cast")."""
    import warnings

    import numpy as np
    from tf_rnn_ops.report import _max_err
    stock = np.ones((4, 2), np.float32)
    stock[3] = np.array([0x7F800001] * 2, np.uint32).view(np.float32)   # signalling NaN
    ours = np.ones((4, 2), np.float32)
    ours[3] = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _max_err([stock], [ours], slm=3) == 0.0


def _backend_call(code, env=None):
    """Runs `code` with the build backend imported as `b`, in a Python without site-packages
    (like pip's isolated build environment: no TensorFlow)."""
    backend = os.path.join(ROOT, "build_backend")
    prog = f"import sys; sys.path.insert(0, {backend!r}); import tf_rnn_ops_backend as b\n" + code
    return _run([sys.executable, "-S", "-c", prog], env=env, timeout=60)


def test_isolated_build_stops_with_one_line_naming_the_flag():
    p = _backend_call("b.get_requires_for_build_wheel()")
    assert p.returncode != 0
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("tf_rnn_ops: no TensorFlow") and "--no-build-isolation" in lines[0]


def test_pip_install_with_build_isolation_stops_within_seconds(tmp_path):
    """Plain `pip install .` (build isolation on): the isolated environment has no TensorFlow,
    so the backend stops before any build, with the hint."""
    start = time.time()
    p = _run([sys.executable, "-m", "pip", "install", "--no-index", "--target",
              str(tmp_path / "t"), ROOT], timeout=120)
    assert p.returncode != 0
    assert "pip install --no-build-isolation ." in p.stdout + p.stderr, p.stdout + p.stderr
    assert time.time() - start < 60


def test_missing_bazel_is_one_line_naming_what_to_install(tmp_path):
    p = _backend_call("b._toolchain()", env={"PATH": str(tmp_path)})
    assert p.returncode != 0
    assert p.stderr.strip() == ("tf_rnn_ops: Bazel not found on PATH: install it (Debian/Ubuntu: "
                                "apt-get install bazel-bootstrap; elsewhere Bazel 4.2 or newer) "
                                "and build again")


def test_metadata_states_tensorflow_only_as_extras():
    p = _backend_call("print(b._metadata())")
    assert p.returncode == 0, p.stderr
    meta = p.stdout
    for field in ("Name: tf-rnn-ops", "Version: 0.1.0", "Summary: ", "License: ",
                  "Requires-Python: ", "Provides-Extra: onnx", "Provides-Extra: test"):
        assert field in meta, field
    reqs = [line for line in meta.splitlines() if line.startswith("Requires-Dist:")]
    tf_reqs = [r for r in reqs if "tensorflow" in r]
    assert tf_reqs and all("extra ==" in r for r in tf_reqs), tf_reqs   # never a hard one


@pytest.mark.skipif(shutil.which("bazel") is None or not os.path.exists(
    os.path.join(ROOT, ".bazelrc")), reason="needs ./configure.sh and Bazel")
def test_wheel_installs_and_works_in_a_fresh_venv(tmp_path):
    """`pip wheel --no-build-isolation .` against this venv's TensorFlow (an incremental build):
    a platform wheel with every library the build made, valid RECORD, that works installed."""
    dist = tmp_path / "dist"
    build = _run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
                  "-w", str(dist), ROOT], cwd=ROOT, timeout=1800)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    wheels = glob.glob(str(dist / "tf_rnn_ops-*.whl"))
    assert len(wheels) == 1, wheels
    assert not wheels[0].endswith("-any.whl")
    with zipfile.ZipFile(wheels[0]) as z:
        names = set(z.namelist())
        record = z.read(next(n for n in names if n.endswith(".dist-info/RECORD"))).decode()
        for line in record.splitlines():
            name, digest, _ = line.rsplit(",", 2)
            if digest:
                data = z.read(name)
                want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
                assert digest == "sha256=" + want.decode(), name
    libs = {os.path.basename(n) for n in names if n.endswith(".so")}
    built = {n for n in os.listdir(PKG) if n.endswith(".so")}
    assert built <= libs, built - libs
    assert "tf_rnn_ops/_build_info.txt" in names
    venv = tmp_path / "venv"
    p = _run([sys.executable, "-m", "venv", str(venv)])
    assert p.returncode == 0, p.stderr
    vpy = str(venv / "bin" / "python")
    # TensorFlow itself is not re-downloaded: the fresh venv sees this venv's site-packages
    # through a .pth file; tf_rnn_ops comes only from the wheel.
    site = _run([vpy, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    with open(os.path.join(site.stdout.strip(), "_tf_from_dev_venv.pth"), "w") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")
    p = _run([vpy, "-m", "pip", "install", "--no-deps", "--no-index", wheels[0]])
    assert p.returncode == 0, p.stdout + p.stderr
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    p = _run([vpy, "-c", "import tf_rnn_ops, os; print(tf_rnn_ops.__file__)\n" + CHECK],
             cwd=str(outside))
    assert p.returncode == 0, p.stdout + p.stderr
    assert str(venv) in p.stdout.splitlines()[0]
