"""Sweeps (``optbench run -m``): every job's results merged into one results.json and report.md.

``MergeSweep`` is a Hydra callback (``hydra.callbacks`` in suites/config.yaml). In each job, in whatever
process or machine the launcher runs it (basic: in turn in this process; joblib: worker processes;
submitit: SLURM nodes), it writes ``job.json`` beside the job's results: its number and overrides when it
starts, how it ended (exit code, or the exception) when it ends. At the end of the multirun, in the
launching process, ``merge`` reads every job's folder under ``hydra.sweep.dir`` and writes the merged
``results.json``/``results.csv`` and ``report.md`` there: the jobs' rows in job order, the list of jobs
(overrides, folder, machine, config, exit code) in the header under ``sweep``, and one ``error`` row per job
whose results are not whole (it raised, was killed, never started or stopped on a usage error), so a job
that crashes loses nothing of the others'. If Hydra stops before its end-of-multirun hook (a job raised,
a worker died), ``finish``, which ``optbench run`` calls after every multirun, merges what exists.

The multirun's exit code is the worst job's: 2 if a job stopped on a usage error, 1 if any failed a check,
crashed or is missing, 3 if a job verified nothing (``optbench.results.verdict`` of its rows), else 0.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from optbench.checks.registry import counted_checks, report_sections
from optbench.engine.out_dir import JOB_FILE
from optbench.metrics import SWEEP_JOB
from optbench.results import FAIL, NOTHING_VERIFIED, atomic_write, incomplete, verdict
from optbench.usage import EXIT_CHECK_FAILED, EXIT_NOTHING_VERIFIED, EXIT_OK, EXIT_USAGE, UsageError, worst

_BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"


@dataclass
class _Sweep:
    """A multirun begun in this process."""

    dir: Path
    expected: list[list[str]] | None  # each job's overrides, by job number (None: not known for this sweeper)
    launcher: str
    overrides: list[str]
    started: float = field(default_factory=time.perf_counter)
    exit_code: int | None = None  # set once merged


_begun: list[_Sweep] = []  # by on_multirun_start, in the launching process; emptied by finish()


class MergeSweep(Callback):
    """Hydra callback: job.json in every job of a multirun, the merged results at its end."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        hydra = config.hydra
        _begun.append(_Sweep(Path(str(hydra.sweep.dir)).absolute(), _expected_jobs(config),
                             str(hydra.launcher.get("_target_", "")), list(hydra.overrides.task)))

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep = next((s for s in reversed(_begun) if s.dir == Path(str(config.hydra.sweep.dir)).absolute()), None)
        if sweep is not None and sweep.exit_code is None:
            _merge_and_say(sweep)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        if _in_sweep(config):
            _write_job(config, status="started", started_s=time.time(), host=socket.gethostname(), pid=os.getpid())

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        if not _in_sweep(config):
            return
        from hydra.core.utils import JobStatus

        completed = job_return.status == JobStatus.COMPLETED
        value = job_return._return_value  # the exit code, or the exception (``return_value`` would raise it)
        error = "" if completed else f"{type(value).__name__}: {(str(value).splitlines() or [''])[0]}"
        _write_job(config, status="completed" if completed else "failed",
                   exit_code=value if completed and isinstance(value, int) else EXIT_CHECK_FAILED, error=error)


def finish() -> list[int]:
    """After a multirun: merge each sweep Hydra stopped before merging (a job raised, a worker died) from
    what its jobs left; the exit code of every sweep begun (none when no job ever started)."""
    codes = []
    for sweep in _begun:
        if sweep.exit_code is None and any(sweep.dir.rglob(JOB_FILE)):
            _merge_and_say(sweep)
        if sweep.exit_code is not None:
            codes.append(sweep.exit_code)
    _begun.clear()
    return codes


def combinations(overrides: list[str]) -> list[list[str]]:
    """The jobs Hydra's basic sweeper makes of ``overrides``, in job-number order."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(overrides)
    return [list(job) for job in BasicSweeper.split_arguments(parsed, None)[0]]


def validate(overrides: list[str], config_dirs=()) -> None:
    """Compose enough of a sweep's jobs to use every swept value once, so that a bad override is one line
    (a UsageError) before any job starts. ``out_dir=`` (a single run's folder) is refused: a sweep writes
    under ``hydra.sweep.dir``."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from optbench.config import compose_config

    parsed = OverridesParser.create().parse_overrides(overrides)
    if any(o.get_key_element().lstrip("+~") == "out_dir" for o in parsed):
        raise UsageError("out_dir= names a single run's folder; a sweep writes its jobs and the merged results "
                         "under hydra.sweep.dir=DIR")
    if any(o.is_sweep_override() and not o.is_discrete_sweep() for o in parsed):
        return  # a range or interval sweep is another sweeper's: Hydra checks it
    axes = [[f"{o.get_key_element()}={v}" for v in o.sweep_string_iterator()] if o.is_sweep_override()
            else [o.input_line] for o in parsed]
    for i in range(max((len(a) for a in axes), default=1)):
        try:
            compose_config([a[min(i, len(a) - 1)] for a in axes], config_dirs)
        except UsageError as exc:
            joblib = "hydra/launcher/joblib" in str(exc)
            hint = " (the joblib launcher: pip install 'optbench[sweep]')" if joblib else ""
            raise UsageError(f"{exc}{hint}") from None


@dataclass
class Job:
    """One job of a sweep as its folder shows it."""

    num: int
    overrides: list[str]
    dir: Path | None = None
    status: str = "missing"  # completed | failed (raised) | started (never ended: killed) | missing (never started)
    exit_code: int | None = None  # the job's own, when it completed
    error: str = ""
    host: str = ""
    meta: dict = field(default_factory=dict)  # its results.json header (machine, config, wall_s)
    rows: list[dict] = field(default_factory=list)
    partial: bool = False  # the run did not finish its plan (its results.json says so, or only its journal is there)

    @property
    def code(self) -> int:
        """The job's exit code as the sweep counts it: the worst of its own, its rows' verdict (1 when a row
        fails, 3 when none verified anything) and 1 when its results are not whole."""
        own = self.exit_code if self.status == "completed" and isinstance(self.exit_code, int) else EXIT_CHECK_FAILED
        checks = (self.meta.get("config") or {}).get("checks") or ()
        rows_say = verdict(self.rows, checks, self.meta.get("run")).exit_code
        return worst([own, rows_say, EXIT_CHECK_FAILED if self.problem else EXIT_OK])

    @property
    def problem(self) -> str:
        """Why this job's results are not whole ("" when they are)."""
        kept = f"; the {len(self.rows)} rows it wrote are kept" if self.rows else ""
        if self.status == "missing":
            return "never started (no job folder)"
        if self.status == "started":
            run = self.meta.get("run") or {}
            if run.get("status") == "interrupted":  # the sweep was stopped inside this job: its results say how
                return f"{incomplete(run)}; the sweep stopped here{kept}"
            return f"stopped without finishing (killed?){kept}"
        if self.status == "failed":
            return f"raised {self.error}{kept}"
        if self.exit_code == EXIT_USAGE:
            return "stopped on a usage error; its message is in the job's output"
        if self.exit_code not in (EXIT_OK, EXIT_CHECK_FAILED, EXIT_NOTHING_VERIFIED):
            return f"exit {self.exit_code}" + (f" ({incomplete(self.meta.get('run'))})" if self.partial else "")
        if not self.meta:
            return "wrote no results.json"
        if self.partial:
            return f"did not finish: {incomplete(self.meta.get('run'))}{kept}"
        return ""

    def record(self, sweep_dir: Path) -> dict:
        return {"num": self.num, "overrides": self.overrides,
                "dir": str(self.dir.relative_to(sweep_dir)) if self.dir else None, "status": self.status,
                "exit_code": self.code, "problem": self.problem, "host": self.host, "rows": len(self.rows),
                "wall_s": self.meta.get("wall_s"), "machine": self.meta.get("machine"),
                "config": self.meta.get("config")}


@dataclass
class Merged:
    results: Path
    report: Path
    exit_code: int
    jobs: list[Job]


def merge(sweep_dir, expected: list[list[str]] | None = None, launcher: str = "", overrides=(),
          wall_s: float | None = None) -> Merged:
    """Merge the jobs under ``sweep_dir`` into its results.json/csv and report.md. ``expected``: every job's
    overrides by job number, so a job that never started is reported too."""
    import pandas as pd

    from optbench.report import render_report
    from optbench.report.tables import markdown
    from optbench.results import SCHEMA_VERSION, Results, row

    sweep_dir = Path(sweep_dir)
    jobs = read_jobs(sweep_dir, expected)
    rows = []
    for job in jobs:
        rows += job.rows
        if job.problem:
            cfg = job.meta.get("config") or _job_config(job)
            optimizer = cfg["suite"].get("optimizer") if isinstance(cfg.get("suite"), dict) else ""
            labels = {"suite": _name(cfg, "suite", job.overrides), "optimizer": optimizer or "", "impl": "",
                      "dtype": "", "hparams": "", "device": _name(cfg, "device", job.overrides)}
            rows.append(row(labels, check="sweep", metric=SWEEP_JOB, value=job.code, status="error",
                            detail=f"job {job.num} ({' '.join(job.overrides)}): {job.problem}"))
    machines = [j.meta["machine"] for j in jobs if j.meta.get("machine")]
    machine = dict(machines[0]) if machines else {}
    differing = sorted(k for k in {k for m in machines for k in m}
                       if len({json.dumps(m.get(k), sort_keys=True, default=str) for m in machines}) > 1)
    if differing:  # another host, torch, or a commit made while the sweep ran: say which
        machine["note"] = f"the jobs differ in {', '.join(differing)}: each job's is under sweep.jobs"
    meta = {"machine": machine, "suites": list(dict.fromkeys(s for j in jobs for s in j.meta.get("suites") or [])),
            "wall_s": None if wall_s is None else round(wall_s, 2),
            "sweep": {"dir": str(sweep_dir), "launcher": launcher, "overrides": list(overrides),
                      "jobs": [j.record(sweep_dir) for j in jobs]}}
    results = Results(sweep_dir, meta, rows)
    path = results.finish()
    report = render_report(meta | {"schema_version": SCHEMA_VERSION}, results.table, sweep_dir, report_sections,
                           counted_checks())
    table = pd.DataFrame([{"job": j.num, "overrides": " ".join(j.overrides), "folder": r["dir"] or "-",
                           "exit": j.code, "rows": len(j.rows), "wall time (s)": r["wall_s"] or "-",
                           "problem": j.problem or "-"} for j, r in zip(jobs, meta["sweep"]["jobs"])])
    with report.open("a", encoding="utf-8") as f:
        f.write(f"\n## Sweep jobs\n\n{markdown(table)}\n")
    return Merged(path, report, worst(j.code for j in jobs), jobs)


def read_jobs(sweep_dir: Path, expected: list[list[str]] | None = None) -> list[Job]:
    """Every job under ``sweep_dir`` (by its job.json), and each expected job that left no folder."""
    found: dict[int, tuple[Path, dict]] = {}
    for marker in sweep_dir.rglob(JOB_FILE):
        try:
            info = json.loads(marker.read_text(encoding="utf-8"))
            num = int(info["num"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if expected is not None and not 0 <= num < len(expected):
            continue  # an older sweep's job in a reused sweep directory
        if num not in found or info.get("started_s", 0) > found[num][1].get("started_s", 0):
            found[num] = marker, info
    nums = range(len(expected)) if expected is not None else sorted(found)
    return [_load_job(*found[n]) if n in found else Job(n, list(expected[n])) for n in nums]


def _load_job(marker: Path, info: dict) -> Job:
    from optbench.journal import JOURNAL
    from optbench.results import COLUMNS, READABLE_SCHEMAS, from_journal

    job = Job(int(info["num"]), list(info.get("overrides") or []), marker.parent, info.get("status", "started"),
              info.get("exit_code"), info.get("error", ""), info.get("host", ""))

    def fresh(path: Path) -> bool:  # written by this job, not left by an older sweep in the same folder
        return path.is_file() and path.stat().st_mtime >= float(info.get("started_s", 0)) - 2

    results, journal = job.dir / "results.json", job.dir / JOURNAL
    if fresh(results):
        try:
            data = json.loads(results.read_text(encoding="utf-8"))
            if data.get("schema_version") in READABLE_SCHEMAS:
                job.meta = {k: v for k, v in data.items() if k != "rows"}
                job.rows = data.get("rows") or []
        except (OSError, ValueError):
            pass
    elif fresh(journal):  # killed before writing results.json: the journal has every case it finished
        try:
            job.meta, frame = from_journal(journal)
            job.rows = frame.to_dict("records")
        except UsageError:
            pass
    job.partial = bool(incomplete(job.meta.get("run")))
    job.rows = [{c: r.get(c, "") for c in COLUMNS} for r in job.rows]
    return job


def remerge(sweep_dir: Path) -> int:
    """``optbench merge DIR``: merge a sweep again from its folder (after re-running a job by hand, or when
    the launching process died before the end, as a SLURM login session may); the worst job's exit code.
    The jobs expected come from the multirun.yaml Hydra wrote there."""
    sweep_dir = Path(sweep_dir)
    if not sweep_dir.is_dir() or not any(sweep_dir.rglob(JOB_FILE)):
        raise UsageError(f"{sweep_dir}: no sweep jobs there (each job of 'optbench run -m' leaves a {JOB_FILE})")
    saved = sweep_dir / "multirun.yaml"
    config = OmegaConf.load(saved) if saved.is_file() else None
    expected = _expected_jobs(config) if config is not None else None
    launcher = str(OmegaConf.select(config, "hydra.launcher._target_", default="")) if config is not None else ""
    overrides = list(OmegaConf.select(config, "hydra.overrides.task", default=[])) if config is not None else []
    return _say(merge(sweep_dir, expected, launcher, overrides))


def _merge_and_say(sweep: _Sweep) -> None:
    merged = merge(sweep.dir, sweep.expected, sweep.launcher, sweep.overrides, time.perf_counter() - sweep.started)
    sweep.exit_code = _say(merged)


def _say(merged: Merged) -> int:
    bad = [f"job {j.num} exit {j.code}" + (f" ({j.problem})" if j.problem else "") for j in merged.jobs if j.code]
    print(f"sweep: {len(merged.jobs)} job(s) merged: {merged.results} (+ results.csv)\nreport:  {merged.report}")
    name = NOTHING_VERIFIED if merged.exit_code == EXIT_NOTHING_VERIFIED else FAIL
    print("verdict:", f"{name}: {'; '.join(bad)}" if bad else verdict(r for j in merged.jobs for r in j.rows))
    return merged.exit_code


def _in_sweep(config: DictConfig) -> bool:
    from hydra.types import RunMode

    return config.hydra.mode == RunMode.MULTIRUN


def _write_job(config: DictConfig, **fields) -> None:
    """Write (or update) the job's job.json through a temporary file, never half-written."""
    path = Path(str(config.hydra.runtime.output_dir)) / JOB_FILE
    info = json.loads(path.read_text(encoding="utf-8")) if fields.get("status") != "started" and path.is_file() else {}
    info |= {"num": int(config.hydra.job.num), "overrides": list(config.hydra.overrides.task), **fields}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(info, indent=1, default=str) + "\n")


def _expected_jobs(config: DictConfig) -> list[list[str]] | None:
    """Each job's overrides by job number, for the basic sweeper (which every launcher here uses)."""
    if config.hydra.sweeper.get("_target_") != _BASIC_SWEEPER:
        return None
    params = config.hydra.sweeper.get("params") or {}
    try:
        return combinations([f"{k}={v}" for k, v in params.items()] + list(config.hydra.overrides.task))
    except Exception:
        return None


def _job_config(job: Job) -> dict:
    """The job's composed config as Hydra saved it (.hydra/config.yaml), for a job that wrote no results."""
    path = job.dir / ".hydra" / "config.yaml" if job.dir else None
    try:
        return OmegaConf.to_container(OmegaConf.load(path), resolve=False) if path and path.is_file() else {}
    except Exception:
        return {}


def _name(cfg: dict, group: str, overrides: list[str]) -> str:
    """``suite``/``device`` name of a job, from its config or else its overrides."""
    name = (cfg.get(group) or {}).get("name") if isinstance(cfg.get(group), dict) else None
    return str(name or next((o.split("=", 1)[1] for o in overrides if o.startswith(f"{group}=")), ""))
