"""The dashboard's charts as inline SVG text (matplotlib's SVG backend, text kept as text).

Output is deterministic: no date in the metadata, and element ids hashed with a salt per chart, so
two charts in one page never share an id and the same inputs give the same bytes.
"""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from optbench.metrics import ROOFLINE_PCT, TIME_STEP_MS
from optbench.report.dashboard_data import dtype_rank, impl_rank

MAX_TICKS = 12


def svg(fig, salt: str) -> str:
    """The figure as an ``<svg>`` element (no XML prolog), sized to its container."""
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt, "svg.id": None}):
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    return text.replace("<svg ", '<svg class="chart" role="img" ', 1)


def _colors(keys) -> dict:
    cmap = plt.get_cmap("tab10" if len(keys) <= 10 else "tab20")
    return {k: cmap(i % 20) for i, k in enumerate(keys)}


def history(series: pd.DataFrame, title: str, salt: str) -> str:
    """Median step time against run, one panel per dtype, a line per implementation with its band."""
    dtypes = sorted(series["dtype"].unique(), key=dtype_rank)
    impls = sorted(series["impl"].unique(), key=impl_rank)
    colors = _colors(impls)
    runs = series.drop_duplicates("x").sort_values("x")
    xs, labels = runs["x"].to_numpy(), runs["label"].tolist()
    fig, axes = plt.subplots(1, len(dtypes), figsize=(min(16.0, max(6.0, 1.0 + 3.6 * len(dtypes))), 3.3), squeeze=False)
    for ax, dtype in zip(axes[0], dtypes):
        for impl in impls:
            line = series[(series["dtype"] == dtype) & (series["impl"] == impl)].sort_values("x")
            if line.empty:
                continue
            ax.fill_between(line["x"], line["lo"], line["hi"], color=colors[impl], alpha=0.2, linewidth=0)
            band = [(line["ms"] - line["lo"]).clip(lower=0), (line["hi"] - line["ms"]).clip(lower=0)]
            ax.errorbar(line["x"], line["ms"], yerr=band, marker="o", markersize=3, capsize=2, elinewidth=0.8,
                        color=colors[impl], label=impl)
        step = max(1, int(np.ceil(len(xs) / MAX_TICKS)))
        ax.set_xticks(xs[::step], labels[::step], rotation=35, ha="right", fontsize=7)
        ax.set_xlim(xs.min() - 0.5, xs.max() + 0.5)
        ax.set_ylim(bottom=0)
        ax.set_title(dtype, fontsize=9)
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(alpha=0.3)
    axes[0, 0].set_ylabel("median step time (ms)", fontsize=8)
    axes[0, -1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return svg(fig, salt)


def scaling(frame: pd.DataFrame, title: str, salt: str) -> str:
    """Step time (log-log) and roofline % (log x) against the parameter count, a line per impl x dtype."""
    keys = sorted(dict.fromkeys(zip(frame["impl"], frame["dtype"])), key=lambda k: (dtype_rank(k[1]), impl_rank(k[0])))
    colors = _colors(keys)
    panels = [(TIME_STEP_MS, "median step time (ms)", True)]
    if frame[ROOFLINE_PCT].notna().any():
        panels.append((ROOFLINE_PCT, "% of the bandwidth roofline", False))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels) + 1.6, 3.3), squeeze=False)
    for ax, (metric, ylabel, logy) in zip(axes[0], panels):
        for key in keys:
            line = frame[(frame["impl"] == key[0]) & (frame["dtype"] == key[1])].dropna(subset=["params", metric])
            line = line[line["params"] > 0].sort_values("params")
            if not line.empty:
                ax.plot(line["params"], line[metric], marker="o", markersize=3, color=colors[key],
                        label=f"{key[0]} {key[1]}")
        ax.set_xscale("log")
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel("parameters", fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3, which="both")
    axes[0, -1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return svg(fig, salt)
