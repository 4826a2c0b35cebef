"""bench_rnn.py's report: the comparisons of ours against each peer, the issue's targets, the
Markdown tables and the bar plot of speed-ups (bench_rnn.py measures; this module prints)."""
import os

import numpy as np

import bench_util as bu


def comparisons(results, peers):
    by = {(r["bench"], r["impl"], tuple(r["size"]), r["dtype"]): r for r in results}
    comps = []
    for r in results:
        if r["impl"] != "ours":
            continue
        for peer in peers[r["bench"]]:
            p = by.get((r["bench"], peer, tuple(r["size"]), r["dtype"]))
            if p is None:
                continue
            ratio = p["ms"] / r["ms"] if (p["ms"] and r["ms"]) else None
            comps.append(dict(bench=r["bench"], peer=peer, size=r["size"], dtype=r["dtype"],
                              ours_ms=r["ms"], peer_ms=p["ms"], ratio=ratio,
                              ours_peak_mib=r["peak_mib"], peer_peak_mib=p["peak_mib"]))
    return comps


def targets(results, comps, ratio_targets, gemm_target):
    out = []
    for c in comps:
        for bench, peer, goal in ratio_targets:
            if c["dtype"] == "float32" and c["bench"] == bench and c["peer"] == peer:
                out.append(dict(name=f"{bench} {peer}/ours", size=c["size"], dtype="float32",
                                value=c["ratio"], goal=goal,
                                met=None if c["ratio"] is None else c["ratio"] >= goal))
    bench, size, goal = gemm_target
    for r in results:
        if (r["bench"], r["impl"], tuple(r["size"]), r["dtype"]) == (bench, "ours", size,
                                                                      "float32"):
            out.append(dict(name=f"{bench} ours share of GEMM", size=list(size),
                            dtype="float32", value=r["gemm_share"], goal=goal,
                            met=None if r["gemm_share"] is None else r["gemm_share"] >= goal))
    return out


def _f(v, fmt, na="n/a"):
    return na if v is None else format(v, fmt)


def _pct(v):
    return "n/a" if v is None else f"{100 * v:.0f}%"


def print_keras_xla(meta, by):
    """Ours compiled by XLA (one custom call) against the stock layer compiled by XLA (its
    loop), and against ours without XLA, per Keras benchmark."""
    rows = sorted({(b, s, d) for (b, impl, s, d) in by if impl == "ours_xla"})
    if not rows:
        return
    print("#### Keras with XLA (jit_compile=True): ours_xla against keras_xla and ours\n")
    print("| benchmark | dtype | T×B×I×H | ours_xla ms | keras_xla ms | keras_xla/ours_xla | "
          "ours ms | ours/ours_xla |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for bench, size, dt in rows:
        ox, kx = by[(bench, "ours_xla", size, dt)]["ms"], by.get((bench, "keras_xla", size, dt))
        o = by.get((bench, "ours", size, dt))
        kx_ms, o_ms = kx and kx["ms"], o and o["ms"]
        ratio = lambda a, b: f"{a / b:.2f}x" if a and b else "n/a"  # noqa: E731
        print(f"| {bench} | {dt} | {bu.size_str(size)} | {_f(ox, '.3f')} | {_f(kx_ms, '.3f')} | "
              f"{ratio(kx_ms, ox)} | {_f(o_ms, '.3f')} | {ratio(o_ms, ox)} |")
    print()


def print_tables(meta, gemm, results, comps, tgts, backward):
    torch = (f"PyTorch {meta['torch']} ({meta['torch_threads']} threads)" if meta["torch"]
             else "PyTorch not installed")
    print(f"\n### RNN CPU benchmark: {meta['cpus']} CPUs, TensorFlow {meta['tensorflow']}, "
          f"{torch}, median of {meta['reps']} reps\n")
    print("GEMM rates (same run): tf.matmul of the RNN input GEMM [T·B, I+H]·[I+H, 4H] and of a "
          f"square {meta['square']}³, torch.matmul of the RNN input GEMM (where PyTorch is "
          "installed); %GEMM below is relative to the fastest.\n")
    print("| dtype | T×B×I×H | RNN-shape tf.matmul GF/s | square tf.matmul GF/s | "
          "RNN-shape torch.matmul GF/s | peak GF/s |")
    print("|---|---|---:|---:|---:|---:|")
    for g in gemm:
        t = g.get("torch_gemm_rnn_gflops")
        print(f"| {g['dtype']} | {bu.size_str(g['size'])} | {g['gemm_rnn_gflops']:.1f} | "
              f"{g['gemm_square_gflops']:.1f} | {'n/a' if t is None else f'{t:.1f}'} | "
              f"{g['peak_gflops']:.1f} |")
    print(f"\nPeak memory (MiB, backward benchmarks only): {meta['memory_method']}.")
    print("speed-up = peer ms / ours ms (> 1: ours faster).\n")
    by = {(r["bench"], r["impl"], tuple(r["size"]), r["dtype"]): r for r in results}
    for dt in meta["dtypes"]:
        print(f"#### {dt}\n")
        print("| benchmark | T×B×I×H | ours ms | ours GF/s | ours %GEMM | peer | peer ms | "
              "peer GF/s | speed-up | ours peak MiB | peer peak MiB |")
        print("|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|")
        for c in comps:
            if c["dtype"] != dt:
                continue
            o = by[(c["bench"], "ours", tuple(c["size"]), dt)]
            p = by[(c["bench"], c["peer"], tuple(c["size"]), dt)]
            mem = c["bench"] in backward
            print(f"| {c['bench']} | {bu.size_str(c['size'])} | {_f(o['ms'], '.2f')} | "
                  f"{_f(o['gflops'], '.1f')} | "
                  f"{_pct(o['gemm_share'])} | "
                  f"{c['peer']} | {_f(p['ms'], '.2f')} | {_f(p['gflops'], '.1f')} | "
                  f"{_f(c['ratio'], '.2f')}{'x' if c['ratio'] is not None else ''} | "
                  f"{_f(o['peak_mib'], '.1f', 'n/a' if mem else '-')} | "
                  f"{_f(p['peak_mib'], '.1f', 'n/a' if mem else '-')} |")
        print()
    print_keras_xla(meta, by)
    na = sorted({(r["bench"], r["impl"], r["dtype"], r["status"]) for r in results
                 if r["status"] != "ok"})
    if na:
        print("n/a:")
        for bench, impl, dt, status in na:
            print(f"- {bench} {impl} {dt}: {status[5:]}")
        print()
    if tgts:
        print("#### Targets (issue #5, float32)\n")
        print("| target | T×B×I×H | value | goal | met |")
        print("|---|---|---:|---:|---|")
        for t in tgts:
            share = "GEMM" in t["name"]
            val = _pct(t["value"]) if share else _f(t["value"], ".2f") + (
                "x" if t["value"] is not None else "")
            goal = f"{100 * t['goal']:.0f}%" if share else f"{t['goal']:.1f}x"
            met = "n/a" if t["met"] is None else ("yes" if t["met"] else "NO")
            print(f"| {t['name']} | {bu.size_str(t['size'])} | {val} | >= {goal} | {met} |")
        print()


def plot(path, meta, comps):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dtypes = meta["dtypes"]
    fig, axes = plt.subplots(len(dtypes), 1, figsize=(14, 4.5 * len(dtypes)), squeeze=False)
    for ax, dt in zip(axes[:, 0], dtypes):
        cs = [c for c in comps if c["dtype"] == dt]
        sizes = [tuple(s) for s in meta["sizes"]]
        series = []  # (bench, peer) pairs with at least one ratio in this dtype
        for c in cs:
            key = (c["bench"], c["peer"])
            if c["ratio"] is not None and key not in series:
                series.append(key)
        width = 0.8 / max(1, len(series))
        cmap = plt.get_cmap("tab20")
        for k, (bench, peer) in enumerate(series):
            vals = []
            for s in sizes:
                v = [c["ratio"] for c in cs
                     if (c["bench"], c["peer"], tuple(c["size"])) == (bench, peer, s)]
                vals.append(v[0] if v and v[0] else np.nan)
            xs = np.arange(len(sizes)) + (k - (len(series) - 1) / 2) * width
            ax.bar(xs, vals, width, label=f"{bench} vs {peer}", color=cmap(k % 20))
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xlim(-0.5, len(sizes) - 0.5)
        ax.set_yscale("log")
        ax.set_xticks(np.arange(len(sizes)))
        ax.set_xticklabels([f"T={s[0]} B={s[1]}\nI={s[2]} H={s[3]}" for s in sizes])
        ax.set_ylabel("speed-up (peer ms / ours ms)")
        ax.set_title(f"tf_rnn_ops vs peers, {dt} ({meta['cpus']} CPUs)")
        ax.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
