"""RNN CPU benchmark: tf_rnn_ops against stock TensorFlow, Keras and PyTorch in one run.

    .venv/bin/python bench/bench_rnn.py                       # full grid (takes a while)
    .venv/bin/python bench/bench_rnn.py --quick               # tiny sizes, 2 reps: smoke test
    .venv/bin/python bench/bench_rnn.py --sizes 100x64x256x256 --dtypes float32 \\
        --only block_lstm,block_lstm_grad --reps 20

Benchmarks (--only; each is "ours" against one or more peers, same inputs, same run):

  block_lstm       BlockLSTM forward                              vs stock tf.raw_ops
  block_lstm_grad  BlockLSTMGrad                                  vs stock
  lstm_cell        LSTMBlockCell stepped over T (forward)         vs stock
  lstm_cell_grad   LSTMBlockCellGrad stepped over T, plus the dx/dh/dW matmuls, vs stock
  gru_cell         GRUBlockCell stepped over T                    vs stock
  gru_cell_grad    GRUBlockCellGrad stepped over T, plus the dW matmuls, vs stock
  lstm_train       LSTM fwd+bwd: BlockLSTMV2 + BlockLSTMGradV2    vs stock (same ops), torch
  gru_train        GRU fwd+bwd: CudnnRNNV3 + CudnnRNNBackpropV3   vs torch nn.GRU
  lstm_train_cudnn LSTM fwd+bwd: CudnnRNNV3 + CudnnRNNBackpropV3 (the op of the Keras layers;
                   no activation planes through the op boundary) vs torch nn.LSTM
  keras_lstm       training step (forward, loss, all gradients) of tf_rnn_ops.keras.LSTM
                   (fused TfRnn>KerasRNN) vs keras.layers.LSTM, plain and with jit_compile=True
  keras_gru        the same for GRU                               vs keras.layers.GRU
  keras_lstm_mask  keras_lstm with a left-padded mask (lengths T/2..T, pad_sequences' default)
  keras_lstm_rdrop keras_lstm with recurrent_dropout=0.25 (same seed both sides)
  keras_gru_rdrop  keras_gru with recurrent_dropout=0.25 (same seed both sides)
  keras_simple     the same training step for SimpleRNN (tanh)    vs keras.layers.SimpleRNN
  keras_lstm_infer inference (training=False, whole sequence), LSTM; keras_gru_infer: GRU;
                   also vs torch nn.LSTM / nn.GRU (batch_first, no_grad)
  keras_lstm_stream a stateful layer called on one step of batch B (T unused): the streaming
                   step of a model served per time step; keras_gru_stream: GRU
  (every keras_* benchmark: peers "ours_xla", our layer with jit_compile=True, "keras", the
  stock layer in a tf.function, and "keras_xla", the same with jit_compile=True; see
  keras_cases.py)

Every TensorFlow callable (ours and stock alike) runs as a tf.function; PyTorch runs eagerly
(nn.LSTM / nn.GRU, forward + backward, when PyTorch is installed: a benchmark peer only) with
--torch-threads threads (default: all CPUs, as many as TensorFlow's intra-op pool).
Time = median of --reps calls after one warm-up call; the implementations of a benchmark are
timed in turns (per round, untimed calls for at least 30 ms (at least one, at most ten; a
streaming step at least five) then one timed call of each, in an order shuffled each round), so
that machine drift hits both sides while no side is timed in the wake of another (PyTorch's
OpenMP workers keep spinning after a call returns) more often than the others are.
GF/s use FLOPs of forward 8·T·B·H·(I+H) for LSTM (6· for GRU), backward twice that, fwd+bwd three
times. "%GEMM" is the share of the fastest GEMM rate measured in the same run and dtype:
tf.matmul of the RNN's input GEMM [T·B, I+H]·[I+H, 4H] and of a square (2048, 256 with
--quick), and torch.matmul of the input GEMM where PyTorch is installed (on an AVX2 Zen 3 it ran
1.8x tf.matmul's rate there). bench_turns.py --vs-gemm measures the share in turns.
Peak memory of the backward benchmarks is measured in a separate process (see
bench_util.MEM_METHOD).
bfloat16: stock BlockLSTM/LSTMBlockCell take half and float only and stock GRUBlockCell float
only, so those peers print n/a; the Keras layers use the mixed_bfloat16 policy.

Prints markdown tables (GEMM rates, all results, targets), writes a PNG (grouped bars of the
speed-ups peer/ours per size, one panel per dtype) and optionally JSON.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_util as bu  # noqa: E402  (puts the repository root on sys.path)
import bench_report as report  # noqa: E402
import sweep  # noqa: E402
from keras_cases import KERAS_PEERS, KerasCases  # noqa: E402
from bench_util import tf  # noqa: E402

tf.get_logger().setLevel("ERROR")  # each benchmark is its own tf.function: no retracing notes

from tf_rnn_ops import raw_ops as ours  # noqa: E402

STREAM_SETTLE = 5  # untimed calls before each timed call of a *_stream benchmark (below)
SETTLE_MS = 30.0  # and at least this long of untimed calls before each timed call (below)
KERAS_BENCHES = ["keras_lstm", "keras_gru", "keras_lstm_mask", "keras_lstm_rdrop",
                 "keras_gru_rdrop", "keras_simple", "keras_lstm_infer", "keras_gru_infer",
                 "keras_lstm_stream", "keras_gru_stream"]
BENCHES = ["block_lstm", "block_lstm_grad", "lstm_cell", "lstm_cell_grad", "gru_cell",
           "gru_cell_grad", "lstm_train", "gru_train", "lstm_train_cudnn"] + KERAS_BENCHES
# Peers of each benchmark, in the order they are printed.
PEERS = {"block_lstm": ["stock"], "block_lstm_grad": ["stock"], "lstm_cell": ["stock"],
         "lstm_cell_grad": ["stock"], "gru_cell": ["stock"], "gru_cell_grad": ["stock"],
         "lstm_train": ["stock", "torch"], "gru_train": ["torch"], "lstm_train_cudnn": ["torch"],
         # inference also against PyTorch's nn.LSTM / nn.GRU (batch_first, no_grad)
         **{b: list(KERAS_PEERS) + (["torch"] if b.endswith("_infer") else [])
            for b in KERAS_BENCHES}}
# Benchmarks whose peak memory is measured (the backward passes).
BACKWARD = {"block_lstm_grad", "lstm_cell_grad", "gru_cell_grad", "lstm_train", "gru_train",
            "lstm_train_cudnn", "keras_lstm", "keras_gru", "keras_lstm_mask", "keras_lstm_rdrop",
            "keras_gru_rdrop", "keras_simple"}
# Targets from issue #5 (float32): (bench, peer, minimum speed-up peer_ms / ours_ms).
TARGETS = [("block_lstm_grad", "stock", 3.0), ("block_lstm", "stock", 1.5),
           ("lstm_train", "torch", 1.2), ("gru_train", "torch", 1.2),
           ("lstm_train_cudnn", "torch", 1.2),
           ("keras_lstm", "keras", 3.0)]
GEMM_TARGET = ("block_lstm_grad", (100, 64, 256, 256), 0.70)
LSTM_ACTS = ["i", "cs", "f", "o", "ci", "co", "h"]


TORCH_THREADS = [os.cpu_count() or 1]  # set from --torch-threads


def _torch():
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(TORCH_THREADS[0])
    return torch


class Case(KerasCases):
    """Inputs of one (size, dtype); builds the callables of every benchmark lazily."""

    def __init__(self, size, dtype_name):
        self.size = size
        self.dtype_name = dtype_name
        self.dtype = bu.DTYPES[dtype_name]
        T, B, I, H = size
        rng = np.random.default_rng(0)
        ws = 1.0 / np.sqrt(I + H)

        def r(*shape, scale=0.5):
            return tf.constant((rng.standard_normal(shape) * scale).astype(np.float32),
                               dtype=self.dtype)

        self.r = r
        self.slm = tf.constant(T, tf.int64)
        self.lstm = dict(x=r(T, B, I), cs_prev=r(B, H), h_prev=r(B, H),
                         w=r(I + H, 4 * H, scale=ws), wci=r(H, scale=0.1),
                         wcf=r(H, scale=0.1), wco=r(H, scale=0.1), b=r(4 * H))
        self.gru = dict(w_ru=r(I + H, 2 * H, scale=ws), w_c=r(I + H, H, scale=ws),
                        b_ru=r(2 * H), b_c=r(H))
        self.dh = r(T, B, H)  # upstream gradient of every h_t
        self.dc = r(T, B, H)  # upstream gradient of every cs_t
        self._acts = None

    @property
    def lstm_acts(self):
        """Forward activations (ours, valid input for stock too: seq_len_max = T)."""
        if self._acts is None:
            out = ours.BlockLSTM(seq_len_max=self.slm, **self.lstm)
            self._acts = dict(zip(LSTM_ACTS, out))
        return self._acts

    # Each builder returns {impl: factory}; a factory returns the zero-argument callable that
    # is timed (or raises when the implementation cannot run this dtype).

    def block_lstm(self):
        def make(mod):
            return tf.function(lambda: mod.BlockLSTM(seq_len_max=self.slm, **self.lstm))
        return {"ours": lambda: make(ours), "stock": lambda: make(tf.raw_ops)}

    def block_lstm_grad(self):
        def make(mod):
            kw = dict(seq_len_max=self.slm, **self.lstm, **self.lstm_acts, cs_grad=self.dc,
                      h_grad=self.dh, use_peephole=False)
            return tf.function(lambda: mod.BlockLSTMGrad(**kw))
        return {"ours": lambda: make(ours), "stock": lambda: make(tf.raw_ops)}

    def lstm_cell(self):
        T = self.size[0]
        a = self.lstm

        def make(mod):
            def step():
                h, c, hs = a["h_prev"], a["cs_prev"], []
                for t in range(T):
                    out = mod.LSTMBlockCell(x=a["x"][t], cs_prev=c, h_prev=h, w=a["w"],
                                            wci=a["wci"], wcf=a["wcf"], wco=a["wco"], b=a["b"])
                    c, h = out[1], out[6]
                    hs.append(h)
                return tf.stack(hs), c
            return tf.function(step, autograph=False)
        return {"ours": lambda: make(ours), "stock": lambda: make(tf.raw_ops)}

    def lstm_cell_grad(self):
        """Backward through T steps the way TF's LSTMBlockCell gradient does it: the cell grad
        op gives the gate gradients, matmuls give d[x, h_prev] and accumulate dW, db."""
        T, B, I, H = self.size
        a = self.lstm

        def make(mod):
            acts = self.lstm_acts

            def step():
                dh = tf.zeros([B, H], self.dtype)
                dc = tf.zeros([B, H], self.dtype)
                dw = tf.zeros([I + H, 4 * H], self.dtype)
                db = tf.zeros([4 * H], self.dtype)
                dxs = []
                for t in reversed(range(T)):
                    h_prev = a["h_prev"] if t == 0 else acts["h"][t - 1]
                    c_prev = a["cs_prev"] if t == 0 else acts["cs"][t - 1]
                    out = mod.LSTMBlockCellGrad(
                        x=a["x"][t], cs_prev=c_prev, h_prev=h_prev, w=a["w"], wci=a["wci"],
                        wcf=a["wcf"], wco=a["wco"], b=a["b"],
                        **{k: acts[k][t] for k in LSTM_ACTS[:6]},
                        cs_grad=self.dc[t] + dc, h_grad=self.dh[t] + dh, use_peephole=False)
                    dc, dgates = out[0], out[1]
                    dxh = tf.matmul(dgates, a["w"], transpose_b=True)
                    dxs.append(dxh[:, :I])
                    dh = dxh[:, I:]
                    dw += tf.matmul(tf.concat([a["x"][t], h_prev], 1), dgates, transpose_a=True)
                    db += tf.reduce_sum(dgates, 0)
                return tf.stack(dxs[::-1]), dw, db, dh, dc
            return tf.function(step, autograph=False)
        return {"ours": lambda: make(ours), "stock": lambda: make(tf.raw_ops)}

    def _gru_forward(self, mod):
        T = self.size[0]
        x, h = self.lstm["x"], self.lstm["h_prev"]
        outs = []
        for t in range(T):
            r, u, c, h = mod.GRUBlockCell(x=x[t], h_prev=h, **self.gru)
            outs.append((r, u, c, h))
        return outs

    def gru_cell(self):
        def make(mod):
            return tf.function(lambda: tf.stack([o[3] for o in self._gru_forward(mod)]),
                               autograph=False)
        return {"ours": lambda: make(ours), "stock": lambda: make(tf.raw_ops)}

    def gru_cell_grad(self):
        T, B, I, H = self.size
        x, h0 = self.lstm["x"], self.lstm["h_prev"]
        g = self.gru

        def make(mod):
            fwd = self._gru_forward(ours)  # eager, once: the saved activations

            def step():
                dh = tf.zeros([B, H], self.dtype)
                dw_ru = tf.zeros([I + H, 2 * H], self.dtype)
                dw_c = tf.zeros([I + H, H], self.dtype)
                db_ru = tf.zeros([2 * H], self.dtype)
                db_c = tf.zeros([H], self.dtype)
                dxs = []
                for t in reversed(range(T)):
                    r, u, c, _ = fwd[t]
                    h_prev = h0 if t == 0 else fwd[t - 1][3]
                    d_x, dh, d_c_bar, d_ru = mod.GRUBlockCellGrad(
                        x=x[t], h_prev=h_prev, **g, r=r, u=u, c=c, d_h=self.dh[t] + dh)
                    dxs.append(d_x)
                    dw_ru += tf.matmul(tf.concat([x[t], h_prev], 1), d_ru, transpose_a=True)
                    dw_c += tf.matmul(tf.concat([x[t], r * h_prev], 1), d_c_bar,
                                      transpose_a=True)
                    db_ru += tf.reduce_sum(d_ru, 0)
                    db_c += tf.reduce_sum(d_c_bar, 0)
                return tf.stack(dxs[::-1]), dh, dw_ru, dw_c, db_ru, db_c
            return tf.function(step, autograph=False)
        return {"ours": lambda: make(ours), "stock": lambda: make(tf.raw_ops)}

    def lstm_train(self):
        a = dict(self.lstm, wci=tf.zeros_like(self.lstm["wci"]),
                 wcf=tf.zeros_like(self.lstm["wci"]), wco=tf.zeros_like(self.lstm["wci"]))

        def make(mod):
            @tf.function
            def step():
                out = mod.BlockLSTMV2(seq_len_max=self.slm, **a)
                return mod.BlockLSTMGradV2(seq_len_max=self.slm, **a, **dict(zip(LSTM_ACTS, out)),
                                           cs_grad=tf.zeros_like(out[1]), h_grad=self.dh,
                                           use_peephole=False)
            return step
        return {"ours": lambda: make(ours), "stock": lambda: make(tf.raw_ops),
                "torch": lambda: self._torch_step("LSTM")}

    def _cudnn_params(self, mode):
        T, B, I, H = self.size
        n = int(tf.reshape(ours.CudnnRNNParamsSize(
            num_layers=1, num_units=H, input_size=I, T=self.dtype, S=tf.int32,
            rnn_mode=mode), [-1])[0])
        return self.r(n, scale=1.0 / np.sqrt(I + H))

    def _cudnn_train(self, mode, torch_kind):
        T, B, I, H = self.size

        def make():
            params = self._cudnn_params(mode)
            x, h0 = self.lstm["x"], self.lstm["h_prev"][None]
            c0 = self.lstm["cs_prev"][None] if mode == "lstm" else h0
            lengths = tf.fill([B], T)
            kw = dict(input=x, input_h=h0, input_c=c0, params=params, sequence_lengths=lengths,
                      rnn_mode=mode)
            return bu.cudnn_train_step(ours, kw, self.dh)
        return {"ours": make, "torch": lambda: self._torch_step(torch_kind)}

    def gru_train(self):
        return self._cudnn_train("gru", "GRU")

    def lstm_train_cudnn(self):
        return self._cudnn_train("lstm", "LSTM")

    def _torch_module(self, kind, **kw):
        """(torch, nn.LSTM / nn.GRU of this size in this dtype, the dtype)."""
        torch = _torch()
        if torch is None:
            raise RuntimeError("PyTorch not installed")
        T, B, I, H = self.size
        tdt = {"float32": torch.float32, "bfloat16": torch.bfloat16}[self.dtype_name]
        torch.manual_seed(0)
        return torch, getattr(torch.nn, kind)(I, H, **kw).to(tdt), tdt

    def _torch_step(self, kind):
        torch, mod, tdt = self._torch_module(kind)
        to_t = lambda t: torch.from_numpy(tf.cast(t, tf.float32).numpy()).to(tdt)  # noqa: E731
        x = to_t(self.lstm["x"]).requires_grad_()
        h0 = to_t(self.lstm["h_prev"])[None].requires_grad_()
        c0 = to_t(self.lstm["cs_prev"])[None].requires_grad_()
        go = to_t(self.dh)

        def step():
            mod.zero_grad(set_to_none=True)
            x.grad = h0.grad = c0.grad = None
            out, _ = mod(x, (h0, c0)) if kind == "LSTM" else mod(x, h0)
            out.backward(go)
            return x.grad
        return step

    def _torch_infer(self, kind):
        """nn.LSTM / nn.GRU inference on the same batch-major x: the Keras inference
        benchmarks' PyTorch peer (forward under no_grad)."""
        torch, mod, tdt = self._torch_module(kind, batch_first=True)
        x = torch.from_numpy(tf.transpose(tf.cast(self.lstm["x"], tf.float32),
                                          [1, 0, 2]).numpy()).to(tdt)

        def step():
            with torch.no_grad():
                return mod(x)[0]
        return step


def flops(bench, size):
    T, B, I, H = size
    gates = 3 if "gru" in bench else 1 if "simple" in bench else 4
    if bench.endswith("_stream"):
        return bu.lstm_flops(1, B, I, H, gates)
    f = bu.lstm_flops(T, B, I, H, gates)
    if bench.endswith("_grad"):
        return 2 * f
    if bench.endswith("_infer"):
        return f
    if bench.startswith("keras_"):
        # The training step differentiates the layer's variables only (KerasCases._keras): the
        # forward, then the backward's two products per forward one but for x's gradient,
        # which neither side computes (stock's is pruned from the graph, ours skipped by the
        # backprop kernel as an output nobody consumes).
        return bu.train_flops(f, I, H, input_grad=False)
    if "_train" in bench:  # lstm_train_cudnn too
        return bu.train_flops(f, I, H)
    return f


def _err_line(e):
    """One informative line of an exception (tf.function errors start with 'in user code:')."""
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    pick = [ln for ln in lines if "allowed values" in ln or "not installed" in ln]
    line = (pick or lines[-1:] or [""])[0]
    if not line.startswith(type(e).__name__):
        line = f"{type(e).__name__}: {line}"
    return line[:130]


def _impls(case, bench, want_torch):
    impls = getattr(case, bench)()
    if not want_torch:
        impls.pop("torch", None)
    return impls


class Progress:
    """One line per finished measurement on stderr: a bar, measurements done and left, the
    elapsed time and an estimate of the time left. The estimate weighs each remaining
    measurement by its FLOPs times the number of implementations it times (a benchmark's time
    grows with both), scaled by the seconds per such unit measured so far."""

    def __init__(self, args, stream=sys.stderr):
        self.stream = stream
        self.items = [(dt, size, bench) for dt in args.dtypes for size in args.sizes
                      for bench in args.only]
        self.weight = {it: flops(it[2], it[1]) * (1 + len(_peers(it[2], args)))
                       for it in self.items}
        self.total_w = sum(self.weight.values()) or 1.0
        self.done, self.done_w = 0, 0.0
        self.t0 = time.perf_counter()

    def step(self, item, summary):
        self.done += 1
        self.done_w += self.weight[item]
        elapsed = time.perf_counter() - self.t0
        left_w = self.total_w - self.done_w
        eta = elapsed * left_w / self.done_w if self.done_w > 0 else 0.0
        n = len(self.items)
        fill = int(round(20 * self.done / n))
        dt, size, bench = item
        print(f"[{'#' * fill}{'.' * (20 - fill)}] {self.done}/{n} ({n - self.done} left) "
              f"{bu.clock(elapsed)} elapsed, ~{bu.clock(eta)} left | {dt} {bu.size_str(size)} "
              f"{bench}: {summary}", file=self.stream, flush=True)


def _summary(rows):
    """'ours 1.23 ms | stock 2.46 ms (2.00x)' for the progress line."""
    ours_ms = rows["ours"]["ms"] if "ours" in rows else None
    parts = []
    for impl, row in rows.items():
        if row["ms"] is None:
            parts.append(f"{impl} n/a")
            continue
        text = f"{impl} {row['ms']:.2f} ms"
        if impl != "ours" and ours_ms:
            text += f" ({row['ms'] / ours_ms:.2f}x)"
        parts.append(text)
    return " | ".join(parts)


def _peers(bench, args):
    return [p for p in PEERS[bench] if args.peers is None or p in args.peers]


def run_timings(args):
    results, gemm = [], []
    torch = _torch() if not args.no_torch else None
    progress = Progress(args)
    print(f"bench_rnn: {len(progress.items)} measurements ({len(args.dtypes)} dtypes x "
          f"{len(args.sizes)} sizes x {len(args.only)} benchmarks), {args.reps} reps each",
          file=sys.stderr, flush=True)
    for dt in args.dtypes:
        for size in args.sizes:
            rnn_rate, sq_rate = bu.gemm_rates(*size, bu.DTYPES[dt], args.reps, args.square)
            torch_rate = (bu.torch_gemm_rate(torch, *size, bu.DTYPES[dt], args.reps)
                          if torch is not None else None)
            peak = max(rnn_rate, sq_rate, torch_rate or 0.0)
            gemm.append(dict(size=list(size), dtype=dt, gemm_rnn_gflops=rnn_rate,
                             gemm_square_gflops=sq_rate, square_n=args.square,
                             torch_gemm_rnn_gflops=torch_rate, peak_gflops=peak))
            case = Case(size, dt)
            for bench in args.only:
                try:
                    impls = _impls(case, bench, torch is not None)
                except Exception as e:  # noqa: BLE001 (report, go on)
                    impls = {"ours": e}
                if torch is None and "torch" in PEERS[bench]:
                    impls["torch"] = RuntimeError("PyTorch not installed" if not args.no_torch
                                                  else "--no-torch")
                # Every implementation is built and warmed up first, then timed in turns (one
                # call of each per round): the machine's speed drifts by tens of percent over a
                # run, and timing each side in turn lets both see the same drift.
                rows, fns, warm_ms = {}, {}, {}
                for impl in ["ours"] + _peers(bench, args):
                    f = flops(bench, size)
                    row = dict(bench=bench, impl=impl, size=list(size), dtype=dt, flops=f,
                               ms=None, gflops=None, gemm_share=None, peak_mib=None,
                               status="ok")
                    factory = impls.get(impl)
                    try:
                        if isinstance(factory, Exception):
                            raise factory
                        fn = factory()
                        fn()  # also the warm-up
                        fns[impl] = fn
                        warm_ms[impl] = bu.time_once_ms(fn)
                    except Exception as e:  # noqa: BLE001
                        row["status"] = "n/a: " + _err_line(e)
                    rows[impl] = row
                # Each turn starts with one untimed call. PyTorch's OpenMP workers spin for
                # milliseconds after a call returns and take a core from whatever runs next
                # (ours lstm_train at 200x16x64x128 is about 40 % slower right after an nn.LSTM
                # step, CHANGELOG.md); in a training loop each framework runs back to back with
                # itself, which the settling call restores.
                # A streaming step (well under a millisecond) needs more: right after another
                # tf.function ran, its first calls are 1.3-2x slower on both sides (measured
                # 490, 340, 290, 276 µs for ours and 540, 430, 400, 387 µs for stock
                # before their steady 268 / 377, LSTM H = 128), and a model served per time
                # step runs back to back. So stream turns settle with STREAM_SETTLE calls.
                # And every turn settles for at least SETTLE_MS: PyTorch's workers still spun
                # through the whole of the next 5 ms call (ours keras_lstm_infer at
                # 200x16x64x128: a median 6.5-7.3 ms with one settling call after an nn.LSTM
                # call, 4.9 ms at best; the bench read 0.61x where alternating blocks of calls
                # read 1.03x).
                base = STREAM_SETTLE if bench.endswith("_stream") else 1
                settle = {impl: max(base, min(10, int(np.ceil(SETTLE_MS / max(ms, 1e-3)))))
                          for impl, ms in warm_ms.items()}
                # The order of the turns is shuffled each round (seeded), so that each
                # implementation follows each of the others about equally often: whatever a
                # call leaves behind (spinning pool threads, cold caches) falls on all of them
                # alike. (A rotation would keep the cyclic order: the same side would always
                # follow PyTorch.)
                times = {impl: [] for impl in fns}
                for rnd in range(max(1, args.reps)):
                    order = list(fns)
                    random.Random(rnd).shuffle(order)
                    for impl in order:
                        fn = fns[impl]
                        try:
                            for _ in range(settle[impl]):
                                fn()
                            times[impl].append(bu.time_once_ms(fn))
                        except Exception as e:  # noqa: BLE001
                            rows[impl]["status"] = "n/a: " + _err_line(e)
                            del fns[impl]
                for impl, row in rows.items():
                    if row["status"] == "ok" and times.get(impl):
                        row["ms"] = float(np.median(times[impl]))
                        row["gflops"] = row["flops"] / row["ms"] / 1e6
                        row["gemm_share"] = row["gflops"] / peak
                    results.append(row)
                    if args.verbose and row["status"] != "ok":
                        print(f"  {dt} {bu.size_str(size)} {bench} {impl}: {row['status']}",
                              file=sys.stderr, flush=True)
                progress.step((dt, size, bench), _summary(rows))
    return results, gemm


def mem_child(args):
    """Runs in the separate process: peak memory of each backward benchmark, as JSON lines."""
    torch = _torch() if not args.no_torch else None
    out = []
    todo = [(dt, size, bench) for dt in args.dtypes for size in args.sizes
            for bench in args.only if bench in BACKWARD]
    done = 0
    t0 = time.perf_counter()
    for dt in args.dtypes:
        for size in args.sizes:
            case = Case(size, dt)
            for bench in args.only:
                if bench not in BACKWARD:
                    continue
                done += 1
                print(f"[memory {done}/{len(todo)}] {bu.clock(time.perf_counter() - t0)} "
                      f"elapsed | {dt} {bu.size_str(size)} {bench}", file=sys.stderr,
                      flush=True)
                try:
                    impls = _impls(case, bench, torch is not None)
                except Exception:  # noqa: BLE001
                    continue
                for impl, factory in impls.items():
                    try:
                        mib = bu.peak_mib(factory())
                    except Exception:  # noqa: BLE001 (n/a: the timing run says why)
                        continue
                    out.append(dict(bench=bench, impl=impl, size=list(size), dtype=dt,
                                    peak_mib=mib))
    print("MEMJSON " + json.dumps(out), flush=True)


def start_memory(args):
    """Starts mem_child in a fresh process (with the allocator settings it needs). Returns the
    process, or a string saying why memory is not measured."""
    if not any(b in BACKWARD for b in args.only):
        return "not measured (no backward benchmark selected)"
    if args.no_memory:
        return "not measured (--no-memory)"
    if not bu.memory_supported():
        return "not measured (/proc/self/clear_refs not writable)"
    cmd = [sys.executable, os.path.abspath(__file__), "--_mem-child",
           "--sizes", ",".join(bu.size_str(s) for s in args.sizes),
           "--dtypes", ",".join(args.dtypes), "--only", ",".join(args.only)]
    if args.no_torch:
        cmd.append("--no-torch")
    cmd += ["--torch-threads", str(args.torch_threads)]
    env = dict(os.environ, **bu.MEM_ENV)
    print("bench_rnn: peak memory in a separate process"
          + (" (alongside the timings)" if args.quick else ""), file=sys.stderr, flush=True)
    # Its progress lines (stderr) go straight to ours.
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=None, text=True)


def finish_memory(proc, results):
    """Waits for the memory process and fills in peak_mib; returns the method line."""
    if isinstance(proc, str):
        return proc
    stdout, _ = proc.communicate()
    lines = [ln for ln in stdout.splitlines() if ln.startswith("MEMJSON ")]
    if proc.returncode != 0 or not lines:
        tail = stdout.strip().splitlines()[-3:]
        return (f"failed: the memory process exited with {proc.returncode} (its error is on "
                "stderr above)" + (": " + " | ".join(tail) if tail else ""))
    found = {(m["bench"], m["impl"], tuple(m["size"]), m["dtype"]): m["peak_mib"]
             for m in json.loads(lines[-1][len("MEMJSON "):])}
    for row in results:
        key = (row["bench"], row["impl"], tuple(row["size"]), row["dtype"])
        if row["status"] == "ok" and key in found:
            row["peak_mib"] = found[key]
    return bu.MEM_METHOD


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 2)[2])
    p.add_argument("--sizes", help="comma-separated TxBxIxH (default: the four of issue #5; "
                                   f"--quick: {','.join(map(bu.size_str, bu.QUICK_SIZES))})")
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--reps", type=int, help="timed calls per measurement (default 10; "
                                            "--quick: 2)")
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes, 2 reps, 256³ square GEMM: a smoke test, not a measurement")
    p.add_argument("--only", help=f"comma-separated subset of: {', '.join(BENCHES)} "
                                  "(default: all; --sweep: sweep.SWEEP_BENCHES)")
    p.add_argument("--png", default=os.path.join(bu.REPO_ROOT, "bench", "out", "bench.png"))
    p.add_argument("--json", help="also write all results as JSON to this path")
    p.add_argument("--square", type=int, help="side of the square GEMM (default 2048; "
                                              "--quick: 256)")
    p.add_argument("--no-torch", action="store_true", help="skip the PyTorch peers")
    p.add_argument("--torch-threads", type=int,
                   help="PyTorch intra-op threads (default: all CPUs, like TensorFlow's "
                        "intra-op pool; --quick: 1, since OpenMP spin-waiting makes PyTorch "
                        "very slow on an oversubscribed machine)")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory process")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="also print why an implementation is n/a as it happens (every "
                        "measurement prints a progress line on stderr regardless)")
    sweep.add_args(p)
    p.add_argument("--_mem-child", dest="mem_child", action="store_true",
                   help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.sizes = (bu.parse_sizes(args.sizes) if args.sizes
                  else (bu.QUICK_SIZES if args.quick else bu.DEFAULT_SIZES))
    args.dtypes = bu.parse_dtypes(args.dtypes)
    args.reps = args.reps or (2 if args.quick else 10)
    args.square = args.square or (256 if args.quick else 2048)
    args.torch_threads = args.torch_threads or (1 if args.quick else os.cpu_count() or 1)
    TORCH_THREADS[0] = args.torch_threads
    given_only, given_peers = args.only is not None, args.peers is not None
    args.only = [b.strip() for b in (args.only or ",".join(BENCHES)).split(",") if b.strip()]
    args.peers = [x.strip() for x in args.peers.split(",")] if args.peers else None
    if args.sweep:
        sweep.configure(args, given_only, given_peers)
    bad = [b for b in args.only if b not in BENCHES]
    if bad:
        p.error(f"--only: unknown {bad}; choose from {', '.join(BENCHES)}")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.mem_child:
        mem_child(args)
        return 0
    torch = None if args.no_torch else _torch()
    meta = dict(tensorflow=tf.__version__, torch=torch.__version__ if torch else None,
                torch_threads=args.torch_threads if torch else None,
                cpus=os.cpu_count(), reps=args.reps, quick=args.quick, square=args.square,
                sizes=[list(s) for s in args.sizes], dtypes=args.dtypes, only=args.only,
                flops="LSTM forward 8*T*B*H*(I+H), GRU 6*...; backward 2x, fwd+bwd 3x",
                timing="median of reps after one warm-up call, implementations timed in turns; "
                       "TF callables as tf.function")
    if args.sweep:  # GF/s over H, I or B: sweep.py's table and plot, no memory process
        results, gemm, rows = sweep.run(args, run_timings)
        if args.json:  # comparisons too: bench_ab.py reads them
            with open(args.json, "w") as f:
                json.dump(dict(meta=meta, gemm=gemm, results=results, sweep=rows,
                               comparisons=report.comparisons(results, PEERS)), f, indent=1)
        return 0
    # The memory process runs after the timings, so it cannot disturb them; with --quick
    # (not a measurement) it runs alongside them to save time.
    mem = start_memory(args) if args.quick else None
    results, gemm = run_timings(args)
    meta["memory_method"] = finish_memory(mem or start_memory(args), results)
    comps = report.comparisons(results, PEERS)
    tgts = report.targets(results, comps, TARGETS, GEMM_TARGET)
    report.print_tables(meta, gemm, results, comps, tgts, BACKWARD)
    if args.png:
        report.plot(args.png, meta, comps)
        print(f"plot: {args.png}")
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(dict(meta=meta, gemm=gemm, results=results, comparisons=comps,
                           targets=tgts), f, indent=1)
        print(f"json: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
