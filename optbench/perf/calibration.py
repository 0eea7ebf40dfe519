"""A/A calibration: how far runs of the same code on this machine disagree, case by case, so that ``optbench
compare`` flags only a change beyond it.

A comparison's test sees the noise it has samples of (rounds, or with ``speed.repeats`` the processes of each
run). What moves a whole run (another tenant on the host, a frequency or memory state that lasts minutes) is seen
only by running the same code again. ``optbench calibrate`` reads such A/A runs: runs named on the command line
(the same code and config, by the user's word), or from the run history (``--history``: runs of one commit, not
dirty, and one timing config, grouped automatically). Per timing case its A/A spread is the largest ratio between
two runs' medians, minus one; the file holds each case's spread, their largest (the threshold for a case the runs
lack) and the machine. ``optbench compare --calibration FILE`` then uses, per case, the larger of ``--threshold``
and the case's spread.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from optbench.perf.compare import CASE, MACHINE_KEYS, medians

SCHEMA = 1


def case_text(key: tuple) -> str:
    return "/".join(str(k) for k in key)


def spreads(runs: list[pd.DataFrame]) -> dict[tuple, float]:
    """Per timing case in at least two of ``runs``: the largest ratio between two of its medians, minus one."""
    found: dict[tuple, list[float]] = {}
    for rows in runs:
        for key, ms in medians(rows).items():
            if math.isfinite(ms) and ms > 0:
                found.setdefault(key, []).append(ms)
    return {k: float(max(v) / min(v) - 1) for k, v in found.items() if len(v) >= 2}


def calibrate(groups: list[list[tuple[dict, pd.DataFrame]]]) -> dict:
    """The calibration from groups of A/A runs ((meta, rows) each; every group the same code and config)."""
    cases: dict[tuple, float] = {}
    for group in groups:
        for key, spread in spreads([rows for _, rows in group]).items():
            cases[key] = max(cases.get(key, 0.0), spread)
    machine = next(((meta.get("machine") or {}) for g in groups for meta, _ in g), {})
    return {"schema": SCHEMA, "kind": "optbench A/A calibration",
            "machine": {k: machine.get(k) for k in MACHINE_KEYS},
            "runs": sum(len(g) for g in groups), "groups": len(groups),
            "threshold": max(cases.values(), default=math.nan),
            "cases": [dict(zip(CASE, k)) | {"spread": v} for k, v in sorted(cases.items(), key=lambda kv: -kv[1])]}


def groups_from_history(runs: pd.DataFrame, metas: list[dict]) -> list[list[int]]:
    """Indices of the history's runs that are A/A of one another: one commit (not dirty), suites, device and timing
    config; groups of two or more."""
    out: dict[tuple, list[int]] = {}
    for i, meta in enumerate(metas):
        machine, cfg = meta.get("machine") or {}, meta.get("config") or {}
        if not machine.get("git_sha") or machine.get("git_dirty"):
            continue
        timing = json.dumps({k: cfg.get(k) for k in ("speed", "scaling", "device", "dtype", "impl")}, sort_keys=True,
                            default=str)
        out.setdefault((machine.get("git_sha"), runs.iloc[i]["machine"], runs.iloc[i]["torch"],
                        runs.iloc[i]["suites"], timing), []).append(i)
    return [g for g in out.values() if len(g) >= 2]


def write(calibration: dict, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(calibration, indent=1, default=str) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def read(path: Path) -> dict:
    """A calibration file, or ValueError naming what is wrong with it."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not a readable calibration file ({exc})") from None
    if not isinstance(data, dict) or data.get("kind") != "optbench A/A calibration":
        raise ValueError(f"{path}: not an optbench calibration file (optbench calibrate writes one)")
    if data.get("schema") != SCHEMA:
        raise ValueError(f"{path}: calibration schema {data.get('schema')}, this optbench reads {SCHEMA}")
    return data


def thresholds(calibration: dict) -> tuple[dict[tuple, float], float]:
    """(per-case A/A spread, the largest: for a case the calibration lacks)."""
    cases = {tuple(str(c.get(k, "")) for k in CASE): float(c["spread"]) for c in calibration.get("cases") or ()}
    overall = float(calibration.get("threshold", math.nan))
    return cases, overall if math.isfinite(overall) else float(np.nan)
