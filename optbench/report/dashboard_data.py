"""What the dashboard shows, as frames: the step-time series over runs, the latest rows of each check,
the parity verdict per suite x implementation x dtype, and the declared findings seen.

Every function takes the tidy history frame (``optbench.engine.history.read_history``: result rows plus
``run``, ``created``, ``git_sha``, ``machine``, ``torch``) and the runs frame, oldest run first.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from optbench.metrics import PARITY_MAX_ERR_EPS, PARITY_TOL_EPS, TIME_ROUND_MS, TIME_STEP_MS, TIME_STEP_MS_IQR
from optbench.perf.compare import Rule, compare_case
from optbench.report import matrix
from optbench.results import CASE_KEY

MAIN_WORKLOADS = ("model", "")  # the speed check's main figure ("" before results schema 3)
CASE = ["machine", *CASE_KEY[:3]]  # a cell: machine, suite, impl, dtype (hparams kept apart, per cell)
# worst first: a suite/impl/dtype cell shows the worst verdict over its hparam sets
VERDICT_ORDER = ("error", "fail", "xpass", "xfail", "pass", "unsupported", "skip")
SHOWN = {"error": "ERR", "fail": "FAIL", "xpass": "XPASS", "xfail": "xfail", "pass": "pass", "unsupported": "n/a",
         "skip": "skip"}


def run_label(run: pd.Series) -> str:
    """``b902603 05-14 12:03``: the commit and (UTC) time a run ended."""
    created = str(run["created"])
    when = f"{created[5:10]} {created[11:16]}" if len(created) >= 16 else created
    return f"{(run['git_sha'] or 'nogit')[:7]} {when}".strip()


def impl_rank(impl: str) -> tuple:
    base = impl.partition("+")[0]
    return (matrix.IMPL_ORDER.index(base) if base in matrix.IMPL_ORDER else len(matrix.IMPL_ORDER), impl)


def dtype_rank(dtype: str) -> tuple:
    return (matrix.DTYPE_ORDER.index(dtype) if dtype in matrix.DTYPE_ORDER else len(matrix.DTYPE_ORDER), dtype)


def needed(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows the dashboard reads (a run's per-tensor parity rows, its bulk, are left out)."""
    aggregate = rows["fqn"].eq("") & (rows["check"].isin(["speed", "memory", "scaling"])
                                      | rows["metric"].isin([PARITY_MAX_ERR_EPS, PARITY_TOL_EPS]))
    return rows[aggregate | rows["status"].isin(["error", "unsupported", "xfail"])]


def latest(rows: pd.DataFrame, runs: pd.DataFrame, checks) -> pd.DataFrame:
    """Rows of ``checks`` from the latest run that has them, per machine, suite, device and check."""
    sel = rows[rows["check"].isin(list(checks))]
    if sel.empty:
        return sel
    rank = {run: i for i, run in enumerate(runs["run"])}
    sel = sel.assign(_rank=sel["run"].map(rank))
    last = sel.groupby(["machine", "suite", "device", "check"])["_rank"].transform("max")
    return sel[sel["_rank"] == last].drop(columns="_rank")


def step_series(rows: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Median step time per case and run, with its band: the rounds' quartiles (``time.round_ms``) where
    recorded, else median +- IQR/2. Columns: machine, suite, impl, dtype, hparams, run, x (the run's index
    in time), label, ms, lo, hi, iqr, rounds (the round times, for ``changes``)."""
    speed = rows[(rows["check"] == "speed") & (rows["fqn"] == "") & rows["workload"].isin(MAIN_WORKLOADS)]
    keys = [*CASE, "hparams", "run"]
    med = speed[speed["metric"] == TIME_STEP_MS].drop_duplicates(keys).set_index(keys)["value"].rename("ms")
    if med.empty:
        return pd.DataFrame(columns=[*keys, "x", "label", "ms", "lo", "hi", "iqr", "rounds"])
    iqr = speed[speed["metric"] == TIME_STEP_MS_IQR].drop_duplicates(keys).set_index(keys)["value"].rename("iqr")
    out = med.to_frame().join(iqr)
    rounds = speed[speed["metric"] == TIME_ROUND_MS].groupby(keys)["value"]
    quart = pd.DataFrame({"q1": rounds.quantile(0.25), "q3": rounds.quantile(0.75),
                          "rounds": rounds.agg(lambda v: v.to_numpy(float))})
    out = out.join(quart).reset_index()
    out["rounds"] = [r if isinstance(r, np.ndarray) else np.array([]) for r in out["rounds"]]
    half = out["iqr"].fillna(0) / 2
    out["lo"] = out["q1"].where(out["q1"].notna(), (out["ms"] - half).clip(lower=0))
    out["hi"] = out["q3"].where(out["q3"].notna(), out["ms"] + half)
    position = {run: i for i, run in enumerate(runs["run"])}
    labels = {r["run"]: run_label(r) for _, r in runs.iterrows()}
    out["x"], out["label"] = out["run"].map(position), out["run"].map(labels)
    return out.drop(columns=["q1", "q3"]).sort_values(["x", *CASE]).reset_index(drop=True)


def changes(series: pd.DataFrame, rule: Rule = Rule()) -> pd.DataFrame:
    """Per case: the latest median, IQR, and its change from the run before, judged by ``optbench compare``'s
    rule (``optbench.perf.compare.compare_case``: Mann-Whitney on the two runs' rounds, and a ratio beyond
    the threshold); "n/a" where either run has too few rounds."""
    out = []
    for key, case in series.groupby([*CASE, "hparams"], sort=False):
        case = case.sort_values("x")
        now = case.iloc[-1]
        before = case.iloc[-2] if len(case) > 1 else None
        change, verdict = np.nan, ""
        if before is not None and before["ms"] > 0:
            change = now["ms"] / before["ms"] - 1
            verdict = compare_case(before["rounds"], now["rounds"], before["ms"], now["ms"], rule)["verdict"]
        out.append((*key, now["ms"], now["iqr"], len(case), change, verdict))
    return pd.DataFrame(out, columns=[*CASE, "hparams", "ms", "iqr", "runs", "change", "verdict"])


def parity_cells(rows: pd.DataFrame) -> pd.DataFrame:
    """Worst parity verdict per machine, suite, impl and dtype over the hparam sets of the latest rows;
    with counts (``n_bad`` of ``n``), the worst error/tolerance ratio and where it was."""
    out = []
    for machine, part in rows.groupby("machine", sort=True):
        frame = matrix.cells(part)
        for (suite, impl, dtype), cases in frame.groupby(["suite", "impl", "dtype"], sort=False):
            statuses = [s for s in VERDICT_ORDER if s in set(cases["status"])]
            worst = statuses[0] if statuses else "skip"
            ratio = cases["value"] / cases["tol"]
            finite = ratio[np.isfinite(ratio) | np.isposinf(ratio)]
            top = cases.loc[finite.idxmax()] if len(finite) else None
            where = (f"worst {top['value']:.3g} eps (tol {top['tol']:.3g}) in {top['hparams']}" if top is not None
                     else "")
            bad = cases[cases["status"] == worst]["hparams"]
            out.append((machine, suite, impl, dtype, worst, int((cases["status"] == worst).sum()), len(cases),
                        finite.max() if len(finite) else np.nan, where, ", ".join(bad)))
    return pd.DataFrame(out, columns=[*CASE, "status", "n_worst", "n", "ratio", "worst_at", "which"])


def finding_titles(path: Path | None) -> dict[str, str]:
    """``{"F01": "fused CPU SGD is wrong at bfloat16 and float16", ...}`` from docs/findings.md."""
    if path is None or not path.is_file():
        return {}
    titles = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.match(r"#{2,3}\s+(F\d{2,3})\b[:.]?\s*(.*)", line)
        if m:
            titles[m.group(1)] = m.group(2).strip()
    return titles


def findings(rows: pd.DataFrame) -> pd.DataFrame:
    """Each finding id that an ``xfail`` row of ``rows`` names: where it showed and one detail."""
    xfail = rows[rows["status"] == "xfail"]
    seen: dict[str, list] = {}
    for r in xfail.itertuples():
        for fid in dict.fromkeys(f for f in r.finding.split(",") if f):
            seen.setdefault(fid, []).append(r)
    out = []
    for fid in sorted(seen, key=lambda f: int(f[1:])):
        hits = seen[fid]
        # the declaration's own words where a deviation row carries them, else the shortest detail
        example = min(((h.check != "deviation", len(h.detail), h.detail) for h in hits if h.detail),
                      default=(0, 0, ""))[2]
        out.append((fid, ", ".join(sorted({h.suite for h in hits})),
                    ", ".join(sorted({h.impl for h in hits}, key=impl_rank)),
                    ", ".join(sorted({h.dtype for h in hits if h.dtype}, key=dtype_rank)), len(hits), example))
    return pd.DataFrame(out, columns=["finding", "suites", "impls", "dtypes", "rows", "detail"])


def wide(rows: pd.DataFrame, keys: list[str], metrics: list[str]) -> pd.DataFrame:
    """One row per ``keys`` with a column per metric (aggregate rows, fqn "")."""
    sel = rows[(rows["fqn"] == "") & rows["metric"].isin(metrics)]
    if sel.empty:
        return pd.DataFrame(columns=[*keys, *metrics])
    out = sel.pivot_table(index=keys, columns="metric", values="value", aggfunc="first", sort=False)
    return out.reindex(columns=metrics).reset_index()


def sort_cases(frame: pd.DataFrame) -> pd.DataFrame:
    """Suite, then implementation and dtype in the report's order."""
    if frame.empty:
        return frame
    key = {"impl": lambda s: s.map(impl_rank), "dtype": lambda s: s.map(dtype_rank)}
    cols = [c for c in ("machine", "suite", "workload", "impl", "dtype") if c in frame.columns]
    return frame.sort_values(cols, key=lambda s: key[s.name](s) if s.name in key else s,
                             kind="stable").reset_index(drop=True)
