#!/usr/bin/env python
"""Train a small sunspot forecaster with tf_rnn_ops.keras.LSTM and with keras.layers.LSTM.

The data are the monthly mean sunspot numbers 1749-2009 (NGDC, public domain) that the
`statsmodels` package ships as a data file (statsmodels/datasets/sunspots/src/): nothing is
downloaded. The file is read directly, so statsmodels itself is never imported.

Both models start from identical weights and see identical batches. The script prints the
time of each epoch for both, checks that the two loss curves agree (exit status 1 if they do
not, 2 if the data file is missing) and writes a PNG of the curves and the forecasts when
matplotlib is installed.

    .venv/bin/python examples/train_sunspots.py                # LSTM, 8 epochs
    .venv/bin/python examples/train_sunspots.py --cell gru --epochs 20 --plot gru.png
"""
import argparse
import importlib.util
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402


def sunspots_file():
    """Path of statsmodels' monthly sunspot file, found without importing statsmodels."""
    spec = importlib.util.find_spec("statsmodels")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = list(spec.submodule_search_locations)[0]
    path = os.path.join(root, "datasets", "sunspots", "src", "sunspots_monthly.dat")
    return path if os.path.exists(path) else None


def load_monthly(path):
    """Monthly values in time order: lines 'YEAR v1 ... v12' (the last year may be short)."""
    values = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) < 2 or not (parts[0].isdigit() and len(parts[0]) == 4):
                continue
            try:
                values.extend(float(p) for p in parts[1:13])
            except ValueError:
                continue
    return np.asarray(values, np.float32)


def windows(series, width):
    idx = np.arange(width)[None, :] + np.arange(len(series) - width)[:, None]
    return series[idx][..., None], series[width:][:, None]


class EpochTimer:
    def __init__(self, keras):
        class _Timer(keras.callbacks.Callback):
            def on_train_begin(self, logs=None):
                self.times = []

            def on_epoch_begin(self, epoch, logs=None):
                self._t0 = time.perf_counter()

            def on_epoch_end(self, epoch, logs=None):
                self.times.append(time.perf_counter() - self._t0)

        self.callback = _Timer()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--cell", choices=("lstm", "gru"), default="lstm")
    ap.add_argument("--units", type=int, default=32)
    ap.add_argument("--window", type=int, default=48, help="months of history per sample")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rtol", type=float, default=1e-3,
                    help="allowed relative difference of the loss curves")
    ap.add_argument("--plot", default="sunspots_loss.png", help="PNG to write ('' for none)")
    args = ap.parse_args(argv)

    path = sunspots_file()
    if path is None:
        print("The sunspot data file ships with statsmodels, which is not installed here:\n"
              "    pip install statsmodels==0.15.0", file=sys.stderr)
        return 2

    import keras
    import tensorflow as tf  # noqa: F401  (the TensorFlow backend)

    import tf_rnn_ops.keras

    raw = load_monthly(path)
    series = np.sqrt(raw)                      # count data: stabilise the variance
    split = int(0.8 * len(series))
    mean, std = series[:split].mean(), series[:split].std()
    series = (series - mean) / std
    x_train, y_train = windows(series[:split], args.window)
    x_val, y_val = windows(series[split - args.window:], args.window)
    order = np.random.default_rng(args.seed).permutation(len(x_train))
    x_train, y_train = x_train[order], y_train[order]
    print(f"monthly sunspot numbers 1749-{1749 + (len(raw) - 1) // 12} from {path}: "
          f"{len(raw)} months; {len(x_train)} training / {len(x_val)} validation windows of "
          f"{args.window} months")

    layer_cls = {("stock", "lstm"): keras.layers.LSTM, ("stock", "gru"): keras.layers.GRU,
                 ("ours", "lstm"): tf_rnn_ops.keras.LSTM, ("ours", "gru"): tf_rnn_ops.keras.GRU}

    def build(impl):
        keras.utils.set_random_seed(args.seed)
        return keras.Sequential([keras.Input((args.window, 1)),
                                 layer_cls[impl, args.cell](args.units),
                                 keras.layers.Dense(1)])

    models = {"stock": build("stock"), "ours": build("ours")}
    models["ours"].set_weights(models["stock"].get_weights())
    history, times, preds = {}, {}, {}
    for name in ("ours", "stock"):
        model = models[name]
        model.compile(keras.optimizers.Adam(3e-3), "mse")
        timer = EpochTimer(keras).callback
        h = model.fit(x_train, y_train, batch_size=args.batch_size, epochs=args.epochs,
                      validation_data=(x_val, y_val), shuffle=False, verbose=0,
                      callbacks=[timer])
        history[name], times[name] = h.history, timer.times
        preds[name] = model.predict(x_val, batch_size=256, verbose=0)[:, 0]

    cls_name = {"lstm": "LSTM", "gru": "GRU"}[args.cell]
    print(f"\n{'epoch':>5} {'stock s':>9} {'ours s':>9} {'speed-up':>9}   "
          f"{'stock loss':>11} {'ours loss':>11} {'stock val':>10} {'ours val':>10}")
    for e in range(args.epochs):
        ts, to = times["stock"][e], times["ours"][e]
        print(f"{e + 1:>5} {ts:>9.2f} {to:>9.2f} {ts / to:>8.1f}x   "
              f"{history['stock']['loss'][e]:>11.5f} {history['ours']['loss'][e]:>11.5f} "
              f"{history['stock']['val_loss'][e]:>10.5f} {history['ours']['val_loss'][e]:>10.5f}")
    steady = slice(1, None) if args.epochs > 1 else slice(None)
    ts, to = np.median(times["stock"][steady]), np.median(times["ours"][steady])
    print(f"median epoch{' after the first' if args.epochs > 1 else ''}: "
          f"keras.layers.{cls_name} {ts:.2f} s, tf_rnn_ops.keras.{cls_name} {to:.2f} s "
          f"({ts / to:.1f}x)")

    def rmse(pred):   # in sunspot numbers
        back = lambda v: np.square(v * std + mean)  # noqa: E731
        return float(np.sqrt(np.mean((back(pred) - back(y_val[:, 0])) ** 2)))

    persistence = rmse(x_val[:, -1, 0])
    print(f"validation RMSE (sunspots/month): stock {rmse(preds['stock']):.2f}, "
          f"ours {rmse(preds['ours']):.2f}, persistence baseline {persistence:.2f}")

    ok = True
    for key in ("loss", "val_loss"):
        a, b = np.asarray(history["ours"][key]), np.asarray(history["stock"][key])
        rel = float(np.max(np.abs(a - b) / np.abs(b)))
        agree = rel <= args.rtol
        ok &= agree
        print(f"{key} curves: max relative difference {rel:.2e} "
              f"({'within' if agree else 'OUTSIDE'} {args.rtol:g})")

    if args.plot:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("matplotlib is not installed: no plot (pip install matplotlib)")
        else:
            fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
            epochs = np.arange(1, args.epochs + 1)
            for name, style in (("stock", dict(ls="-")),
                                ("ours", dict(ls="--", marker="o", mfc="none"))):
                label = (f"keras.layers.{cls_name}" if name == "stock"
                         else f"tf_rnn_ops.keras.{cls_name}")
                ax1.plot(epochs, history[name]["loss"], color="C0", label=f"{label} train",
                         **style)
                ax1.plot(epochs, history[name]["val_loss"], color="C1",
                         label=f"{label} validation", **style)
            ax1.set_yscale("log")
            ax1.set_xlabel("epoch")
            ax1.set_ylabel("MSE (standardised sqrt sunspots)")
            ax1.set_title("loss curves")
            ax1.legend(fontsize=8)
            months = 1749 + (split + np.arange(len(y_val))) / 12.0
            back = lambda v: np.square(v * std + mean)  # noqa: E731
            ax2.plot(months, back(y_val[:, 0]), "k", lw=1, label="observed")
            ax2.plot(months, back(preds["stock"]), "C0", lw=1, label="stock forecast")
            ax2.plot(months, back(preds["ours"]), "C3--", lw=1, label="ours forecast")
            ax2.set_xlabel("year")
            ax2.set_ylabel("monthly mean sunspot number")
            ax2.set_title("one-month-ahead forecasts (validation)")
            ax2.legend(fontsize=8)
            fig.tight_layout()
            fig.savefig(args.plot, dpi=100)
            print(f"plot written to {args.plot}")

    if not ok:
        print("FAIL: the loss curves of the two implementations differ", file=sys.stderr)
        return 1
    print("OK: tf_rnn_ops.keras and keras.layers give the same training run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
