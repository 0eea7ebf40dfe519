"""Mutant trials: how strong the gate is, measured per dtype (``optbench mutants``; the report is
``optbench.report.mutants``).

A mutant catalogue is a Python package (``optbench.mutants``, the default) that exports ``MUTANTS``
("module.Class" -> suite where that deliberately wrong optimizer must fail), and optionally
``CONTROLS`` (correct optimizers that must pass), ``EXISTS_AT`` ("module.Class" -> the dtypes where its
bug can exist, e.g. "state kept in float32" only at float64), ``CAUGHT_BY`` ("module.Class" -> the check
that must catch it, run beside parity and ``trial_checks``), ``SPECS`` ("module.Class" -> the candidate spec
it is judged through) and ``STEPS`` (suite -> steps per run).
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
import json
import os
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from optbench.metrics import PARITY_MAX_ERR_EPS, PARITY_ONE_STEP_MAX_ERR_EPS, PARITY_TOL_EPS
from optbench.results import FAILING, as_float
from optbench.suite.catalog import suite_by_name
from optbench.suite.spec import REAL_DTYPES

DEFAULT_STEPS = 25  # reaches a bug that starts after step 20


@dataclass(frozen=True)
class Trial:
    mutant: str  # "module.Class" in the catalogue
    suite: str
    dtype: str
    control: bool
    catalogue: str
    steps: int
    overrides: tuple[str, ...]
    checks: tuple[str, ...] = ("parity", "roundtrip")
    spec: str | None = None  # the candidate spec's keys but class, as JSON (a trial crosses to a process pool)


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
    caught_by, specs = getattr(module, "CAUGHT_BY", {}), getattr(module, "SPECS", {})
    out = []
    for control, found in ((False, module.MUTANTS), (True, getattr(module, "CONTROLS", {}))):
        for mutant, suite_name in sorted(found.items()):
            if suites and suite_name not in suites:
                continue
            spec = spec_json(mutant, specs[mutant]) if mutant in specs else None
            checks = tuple(dict.fromkeys(("parity", *trial_checks(specs.get(mutant)),
                                          caught_by.get(mutant, "parity"))))
            suite_dtypes = suite_by_name(suite_name).dtypes
            for dtype in suite_dtypes:
                if (dtypes and dtype not in dtypes) or dtype not in exists_at.get(mutant, REAL_DTYPES):
                    continue
                out.append(Trial(mutant, suite_name, dtype, control, catalogue,
                                 int(steps.get(suite_name, DEFAULT_STEPS)), tuple(overrides), checks, spec))
    return out


def spec_json(mutant: str, spec) -> str:
    """A catalogue's ``SPECS`` entry as JSON; one that is not a mapping of plain values is the catalogue's mistake
    (an AttributeError, which ``optbench mutants`` says in one line)."""
    try:
        if not isinstance(spec, dict) or "class" in spec:
            raise TypeError("a spec file's keys but class")
        return json.dumps(spec)
    except (TypeError, ValueError) as exc:
        raise AttributeError(f"SPECS[{mutant!r}] is not a candidate spec ({exc})") from None


def trial_checks(spec: dict | None) -> tuple[str, ...]:
    """The checks beside parity a trial runs: the state_dict round-trip, and for an optimizer whose spec declares
    quantized state the quantized check, one that rounds stochastically the stochastic check (its controls must
    pass them too)."""
    spec = spec or {}
    return ("roundtrip", *(("quantized",) if spec.get("quantized") else ()),
            *(("stochastic",) if spec.get("stochastic_rounding") else ()))


def detecting(rows: list[dict]) -> list[str]:
    """The checks (parity split into its two gates) whose rows failed."""
    found, cases = set(), {}
    for r in rows:
        if r["check"] == "parity" and r["fqn"] == "" and r["metric"] in (PARITY_MAX_ERR_EPS, PARITY_TOL_EPS):
            cases.setdefault((r["dtype"], r["hparams"]), {})[r["metric"]] = as_float(r["value"])  # "inf" from a file
        if r["status"] not in FAILING:
            continue
        if r["metric"] == PARITY_ONE_STEP_MAX_ERR_EPS:
            found.add("parity/one-step")
        elif r["metric"] != PARITY_MAX_ERR_EPS:
            found.add("error" if r["status"] == "error" else r["check"])
        elif r["gate"]:  # the case verdict: the gate its first failure came from
            found.add(f"parity/{r['gate']}")
    for values in cases.values():
        if values.get(PARITY_MAX_ERR_EPS, 0.0) > values.get(PARITY_TOL_EPS, float("inf")):
            found.add("parity/trajectory")
    return sorted(found)


def spec_file(folder: Path, cls: str, spec: dict) -> Path:
    """``spec`` (a candidate spec's keys but class) as a spec file for ``cls`` in ``folder``: ``candidate=`` it."""
    from omegaconf import OmegaConf

    path = Path(folder) / "spec.yaml"
    path.write_text(OmegaConf.to_yaml({"class": cls, **spec}))
    return path


def run_trial(trial: Trial) -> dict:
    """Run one mutant at one dtype as ``optbench run`` would; what failed, and the run's verdict."""
    from optbench.config import compose_config
    from optbench.engine.runner import SuiteRun

    with tempfile.TemporaryDirectory(prefix="optbench-mutant-") as scratch:
        candidate = f"{trial.catalogue}.{trial.mutant}"
        if trial.spec is not None:
            candidate = str(spec_file(Path(scratch), candidate, json.loads(trial.spec)))
        cfg = compose_config([f"suite={trial.suite}", f"candidate={candidate}", "impl=[candidate]", "jobs=0",
                              f"dtype={trial.dtype}", f"checks=[{','.join(trial.checks)}]",
                              f"steps={trial.steps}", *trial.overrides])
        results = SuiteRun(cfg, Path(scratch) / "run", echo=lambda *_: None).run()
        rows = results.rows
    return {"mutant": trial.mutant, "suite": trial.suite, "dtype": trial.dtype, "control": trial.control,
            "failed": bool(results.failed), "detected_by": ", ".join(detecting(rows)), "sizes": sizes(rows)}


def sizes(rows: list[dict]) -> dict[str, tuple[float, float, float]]:
    """Per hparam set: the worst one-step error of the parameter (eps of the update), of a state tensor
    (eps of the dtype), and the worst drift (eps of the dtype)."""
    out: dict[str, list[float]] = {}
    for r in rows:
        if (r["check"] != "parity" or r["metric"] not in (PARITY_ONE_STEP_MAX_ERR_EPS, PARITY_MAX_ERR_EPS)
                or not r["fqn"]):
            continue
        worst = out.setdefault(r["hparams"], [0.0, 0.0, 0.0])
        slot = 2 if r["metric"] == PARITY_MAX_ERR_EPS else 0 if r["tensor"] == "param" else 1
        worst[slot] = max(worst[slot], r["value"])
    return {k: tuple(v) for k, v in out.items()}


def run_all(trial_list: list[Trial], jobs: int) -> pd.DataFrame:
    if jobs <= 1:
        records = [run_trial(t) for t in trial_list]
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            records = list(pool.map(run_trial, trial_list))
    return pd.DataFrame(records, columns=["mutant", "suite", "dtype", "control", "failed", "detected_by", "sizes"])
