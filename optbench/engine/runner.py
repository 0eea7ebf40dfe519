"""Run suites: suite -> cases -> (reference | implementation) -> checks -> results -> report.

``SuiteRun`` only orchestrates what three parts do: the ``Planner`` resolves the configuration once (or raises a
one-line UsageError) and plans the (check, case) pairs; the plan's ``Blueprint`` (the plan as data) is cut into
units (a group of cases sharing scratch, else one case) that run in worker processes (``engine.pool``), ``jobs`` at
a time, the measuring checks (speed, memory, scaling) after the rest, one at a time, with nothing else running. A
run that checks a candidate in workers makes its plan in a worker too (``engine.remote_plan``): this process never
imports, inspects or builds the code under test, and judges a candidate's parity itself from what its worker
recorded (``engine.judge``); the ``Executor`` runs a unit's cases (in a worker, or here with ``jobs=0``); the
``RunWriter`` is the parent's one writer: each finished case to the journal (``optbench.journal``) at once,
results.json/csv and the report once at the end, interrupted or not.
``Results.verdict`` (``optbench.results.verdict``) decides the exit code.
"""

from __future__ import annotations

import signal
import sys
import time
import traceback
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from optbench.adapters.quantized import declared
from optbench.cases import Case
from optbench.engine.blueprint import Blueprint, changed_inputs
from optbench.engine.executor import Executor, quiet_torch
from optbench.engine.interrupts import Interrupted, MaxFailuresReached, sigterm_interrupts
from optbench.engine.judge import Judge
from optbench.engine.machine import machine_info
from optbench.engine.out_dir import claim
from optbench.engine.planner import Planner
from optbench.engine.pool import Pool
from optbench.engine.remote_plan import plan_in_worker
from optbench.engine.selection import candidate_spec
from optbench.engine.units import Unit, cut_into_units, longest_first, unfinished
from optbench.engine.writer import RunWriter
from optbench.implementations.candidate import defaults_warning, unchecked
from optbench.journal import Record
from optbench.results import CASE_KEY, FINISHED, STOPPED, Results
from optbench.usage import UsageError

__all__ = ["SuiteRun", "quiet_torch"]


def _progress(total: int):
    """A progress bar over cases on stderr, only when it is a terminal."""
    from tqdm import tqdm

    return tqdm(total=total, unit="case", disable=not sys.stderr.isatty(), leave=False, dynamic_ncols=True)


class SuiteRun:
    """One run of one suite (or meta-suite) on one device, writing into ``out_dir``."""

    def __init__(self, cfg: DictConfig, out_dir: Path, echo=print, config_dirs=(), probe_machine: bool = True):
        self.planner = Planner(cfg, config_dirs, with_candidate=False)
        p = self.planner
        self.echo, self.config_dirs = echo, p.config_dirs
        self.steps, self.seed, self.jobs, self.case_timeout_s = p.steps, p.seed, p.jobs, p.case_timeout_s
        self.device, self.suites, self.checks, self.ctx = p.device, p.suites, p.checks, p.ctx
        self.plan = p.plan  # the (check, case) pairs: only where the candidate is built here (jobs=0, or none)
        self.executor = Executor(self.ctx, self.seed) if self.ctx is not None else None
        meta_info = {"machine": machine_info(self.device) if probe_machine else {},
                     "config": OmegaConf.to_container(cfg, resolve=True), "suites": [s.name for s in self.suites]}
        self.results = Results(Path(out_dir), meta_info)
        self._blueprint: Blueprint | None = None
        self.writer = RunWriter(self.results, echo, p.max_failures)
        self._group = None
        self._pool: Pool | None = None  # the run's workers, started before it is planned

    @property
    def candidate_in_workers(self) -> bool:
        """Whether the code under test is imported in worker processes only (its plan made in one)."""
        return self.ctx is None

    def blueprint(self, keep: bool = False) -> Blueprint:
        """The plan as data: made here where the cases run here (jobs=0), else in a worker (``engine.remote_plan``;
        a candidate's import and build under ``case_timeout_s``: one that exits, crashes or hangs there is a one-line
        UsageError); ``keep``: kept there for the next run of this config (the command's). The candidate's
        description in results.json is the blueprint's."""
        if self._blueprint is None:
            self._blueprint = (plan_in_worker(self.results.meta["config"], self.config_dirs, self.case_timeout_s, keep)
                               if self.jobs else self.planner.blueprint())
            if self._blueprint.candidate_meta is not None:
                self.results.meta["candidate"] = self._blueprint.candidate_meta
        return self._blueprint

    def plan_fingerprint(self) -> str:
        return self.blueprint().fingerprint

    def labels_of(self, index: int) -> dict:
        return self.blueprint().labels_of(index)

    def execute(self, check, case: Case):
        return self.executor.execute(check, case)

    def reset_for_unit(self) -> None:
        self.executor.reset_for_unit()

    def run_unit(self, requests: list, fresh: bool = True, started=None):
        """One unit's requests run here (``Executor.run_unit`` over this run's plan)."""
        return self.executor.run_unit(self.plan(), requests, fresh, started)

    def run(self, resume: Record | None = None) -> Results:
        """Run the plan (``resume``: the rest of it) in worker processes; results written once, at the end."""
        lock = claim(self.results.out_dir, resume=resume is not None)
        try:
            self.start()
            if self.jobs:  # the workers import torch and plan while this process plans: their start costs no time
                self._pool = self.pool(self._init(), self.writer.record)
                # a run of measuring checks alone runs one case at a time: one worker (each imports torch, plans)
                self._pool.prestart(1 if self.planner.measuring_only() else None)
            try:
                with sigterm_interrupts():  # planning probes the implementations (a kernel may build): minutes
                    plan = self.blueprint().entries
            except Interrupted as exc:  # before any case: said in one line, never a silent death
                return self.finish(run={"status": "interrupted", "how": f"interrupted by {exc} while planning",
                                        "signal": exc.signum, "planned_cases": 0, "finished_cases": 0,
                                        "jobs": self.jobs})
            if resume is not None and resume.header.get("fingerprint") != self.plan_fingerprint():
                if changed := changed_inputs(resume.header.get("inputs") or {}, self.blueprint().inputs):
                    raise UsageError(f"{resume.path}: {', '.join(changed)} changed since the run started: resuming "
                                     "would mix rows of both; start a new run")
                raise UsageError(f"{resume.path}: this optbench plans other cases for the run's config than the run "
                                 "did (optbench, torch or a suite file changed?): it cannot be resumed")
            if warning := defaults_warning(self.results.meta.get("candidate") or {"defaults": []}):
                self.echo(warning)
            how = self._run_plan(resume)
            recorded = self.writer.by_case
            if how["status"] == FINISHED and len(recorded) < len(plan):  # never "finished" with a case unrecorded
                how = {"status": "crashed", "how": f"the harness lost {len(plan) - len(recorded)} case(s): never "
                                                   "recorded"}
            self.results.rows = [r for i in sorted(recorded) for r in recorded[i]]
            return self.finish(run=how | {"planned_cases": len(plan), "finished_cases": len(recorded),
                                          "jobs": self.jobs})
        finally:
            if self._pool is not None:
                self._pool.close()
            lock.release()

    def _run_plan(self, resume: Record | None) -> dict:
        """Run what is left of the plan, recording each case as it finishes; how the run ended."""
        plan = self.blueprint().entries
        try:
            self.writer.open(len(plan), self._journal_header() if resume is None else {}, resume)
            parallel, timing = (unfinished(units, self.writer.by_case) for units in cut_into_units(plan))
            with _progress(len(plan)) as bar, sigterm_interrupts():
                self.writer.show_on(bar)
                self._dispatch(parallel, timing)
        except KeyboardInterrupt:
            return {"status": "interrupted", "how": "interrupted by SIGINT", "signal": signal.SIGINT.value}
        except Interrupted as exc:
            return {"status": "interrupted", "how": f"interrupted by {exc}", "signal": exc.signum}
        except MaxFailuresReached as exc:
            return {"status": STOPPED, "how": str(exc)}
        except OSError as exc:  # the disk filled, the folder went away: what was measured is kept, if it can be
            return {"status": "crashed", "how": f"the harness could not write: {exc}"}
        except Exception as exc:  # a harness bug, or a worker that could not start: never a silent PASS
            log = self.results.out_dir / "crash.log"
            try:
                log.write_text(traceback.format_exc(), encoding="utf-8")
            except OSError:
                pass
            return {"status": "crashed", "how": f"the harness failed: {type(exc).__name__}: {exc} (traceback: {log})"}
        return {"status": FINISHED, "how": "finished"}

    def _journal_header(self) -> dict:
        plan = [{"check": e.check, **{k: e.labels[k] for k in CASE_KEY}} for e in self.blueprint().entries]
        return {"config": self.results.meta["config"], "config_dirs": self.config_dirs,
                "fingerprint": self.plan_fingerprint(), "inputs": self.blueprint().inputs, "meta": self.results.meta,
                "plan": plan}

    def _dispatch(self, parallel: list[Unit], timing: list[Unit]) -> None:
        repeats = int(self.planner.settings.speed.repeats or 1)
        repeated = [u for u in timing if repeats > 1 and self.blueprint().entries[u.items[0]].check == "speed"]
        timing = [u for u in timing if u not in repeated]
        if self.jobs == 0:  # in this process, no isolation: a crash or exit in the code under test ends the run
            for unit in parallel + timing:
                for index, mode, rows, line in self.run_unit(unit.requests()):
                    if mode == "run":
                        self.writer.record(index, rows, line)
            self._repeat(repeated, repeats, None)
            return
        pool = self._pool or self.pool(self._init(), self.writer.record)
        try:
            pool.run(longest_first(parallel, self.blueprint().entries))
            pool.run(timing, jobs=1)  # timing alone: no other worker runs a case meanwhile
        finally:
            pool.close()
        self._repeat(repeated, repeats, self._init())

    def _init(self) -> dict:
        """What a worker is sent first: the run's config, from which it plans the run."""
        return {"op": "init", "cfg": self.results.meta["config"], "config_dirs": self.config_dirs,
                "sys_path": list(sys.path)}

    def pool(self, init: dict, record, jobs: int | None = None) -> Pool:
        """Worker processes (``jobs``, else the run's) for this run's plan, each finished case to ``record``."""
        return Pool(jobs or self.jobs, init, self.results.out_dir / "workers", self.case_timeout_s, self.labels_of,
                    record, self.plan_fingerprint, self._judge if self.candidate_in_workers else None)

    def _judge(self, events) -> Judge:
        """The judge of the candidate's parity cases (``engine.judge``), reporting to a pool's ``events``."""
        folder = self.results.out_dir / "recordings"
        folder.mkdir(exist_ok=True)
        return Judge(self.planner, self.blueprint, str(self.planner.cfg.candidate), folder,
                     bool(self.planner.settings.parity.keep_recordings), self.case_timeout_s, events)

    def _repeat(self, units: list[Unit], repeats: int, init: dict | None) -> None:
        """The speed units ``repeats`` times (optbench.engine.repeats.run_repeated); each case recorded once."""
        if units:
            from optbench.engine.repeats import run_repeated

            run_repeated(self, units, repeats, init)

    def candidate_name(self) -> str | None:
        """The candidate's implementation name (None without one, or before the run is planned)."""
        return self._blueprint.candidate if self._blueprint is not None else None

    def start(self) -> None:
        """Before the first case: torch's warnings quietened, the clock started, what runs said."""
        quiet_torch()
        self._started, self._group = time.perf_counter(), None
        names = ", ".join(s.name for s in self.suites)
        jobs = "in this process" if self.jobs == 0 else f"{self.jobs} worker(s)"
        dtypes = sorted({d for ds in self.planner.dtypes.values() for d in ds})
        self.echo(f"optbench: {len(self.suites)} suite(s) ({names}) on {self.device}, dtypes {', '.join(dtypes)}, "
                  f"checks {', '.join(self.planner.selected_checks())}; {jobs}")
        candidate = self.planner.cfg.get("candidate")
        if candidate and "quantized" not in self.planner.selected_checks() and len(self.suites) == 1 and (
                q := declared(candidate_spec(str(candidate), self.suites[0]))):
            self.echo(f"  note: {candidate} keeps quantized state for parameters of at least {q['min_size']} "
                      "elements: parity leaves them to the quantized check, which this run does not select")

    def run_case(self, check, case: Case, echo=None) -> list[dict]:
        """Run one planned (check, case) in this process, called in plan order (a new group starts from a fresh
        unit state); its rows (the pytest gate's path)."""
        key = (case.suite.name, check.group(case))
        if key != self._group:
            self.reset_for_unit()
            self._group = key
        rows, line = self.execute(check, case)
        self.results.extend(rows)
        if line:
            (echo or self.echo)(line)
        return rows

    def finish(self, write: bool = True, run: dict | None = None) -> Results:
        """After the last case: a candidate never silently unchecked, the wall time, how the run ended (``run``)
        and (``write``) results.json/csv, the history copy (a finished run's) and report.md."""
        run = run or {"status": FINISHED, "how": "finished"}
        candidate = self.candidate_name()
        if run["status"] == FINISHED and "parity" in self.checks and candidate is not None:
            self.results.extend(unchecked(candidate, self.results.rows, self.suites[0], self.device.type, self.echo))
        self.results.meta["wall_s"] = round(time.perf_counter() - self._started, 2)
        self.results.meta["run"] = run | {"journal_writing_s": round(self.writer.writing_s, 3)}
        if not write:
            return self.results
        return self.writer.finish(run, self.planner.history_dir)  # meta["run"] as set here
