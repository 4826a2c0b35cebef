"""The CUDA custom-call targets of the XLA kernels (cc/xla/rnn_ffi_gpu.cc) run by an XLA that is
not TensorFlow's: JAX's, through jax.ffi, without TensorFlow (the GPU machines have none).

    python3 tests/gpu/xla_ffi_checks.py            # a GPU machine: JAX with CUDA, the engine
                                                   # tf_rnn_ops/_tfrnn_engine_cuda.so
    TF_RNN_OPS_CUDA_EMULATED=1 python3 tests/gpu/xla_ffi_checks.py
        # no GPU: JAX on the CPU, the targets' host-memory variants and the CUDA engine's CPU
        # emulation (tools/build_cuda_emu.sh)

The targets are built here with g++ against JAX's FFI headers (jax.ffi.include_dir()) into
build/xla_ffi/ and registered under their TensorFlow names; each case encodes the call as the
XLA kernels do (cc/xla/rnn_call.h: version, call fields, then every RnnSpec field), runs the
forward and the backward custom calls on JAX arrays, and compares every result with the CPU
engine's on the same inputs (tests/gpu/cpu_parity.py's shim, verified against stock
TensorFlow and Keras): the Keras op's form (kernel, recurrent_kernel, bias as Keras holds them,
one or two bias rows, per-gate masks, lengths, reset-before gru, inference without a reserve
result) and the params-vector form (the CudnnRNN and MPSGraph ops). Prints one line per check
and a summary; exits 1 on any FAIL.
"""

import ctypes
import os
import struct
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cpu_parity as cp  # noqa: E402
import cuda_engine as ce  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
SRC = "cc/xla/rnn_ffi_gpu.cc"
DEPS = [SRC, "cc/xla/ffi_buffers.h", "cc/xla/rnn_call.h", "cc/xla/rnn_call_buffers.h",
        "cc/gpu/c_api.h", "cc/gpu/c_api_loader.h", "cc/gpu/c_api_convert.h",
        "cc/engine/library_dir.h", "cc/engine/types.h", "cc/engine/rnn_spec_fields.h"]
CALL_VERSION = 4  # kXlaRnnCallVersion in cc/xla/rnn_call.h
FACES = {"KerasRNN": 0, "KerasRNNBackprop": 1, "CudnnRNNV3": 4, "CudnnRNNBackpropV3": 7}
TOL = {"float32": 1e-4, "float64": 1e-10}


def emulated():
    return os.environ.get("TF_RNN_OPS_CUDA_EMULATED", "") == "1"


def build(jax):
    """The targets as a library of their own (FFI headers: JAX's); rebuilt when a source is
    newer. Returns its path."""
    out = os.path.join(REPO, "build", "xla_ffi",
                       "rnn_ffi_gpu_emulated.so" if emulated() else "rnn_ffi_gpu.so")
    newest = max(os.path.getmtime(os.path.join(REPO, d)) for d in DEPS)
    if os.path.exists(out) and os.path.getmtime(out) >= newest:
        return out
    os.makedirs(os.path.dirname(out), exist_ok=True)
    cmd = ["g++", "-std=c++17", "-O1", "-fPIC", "-shared", "-Wall", "-Werror", "-I", REPO,
           "-isystem", jax.ffi.include_dir(), "-DTFRNN_XLA_FFI_STANDALONE"]
    cmd += ["-DTFRNN_XLA_FFI_EMULATED"] if emulated() else []
    subprocess.run(cmd + [os.path.join(REPO, SRC), "-o", out, "-ldl"], check=True)
    return out


def register(jax, lib_path):
    """Registers the targets under their TensorFlow names for this JAX's platform."""
    lib = ctypes.CDLL(lib_path)
    suffix, platform = ("emulated", "cpu") if emulated() else ("cuda", "CUDA")
    for name in ("tfrnn_rnn_forward", "tfrnn_rnn_backward"):
        fn = getattr(lib, f"{name}_{suffix}")
        jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(fn), platform=platform)
    return lib


def encode(spec, face, f64, params_vector, has_lengths, two_biases, mask_per_step):
    """EncodeXlaRnnCall (cc/xla/rnn_call.h) of a cuda_engine.Spec."""
    # ..., has_dc_seq 0, batch_major 0 (CPU only), input_grad 1
    v = [CALL_VERSION, FACES[face], int(f64), int(params_vector), int(has_lengths),
         int(two_biases), int(mask_per_step), 0, 0, 1]
    for name, ctype in ce.Spec._fields_[1:]:  # dtype is the C struct's own
        value = getattr(spec, name)
        for x in (list(value) if hasattr(value, "__len__") else [value]):
            if ctype in (ctypes.c_double, ctypes.c_float):
                x = struct.unpack("<q", struct.pack("<d", float(x)))[0]
            v.append(int(x))
    return np.array(v, np.int64)


def run_call(jax, spec, inp, lengths, c, dtype, training, alter=None):
    """Forward and backward custom calls on JAX arrays; the results as numpy arrays, named as
    CpuEngine.run names them. alter(ops) may change the forward's operand list first."""
    jnp = jax.numpy
    dt = np.dtype(dtype)
    lstm = spec.mode == ce.MODES["lstm"]
    T, B, I, H, L, D = spec.T, spec.B, spec.I, spec.H, spec.L, spec.D
    keras = "weights" in inp
    w = inp.get("weights") or {}
    two = keras and c.get("two_biases", False)
    empty = np.zeros(0, dt)
    lens = np.zeros(0, np.int32) if lengths is None else np.asarray(lengths, np.int32)
    if keras:
        bias = np.stack([w["bw"], w["br"]]) if two else w["bw"]
        ws = [w["w"], w["r"], bias]
    else:
        ws = [inp["params"], empty, empty]
    mask = inp["mask"] if inp["mask"] is not None else empty
    ops = [lens, inp["x"], inp["h0"], inp["c0"] if lstm else empty, *ws, mask, empty]
    if alter is not None:
        alter(ops)
    ops = [jnp.asarray(o if o.dtype == np.int32 else o.astype(dt)) for o in ops]
    enc = dict(f64=dt == np.float64, params_vector=not keras, has_lengths=lengths is not None,
               two_biases=two, mask_per_step=c.get("mask_per_step", False))
    spec.training = int(training)
    f = jax.ffi.ffi_call("tfrnn_rnn_forward", [
        jax.ShapeDtypeStruct((T, B, D * H), dt), jax.ShapeDtypeStruct((L * D, B, H), dt),
        jax.ShapeDtypeStruct((L * D, B, H) if lstm else (0,), dt),
        jax.ShapeDtypeStruct((ce.Engine().sizes(spec)[1] if training else 0,), dt)])
    face = "KerasRNN" if keras else "CudnnRNNV3"
    y, hn, cn, reserve = f(*ops, call=encode(spec, face, **enc))
    out = {"y": y, "hn": hn, "cn": cn if lstm else None}
    if not training:
        return {k: None if v is None else np.asarray(v) for k, v in out.items()}
    grads = [jnp.asarray(inp["dy"].astype(dt)), jnp.asarray(inp["dhn"].astype(dt)),
             jnp.asarray(inp["dcn"].astype(dt) if lstm else empty), reserve,
             jnp.asarray(empty)]  # dy, dhn, dcn, the forward's reserve, no dc_seq
    b = jax.ffi.ffi_call("tfrnn_rnn_backward", [
        jax.ShapeDtypeStruct((T, B, I), dt), jax.ShapeDtypeStruct((L * D, B, H), dt),
        jax.ShapeDtypeStruct((L * D if lstm else 0, B, H), dt),
        *[jax.ShapeDtypeStruct(tuple(o.shape), dt) for o in ops[4:7]],
        jax.ShapeDtypeStruct((0,), dt)])
    r = b(*ops, *grads, call=encode(spec, "KerasRNNBackprop" if keras else "CudnnRNNBackpropV3",
                                    **enc))
    out.update(dx=r[0], dh0=r[1], dc0=r[2] if lstm else None)
    if keras:
        out.update(dw=r[3], dr=r[4])
        db = np.asarray(r[5])
        out.update(dbw=db[0] if two else db, dbr=db[1] if two else None)
    else:
        out["dparams"] = r[3]
    return {k: None if v is None else np.asarray(v) for k, v in out.items()}


CASES = [  # (name, cpu_parity.make_case description, training)
    ("keras-lstm-one-bias-var", dict(mode="lstm", keras=True, one_bias=True, lengths="var"),
     True),
    ("keras-gru-two-biases-maskgates-var", dict(mode="gru", keras=True, two_biases=True,
                                                has_mask=True, mask_gates=True, lengths="var"),
     True),
    ("keras-gru-resetbefore-maskgates", dict(mode="gru", keras=True, one_bias=True,
                                             gru_reset_before=True, has_mask=True,
                                             mask_gates=True), True),
    ("keras-lstm-inference", dict(mode="lstm", keras=True, one_bias=True, lengths="zero"),
     False),
    ("params-lstm-L2-D2-var", dict(mode="lstm", L=2, D=2, lengths="var"), True),
    ("params-gru-maskperstep", dict(mode="gru", has_mask=True, mask_per_step=True), True),
]


# Operands that do not match the call (forward, float32): the target must refuse each with
# INVALID_ARGUMENT naming it, before it reads a buffer or runs the engine.
BAD = [  # (name, case, alter(ops), words of the message)
    ("mask-without-has-mask", dict(mode="lstm", keras=True, one_bias=True),
     lambda ops: ops.__setitem__(7, np.ones(3, np.float32)), "buffer mask"),
    ("x-one-row-short", dict(mode="gru", keras=True, one_bias=True),
     lambda ops: ops.__setitem__(1, ops[1][:-1]), "buffer x"),
    ("length-past-T", dict(mode="lstm", lengths="var"),
     lambda ops: ops.__setitem__(0, ops[0] + 100), "time"),
]


def bad_inputs(jax):
    for name, c, alter, words in BAD:
        spec, inp, lengths = cp.make_case(c, "float32")
        weights = inp.pop("weights", None)
        call_inp = {k: None if v is None else v.astype(np.float32) for k, v in inp.items()}
        if weights is not None:
            call_inp["weights"] = {k: v.astype(np.float32) for k, v in weights.items()}
        try:
            run_call(jax, spec, call_inp, lengths, c, "float32", False, alter=alter)
        except Exception as e:  # noqa: BLE001 - the error is what is checked
            msg = str(e)
            ok = "INVALID_ARGUMENT" in msg and words in msg
            cp.report("PASS" if ok else "FAIL", f"bad input {name}", msg.splitlines()[0][:160])
            continue
        cp.report("FAIL", f"bad input {name}", "the call ran")


def main():
    try:
        import jax
    except ImportError:
        print("SKIP all  JAX is not installed")
        print("summary:", {"PASS": 0, "FAIL": 0, "SKIP": 1})
        return 0
    jax.config.update("jax_enable_x64", True)
    if not emulated() and not any(d.platform == "gpu" for d in jax.devices()):
        print("SKIP all  JAX sees no GPU (TF_RNN_OPS_CUDA_EMULATED=1 runs the emulation)")
        print("summary:", {"PASS": 0, "FAIL": 0, "SKIP": 1})
        return 0
    # The targets load the engine next to their library unless told; theirs is build/xla_ffi/.
    os.environ.setdefault("TF_RNN_OPS_CUDA_ENGINE", ce.so_path())
    path, why = cp.pick_cpu_engine()
    if path is None:
        cp.report("SKIP", "all", why)
        print("summary:", cp.COUNTS)
        return 0
    cpu = cp.CpuEngine(path)
    lib = register(jax, build(jax))  # noqa: F841 - the handlers live as long as the library
    for name, c, training in CASES:
        for dtype in ("float32", "float64"):
            full = f"{name} {dtype}"
            spec, inp, lengths = cp.make_case(c, dtype)
            cast = lambda v: None if v is None else np.ascontiguousarray(v.astype(dtype))  # noqa: E731
            weights = inp.pop("weights", None)  # one_bias cases: br is zeros
            host = {k: cast(v) for k, v in inp.items()}
            kw = dict(lengths=lengths, mask_per_step=c.get("mask_per_step", False))
            if weights is not None:
                kw["weights"] = {k: cast(v) for k, v in weights.items()}
            try:
                call_inp = dict(host, **({"weights": kw["weights"]} if weights else {}))
                got = run_call(jax, spec, call_inp, lengths, c, dtype, training)
                grads = ("dy", "dhn", "dcn")
                want = cpu.run(spec, **{k: v for k, v in host.items()
                                        if training or k not in grads}, **kw)
            except Exception as e:  # noqa: BLE001 - one broken case must not stop the rest
                cp.report("FAIL", full, f"error: {e}")
                continue
            errs = {k: cp.rel_err(got[k], want[k]) for k in got
                    if got[k] is not None and want.get(k) is not None}
            cp.report_errs(full, errs, TOL[dtype])
    bad_inputs(jax)
    print("summary:", cp.COUNTS)
    return 1 if cp.COUNTS["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
