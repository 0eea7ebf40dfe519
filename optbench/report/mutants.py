"""The mutant detection report: per dtype, how many mutants the checks caught and which check caught each;
a miss comes with the mutant's size in the missed dtype's units."""

from __future__ import annotations

import pandas as pd
import torch

from optbench.numerics.one_step import ONE_STEP_TOL, UPDATE_FLOOR_EPS, update_eps
from optbench.report.tables import markdown
from optbench.suite.catalog import suite_by_name
from optbench.suite.spec import DTYPES, REAL_DTYPES


def _update_eps(suite: str, dtype: str) -> float:
    """The unit the one-step check measures a parameter's update in (optbench.numerics.one_step.OneStep)."""
    return max(update_eps(suite_by_name(suite), dtype) or 0.0, torch.finfo(DTYPES[dtype]).eps, UPDATE_FLOOR_EPS)


def size_at(table: pd.DataFrame, mutant: str, dtype: str) -> str:
    """The mutant's effect measured where it is resolved (float32, else float64), on the hparam sets that
    run at ``dtype``, in ``dtype``'s units: the largest one-step error and the largest drift."""
    missed = table[(table.mutant == mutant) & (table.dtype == dtype)]
    runs_here = set(missed.sizes.iloc[0]) if len(missed) else set()
    eps = lambda name: torch.finfo(DTYPES[name]).eps  # noqa: E731
    for where in ("float32", "float64"):
        found = table[(table.mutant == mutant) & (table.dtype == where) & table.failed]
        if not len(found) or where == dtype:
            continue
        measured = [v for h, v in found.sizes.iloc[0].items() if h in runs_here]
        if not measured:
            continue
        suite = found.suite.iloc[0]
        one = max(max(p * _update_eps(suite, where) / _update_eps(suite, dtype), s * eps(where) / eps(dtype))
                  for p, s, _ in measured)
        drift = max(d for *_, d in measured) * eps(where) / eps(dtype)
        return f"size at {where}, in {dtype} eps: one-step {one:.2g} (tol {ONE_STEP_TOL:g}), drift {drift:.2g}"
    return "size unknown (run it at float32 too)"


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per dtype: mutants caught / total, controls passing / total, and what caught them."""
    out = []
    for dtype in [d for d in REAL_DTYPES if d in set(table.dtype)]:
        at = table[table.dtype == dtype]
        mutants, controls = at[~at.control], at[at.control]
        by = mutants[mutants.failed].detected_by.str.split(", ").explode().value_counts()
        out.append({"dtype": dtype, "caught": int(mutants.failed.sum()), "mutants": len(mutants),
                    "controls passing": int((~controls.failed).sum()), "controls": len(controls),
                    "caught by": ", ".join(f"{k} {v}" for k, v in by.items()),
                    "missed": ", ".join(mutants[~mutants.failed].mutant)})
    return pd.DataFrame(out)


def render(table: pd.DataFrame) -> str:
    """The report as Markdown: the per-dtype summary, then each mutant at each dtype."""
    per_dtype = summary(table)
    wide = table[~table.control].pivot_table(index=["suite", "mutant"], columns="dtype", values="detected_by",
                                             aggfunc="first").fillna("")
    caught = table[~table.control].pivot_table(index=["suite", "mutant"], columns="dtype", values="failed",
                                               aggfunc="first")
    for dtype in wide.columns:
        wide[dtype] = [("caught: " + by if ok else f"MISSED ({size_at(table, mutant, dtype)})") if ok == ok else ""
                       for (_, mutant), by, ok in zip(wide.index, wide[dtype], caught[dtype])]
    wide = wide[[d for d in REAL_DTYPES if d in wide.columns]]
    lines = ["# Mutant detection", "", markdown(per_dtype), "", markdown(wide.reset_index())]
    bad = table[table.control & table.failed]
    if len(bad):
        lines += ["", "Controls that FAILED (false positives): "
                  + ", ".join(f"{m} at {d}" for m, d in zip(bad.mutant, bad.dtype))]
    return "\n".join(lines) + "\n"
