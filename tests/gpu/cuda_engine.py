"""ctypes binding of the TF-free CUDA engine (tf_rnn_ops/_tfrnn_engine_cuda.so, C API in
cc/gpu/c_api.h).  Imports neither TensorFlow nor tf_rnn_ops, so it runs on the GPU machines,
which have PyTorch/CuPy but no TensorFlow.  Device memory is passed as raw pointers (e.g.
torch.Tensor.data_ptr()); the stream as an integer cudaStream_t.
"""

import ctypes
import os
import re

_HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(_HERE))
DEFAULT_SO = os.path.join(REPO_ROOT, "tf_rnn_ops", "_tfrnn_engine_cuda.so")
# The CPU emulation build of the same sources (tools/build_cuda_emu.sh).
EMULATED_SO = os.path.join(REPO_ROOT, "build", "cuda_emu", "_tfrnn_engine_cuda_emu.so")

API_VERSION = 5  # TFRNN_CUDA_API_VERSION in cc/gpu/c_api.h
GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}
DTYPES = {"float16": 0, "bfloat16": 1, "float32": 2, "float64": 3}
STATUS = {0: "OK", 1: "INVALID_ARGUMENT", 2: "CUDA_ERROR", 3: "CUBLAS_UNAVAILABLE",
          4: "CUBLAS_ERROR", 5: "INTERNAL"}
EXPORTED = ("tfrnn_cuda_api_version", "tfrnn_cuda_last_error", "tfrnn_cuda_device_count",
            "tfrnn_cuda_cublas_library", "tfrnn_cuda_rnn_sizes", "tfrnn_cuda_rnn_param_offsets",
            "tfrnn_cuda_rnn_forward", "tfrnn_cuda_rnn_backward", "tfrnn_cuda_swap_major",
            "tfrnn_cuda_copy", "tfrnn_cuda_zero", "tfrnn_cuda_copy_to_host",
            "tfrnn_cuda_lstm_sizes",
            "tfrnn_cuda_lstm_forward", "tfrnn_cuda_lstm_backward", "tfrnn_cuda_gru_cell_sizes",
            "tfrnn_cuda_gru_cell_forward", "tfrnn_cuda_gru_cell_backward",
            "tfrnn_cuda_mma_probe")

_i32, _i64, _u64, _p = ctypes.c_int32, ctypes.c_int64, ctypes.c_uint64, ctypes.c_void_p


_FIELDS_H = os.path.join(REPO_ROOT, "cc", "engine", "rnn_spec_fields.h")
_C_TYPES = {"int32_t": _i32, "int64_t": _i64, "uint64_t": _u64, "double": ctypes.c_double}


def _macro_text(path):
    """A C header's text with its comments removed and each macro on one line."""
    with open(path) as f:
        return re.sub(r"/\*.*?\*/", " ", f.read(), flags=re.S).replace("\\\n", " ")


def _spec_lists(path=_FIELDS_H):
    """The lists of cc/engine/rnn_spec_fields.h: the mode and activation spellings in enum
    order, and TfRnnCudaSpec's members (dtype first, then one per field line)."""
    text = _macro_text(path)

    def body(name):
        return re.search(r"#define " + name + r"\([^)]*\)(.*)", text).group(1)

    def spellings(name):
        return {sp: i for i, sp in enumerate(re.findall(r'X\(\w+, "(\w+)"\)', body(name)))}

    fields = [("dtype", _i32)]
    for kind, args in re.findall(r"\b([FA])\((\w[^,]*,\s*\w+,\s*\w+(?:,\s*\d+)?)",
                                 body("TFRNN_RNN_SPEC_FIELDS")):
        parts = [a.strip() for a in args.split(",")]
        c_type = _C_TYPES[parts[2]]
        fields.append((parts[1], c_type * int(parts[3]) if kind == "A" else c_type))
    return spellings("TFRNN_RNN_MODES"), spellings("TFRNN_RNN_ACTS"), fields


MODES, ACTS, _SPEC_FIELDS = _spec_lists()


class Spec(ctypes.Structure):
    _fields_ = _SPEC_FIELDS


class FwdArgs(ctypes.Structure):
    _fields_ = [("lengths", ctypes.POINTER(_i32)), ("lengths_dev", _p),
                ("x", _p), ("h0", _p), ("c0", _p), ("params", _p),
                ("y", _p), ("hn", _p), ("cn", _p), ("reserve", _p),
                ("peephole", _p), ("mask", _p), ("mask_per_step", _i32),
                ("w", _p), ("r", _p), ("bw", _p), ("br", _p)]


class BwdArgs(ctypes.Structure):
    _fields_ = [("lengths", ctypes.POINTER(_i32)), ("lengths_dev", _p),
                ("x", _p), ("h0", _p), ("c0", _p), ("params", _p), ("reserve", _p),
                ("dy", _p), ("dhn", _p), ("dcn", _p),
                ("dx", _p), ("dh0", _p), ("dc0", _p), ("dparams", _p),
                ("peephole", _p), ("mask", _p), ("mask_per_step", _i32),
                ("dc_seq", _p), ("dpeephole", _p),
                ("w", _p), ("r", _p), ("bw", _p), ("br", _p),
                ("dw", _p), ("dr", _p), ("dbw", _p), ("dbr", _p)]


class LstmSpec(ctypes.Structure):
    """TfRnnCudaLstmSpec (the LSTM block engine: BlockLSTM / BlockLSTMV2)."""
    _fields_ = [("dtype", _i32), ("T", _i64), ("B", _i64), ("I", _i64), ("H", _i64),
                ("seq_len_max", _i64), ("gate_order", _i32), ("forget_bias", ctypes.c_float),
                ("cell_clip", ctypes.c_float), ("use_peephole", _i32),
                ("exact_clip_grad", _i32)]


def _arg_lists(path=os.path.join(REPO_ROOT, "cc", "engine", "block_arg_fields.h")):
    """The pointer members of the block ops' args structs, from the lists of
    cc/engine/block_arg_fields.h, in their C order."""
    return {name: tuple(re.findall(r"\b(?:IN|OUT)\((\w+),", body))
            for name, body in re.findall(r"#define (TFRNN_\w+_ARGS)\(IN, OUT\)(.*)",
                                         _macro_text(path))}


_ARGS = _arg_lists()
LSTM_FWD_FIELDS = _ARGS["TFRNN_LSTM_FWD_ARGS"]
LSTM_BWD_FIELDS = _ARGS["TFRNN_LSTM_BWD_ARGS"] + ("dgates",)
GRU_CELL_FWD_FIELDS = _ARGS["TFRNN_GRU_CELL_FWD_ARGS"]
GRU_CELL_BWD_FIELDS = _ARGS["TFRNN_GRU_CELL_BWD_ARGS"]


class LstmFwdArgs(ctypes.Structure):
    _fields_ = [(f, _p) for f in LSTM_FWD_FIELDS]


class LstmBwdArgs(ctypes.Structure):
    _fields_ = [(f, _p) for f in LSTM_BWD_FIELDS]


def make_lstm_spec(*, T, B, I, H, seq_len_max=None, dtype="float32", gate_order="icfo",
                   forget_bias=1.0, cell_clip=0.0, use_peephole=False, exact_clip_grad=False):
    s = LstmSpec()
    s.dtype = DTYPES[dtype]
    s.T, s.B, s.I, s.H = T, B, I, H
    s.seq_len_max = T if seq_len_max is None else seq_len_max
    s.gate_order = {"icfo": 0, "ifco": 1}[gate_order]
    s.forget_bias, s.cell_clip = forget_bias, cell_clip
    s.use_peephole, s.exact_clip_grad = int(use_peephole), int(exact_clip_grad)
    return s


class GruCellSpec(ctypes.Structure):
    """TfRnnCudaGruCellSpec (GRUBlockCell / GRUBlockCellGrad)."""
    _fields_ = [("dtype", _i32), ("B", _i64), ("I", _i64), ("H", _i64)]


class GruCellFwdArgs(ctypes.Structure):
    _fields_ = [(f, _p) for f in GRU_CELL_FWD_FIELDS]


class GruCellBwdArgs(ctypes.Structure):
    _fields_ = [(f, _p) for f in GRU_CELL_BWD_FIELDS]


def make_gru_cell_spec(*, B, I, H, dtype="float32"):
    s = GruCellSpec()
    s.dtype, s.B, s.I, s.H = DTYPES[dtype], B, I, H
    return s


class EngineError(RuntimeError):
    def __init__(self, code, message):
        super().__init__(f"{STATUS.get(code, code)}: {message}")
        self.code = code
        self.message = message


def build_emulation(out=EMULATED_SO, cxxflags=""):
    """Builds the CUDA emulation (tools/build_cuda_emu.sh) into `out` and returns `out`.
    Raises FileNotFoundError when there is no C++ compiler, RuntimeError with the build's
    output when the build fails."""
    import shutil
    import subprocess
    if shutil.which(os.environ.get("CXX", "g++")) is None:
        raise FileNotFoundError("no C++ compiler to build the CUDA emulation")
    env = dict(os.environ, TF_RNN_OPS_CUDA_EMU_OUT=out, TF_RNN_OPS_CUDA_EMU_CXXFLAGS=cxxflags)
    r = subprocess.run(["bash", os.path.join(REPO_ROOT, "tools", "build_cuda_emu.sh")],
                       cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise RuntimeError(f"build_cuda_emu.sh failed:\n{r.stdout}\n{r.stderr}")
    return out


def so_path():
    emulated = os.environ.get("TF_RNN_OPS_CUDA_EMULATED", "") == "1"
    return os.environ.get("TF_RNN_OPS_CUDA_ENGINE", EMULATED_SO if emulated else DEFAULT_SO)


def make_spec(mode="lstm", *, T, B, I, H, P=0, L=1, D=1, dtype="float32", skip_input=False,
              training=True, dropout=0.0, seed=0, gate_pos=(0, 1, 2, 3),
              gate_act=("sigmoid", "sigmoid", "tanh", "sigmoid"), cell_act="tanh",
              peephole=False, has_mask=False, preprojected=False, reverse=False,
              gru_reset_before=False, gru_z_new=False, mask_gates=False):
    s = Spec()
    s.mode, s.dtype = MODES[mode], DTYPES[dtype]
    s.T, s.B, s.I, s.H, s.P, s.L, s.D = T, B, I, H, P, L, D
    s.skip_input, s.training, s.dropout, s.seed = int(skip_input), int(training), dropout, seed
    for q in range(4):
        s.gate_pos[q] = gate_pos[q]
        s.gate_act[q] = ACTS[gate_act[q]]
    s.cell_act = ACTS[cell_act]
    s.peephole, s.has_mask = int(peephole), int(has_mask)
    s.preprojected, s.reverse = int(preprojected), int(reverse)
    s.gru_reset_before, s.gru_z_new = int(gru_reset_before), int(gru_z_new)
    s.mask_gates = int(mask_gates)
    return s


class Engine:
    """The loaded library.  Every failing call raises EngineError with the library's message."""

    def __init__(self, path=None):
        self.path = path or so_path()
        lib = ctypes.CDLL(self.path)
        self.lib = lib
        lib.tfrnn_cuda_api_version.restype = ctypes.c_int
        lib.tfrnn_cuda_last_error.restype = ctypes.c_char_p
        lib.tfrnn_cuda_device_count.argtypes = [ctypes.POINTER(_i32)]
        lib.tfrnn_cuda_cublas_library.argtypes = [ctypes.POINTER(ctypes.c_char_p)]
        lib.tfrnn_cuda_rnn_sizes.argtypes = [ctypes.POINTER(Spec)] + [ctypes.POINTER(_i64)] * 4
        lib.tfrnn_cuda_rnn_param_offsets.argtypes = [ctypes.POINTER(Spec), _i64, _i64 * 6]
        lib.tfrnn_cuda_rnn_forward.argtypes = [ctypes.POINTER(Spec), ctypes.POINTER(FwdArgs),
                                               _p, _i64, _p]
        lib.tfrnn_cuda_rnn_backward.argtypes = [ctypes.POINTER(Spec), ctypes.POINTER(BwdArgs),
                                                _p, _i64, _p]
        lib.tfrnn_cuda_gru_cell_sizes.argtypes = ([ctypes.POINTER(GruCellSpec)]
                                                  + [ctypes.POINTER(_i64)] * 2)
        lib.tfrnn_cuda_gru_cell_forward.argtypes = [ctypes.POINTER(GruCellSpec),
                                                    ctypes.POINTER(GruCellFwdArgs), _p, _i64, _p]
        lib.tfrnn_cuda_gru_cell_backward.argtypes = [ctypes.POINTER(GruCellSpec),
                                                     ctypes.POINTER(GruCellBwdArgs), _p, _i64,
                                                     _p]
        lib.tfrnn_cuda_lstm_sizes.argtypes = [ctypes.POINTER(LstmSpec)] + [ctypes.POINTER(_i64)] * 2
        lib.tfrnn_cuda_lstm_forward.argtypes = [ctypes.POINTER(LstmSpec),
                                                ctypes.POINTER(LstmFwdArgs), _p, _i64, _p]
        lib.tfrnn_cuda_lstm_backward.argtypes = [ctypes.POINTER(LstmSpec),
                                                 ctypes.POINTER(LstmBwdArgs), _p, _i64, _p]
        lib.tfrnn_cuda_mma_probe.argtypes = [_i32, _p, _p, _p, _i64, _i64, _i64, _p]

    def _check(self, code):
        if code != 0:
            raise EngineError(code, self.lib.tfrnn_cuda_last_error().decode())

    def api_version(self):
        return self.lib.tfrnn_cuda_api_version()

    def mma_probe(self, dtype, a, bt, c, M, N, K, stream=0):
        """c [M, N] float32 = a [M, K] · btᵀ (bt [N, K]) by the warp tensor-core product of
        cc/gpu/mma.cuh; dtype "float16" or "bfloat16"; a, bt, c device pointers."""
        self._check(self.lib.tfrnn_cuda_mma_probe(DTYPES[dtype], a, bt, c, M, N, K, stream))

    def last_error(self):
        return self.lib.tfrnn_cuda_last_error().decode()

    def device_count(self):
        n = _i32(0)
        self._check(self.lib.tfrnn_cuda_device_count(ctypes.byref(n)))
        return n.value

    def cublas_library(self):
        name = ctypes.c_char_p()
        self._check(self.lib.tfrnn_cuda_cublas_library(ctypes.byref(name)))
        return name.value.decode()

    def sizes_of(self, fn, n, spec):
        """The n int64 sizes the query tfrnn_cuda_<fn> gives for spec."""
        out = [_i64(0) for _ in range(n)]
        self._check(getattr(self.lib, "tfrnn_cuda_" + fn)(ctypes.byref(spec),
                                                          *[ctypes.byref(o) for o in out]))
        return tuple(o.value for o in out)

    def sizes(self, spec):
        """(params_elems, reserve_elems, fwd_workspace_bytes, bwd_workspace_bytes)."""
        return self.sizes_of("rnn_sizes", 4, spec)

    def param_offsets(self, spec, pseudo):
        """dict w, r, p, bw, br, end (elements) of pseudo-layer l*D + d."""
        out = (_i64 * 6)()
        self._check(self.lib.tfrnn_cuda_rnn_param_offsets(ctypes.byref(spec), pseudo, out))
        return dict(zip(("w", "r", "p", "bw", "br", "end"), list(out)))

    @staticmethod
    def _lengths(lengths):
        if lengths is None:
            return None, None
        arr = (_i32 * len(lengths))(*[int(v) for v in lengths])
        return arr, ctypes.cast(arr, ctypes.POINTER(_i32))

    def call_raw(self, fn, args_type, spec, ptrs, workspace, workspace_bytes, stream,
                 lengths=None):
        """tfrnn_cuda_<fn> on spec and an args_type of ptrs (dict field -> int pointer,
        missing: NULL) and of lengths (None: NULL)."""
        keep, lp = self._lengths(lengths)
        a = args_type()
        if lp is not None:
            a.lengths = lp
        for k, v in ptrs.items():
            setattr(a, k, v)
        self._check(getattr(self.lib, "tfrnn_cuda_" + fn)(ctypes.byref(spec), ctypes.byref(a),
                                                          workspace, workspace_bytes, stream))
        del keep

    def forward_raw(self, spec, ptrs, workspace, workspace_bytes, stream, lengths=None):
        """ptrs: dict of FwdArgs field -> int pointer (missing: NULL)."""
        self.call_raw("rnn_forward", FwdArgs, spec, ptrs, workspace, workspace_bytes, stream,
                      lengths)

    def backward_raw(self, spec, ptrs, workspace, workspace_bytes, stream, lengths=None):
        self.call_raw("rnn_backward", BwdArgs, spec, ptrs, workspace, workspace_bytes, stream,
                      lengths)


def _block_sizes(name):
    """(eng, spec) -> (fwd_workspace_bytes, bwd_workspace_bytes) of tfrnn_cuda_<name>_sizes."""
    def sizes(eng, spec):
        return eng.sizes_of(f"{name}_sizes", 2, spec)
    sizes.__name__ = f"{name}_sizes"
    return sizes


def _block_call(name, args_type):
    """tfrnn_cuda_<name> on raw pointers: (eng, spec, ptrs, workspace, workspace_bytes,
    stream), ptrs a dict of args_type's fields."""
    def call(eng, spec, ptrs, workspace, workspace_bytes, stream):
        eng.call_raw(name, args_type, spec, ptrs, workspace, workspace_bytes, stream)
    call.__name__ = f"{name}_raw"
    return call


# The LSTM block engine and the GRU block cell.
lstm_sizes = _block_sizes("lstm")
lstm_forward_raw = _block_call("lstm_forward", LstmFwdArgs)
lstm_backward_raw = _block_call("lstm_backward", LstmBwdArgs)
gru_cell_sizes = _block_sizes("gru_cell")
gru_cell_forward_raw = _block_call("gru_cell_forward", GruCellFwdArgs)
gru_cell_backward_raw = _block_call("gru_cell_backward", GruCellBwdArgs)


def param_layout(mode, *, L, D, I, H, P=0, skip_input=False):
    """Python mirror of RnnParamLayout (cc/engine/types.h), cuDNN's layout: per pseudo-layer
    p = l*D + d a dict of element offsets w, r, p, bw, br, end.  The buffer holds first the
    matrices of every pseudo-layer in order (K input matrices [H, in_l], none for skip input;
    K recurrent matrices [H, Hs]; the projection [P, H] for lstm with P > 0), then the biases
    of every pseudo-layer in order (K input biases [H], K recurrent biases [H]); end is one
    past the pseudo-layer's recurrent biases.  The projection is [p, p + P*H)."""
    K = GATES[mode]
    Hs = P if P else H
    mats = []
    for l in range(L):
        in_l = (0 if skip_input else I) if l == 0 else D * Hs
        mats += [(in_l, K * H * in_l + K * H * Hs + P * H)] * D
    out, off, boff = [], 0, sum(m for _, m in mats)
    for in_l, m in mats:
        o = {"w": off, "r": off + K * H * in_l, "p": off + K * H * (in_l + Hs),
             "bw": boff, "br": boff + K * H, "end": boff + 2 * K * H}
        off += m
        boff = o["end"]
        out.append(o)
    return out
