"""Packaging: the wheel works in a fresh venv, a version mismatch gives a clear error, every
engine variant this CPU supports loads and agrees with stock, and the report runs."""
import glob
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap

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


@pytest.mark.skipif(shutil.which("bazel") is None or not os.path.exists(
    os.path.join(ROOT, ".bazelrc")), reason="needs ./configure.sh and Bazel")
def test_wheel_installs_and_works_in_a_fresh_venv(tmp_path):
    build = _run(["bazel", "build", "//:wheel"], cwd=ROOT, timeout=900)
    assert build.returncode == 0, build.stderr[-3000:]
    wheels = glob.glob(os.path.join(ROOT, "bazel-bin", "dist", "tf_rnn_ops-*.whl"))
    assert len(wheels) == 1, wheels
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
