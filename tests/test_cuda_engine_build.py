"""The TF-free CUDA engine on a machine without a GPU (CI): it was built when nvcc exists, it
exports the C API, its size and layout functions agree with our params layout, and calling it
without a GPU fails cleanly (a status and a message, no crash).  The GPU behaviour itself is
tested by tests/gpu (tools/gpu_tests.sh on a GPU machine)."""

import os
import shutil
import subprocess
import sys

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_HERE, "gpu"))

import cuda_engine  # noqa: E402

SO = cuda_engine.DEFAULT_SO


def _nvcc():
    return shutil.which("nvcc") or (
        "/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)


def _engine():
    if not os.path.exists(SO):
        if _nvcc() and os.environ.get("TF_RNN_OPS_CUDA", "1") != "0":
            pytest.fail(f"nvcc exists but the CUDA engine was not built ({SO})")
        pytest.skip("no nvcc: the CUDA engine is not built")
    return cuda_engine.Engine(SO)


def test_built_when_nvcc_exists():
    if not _nvcc() or os.environ.get("TF_RNN_OPS_CUDA", "1") == "0":
        pytest.skip("no nvcc, or TF_RNN_OPS_CUDA=0")
    assert os.path.exists(SO), "tools/build.sh did not build _tfrnn_engine_cuda.so"


def test_exports_the_c_api_only():
    eng = _engine()
    for name in cuda_engine.EXPORTED:
        assert hasattr(eng.lib, name), name
    assert eng.api_version() == cuda_engine.API_VERSION == 5
    # Internal symbols (and the static CUDA runtime's) stay hidden.
    with pytest.raises(AttributeError):
        eng.lib.cudaMalloc  # noqa: B018
    with pytest.raises(AttributeError):
        eng.lib.cudaGetDeviceCount  # noqa: B018


@pytest.mark.parametrize("mode", ["lstm", "gru", "rnn_tanh", "rnn_relu"])
@pytest.mark.parametrize("L,D,P,skip", [(1, 1, 0, False), (2, 2, 0, False), (3, 2, 0, True),
                                        (2, 2, 3, False)])
def test_sizes_and_layout_match_ours(mode, L, D, P, skip):
    import cudnn_reference as ref
    if P and mode != "lstm":
        pytest.skip("projection is lstm only")
    eng = _engine()
    I, H = (8, 8) if skip else (5, 8)
    spec = cuda_engine.make_spec(mode, T=4, B=3, I=I, H=H, P=P, L=L, D=D, skip_input=skip)
    n_params, n_reserve, fws, bws = eng.sizes(spec)
    kw = dict(mode=mode, num_layers=L, num_units=H, input_size=I, num_proj=P,
              direction="bidirectional" if D == 2 else "unidirectional",
              input_mode="skip_input" if skip else "linear_input")
    assert n_params == ref.params_size(**kw)
    assert n_reserve > 0 and fws > 0 and bws > 0
    mirror = cuda_engine.param_layout(mode, L=L, D=D, I=I, H=H, P=P, skip_input=skip)
    assert mirror[-1]["end"] == n_params
    for p in range(L * D):
        assert eng.param_offsets(spec, p) == mirror[p]


def test_invalid_spec_is_a_clean_error():
    eng = _engine()
    with pytest.raises(cuda_engine.EngineError, match="projection"):
        eng.sizes(cuda_engine.make_spec("gru", T=2, B=2, I=3, H=4, P=2))
    with pytest.raises(cuda_engine.EngineError, match="skip input"):
        eng.sizes(cuda_engine.make_spec("lstm", T=2, B=2, I=3, H=4, skip_input=True))
    with pytest.raises(cuda_engine.EngineError, match="directions"):
        eng.sizes(cuda_engine.make_spec("lstm", T=2, B=2, I=3, H=4, D=3))
    with pytest.raises(cuda_engine.EngineError, match="outside"):
        eng.param_offsets(cuda_engine.make_spec("lstm", T=2, B=2, I=3, H=4), 1)
    with pytest.raises(cuda_engine.EngineError, match="peephole needs lstm"):
        eng.sizes(cuda_engine.make_spec("gru", T=2, B=2, I=3, H=4, peephole=True))
    with pytest.raises(cuda_engine.EngineError, match="need gru"):
        eng.sizes(cuda_engine.make_spec("lstm", T=2, B=2, I=3, H=4, gru_reset_before=True))
    with pytest.raises(cuda_engine.EngineError, match="mask needs lstm or gru"):
        eng.sizes(cuda_engine.make_spec("rnn_tanh", T=2, B=2, I=3, H=4, has_mask=True))
    # Per-gate masks: accepted for lstm and gru (reset after or before), refused with a
    # projection (no path).
    gates = dict(T=2, B=2, I=3, H=4, has_mask=True, mask_gates=True)
    eng.sizes(cuda_engine.make_spec("lstm", **gates))
    eng.sizes(cuda_engine.make_spec("gru", **gates))
    eng.sizes(cuda_engine.make_spec("gru", gru_reset_before=True, **gates))
    with pytest.raises(cuda_engine.EngineError, match="mask_gates"):
        eng.sizes(cuda_engine.make_spec("lstm", P=2, **gates))
    # weights_xw (the Keras op's separate weights): one layer and direction, no projection.
    xw = cuda_engine.make_spec("gru", T=2, B=2, I=3, H=4, gru_reset_before=True)
    xw.weights_xw = 1
    eng.sizes(xw)
    for extra in (dict(L=2), dict(D=2)):
        bad = cuda_engine.make_spec("lstm", T=2, B=2, I=3, H=4, **extra)
        bad.weights_xw = 1
        with pytest.raises(cuda_engine.EngineError, match="weights_xw"):
            eng.sizes(bad)


def test_separate_weights_args_are_checked():
    """A call with separate weights (args.r) names a missing weight or gradient, and needs one
    layer and direction; the checks come before any device work."""
    eng = _engine()
    fake = 4096  # never dereferenced: the argument checks fail first
    spec = cuda_engine.make_spec("lstm", T=2, B=2, I=3, H=4)
    spec.weights_xw = 1
    fwd = {k: fake for k in ("x", "h0", "c0", "y", "hn", "cn", "reserve", "w", "r", "bw")}
    with pytest.raises(cuda_engine.EngineError, match="br is NULL"):
        eng.forward_raw(spec, fwd, fake, 1 << 20, None)
    bwd = {k: fake for k in ("x", "h0", "c0", "reserve", "dy", "dhn", "dcn", "dx", "dh0", "dc0",
                             "w", "r", "bw", "br", "dw", "dr")}
    with pytest.raises(cuda_engine.EngineError, match="dbw is NULL"):
        eng.backward_raw(spec, bwd, fake, 1 << 20, None)
    two = cuda_engine.make_spec("lstm", T=2, B=2, I=3, H=4, L=2)
    with pytest.raises(cuda_engine.EngineError, match="one layer"):
        eng.forward_raw(two, dict(fwd, br=fake), fake, 1 << 20, None)


def test_mps_gru_options_are_accepted():
    """The MPSGraph GRU options (API version 2) pass validation; the reset-before backward
    needs a larger workspace (dpn of a step, the candidate block of dhr, masked h_prev)."""
    eng = _engine()
    kw = dict(T=3, B=2, I=3, H=4, gate_pos=(1, 0, 2, 3),
              gate_act=("hard_sigmoid", "sigmoid", "relu", "sigmoid"))
    base = eng.sizes(cuda_engine.make_spec("gru", **kw))
    opts = eng.sizes(cuda_engine.make_spec("gru", has_mask=True, gru_reset_before=True,
                                           gru_z_new=True, **kw))
    assert opts[:2] == base[:2]          # same params and reserve layout
    assert opts[2] > base[2] and opts[3] > base[3]


def _no_gpu(eng):
    try:
        return eng.device_count() == 0
    except cuda_engine.EngineError as e:
        assert e.code == 2 and e.message, e   # no driver / no device: a CUDA error status
        return True


def test_without_gpu_calls_fail_cleanly():
    eng = _engine()
    if not _no_gpu(eng):
        pytest.skip("a GPU is present; tests/gpu covers it")
    spec = cuda_engine.make_spec("lstm", T=2, B=2, I=3, H=4)
    fake = 4096  # never dereferenced: the device check fails first
    keys = ("x", "h0", "c0", "params", "y", "hn", "cn", "reserve")
    with pytest.raises(cuda_engine.EngineError) as info:
        eng.forward_raw(spec, {k: fake for k in keys}, fake, 1 << 20, None)
    assert info.value.code in (2, 3) and info.value.message
    bkeys = ("x", "h0", "c0", "params", "reserve", "dy", "dhn", "dcn", "dx", "dh0", "dc0",
             "dparams")
    with pytest.raises(cuda_engine.EngineError) as info:
        eng.backward_raw(spec, {k: fake for k in bkeys}, fake, 1 << 20, None, lengths=[2, 1])
    assert info.value.code in (2, 3) and info.value.message
    # The message is per thread and stays readable.
    assert eng.last_error() == info.value.message
    # Argument errors are reported before touching the device.
    with pytest.raises(cuda_engine.EngineError, match="lengths"):
        eng.forward_raw(spec, {k: fake for k in keys}, fake, 1 << 20, None, lengths=[5, 1])
    # A needed pointer left NULL is named (forward: hn; backward: dparams; peephole spec).
    for raw, ks, missing in ((eng.forward_raw, keys, "hn"), (eng.backward_raw, bkeys, "dparams")):
        with pytest.raises(cuda_engine.EngineError) as info:
            raw(spec, {k: fake for k in ks if k != missing}, fake, 1 << 20, None)
        assert (info.value.code, info.value.message) == (1, f"{missing} is NULL")
    peep = cuda_engine.make_spec("lstm", T=2, B=2, I=3, H=4, peephole=True)
    with pytest.raises(cuda_engine.EngineError) as info:
        eng.forward_raw(peep, {k: fake for k in keys}, fake, 1 << 20, None)
    assert (info.value.code, info.value.message) == (1, "peephole is NULL")


def test_cublas_lookup_is_clean():
    eng = _engine()
    try:
        name = eng.cublas_library()
        assert name.startswith("libcublas")
    except cuda_engine.EngineError as e:
        assert e.code == 3 and "libcublas.so.13" in e.message


def test_loads_next_to_the_op_library_without_tf_symbols():
    # The engine needs no TensorFlow: loading it in a fresh process must not pull libtensorflow.
    import subprocess
    code = ("import ctypes, sys; ctypes.CDLL(sys.argv[1]); "
            "print(open('/proc/self/maps').read().count('tensorflow'))")
    out = subprocess.run([sys.executable, "-c", code, SO if os.path.exists(SO) else ""],
                         capture_output=True, text=True)
    if not os.path.exists(SO):
        pytest.skip("engine not built")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0"


def test_python_spec_mirrors_the_c_struct(tmp_path):
    """cuda_engine.Spec (ctypes, parsed from cc/engine/rnn_spec_fields.h) lays out every member
    where a C compiler puts TfRnnCudaSpec's (cc/gpu/c_api.h), and API_VERSION is the header's
    (no GPU or built library needed)."""
    import ctypes
    import re
    hdr = open(os.path.join(cuda_engine.REPO_ROOT, "cc", "gpu", "c_api.h")).read()
    ver = re.search(r"#define TFRNN_CUDA_API_VERSION (\d+)", hdr)
    assert int(ver.group(1)) == cuda_engine.API_VERSION
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    src = tmp_path / "layout.c"
    src.write_text(
        "#include <stddef.h>\n#include <stdio.h>\n#include \"cc/gpu/c_api.h\"\n"
        "#define F(t, name, c, i, lo, hi, w) "
        "printf(\"%s %zu\\n\", #name, offsetof(TfRnnCudaSpec, name));\n"
        "#define A(t, name, c, n, i, lo, hi, w) "
        "printf(\"%s %zu\\n\", #name, offsetof(TfRnnCudaSpec, name));\n"
        "int main(void) {\n  printf(\"dtype %zu\\n\", offsetof(TfRnnCudaSpec, dtype));\n"
        "  TFRNN_RNN_SPEC_FIELDS(F, A)\n"
        "  printf(\"sizeof %zu\\n\", sizeof(TfRnnCudaSpec));\n  return 0;\n}\n")
    exe = tmp_path / "layout"
    subprocess.run([cc, "-std=c99", "-Wall", "-Werror", "-I", cuda_engine.REPO_ROOT, str(src),
                    "-o", str(exe)], check=True, capture_output=True, text=True)
    c_layout = subprocess.run([str(exe)], check=True, capture_output=True,
                              text=True).stdout.split("\n")
    py_layout = [f"{name} {getattr(cuda_engine.Spec, name).offset}"
                 for name, _ in cuda_engine.Spec._fields_]
    py_layout.append(f"sizeof {ctypes.sizeof(cuda_engine.Spec)}")
    assert [l for l in c_layout if l] == py_layout


BLOCK_STRUCTS = {  # C struct of cc/gpu/c_api.h -> its ctypes mirror in cuda_engine
    "TfRnnCudaFwdArgs": "FwdArgs", "TfRnnCudaBwdArgs": "BwdArgs",
    "TfRnnCudaLstmSpec": "LstmSpec", "TfRnnCudaLstmFwdArgs": "LstmFwdArgs",
    "TfRnnCudaLstmBwdArgs": "LstmBwdArgs", "TfRnnCudaGruCellSpec": "GruCellSpec",
    "TfRnnCudaGruCellFwdArgs": "GruCellFwdArgs", "TfRnnCudaGruCellBwdArgs": "GruCellBwdArgs",
}


@pytest.mark.parametrize("c_name", sorted(BLOCK_STRUCTS))
def test_python_block_structs_mirror_the_c_structs(tmp_path, c_name):
    """The block ops' specs and args structs (c_api.h, their pointers expanded from
    cc/engine/block_arg_fields.h) have every ctypes member of cuda_engine at a C compiler's
    offset, and the same size."""
    import ctypes
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    py = getattr(cuda_engine, BLOCK_STRUCTS[c_name])
    prints = "".join(f'  printf("{n} %zu\\n", offsetof({c_name}, {n}));\n' for n, _ in py._fields_)
    src = tmp_path / "layout.c"
    src.write_text("#include <stddef.h>\n#include <stdio.h>\n#include \"cc/gpu/c_api.h\"\n"
                   f"int main(void) {{\n{prints}"
                   f'  printf("sizeof %zu\\n", sizeof({c_name}));\n  return 0;\n}}\n')
    exe = tmp_path / "layout"
    subprocess.run([cc, "-std=c99", "-Wall", "-Werror", "-I", cuda_engine.REPO_ROOT, str(src),
                    "-o", str(exe)], check=True, capture_output=True, text=True)
    c_layout = subprocess.run([str(exe)], check=True, capture_output=True,
                              text=True).stdout.split()
    py_layout = " ".join(f"{n} {getattr(py, n).offset}" for n, _ in py._fields_).split()
    py_layout += ["sizeof", str(ctypes.sizeof(py))]
    assert c_layout == py_layout
