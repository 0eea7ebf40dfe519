"""The report's plots: step time by implementation, and error against step with the tolerance."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd

from optbench.metrics import PARITY_STEP_MAX_ERR_EPS, QUANTIZED_PRICE_STEP, TIME_STEP_MS, TIME_STEP_MS_IQR
from optbench.numerics.accuracy import tolerance_eps
from optbench.report.tables import metric
from optbench.results import atomic_write

PNG_META = {"Software": None}  # no version stamp: identical inputs give identical bytes


def pyplot():
    """matplotlib.pyplot on the Agg backend, imported on first use: a process that draws nothing (a worker, a
    run with ``report.plots=false``) does not pay its import (0.3 s)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig, path: Path, rect=(0, 0, 1, 1)) -> bool:
    """``fig`` as a PNG at ``path``, written atomically (``results.atomic_write``); ``rect``: the part of the figure
    its axes are laid out in (a figure legend takes the rest)."""
    fig.tight_layout(rect=rect)
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=100, metadata=PNG_META)
    pyplot().close(fig)
    atomic_write(path, png.getvalue())
    return True


def step_time(wide: pd.DataFrame, path: Path) -> bool:
    """Grouped bars: one group per dtype, one bar per impl (suite/impl if several suites); IQR/2 error bars."""
    if wide.empty or wide[TIME_STEP_MS].notna().sum() == 0:
        path.unlink(missing_ok=True)
        return False
    many = wide["suite"].nunique() > 1
    wide = wide.assign(label=(wide["suite"] + " " if many else "") + wide["impl"])
    dtypes, labels = list(dict.fromkeys(wide["dtype"])), list(dict.fromkeys(wide["label"]))
    width, plt = 0.8 / len(labels), pyplot()
    fig, ax = plt.subplots(figsize=(min(40.0, max(8.0, 3 + 1.5 * len(dtypes) * max(1, len(labels) / 3))), 4.5))
    for i, label in enumerate(labels):
        sub = wide[wide["label"] == label].set_index("dtype").reindex(dtypes)
        x = np.arange(len(dtypes)) + (i - (len(labels) - 1) / 2) * width
        ax.bar(x, sub[TIME_STEP_MS], width, yerr=sub[TIME_STEP_MS_IQR].fillna(0) / 2, capsize=3, label=label)
    finite = wide[TIME_STEP_MS][np.isfinite(wide[TIME_STEP_MS]) & (wide[TIME_STEP_MS] > 0)]
    if len(finite) and finite.max() / finite.min() > 50:
        ax.set_yscale("log")
    ax.set_xticks(np.arange(len(dtypes)), dtypes)
    ax.set(ylabel="median step time (ms)", title="Step time by implementation (error bars: IQR/2)")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), ncol=1 + len(labels) // 30)
    return save(fig, path)


def error_vs_step(rows: pd.DataFrame, path: Path) -> bool:
    """Per-dtype log plot of ``parity.step_max_err_eps`` against step, with the tolerance. Only for
    runs of one suite (a meta-suite's report shows the parity matrix instead)."""
    sel = metric(rows, PARITY_STEP_MAX_ERR_EPS).dropna(subset=["step"])
    if sel.empty or sel["suite"].nunique() > 1:
        path.unlink(missing_ok=True)
        return False
    v = sel["value"].to_numpy(dtype=float)
    pos = v[np.isfinite(v) & (v > 0)]
    floor = pos.min() if len(pos) else 1e-3
    top = 10 * min(pos.max() if len(pos) else 1.0, 1e200)  # an error near float's limit must not overflow the axis
    sel = sel.assign(y=np.where(np.isposinf(v), top, np.where(np.isfinite(v) & (v > 0), np.minimum(v, top), floor)),
                     step=sel["step"].astype(float))
    dtypes = list(dict.fromkeys(sel["dtype"]))
    series = list(dict.fromkeys(zip(sel["impl"], sel["hparams"])))
    plt = pyplot()
    colors = {k: plt.get_cmap("tab10" if len(series) <= 10 else "tab20")(i % 20) for i, k in enumerate(series)}
    fig, axes = plt.subplots(len(dtypes), 1, sharex=True, squeeze=False, figsize=(9, 2.8 * len(dtypes) + 0.8))
    steps = np.arange(1, int(sel["step"].max()) + 1)
    handles = {}  # one legend for the figure: a series keeps its colour on every dtype's axes
    for ax, dtype in zip(axes[:, 0], dtypes):
        for (impl, hp), line in sel[sel["dtype"] == dtype].groupby(["impl", "hparams"], sort=False):
            line = line.sort_values("step")
            label = f"{impl} [{hp}]" if hp else impl
            handles[label], = ax.plot(line["step"], line["y"], marker=".", color=colors[(impl, hp)], label=label)
        handles["tolerance"], = ax.plot(steps, tolerance_eps(steps), "k--", linewidth=1, label="tolerance")
        ax.set(yscale="log", title=dtype, ylabel="max err (eps)")
    order = [f"{impl} [{hp}]" if hp else impl for impl, hp in series] + ["tolerance"]
    columns = 1 + len(order) // max(25, int(8 * len(dtypes)))
    right = 1 - 0.26 * columns * 9 / fig.get_figwidth()  # a column of x-small labels: about 2.3 inches
    fig.legend([handles[k] for k in order], order, fontsize="x-small", loc="upper left", ncol=columns,
               bbox_to_anchor=(right, 1 - 0.5 / fig.get_figheight()))
    fig.suptitle(f"Max error over tensors per step (0 drawn at {floor:.3g}, inf at {top:.3g})", fontsize="medium")
    axes[-1, 0].set_xlabel("step")
    return save(fig, path, rect=(0, 0, right, 1))


def quantized_price(rows: pd.DataFrame, path: Path) -> bool:
    """Per dtype, the price of quantization after each step (``quantized.price_step``: the candidate's distance from
    the full-precision reference run free from the same start, in units of that run's updates), a line per
    implementation and hparam set."""
    sel = metric(rows, QUANTIZED_PRICE_STEP).dropna(subset=["step"])
    if sel.empty:
        path.unlink(missing_ok=True)
        return False
    v = sel["value"].to_numpy(dtype=float)
    pos = v[np.isfinite(v) & (v > 0)]
    floor = pos.min() if len(pos) else 1e-3
    sel = sel.assign(y=np.where(np.isfinite(v) & (v > 0), v, floor), step=sel["step"].astype(float))
    dtypes = list(dict.fromkeys(sel["dtype"]))
    plt = pyplot()
    fig, axes = plt.subplots(len(dtypes), 1, sharex=True, squeeze=False, figsize=(9, 2.8 * len(dtypes) + 0.8))
    several = sel["suite"].nunique() > 1
    for ax, dtype in zip(axes[:, 0], dtypes):
        for (suite, impl, hp), line in sel[sel["dtype"] == dtype].groupby(["suite", "impl", "hparams"], sort=False):
            line = line.sort_values("step")
            name = impl.rsplit(".", 1)[-1]  # a candidate's class name: the legend beside the axes stays narrow
            ax.plot(line["step"], line["y"], marker=".", label=(f"{suite}: " if several else "") + f"{name} [{hp}]")
        ax.set(yscale="log", title=dtype, ylabel="distance / updates")
        ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.suptitle("The price of quantization: distance from the full-precision reference run, per step"
                 + (f" (0 drawn at {floor:.3g})" if (v == 0).any() else ""), fontsize="medium")
    axes[-1, 0].set_xlabel("step")
    return save(fig, path, rect=(0, 0, 0.75, 1))
