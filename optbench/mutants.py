"""``optbench mutants``: the detection report, how strong the gate is, measured per dtype.

A mutant catalogue is a Python package (tests/mutants in this repository) that exports ``MUTANTS``
("module.Class" -> suite where that deliberately wrong optimizer must fail), and optionally
``CONTROLS`` (correct optimizers that must pass), ``EXISTS_AT`` ("module.Class" -> the dtypes where its
bug can exist, e.g. "state kept in float32" only at float64) and ``STEPS`` (suite -> steps per run).
Each mutant runs as ``candidate=`` through ``optbench run`` once per dtype, alone at that dtype;
it is caught when the run fails, and the report names the check (and for parity, which of its two
gates: the free-running ``trajectory`` or the ``one-step`` check) that failed.

A miss comes with the mutant's size, measured where its bug is resolved (its float32 run, else float64)
and expressed in the missed dtype's units: its worst one-step error (the update, in eps of the
update) and its worst drift (in eps, against the trajectory tolerance). A bug whose effect is a
fraction of one bfloat16 eps per step cannot show in a bfloat16 parameter, whatever the gate.
"""

from __future__ import annotations

import importlib
import os
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from optbench.catalog import suite_by_name
from optbench.checks.parity import update_eps
from optbench.one_step import UPDATE_FLOOR_EPS
from optbench.report.tables import markdown
from optbench.suite import DTYPES

DEFAULT_STEPS = 25  # reaches a bug that starts after step 20
DTYPE_ORDER = ("float64", "float32", "bfloat16", "float16")


@dataclass(frozen=True)
class Trial:
    mutant: str  # "module.Class" in the catalogue
    suite: str
    dtype: str
    control: bool
    catalogue: str
    steps: int
    overrides: tuple[str, ...]


def load_catalogue(name: str):
    """The catalogue package by dotted name (importable from the current directory)."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    module = importlib.import_module(name)
    if not isinstance(getattr(module, "MUTANTS", None), dict):
        raise AttributeError(f"{name} has no MUTANTS mapping ('module.Class' -> suite)")
    return module


def trials(catalogue: str, dtypes: list[str] | None, suites: list[str] | None, overrides=()) -> list[Trial]:
    """One trial per mutant (and control) and dtype its suite runs and its bug can exist at."""
    module = load_catalogue(catalogue)
    exists_at, steps = getattr(module, "EXISTS_AT", {}), getattr(module, "STEPS", {})
    out = []
    for control, found in ((False, module.MUTANTS), (True, getattr(module, "CONTROLS", {}))):
        for mutant, suite_name in sorted(found.items()):
            if suites and suite_name not in suites:
                continue
            suite_dtypes = suite_by_name(suite_name).dtypes
            for dtype in suite_dtypes:
                if (dtypes and dtype not in dtypes) or dtype not in exists_at.get(mutant, DTYPE_ORDER):
                    continue
                out.append(Trial(mutant, suite_name, dtype, control, catalogue, int(steps.get(suite_name, DEFAULT_STEPS)),
                                 tuple(overrides)))
    return out


def detecting(rows: list[dict]) -> list[str]:
    """The checks (parity split into its two gates) whose rows failed."""
    found, cases = set(), {}
    for r in rows:
        if r["check"] == "parity" and r["fqn"] == "" and r["metric"] in ("parity.max_err_eps", "parity.tol_eps"):
            cases.setdefault((r["dtype"], r["hparams"]), {})[r["metric"]] = r["value"]
        if r["status"] not in ("fail", "error"):
            continue
        if r["metric"] == "parity.one_step_max_err_eps":
            found.add("parity/one-step")
        elif r["metric"] != "parity.max_err_eps":
            found.add("error" if r["status"] == "error" else r["check"])
        elif "(trajectory)" in r["detail"]:  # the case verdict names the gate its first failure came from
            found.add("parity/trajectory")
    for values in cases.values():
        if values.get("parity.max_err_eps", 0.0) > values.get("parity.tol_eps", float("inf")):
            found.add("parity/trajectory")
    return sorted(found)


def run_trial(trial: Trial) -> dict:
    """Run one mutant at one dtype as ``optbench run`` would; what failed, and the run's verdict."""
    from optbench.cli import compose_config
    from optbench.runner import SuiteRun

    with tempfile.TemporaryDirectory(prefix="optbench-mutant-") as out:
        cfg = compose_config([f"suite={trial.suite}", f"candidate={trial.catalogue}.{trial.mutant}", "impl=[candidate]",
                              f"dtype={trial.dtype}", "checks=[parity,roundtrip]",
                              f"steps={trial.steps}", *trial.overrides])
        results = SuiteRun(cfg, Path(out), echo=lambda *_: None).run()
        rows = results.rows
    return {"mutant": trial.mutant, "suite": trial.suite, "dtype": trial.dtype, "control": trial.control,
            "failed": bool(results.failed), "detected_by": ", ".join(detecting(rows)), "sizes": sizes(rows)}


def sizes(rows: list[dict]) -> dict[str, tuple[float, float, float]]:
    """Per hparam set: the worst one-step error of the parameter (eps of the update), of a state tensor
    (eps of the dtype), and the worst drift (eps of the dtype)."""
    out: dict[str, list[float]] = {}
    for r in rows:
        if r["check"] != "parity" or r["metric"] not in ("parity.one_step_max_err_eps", "parity.max_err_eps") or not r["fqn"]:
            continue
        worst = out.setdefault(r["hparams"], [0.0, 0.0, 0.0])
        slot = 2 if r["metric"] == "parity.max_err_eps" else 0 if r["tensor"] == "param" else 1
        worst[slot] = max(worst[slot], r["value"])
    return {k: tuple(v) for k, v in out.items()}


def run_all(trial_list: list[Trial], jobs: int) -> pd.DataFrame:
    if jobs <= 1:
        records = [run_trial(t) for t in trial_list]
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            records = list(pool.map(run_trial, trial_list))
    return pd.DataFrame(records, columns=["mutant", "suite", "dtype", "control", "failed", "detected_by", "sizes"])


def _update_eps(suite: str, dtype: str) -> float:
    """The unit the one-step check measures a parameter's update in (optbench.one_step.OneStep)."""
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
        return f"size at {where}, in {dtype} eps: one-step {one:.2g} (tol 16), drift {drift:.2g}"
    return "size unknown (run it at float32 too)"


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per dtype: mutants caught / total, controls passing / total, and what caught them."""
    out = []
    for dtype in [d for d in DTYPE_ORDER if d in set(table.dtype)]:
        at = table[table.dtype == dtype]
        mutants, controls = at[~at.control], at[at.control]
        by = mutants[mutants.failed].detected_by.str.split(", ").explode().value_counts()
        out.append({"dtype": dtype, "caught": int(mutants.failed.sum()), "mutants": len(mutants),
                    "controls passing": int((~controls.failed).sum()), "controls": len(controls),
                    "caught by": ", ".join(f"{k} {v}" for k, v in by.items()),
                    "missed": ", ".join(mutants[~mutants.failed].mutant)})
    return pd.DataFrame(out)


def render(table: pd.DataFrame) -> str:
    per_dtype = summary(table)
    wide = table[~table.control].pivot_table(index=["suite", "mutant"], columns="dtype", values="detected_by",
                                             aggfunc="first").fillna("")
    caught = table[~table.control].pivot_table(index=["suite", "mutant"], columns="dtype", values="failed", aggfunc="first")
    for dtype in wide.columns:
        wide[dtype] = [("caught: " + by if ok else f"MISSED ({size_at(table, mutant, dtype)})") if ok == ok else ""
                       for (_, mutant), by, ok in zip(wide.index, wide[dtype], caught[dtype])]
    wide = wide[[d for d in DTYPE_ORDER if d in wide.columns]]
    lines = ["# Mutant detection", "", markdown(per_dtype), "", markdown(wide.reset_index())]
    bad = table[table.control & table.failed]
    if len(bad):
        lines += ["", "Controls that FAILED (false positives): " + ", ".join(f"{m} at {d}" for m, d in zip(bad.mutant, bad.dtype))]
    return "\n".join(lines) + "\n"
