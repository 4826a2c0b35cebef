"""bench_rnn.py --sweep: GF/s of ours and the peers over H (or I, or the batch B), sizes off the
64-grid included, as a table and a plot.

    .venv/bin/python bench/bench_rnn.py --sweep H                  # H from 32 to 1024
    .venv/bin/python bench/bench_rnn.py --sweep I --sweep-base 100x32x256 --dtypes float32
    .venv/bin/python bench/bench_rnn.py --sweep H --sweep-values 96,100,128,600,640
    .venv/bin/python bench/bench_rnn.py --sweep B --dtypes float32  # B from 1 to 64

The other three sizes stay at --sweep-base (T×B×I for an H sweep, T×B×H for an I sweep, T×I×H
for a B sweep; default 100x32x128, 100x32x256 and 100x64x128). In an H or I sweep every value
off the 64-grid brings the next multiple of 64 into the sweep, and the table reports its GF/s
over that neighbour's ("vs next 64": the issue's no-cliff criterion is >= 0.8); a B sweep has
no such neighbour (the batch changes the engine's roads: the pipelined chain, batch blocks,
the batch in the SIMD lanes). Default benchmarks: keras_lstm_infer, keras_gru_infer,
lstm_train_cudnn, gru_train; default peers: torch only (--peers adds stock ones). The
measurements are bench_rnn's (turns, medians, progress lines); "ours % of GEMM" is ours over
the fastest GEMM rate measured beside that size in the same run (bench_rnn's "%GEMM": tf.matmul
of the RNN's input GEMM shape and of a --square GEMM, torch.matmul of the input shape where
PyTorch is installed). The input shape alone is no ceiling: at small H tf.matmul runs it at
half the square's rate, where the RNN's fused step products run faster than that.
"""
import os

SWEEP_BENCHES = ["keras_lstm_infer", "keras_gru_infer", "lstm_train_cudnn", "gru_train"]
SWEEP_PEERS = ["torch"]
DEFAULT_BASE = {"H": (100, 32, 128), "I": (100, 32, 256), "B": (100, 64, 128)}
# Powers of two and the sizes models use between them (100, 200, 300, 500, 600, 700, ...).
DEFAULT_VALUES = [32, 50, 64, 100, 128, 160, 200, 256, 300, 384, 500, 512, 600, 640, 700, 768,
                  800, 900, 1000, 1024]
# Batches: one row, the pipelined chain's few rows, the blocks of 3-7 and 8-15 rows, the lanes.
DEFAULT_B_VALUES = [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 24, 32, 48, 64]


def add_args(p):
    p.add_argument("--sweep", choices=["H", "I", "B"],
                   help="GF/s over H or I (32..1024, off the 64-grid too) or B (1..64): a "
                        "table and a plot instead of the benchmark grid (bench/sweep.py)")
    p.add_argument("--sweep-base", help="the fixed sizes: TxBxI for --sweep H, TxBxH for "
                                        "--sweep I, TxIxH for --sweep B (default 100x32x128 / "
                                        "100x32x256 / 100x64x128)")
    p.add_argument("--sweep-values", help="comma-separated H (or I, or B) values (default "
                                          f"{','.join(map(str, DEFAULT_VALUES))}; B: "
                                          f"{','.join(map(str, DEFAULT_B_VALUES))})")
    p.add_argument("--peers", help="comma-separated peers to time beside ours (default: all "
                                   "of a benchmark's; with --sweep: torch)")


def next64(v):
    return (v + 63) // 64 * 64


# Where the swept size sits in T×B×I×H; --sweep-base holds the other three in that order.
_AXIS = {"H": 3, "I": 2, "B": 1}


def _on_grid(args):
    """Whether the swept size has a next multiple of 64 to compare with (H and I, not B)."""
    return args.sweep != "B"


def _at(others, axis, v):
    """The size T×B×I×H with v at `axis` and the fixed sizes `others` around it."""
    return others[:axis] + (v,) + others[axis:]


def _without(size, axis):
    return size[:axis] + size[axis + 1:]


def configure(args, given_only, given_peers):
    """Turns --sweep into the sizes, benchmarks and peers bench_rnn measures."""
    base = (tuple(int(x) for x in args.sweep_base.lower().split("x")) if args.sweep_base
            else DEFAULT_BASE[args.sweep])
    if len(base) != 3:
        raise SystemExit("--sweep-base: expected three sizes, e.g. 100x32x128")
    values = ([int(v) for v in args.sweep_values.split(",") if v.strip()] if args.sweep_values
              else list(DEFAULT_B_VALUES if args.sweep == "B" else DEFAULT_VALUES))
    values = set(values) | ({next64(v) for v in values} if _on_grid(args) else set())
    args.sizes = [_at(base, _AXIS[args.sweep], v) for v in sorted(values)]
    if not given_only:
        args.only = list(SWEEP_BENCHES)
    if not given_peers:
        args.peers = list(SWEEP_PEERS)
    if args.png and os.path.basename(args.png) == "bench.png":
        args.png = os.path.join(os.path.dirname(args.png), f"sweep_{args.sweep}.png")


def _value(args, size):
    return size[_AXIS[args.sweep]]


def _neighbour(args, size):
    """The size at the next multiple of 64 of the swept value (H and I sweeps; B: itself)."""
    if not _on_grid(args):
        return size
    axis = _AXIS[args.sweep]
    return _at(_without(size, axis), axis, next64(size[axis]))


def _others(args):
    """The fixed sizes of the sweep, as TxBxI, TxBxH or TxIxH."""
    return "x".join(map(str, _without(args.sizes[0], _AXIS[args.sweep])))


def tables(args, results, gemm):
    """Markdown: per (dtype, benchmark) one row per value with ours and each peer's GF/s,
    peer/ours, ours' share of the same-run GEMM rate (the fastest measured beside the size) and
    its GF/s over the next multiple of 64's. Returns the rows (for JSON and the plot)."""
    rate = {(g["dtype"], tuple(g["size"])): g["peak_gflops"] for g in gemm}
    by = {(r["dtype"], r["bench"], r["impl"], tuple(r["size"])): r for r in results}
    peers = sorted({r["impl"] for r in results if r["impl"] != "ours"})
    rows, lines = [], []
    for dt in args.dtypes:
        for bench in args.only:
            head = (f"| {args.sweep} | ours GF/s | " + " | ".join(f"{p} GF/s | {p}/ours"
                                                             for p in peers) +
                    " | ours % of GEMM | vs next 64 |")
            lines += ["", f"### {bench}, {dt} ({args.sweep} sweep, other sizes "
                          f"{_others(args)})", "", head, "|" + "---|" * (head.count("|") - 1)]
            for size in args.sizes:
                v = _value(args, size)
                o = by.get((dt, bench, "ours", size), {}).get("gflops")
                n = _neighbour(args, size)
                on = by.get((dt, bench, "ours", n), {}).get("gflops")
                cliff = o / on if (o and on and n != size) else None
                row = dict(dtype=dt, bench=bench, value=v, ours_gflops=o, vs_next64=cliff,
                           gemm_gflops=rate.get((dt, size)))
                cells = [str(v), _fmt(o, ".1f")]
                for p in peers:
                    pg = by.get((dt, bench, p, size), {}).get("gflops")
                    row[f"{p}_gflops"] = pg
                    cells += [_fmt(pg, ".1f"), _fmt(o / pg if (o and pg) else None,
                                                        ".2f", suffix="x")]
                share = o / row["gemm_gflops"] if (o and row["gemm_gflops"]) else None
                cells += [_fmt(None if share is None else 100 * share, ".0f", suffix=" %"),
                          _fmt(cliff, ".2f") if n != size else "-"]
                lines.append("| " + " | ".join(cells) + " |")
                rows.append(row)
    worst = [r for r in rows if r["vs_next64"] is not None]
    if worst:
        w = min(worst, key=lambda r: r["vs_next64"])
        lines += ["", f"Lowest GF/s against the next multiple of 64: {w['vs_next64']:.2f} "
                      f"({w['bench']} {w['dtype']} at {args.sweep} = {w['value']}); target "
                      f">= 0.80."]
    print("\n".join(lines))
    return rows


def _fmt(v, fmt, suffix=""):
    return "n/a" if v is None else format(v, fmt) + suffix


def plot(path, args, rows):
    """One panel per (benchmark, dtype): GF/s against the swept size, ours and each peer;
    values off the 64-grid of H or I marked with open circles."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot: matplotlib not installed, no PNG")
        return
    panels = [(b, d) for d in args.dtypes for b in args.only]
    cols = min(2, len(panels))
    nrows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(6.5 * cols, 3.6 * nrows), squeeze=False)
    keys = sorted({k[:-7] for r in rows for k in r if k.endswith("_gflops")
                   and k != "gemm_gflops"})
    for ax, (bench, dt) in zip(axes.flat, panels):
        sel = [r for r in rows if r["bench"] == bench and r["dtype"] == dt]
        xs = [r["value"] for r in sel]
        for key in keys:
            ys = [r.get(f"{key}_gflops") for r in sel]
            pts = [(x, y) for x, y in zip(xs, ys) if y]
            if not pts:
                continue
            line, = ax.plot([p[0] for p in pts], [p[1] for p in pts], "-", label=key)
            off = [(x, y) for x, y in pts if x % 64 and _on_grid(args)]
            ax.plot([p[0] for p in off], [p[1] for p in off], "o", mfc="none",
                    color=line.get_color())
        g = [(r["value"], r["gemm_gflops"]) for r in sel if r["gemm_gflops"]]
        if g:
            ax.plot([p[0] for p in g], [p[1] for p in g], ":", color="gray",
                    label="GEMM rate (fastest of the run)")
        ax.set_title(f"{bench} {dt}", fontsize=9)
        ax.set_xlabel(args.sweep)
        ax.set_ylabel("GF/s")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.suptitle(f"{args.sweep} sweep" + (" (open circles: off the 64-grid)"
                                          if _on_grid(args) else ""), fontsize=10)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"plot: {path}")


def run(args, run_timings):
    """The sweep's measurements (bench_rnn.run_timings), then its table and plot."""
    results, gemm = run_timings(args)
    rows = tables(args, results, gemm)
    if args.png:
        plot(args.png, args, rows)
    return results, gemm, rows

