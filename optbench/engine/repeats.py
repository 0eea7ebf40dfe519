"""Process-level repeats (``speed.repeats=N``): a run's speed cases timed N times, each time in a fresh worker process,
and each case's N outcomes merged into one. Within one process, interleaved rounds see the machine's drift but not
what differs between processes (where the allocator put the tensors, cache and TLB placement, a frequency state):
two processes timing one step differ by a few percent for good (docs/performance.md), which is the noise a
comparison between two runs meets. Repeats measure it, as asv's ``processes`` and pyperf's worker processes do.

A merged case keeps every round (``time.round_ms`` and the probe's ``roofline.floor_round_ms``, renumbered across
the repeats), the median over the repeats of every per-case statistic (``time.step_ms`` is the median of the
repeats' medians; a ratio, its interval's bounds, % of roofline alike), the sum of ``time.rounds``,
``time.unstable`` when more than half the repeats were timed on a busy machine (one noisy repeat of ten moves a
median of medians little, and compare's test between processes counts its spread; the detail says how many were),
and rows of its own: ``time.repeat_ms`` (each repeat's median, ``step`` its index), ``speed.repeat_ratio`` (each
repeat's paired ratio to its baseline, where it has one) and ``time.repeat_cv`` (the medians' coefficient of
variation: the between-process noise that ``optbench compare`` tests against). A repeat that failed or errored is
the case's outcome, whatever the others measured.
"""

from __future__ import annotations

import numpy as np

from optbench.engine.units import Unit
from optbench.metrics import (
    SPEED_RATIO,
    SPEED_REPEAT_RATIO,
    TIME_REPEAT_CV,
    TIME_REPEAT_MS,
    TIME_ROUNDS,
    TIME_STALLED_ROUNDS,
    TIME_STEP_MS,
    TIME_UNSTABLE,
)
from optbench.results import CASE_KEY, FAILING, row

SUMMED = (TIME_ROUNDS, TIME_STALLED_ROUNDS)
MAJORITY = (TIME_UNSTABLE,)


def _step_ms(rows: list[dict]) -> float | None:
    return next((r["value"] for r in rows if r["metric"] == TIME_STEP_MS and r["fqn"] == ""), None)


def merge(outcomes: list[tuple[list[dict], str]], in_process: bool = False) -> tuple[list[dict], str]:
    """One case's outcomes (rows, console line), one per repeat, as one outcome."""
    if len(outcomes) == 1:
        return outcomes[0]
    broken = next((o for o in outcomes if any(r["status"] in FAILING for r in o[0])), None)
    medians = [_step_ms(rows) for rows, _ in outcomes]
    if broken is not None or any(m is None for m in medians):  # an error, or a case with no step time (xfail)
        return broken or outcomes[0]
    first = outcomes[0][0]
    per_key: dict[tuple, list[dict]] = {}
    for rows, _ in outcomes:
        for r in rows:
            per_key.setdefault((r["metric"], r["fqn"], r["tensor"], r["step"] is None), []).append(r)
    merged = []
    for key, rows in per_key.items():
        if not key[3]:  # a per-round row: every repeat's rounds, numbered on below
            merged += rows
            continue
        values = np.array([r["value"] for r in rows], dtype=float)
        if key[0] in SUMMED:
            value = float(values.sum())
        elif key[0] in MAJORITY:
            value = float(2 * (values > 0).sum() > len(outcomes))
        else:
            value = float(np.median(values)) if np.isfinite(values).all() else float(values[0])
        detail = rows[0]["detail"]
        if key[0] in MAJORITY:
            busy = [r["detail"] for r in rows if r["value"]]
            detail = (f"{len(busy)} of {len(outcomes)} repeats {'' if value else 'only '}timed on a busy machine: "
                      + "; ".join(dict.fromkeys(busy))) if busy else ""
        merged.append(rows[0] | {"value": value, "detail": detail})
    merged = _renumbered(merged)
    labels = {k: first[0][k] for k in (*CASE_KEY, "optimizer")}  # what Case.labels writes on every row
    how = "in this process (jobs=0: not process-level)" if in_process else "each in a fresh worker process"
    cv = float(np.std(medians, ddof=1) / np.mean(medians)) if np.mean(medians) > 0 else float("nan")
    merged += [row(labels, check=first[0]["check"], metric=TIME_REPEAT_MS, value=m, unit="ms", step=i,
                   detail=f"repeat {i + 1} of {len(medians)}, {how}") for i, m in enumerate(medians)]
    ratios = [next((r["value"] for r in rows if r["metric"] == SPEED_RATIO), None) for rows, _ in outcomes]
    if all(r is not None for r in ratios):  # each repeat's paired ratio to its baseline: compare's anchored test
        merged += [row(labels, check=first[0]["check"], metric=SPEED_REPEAT_RATIO, value=v, step=i,
                       detail=f"repeat {i + 1} of {len(ratios)}") for i, v in enumerate(ratios)]
    merged.append(row(labels, check=first[0]["check"], metric=TIME_REPEAT_CV, value=cv,
                      detail=f"between {len(medians)} repeats {how}: the step's median per repeat "
                             f"{', '.join(f'{m:.4g}' for m in medians)} ms"))
    return merged, _median_line(outcomes, medians, cv)


def _renumbered(merged: list[dict]) -> list[dict]:
    """Per-round rows numbered on across the repeats (repeat r's round i after every round of the ones before)."""
    out, seen = [], {}
    for r in merged:
        if r["step"] is None:
            out.append(r)
            continue
        key = (r["metric"], r["fqn"], r["tensor"])
        out.append(r | {"step": seen.get(key, 0)})
        seen[key] = seen.get(key, 0) + 1
    return out


def _median_line(outcomes, medians: list[float], cv: float) -> str:
    """The console line of the repeat whose median is the median, and what the repeats measured."""
    middle = int(np.argsort(medians)[len(medians) // 2])
    line = outcomes[middle][1]
    head, _, tail = line.partition("\n")
    return (f"{head}; {len(medians)} repeats: {', '.join(f'{m:.3f}' for m in medians)} ms (CV {cv:.1%})"
            + (f"\n{tail}" if tail else ""))


def run_repeated(runner, units: list[Unit], repeats: int, init: dict | None) -> None:
    """``runner``'s speed ``units`` ``repeats`` times, each time in a fresh worker process (``init``, the pool's
    start message; None: in this process, jobs=0), alone; each case recorded once, its repeats merged. A case is
    recorded after its last repeat: an interrupted run keeps nothing of the repeats it had not finished."""
    collected: dict[int, list] = {}
    keep = lambda index, rows, line: collected.setdefault(index, []).append((rows, line))  # noqa: E731
    for r in range(repeats):
        runner.writer.line(f"  speed: repeat {r + 1} of {repeats}" + (" (a fresh worker process)" if init else ""))
        fresh = [Unit(list(u.items), done=list(u.done)) for u in units]
        if init is None:
            for unit in fresh:
                for index, mode, rows, line in runner.run_unit(unit.requests()):
                    if mode == "run":
                        keep(index, rows, line)
            continue
        pool = runner.pool(init, keep, jobs=1)
        try:
            pool.run(fresh, jobs=1)
        finally:
            pool.close()
    for index in sorted(collected):
        runner.writer.record(index, *merge(collected[index], in_process=init is None))
