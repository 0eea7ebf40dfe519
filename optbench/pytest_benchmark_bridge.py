"""optbench's timings in pytest-benchmark's terms, both ways.

* **Into pytest-benchmark**: under the gate (``pytest -p optbench.gate --optbench "suite=adamw checks=[speed]"``)
  with pytest-benchmark installed, each timed case's rounds (the interleaved rounds it was measured in, as its
  ``time.round_ms`` rows) become that item's benchmark: ``--benchmark-json``, ``--benchmark-autosave``,
  ``--benchmark-compare`` and ``pytest-benchmark compare`` then work on them. The rounds are not re-timed; they
  are handed to pytest-benchmark's statistics (its ``BenchmarkFixture._make_stats``, pytest-benchmark 5.x) with
  the steps per round as its iterations. ``extra_info["optbench"]`` keeps the case's labels, the method and
  whether the machine was busy (``time.unstable``).
* **From pytest-benchmark**: ``rows_of`` reads a pytest-benchmark JSON file (saved by ``--benchmark-json`` or
  ``--benchmark-autosave``) as optbench rows, so ``optbench compare`` and the dashboard take it. A benchmark
  optbench wrote keeps its labels; any other is the case ``suite=pytest-benchmark``, ``impl=<its full name>``.
  Round samples exist only where it was saved with ``--benchmark-save-data`` (else compare says n/a).
"""

from __future__ import annotations

import math

from optbench.metrics import TIME_ROUND_MS, TIME_ROUNDS, TIME_STEP_MS, TIME_STEPS_PER_ROUND, TIME_UNSTABLE
from optbench.rows import CASE_KEY, SCHEMA_VERSION, row

TIMING_CHECKS = ("speed", "scaling")


def is_pytest_benchmark(data) -> bool:
    return isinstance(data, dict) and "benchmarks" in data and "machine_info" in data


def record(item, rows: list[dict]) -> bool:
    """Hand a timed case's rounds to pytest-benchmark as ``item``'s benchmark; False when there is nothing to hand
    over (pytest-benchmark absent or disabled, or no rounds)."""
    session = getattr(item.config, "_benchmarksession", None)
    rounds = sorted((r["step"], r["value"]) for r in rows if r["metric"] == TIME_ROUND_MS)
    if session is None or session.disabled or session.skip or not rounds:
        return False
    from pytest_benchmark.fixture import BenchmarkFixture

    first = next(r for r in rows if r["metric"] == TIME_ROUND_MS)
    number = int(next((r["value"] for r in rows if r["metric"] == TIME_STEPS_PER_ROUND), 1))
    labels = {k: first[k] for k in CASE_KEY} | {"check": first["check"]}
    fixture = BenchmarkFixture(item, add_stats=session.benchmarks.append, logger=session.logger, warner=item.warn,
                               disabled=False, **(session.options | {
                                   "group": f"{labels['suite']}.{labels['dtype']}.{labels['workload'] or 'model'}"}))
    unstable = next((r["detail"] for r in rows if r["metric"] == TIME_UNSTABLE and r["value"]), "")
    fixture.extra_info["optbench"] = labels | {"method": next((r["detail"] for r in rows
                                                                if r["metric"] == TIME_STEP_MS), ""),
                                               "unstable": unstable}
    stats = fixture._make_stats(number)
    for _, ms in rounds:
        stats.update(ms / 1e3 * number)  # a round's duration: pytest-benchmark divides by the iterations
    fixture._mode = "optbench interleaved rounds"
    return True


def rows_of(data: dict) -> tuple[dict, list[dict]]:
    """(meta, rows) of a pytest-benchmark JSON document."""
    machine = data.get("machine_info") or {}
    cpu = machine.get("cpu") or {}
    meta = {"schema_version": SCHEMA_VERSION, "source": "pytest-benchmark",
            "machine": {"cpu": cpu.get("brand_raw") or machine.get("processor") or "",
                        "cpu_threads": cpu.get("count"), "node": machine.get("node", "")},
            "commit": data.get("commit_info") or {}, "created": data.get("datetime", ""),
            "run": {"status": "finished", "how": "a pytest-benchmark file"}}
    out = []
    for bench in data.get("benchmarks") or []:
        ours = (bench.get("extra_info") or {}).get("optbench") or {}
        labels = {k: "" for k in CASE_KEY} | {"suite": "pytest-benchmark", "impl": bench.get("fullname", "")}
        labels |= {k: str(ours[k]) for k in CASE_KEY if k in ours}
        check = ours.get("check", "speed") if ours.get("check") in TIMING_CHECKS else "speed"
        stats = bench.get("stats") or {}
        median = stats.get("median", math.nan)
        out.append(row(labels, check=check, metric=TIME_STEP_MS, value=1e3 * median, unit="ms",
                       detail=ours.get("method") or "pytest-benchmark"))
        out.append(row(labels, check=check, metric=TIME_ROUNDS, value=stats.get("rounds", math.nan)))
        out.append(row(labels, check=check, metric=TIME_STEPS_PER_ROUND, value=stats.get("iterations", math.nan)))
        out.append(row(labels, check=check, metric=TIME_UNSTABLE, value=int(bool(ours.get("unstable"))),
                       detail=str(ours.get("unstable") or "")))
        out += [row(labels, check=check, metric=TIME_ROUND_MS, value=1e3 * t, unit="ms", step=i)
                for i, t in enumerate(stats.get("data") or [])]
    return meta, out
