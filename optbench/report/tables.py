"""The report's tables, each a DataFrame built from the tidy result rows, and Markdown for them."""

from __future__ import annotations

import math

import pandas as pd

from optbench.implementations.torch_variants import BASELINE
from optbench.metrics import (
    DEVIATION_MAX_ERR_EPS,
    PARITY_MAX_ERR_EPS,
    PARITY_TOL_EPS,
    PARITY_XMAX_ERR_EPS_VS_FORLOOP,
    RUN_CASE_S,
    STATE_DTYPE,
)
from optbench.results import CASE_KEY, NO_VERDICT, as_float, verdict

# A report is of one run on one device; the timing tables add ``workload`` (report.performance.TIMING).
CASE = [k for k in CASE_KEY if k not in ("device", "workload")]
FORLOOP = BASELINE  # the speed table's ratios are against it


def num(v, fmt: str = ".3g") -> str:
    """``v`` to 3 significant digits (plain where short, 812 not 8.12e+02); "inf" for infinities."""
    v = as_float(v)
    if math.isnan(v):
        return ""
    if math.isinf(v):
        return "-inf" if v < 0 else "inf"
    if fmt == ".3g" and 1e-3 <= abs(r := float(format(v, fmt))) < 1e6:
        return format(r, "g")
    return format(v, fmt)


def eng(v) -> str:
    """Scientific notation like 1.23e6."""
    mantissa, _, exponent = num(v, ".2e").partition("e")
    return f"{mantissa}e{int(exponent)}" if exponent else mantissa


MARKDOWN_INERT = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "\\|", "[": "\\[", "]": "\\]",
                                "`": "\\`", "\n": " ", "\r": " "})


def escape(text) -> str:
    """``text`` (from the code under test: messages, class names, state keys) inert in Markdown and HTML: no tag,
    no link or image, no code span and no table cell it can open or close."""
    return str(text).translate(MARKDOWN_INERT)


def markdown(df: pd.DataFrame) -> str:
    """Markdown pipe table of ``df`` (pandas' ``to_markdown``, through tabulate: a declared dependency), every cell
    escaped (``escape``; ``*`` is left alone, so a table's ``**bold**`` stays bold)."""
    if df.empty:
        return "_none_"
    df = df.astype(str).apply(lambda c: c.map(escape))
    return df.to_markdown(index=False)


def metric(rows: pd.DataFrame, name: str, aggregate: bool = True) -> pd.DataFrame:
    sel = rows[rows["metric"] == name]
    return sel[sel["fqn"] == ""] if aggregate else sel


def by_case(rows: pd.DataFrame, name: str, keys=CASE) -> pd.DataFrame:
    """One aggregate row per case key (first seen) with value/status/detail of metric ``name``."""
    return metric(rows, name).drop_duplicates(keys).set_index(keys)[["value", "status", "detail"]]


def summary(rows: pd.DataFrame, checks=(), run: dict | None = None, counted_checks=()) -> str:
    """The overall verdict (``optbench.results.verdict``) and the verdict counts of ``counted_checks`` (the checks
    that give verdicts, as registered: ``optbench.checks.registry.counted_checks``)."""
    counted = rows[rows["check"].isin(list(counted_checks))
                   & ((rows["fqn"].eq("") & rows["tensor"].eq("")) | rows["check"].eq("deviation"))
                   & rows["status"].ne("info")]
    per_check = counted.groupby("check")["status"].value_counts().unstack(fill_value=0)
    parts = [f"{check}: " + ", ".join(f"{int(n)} {status}" for status, n in counts.items() if n)
             for check, counts in per_check.iterrows()]
    return f"**Overall: {verdict(rows, checks, run)}.** " + "; ".join(parts) + ("." if parts else "")


def config_table(meta: dict, rows: pd.DataFrame) -> pd.DataFrame:
    cfg = meta.get("config") or {}
    suite = cfg.get("suite") or {}
    items = {"suite": suite.get("name"), "suites run": ", ".join(meta.get("suites") or []),
             "optimizer": suite.get("optimizer"), "steps": cfg.get("steps"),
             "dtypes": ", ".join(dict.fromkeys(d for d in rows["dtype"] if d)),
             "implementations": ", ".join(dict.fromkeys(rows["impl"])),
             "compiled at": (", ".join(map(str, cfg.get("compile_dtypes") or []))
                             if isinstance(cfg.get("compile_dtypes"), list) else cfg.get("compile_dtypes")),
             "seed": cfg.get("seed"), "wall time (s)": meta.get("wall_s"), "created": meta.get("created")}
    return pd.DataFrame([(k, v) for k, v in items.items() if v not in (None, "")], columns=["key", "value"])


def parity(rows: pd.DataFrame) -> pd.DataFrame:
    verdicts, tol = by_case(rows, PARITY_MAX_ERR_EPS), by_case(rows, PARITY_TOL_EPS)
    out = verdicts.join(tol["value"].rename("tol")).reset_index()
    return pd.DataFrame({**{k: out[k] for k in CASE}, "max err (eps)": out["value"].map(num),
                         "tol (eps)": out["tol"].map(num), "verdict": out["status"], "detail": out["detail"]})


SHORT = {"float64": "f64", "float32": "f32", "bfloat16": "bf16", "float16": "f16", "complex64": "c64",
         "complex128": "c128", "python float": "py-float", "python int": "py-int"}


def _kept(case: pd.DataFrame) -> str:
    """``param bf16, exp_avg bf16, step f32`` from one case's ``state.dtype`` rows (``bf16/f32`` where
    FQNs differ)."""
    return ", ".join(f"{tensor} {'/'.join(dict.fromkeys(SHORT.get(d, d) for d in g['detail']))}"
                     for tensor, g in case.groupby("tensor", sort=False))


def precision(rows: pd.DataFrame) -> pd.DataFrame:
    """The precision each tensor was kept in, per suite x impl x dtype (a state key only some hparam sets
    keep, such as amsgrad's, included); hparam sets apart only where they keep a tensor differently."""
    sel = rows[(rows["metric"] == STATE_DTYPE) & (rows["check"] == "parity")]
    out = []
    for (suite, impl, dtype), group in sel.groupby(["suite", "impl", "dtype"], sort=False):
        if "/" not in (text := _kept(group)):
            out.append((suite, impl, dtype, "all", text))
            continue
        kept = {h: _kept(case) for h, case in group.groupby("hparams", sort=False)}
        for text in dict.fromkeys(kept.values()):
            sets = [h for h, t in kept.items() if t == text]
            out.append((suite, impl, dtype, "all" if len(sets) == len(kept) else ", ".join(sets), text))
    return pd.DataFrame(out, columns=["suite", "impl", "dtype", "hparams", "kept in"])


def worst(rows: pd.DataFrame) -> pd.DataFrame:
    failing = by_case(rows, PARITY_MAX_ERR_EPS).query("status == 'fail'").index
    per = metric(rows, PARITY_MAX_ERR_EPS, aggregate=False)
    per = per[(per["fqn"] != "") & per.set_index(CASE).index.isin(failing)]
    groups = [g.sort_values("value", ascending=False, kind="stable").head(5) for _, g in per.groupby(CASE, sort=False)]
    top = pd.concat(groups) if groups else per
    return top[CASE + ["fqn", "tensor"]].assign(**{"max err (eps)": top["value"].map(num)})


def cross(rows: pd.DataFrame) -> pd.DataFrame:
    out = by_case(rows, PARITY_XMAX_ERR_EPS_VS_FORLOOP).reset_index()
    return out[CASE].assign(**{"eps vs for-loop": out["value"].map(num), "verdict": out["status"],
                               "detail": out["detail"]})


def deviations(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per declared deviation observed; its size in eps where it is one (a declared raise: whether it still
    raises is in its status and detail)."""
    dev = rows[rows["check"] == "deviation"]
    sized = dev["metric"] == DEVIATION_MAX_ERR_EPS
    return dev[CASE + ["fqn", "tensor", "status"]].assign(
        **{"max err (eps)": dev["value"].where(sized).map(num), "detail": dev["detail"]})


def errors(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per invalid input and implementation (not each case's timing row)."""
    err = rows[(rows["check"] == "errors") & (rows["metric"] != RUN_CASE_S)]
    return err[["suite", "impl", "hparams", "status", "detail"]].rename(columns={"hparams": "invalid input"})


def not_run(rows: pd.DataFrame) -> pd.DataFrame:
    """Cases that did not produce a verdict: errors, unsupported hparam sets, skips."""
    sel = rows[rows["status"].isin(NO_VERDICT | {"error"}) & rows["check"].ne("deviation")]
    return sel[CASE + ["check", "status", "detail"]]
