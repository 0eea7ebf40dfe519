"""The report's performance sections: step time next to the roofline, edge-case overheads, memory, and
the scaling sweep (tables and the log-log plot)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from optbench.metrics import (
    MEM_PEAK_TRANSIENT_BYTES,
    MEM_PEAK_TRANSIENT_BYTES_PER_PARAM,
    MEM_STATE_BYTES,
    MEM_STATE_BYTES_PER_PARAM,
    ROOFLINE_BYTES_PER_PARAM,
    ROOFLINE_PCT,
    ROOFLINE_PROBE_GB_PER_S,
    SCALING_PARAMS,
    SCALING_TENSORS,
    SPEED_GB_PER_S,
    SPEED_OVERHEAD,
    SPEED_OVERHEAD_CI_HIGH,
    SPEED_OVERHEAD_CI_LOW,
    SPEED_PARAMS_PER_S,
    SPEED_RATIO,
    SPEED_RATIO_CI_HIGH,
    SPEED_RATIO_CI_LOW,
    SPEED_THREADS,
    TIME_COMPILE_S,
    TIME_ROUNDS,
    TIME_STEP_MS,
    TIME_STEP_MS_CV,
    TIME_STEP_MS_IQR,
)
from optbench.report.plots import pyplot, save
from optbench.report.tables import CASE, FORLOOP, by_case, eng, num

TIMING = CASE + ["workload"]
SPEED_METRICS = [TIME_STEP_MS, TIME_STEP_MS_IQR, TIME_STEP_MS_CV, TIME_ROUNDS, TIME_COMPILE_S,
                 SPEED_PARAMS_PER_S, SPEED_GB_PER_S, ROOFLINE_PCT, ROOFLINE_BYTES_PER_PARAM,
                 ROOFLINE_PROBE_GB_PER_S, SPEED_OVERHEAD, SPEED_THREADS, SCALING_PARAMS, SCALING_TENSORS,
                 SPEED_RATIO, SPEED_RATIO_CI_LOW, SPEED_RATIO_CI_HIGH, SPEED_OVERHEAD_CI_LOW, SPEED_OVERHEAD_CI_HIGH]


def timing_frame(rows: pd.DataFrame, check: str = "speed") -> pd.DataFrame:
    """One wide row per timed case of ``check`` (speed or scaling) with its metrics as columns, plus ``ratio``:
    the case's ``speed.ratio`` (paired over interleaved rounds) where it has one, else its median over the
    for-loop's median on the same suite, dtype and workload (in a candidate-only suite, its ``nearest:`` torch
    optimizer's)."""
    sel = rows[(rows["check"] == check) & (rows["fqn"] == "") & rows["metric"].isin(SPEED_METRICS)]
    if sel.empty:
        return pd.DataFrame()
    wide = sel.pivot_table(index=TIMING, columns="metric", values="value", aggfunc="first", sort=False)
    wide = wide.reindex(columns=SPEED_METRICS).reset_index()
    base = wide[wide["impl"] == FORLOOP].set_index(["suite", "dtype", "hparams", "workload"])[TIME_STEP_MS]
    # a candidate-only suite's baseline: its nearest torch optimizer (nearest:), timed at its own defaults
    nearest = wide[wide["impl"].str.startswith("torch.optim.")].set_index(["suite", "dtype", "workload"])[TIME_STEP_MS]
    nearest = nearest[~nearest.index.duplicated()]
    keys = zip(wide["suite"], wide["dtype"], wide["hparams"], wide["workload"])
    baseline = [base.get(k, nearest.get((k[0], k[1], k[3]), math.nan)) for k in keys]
    ratio = wide[TIME_STEP_MS] / np.array(baseline, dtype=float)
    return wide.assign(ratio=wide[SPEED_RATIO].where(wide[SPEED_RATIO].notna(), ratio))


def speed_frame(rows: pd.DataFrame) -> pd.DataFrame:
    """The main figure: the speed check on the contiguous model workload (or a closure/sparse suite's own)."""
    wide = timing_frame(rows)
    return wide if wide.empty else wide[wide["workload"].isin(["model", ""])].reset_index(drop=True)


def speed(wide: pd.DataFrame) -> pd.DataFrame:
    if wide.empty:
        return wide
    pct = wide[ROOFLINE_PCT].map(lambda v: num(v, ".0f") + " %" if num(v) else "n/a")
    return wide[CASE].assign(**{
        "median ms": wide[TIME_STEP_MS].map(num), "IQR ms": wide[TIME_STEP_MS_IQR].map(num),
        "CV": wide[TIME_STEP_MS_CV].map(lambda v: num(100 * v, ".1f") + " %" if num(v) else ""),
        "rounds": wide[TIME_ROUNDS].map(lambda v: num(v, ".0f")), "params/s": wide[SPEED_PARAMS_PER_S].map(eng),
        "B/param": wide[ROOFLINE_BYTES_PER_PARAM].map(num), "GB/s": wide[SPEED_GB_PER_S].map(num),
        "roofline GB/s": wide[ROOFLINE_PROBE_GB_PER_S].map(num), "% of roofline": pct,
        "compile s": wide[TIME_COMPILE_S].map(num),
        "x vs baseline": [with_interval(v, lo, hi) for v, lo, hi in
                          zip(wide["ratio"], wide[SPEED_RATIO_CI_LOW], wide[SPEED_RATIO_CI_HIGH])]})


def with_interval(value, low, high) -> str:
    """``1.23x [1.20, 1.26]``: a paired ratio and its 95 % interval (just the ratio where it has none)."""
    if not num(value):
        return ""
    if not (num(low) and num(high)):
        return num(value) + "x"
    return f"{num(value)}x [{num(low)}, {num(high)}]"


def overheads(rows: pd.DataFrame) -> pd.DataFrame:
    """Edge cases as their own figures: time per stepped parameter over the contiguous model's."""
    wide = timing_frame(rows)
    if wide.empty or wide[SPEED_OVERHEAD].isna().all():
        return pd.DataFrame()
    wide = wide.dropna(subset=[SPEED_OVERHEAD])
    cells = wide.assign(cell=[with_interval(v, lo, hi) for v, lo, hi in
                              zip(wide[SPEED_OVERHEAD], wide[SPEED_OVERHEAD_CI_LOW], wide[SPEED_OVERHEAD_CI_HIGH])])
    table = cells.pivot_table(index=["suite", "dtype", "workload"], columns="impl", values="cell",
                              aggfunc="first", sort=False)
    return table.fillna("").reset_index()


def memory(rows: pd.DataFrame) -> pd.DataFrame:
    state = by_case(rows, MEM_STATE_BYTES)
    if state.empty:
        return pd.DataFrame()
    peak = by_case(rows, MEM_PEAK_TRANSIENT_BYTES)
    per_state, per_peak = by_case(rows, MEM_STATE_BYTES_PER_PARAM), by_case(rows, MEM_PEAK_TRANSIENT_BYTES_PER_PARAM)
    out = state[["value"]].rename(columns={"value": "state"}).join(
        [per_state["value"].rename("state_pp"), peak["value"].rename("peak"),
         per_peak["value"].rename("peak_pp")]).reset_index()
    return out[CASE].assign(**{"state bytes": out["state"].map(lambda v: num(v, ",.0f")),
                               "state B/param": out["state_pp"].map(num),
                               "peak transient bytes": out["peak"].map(lambda v: num(v, ",.0f")),
                               "peak transient B/param": out["peak_pp"].map(num)})


def scaling(rows: pd.DataFrame) -> pd.DataFrame:
    wide = timing_frame(rows, "scaling")
    if wide.empty:
        return wide
    return wide[["suite", "impl", "dtype", "workload"]].assign(**{
        "params": wide[SCALING_PARAMS].map(eng), "tensors": wide[SCALING_TENSORS].map(lambda v: num(v, ".0f")),
        "median ms": wide[TIME_STEP_MS].map(num),
        "CV": wide[TIME_STEP_MS_CV].map(lambda v: num(100 * v, ".1f") + " %" if num(v) else ""),
        "GB/s": wide[SPEED_GB_PER_S].map(num), "% of roofline": wide[ROOFLINE_PCT].map(lambda v: num(v, ".0f"))})


def scaling_plot(rows: pd.DataFrame, path: Path) -> bool:
    """Per suite: step time and % of roofline against parameters (size sweep) and against tensor count
    (fixed total), log-log, one line per implementation and dtype."""
    wide = timing_frame(rows, "scaling")
    if wide.empty or wide[TIME_STEP_MS].notna().sum() == 0:
        path.unlink(missing_ok=True)
        return False
    suites = list(dict.fromkeys(wide["suite"]))
    fig, axes = pyplot().subplots(len(suites), 3, figsize=(15, 3.8 * len(suites)), squeeze=False)
    for ax_row, suite in zip(axes, suites):
        sub = wide[wide["suite"] == suite]
        for (impl, dtype), line in sub.groupby(["impl", "dtype"], sort=False):
            label = f"{impl} {dtype}" if sub["dtype"].nunique() > 1 else impl
            sizes = line[line["workload"].str.startswith("params-")].sort_values(SCALING_PARAMS)
            counts = line[line["workload"].str.startswith("tensors-")].sort_values(SCALING_TENSORS)
            ax_row[0].plot(sizes[SCALING_PARAMS], sizes[TIME_STEP_MS], "o-", label=label)
            ax_row[1].plot(sizes[SCALING_PARAMS], sizes[ROOFLINE_PCT], "o-", label=label)
            ax_row[2].plot(counts[SCALING_TENSORS], counts[TIME_STEP_MS], "o-", label=label)
        ax_row[0].set(xscale="log", yscale="log", xlabel="parameters", ylabel="median step time (ms)",
                      title=f"{suite}: step time vs size")
        ax_row[1].set(xscale="log", yscale="log", xlabel="parameters", ylabel="% of roofline",
                      title=f"{suite}: % of roofline vs size")
        ax_row[2].set(xscale="log", yscale="log", xlabel="tensors (same total)", ylabel="median step time (ms)",
                      title=f"{suite}: step time vs tensor count")
        for ax in ax_row:
            ax.grid(True, which="both", alpha=0.3)
        ax_row[0].legend(fontsize="small")
    return save(fig, path)
