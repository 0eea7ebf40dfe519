"""Run suites: suite -> cases -> (reference | implementation) -> checks -> results -> report.

The runner only orchestrates: it resolves the configuration (or raises a one-line UsageError), asks
each selected check for its cases and cuts the plan into units (a group of cases sharing scratch, else one
case), which run in worker processes (``engine.pool``), ``jobs`` at a time; the timing checks (speed, memory,
scaling) run after the rest, one at a time, with nothing else running. The parent is the one writer: each
finished case goes to the journal (``optbench.journal``) at once, results.json/csv and the report once at the
end, interrupted or not. ``Results.verdict`` (``optbench.results.verdict``) decides the exit code.
"""

from __future__ import annotations

import hashlib
import json
import logging
import signal
import sys
import time
import traceback
import warnings
from contextlib import contextmanager
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from optbench.cases import Case, RunContext
from optbench.checks import REGISTRY
from optbench.engine.history import record_quietly
from optbench.engine.interrupts import Interrupted, MaxFailuresReached, sigterm_interrupts
from optbench.engine.machine import machine_info
from optbench.engine.out_dir import claim
from optbench.engine.pool import Pool
from optbench.engine.selection import (
    resolve_candidate,
    resolve_case_timeout,
    resolve_checks,
    resolve_compile_dtypes,
    resolve_compile_hparams,
    resolve_device,
    resolve_dtypes,
    resolve_hparams,
    resolve_hparams_somewhere,
    resolve_implementations,
    resolve_jobs,
    resolve_max_failures,
    resolve_options,
    resolve_report,
    resolve_steps,
    resolve_timing,
)
from optbench.engine.units import Unit, cut_into_units, longest_first, unfinished
from optbench.implementations.candidate import candidate_meta, defaults_warning
from optbench.journal import JOURNAL, Journal, Record
from optbench.metrics import CASE_ERROR, PARITY_MAX_ERR_EPS, RUN_CASE_S
from optbench.reference import ContractError
from optbench.results import CASE_KEY, FAILING, FINISHED, NO_VERDICT, SCHEMA_VERSION, STOPPED, Results, row
from optbench.suite.catalog import is_meta, resolve
from optbench.usage import UsageError


def fingerprint(plan) -> str:
    """A digest of the plan's cases in order: a worker's plan and a resumed run's must equal the run's."""
    text = json.dumps([[check.name, case.labels] for check, case in plan], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def quiet_torch() -> None:
    warnings.filterwarnings("ignore", message="Sparse invariant checks")
    # a compiled step calls the optimizer's original step, which the scheduler's call counter does not see
    warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step\\(\\)` before")
    torch._logging.set_logs(dynamo=logging.ERROR, inductor=logging.ERROR)


@contextmanager
def _threads(n: int | None):
    """Run with ``n`` intra-op threads (None: leave torch's setting), restoring it afterwards."""
    before = torch.get_num_threads()
    if n:
        torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _progress(total: int):
    """A progress bar over cases on stderr, only when it is a terminal."""
    from tqdm import tqdm

    return tqdm(total=total, unit="case", disable=not sys.stderr.isatty(), leave=False, dynamic_ncols=True)


class SuiteRun:
    """One run of one suite (or meta-suite) on one device, writing into ``out_dir``."""

    def __init__(self, cfg: DictConfig, out_dir: Path, echo=print, config_dirs=(), probe_machine: bool = True):
        if cfg.suite is None or ("reference" not in cfg.suite and not is_meta(cfg.suite)):
            raise UsageError("no suite selected: pass suite=<name> (see 'optbench list')")
        self.cfg, self.echo, self.config_dirs = cfg, echo, [str(d) for d in config_dirs]
        self.steps, self.seed = resolve_steps(cfg)
        resolve_timing(cfg)
        resolve_report(cfg)
        self.jobs, self.case_timeout_s = resolve_jobs(cfg), resolve_case_timeout(cfg)
        self.max_failures = resolve_max_failures(cfg)
        suites = resolve(cfg.suite, config_dirs)
        meta = is_meta(cfg.suite)
        if meta and (cfg.candidate or cfg.get("options")):
            raise UsageError("candidate= and options= need a single-optimizer suite, "
                             f"not the meta-suite {cfg.suite.name!r}")
        self.device = resolve_device(cfg.device.name)
        self.suites = [resolve_hparams(cfg, resolve_options(cfg, s), lenient=meta).on_device(self.device.type)
                       for s in suites]
        if meta:
            resolve_hparams_somewhere(cfg, suites)
        self.checks = resolve_checks(cfg)
        candidate = resolve_candidate(cfg, self.suites[0]) if cfg.candidate else None
        self.ctx = RunContext(
            cfg=cfg, device=self.device, steps=self.steps, seed=self.seed,
            impls={s.name: resolve_implementations(cfg, s, candidate, lenient=meta) for s in self.suites},
            dtypes={s.name: resolve_dtypes(cfg, s) for s in self.suites},
            compile_dtypes=resolve_compile_dtypes(cfg), compile_hparams=resolve_compile_hparams(cfg),
            candidate=candidate)
        meta_info = {"machine": machine_info(self.device) if probe_machine else {},
                     "config": OmegaConf.to_container(cfg, resolve=True), "suites": [s.name for s in self.suites]}
        if candidate is not None:
            defaults = self.suites[0].defaults(candidate.optimizer_class, candidate.spec)
            meta_info["candidate"] = candidate_meta(candidate, defaults)
        self.results = Results(Path(out_dir), meta_info)
        self._plan = None
        self._group = None

    def plan(self) -> list[tuple[object, Case]]:
        """Every (check, case) pair; per suite, cases of one group together, checks in registry order."""
        if self._plan is not None:
            return self._plan
        out = []
        for suite in self.suites:
            order: dict[tuple, int] = {}
            items = []
            compile_checks = self.cfg.get("compile_checks") or list(REGISTRY)
            for rank, name in enumerate(n for n in REGISTRY if n in self.checks):
                check = REGISTRY[name]
                for case in check.cases(suite, self.ctx):
                    if case.impl is not None and case.impl.compiled and name not in compile_checks:
                        continue
                    if case.impl is not None and case.impl.checks is not None and name not in case.impl.checks:
                        continue  # a variant that takes part in some checks only (implementations.master_weights)
                    items.append((order.setdefault(check.group(case), len(order)), rank, len(items), check, case))
            out += [(check, case) for *_, check, case in sorted(items, key=lambda item: item[:3])]
        self._plan = out
        return out

    def plan_fingerprint(self) -> str:
        if getattr(self, "_fingerprint", None) is None:
            self._fingerprint = fingerprint(self.plan())
        return self._fingerprint

    def labels_of(self, index: int) -> dict:
        check, case = self.plan()[index]
        return {"check": check.name, **case.labels}

    def reset_for_unit(self) -> None:
        """What a unit may see of the units before it in this process: nothing that changes a row."""
        import random

        import numpy as np

        self.ctx.scratch.clear()
        torch.manual_seed(self.seed)
        np.random.seed(self.seed % 2**32)
        random.seed(self.seed)
        if "torch._dynamo" in sys.modules:  # graphs compiled (shapes marked dynamic) by an earlier unit
            torch._dynamo.reset()

    def run_unit(self, requests: list, fresh: bool = True, started=None):
        """Run one unit's ``requests`` (``[index, "run" | "replay"]``, as ``Unit.requests`` gives them) in this
        process, from a fresh unit state unless ``fresh`` is False; yields ``(index, mode, rows, line)`` per
        request (a replay only rebuilds the scratch a later case reads: its rows are not recorded).
        ``started(index)`` is called as each case begins. The worker process and ``jobs=0`` both run units so."""
        if fresh:
            self.reset_for_unit()
        for index, mode in requests:
            if started is not None:
                started(index)
            yield (index, mode, *self.execute(*self.plan()[index]))

    def run(self, resume: Record | None = None) -> Results:
        """Run the plan (``resume``: the rest of it) in worker processes; results written once, at the end."""
        lock = claim(self.results.out_dir, resume=resume is not None)
        try:
            self.start()
            try:
                with sigterm_interrupts():  # planning probes the implementations (a kernel may build): minutes
                    plan = self.plan()
            except Interrupted as exc:  # before any case: said in one line, never a silent death
                self._by_case = {}
                return self.finish(run={"status": "interrupted", "how": f"interrupted by {exc} while planning",
                                        "signal": exc.signum, "planned_cases": 0, "finished_cases": 0,
                                        "jobs": self.jobs})
            if resume is not None and resume.header.get("fingerprint") != self.plan_fingerprint():
                raise UsageError(f"{resume.path}: this optbench plans other cases for the run's config than the run "
                                 "did (optbench, torch or a suite file changed?): it cannot be resumed")
            how = self._run_plan(resume)
            if how["status"] == FINISHED and len(self._by_case) < len(plan):  # never "finished" with a case unrecorded
                missing = len(plan) - len(self._by_case)
                how = {"status": "crashed", "how": f"the harness lost {missing} case(s): never recorded"}
            self.results.rows = [r for i in sorted(self._by_case) for r in self._by_case[i]]
            return self.finish(run=how | {"planned_cases": len(plan), "finished_cases": len(self._by_case),
                                          "jobs": self.jobs})
        finally:
            lock.release()

    def _run_plan(self, resume: Record | None) -> dict:
        """Run what is left of the plan, recording each case as it finishes; how the run ended."""
        out_dir, plan = self.results.out_dir, self.plan()
        self._by_case: dict[int, list[dict]] = {}
        self._writing_s = 0.0  # the journal's share of the run: meta.run.journal_writing_s
        self._failed = 0  # cases with a fail or error row, for max_failures
        try:
            if resume is not None:
                self._by_case.update({i: rows for i, rows in resume.cases.items() if 0 <= i < len(plan)})
                self.journal = Journal(out_dir / JOURNAL, keep=resume.lines)
            else:
                self.journal = Journal(out_dir / JOURNAL, self._journal_header())
            parallel, timing = (unfinished(units, self._by_case) for units in cut_into_units(self.plan()))
            with _progress(len(plan)) as bar, sigterm_interrupts():
                bar.update(len(self._by_case))
                self._bar = bar
                self._line = bar.write if not bar.disable else self.echo
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
            log = out_dir / "crash.log"
            try:
                log.write_text(traceback.format_exc(), encoding="utf-8")
            except OSError:
                pass
            return {"status": "crashed", "how": f"the harness failed: {type(exc).__name__}: {exc} (traceback: {log})"}
        return {"status": FINISHED, "how": "finished"}

    def _journal_header(self) -> dict:
        plan = [{"check": check.name, **{k: case.labels[k] for k in CASE_KEY}} for check, case in self.plan()]
        return {"config": self.results.meta["config"], "config_dirs": self.config_dirs,
                "fingerprint": self.plan_fingerprint(), "meta": self.results.meta, "plan": plan}

    def _record(self, index: int, rows: list[dict], line: str) -> None:
        """The one writer: a finished case's rows into the journal, then the console."""
        started = time.perf_counter()
        self.journal.case(index, rows)
        self._writing_s += time.perf_counter() - started
        self._by_case[index] = rows
        self._bar.update(1)
        if line:
            self._line(line)
        if self.max_failures and any(r["status"] in FAILING for r in rows):
            self._failed += 1
            if self._failed >= self.max_failures:
                raise MaxFailuresReached(self._failed)

    def _dispatch(self, parallel: list[Unit], timing: list[Unit]) -> None:
        repeats = int(self.cfg.speed.get("repeats") or 1)
        repeated = [u for u in timing if repeats > 1 and self.plan()[u.items[0]][0].name == "speed"]
        timing = [u for u in timing if u not in repeated]
        if self.jobs == 0:  # in this process, no isolation: a crash or exit in the code under test ends the run
            for unit in parallel + timing:
                for index, mode, rows, line in self.run_unit(unit.requests()):
                    if mode == "run":
                        self._record(index, rows, line)
            self._repeat(repeated, repeats, None)
            return
        init = {"op": "init", "cfg": self.results.meta["config"], "config_dirs": self.config_dirs,
                "out_dir": str(self.results.out_dir), "sys_path": list(sys.path)}
        pool = self._pool(init, self._record)
        try:
            pool.run(longest_first(parallel, self.plan()))
            pool.run(timing, jobs=1)  # timing alone: no other worker runs a case meanwhile
        finally:
            pool.close()
        self._repeat(repeated, repeats, init)

    def _pool(self, init: dict, record, jobs: int | None = None) -> Pool:
        return Pool(jobs or self.jobs, init, self.results.out_dir / "workers", self.case_timeout_s, self.labels_of,
                    record, self.plan_fingerprint())

    def _repeat(self, units: list[Unit], repeats: int, init: dict | None) -> None:
        """The speed units ``repeats`` times (optbench.engine.repeats.run_repeated); each case recorded once."""
        if units:
            from optbench.engine.repeats import run_repeated

            run_repeated(self, units, repeats, init)

    def start(self) -> None:
        """Before the first case: torch's warnings quietened, the clock started, what runs said."""
        quiet_torch()
        self._started, self._group = time.perf_counter(), None
        dtypes = sorted({d for ds in self.ctx.dtypes.values() for d in ds})
        names = ", ".join(s.name for s in self.suites)
        jobs = "in this process" if self.jobs == 0 else f"{self.jobs} worker(s)"
        self.echo(f"optbench: {len(self.suites)} suite(s) ({names}) on {self.device}, dtypes {', '.join(dtypes)}, "
                  f"checks {', '.join(c for c in REGISTRY if c in self.checks)}; {jobs}")
        if warning := defaults_warning(self.results.meta.get("candidate") or {"defaults": []}):
            self.echo(warning)

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
        if run["status"] == FINISHED:
            self._never_silently_unchecked()
        self.results.meta["wall_s"] = round(time.perf_counter() - self._started, 2)
        self.results.meta["run"] = run | {"journal_writing_s": round(getattr(self, "_writing_s", 0.0), 3)}
        if not write:
            return self.results
        journal = getattr(self, "journal", None)
        try:
            path = self.results.finish()
            if journal is not None:
                journal.end(run)
                journal.close()
                if run["status"] == FINISHED:
                    journal.path.unlink(missing_ok=True)  # results.json holds it all; a journal means unfinished
        except OSError as exc:
            self.echo(f"optbench: could not write the results ({exc}); every finished case is in "
                      f"{self.results.out_dir / JOURNAL}")
            self.results.meta["run"] = run | {"status": "crashed", "how": f"{run['how']}; results not written: {exc}"}
            return self.results
        from optbench.report import render_report  # here: workers never render (matplotlib is slow to import)

        if run["status"] == FINISHED:  # a history problem warns, never loses the run
            record_quietly(path, self.cfg.get("history_dir"), self.echo)
        render_report(self.results.meta | {"schema_version": SCHEMA_VERSION}, self.results.table, path.parent)
        return self.results

    def execute(self, check, case: Case) -> tuple[list[dict], str]:
        """Run one case here: its rows (an exception, ``SystemExit`` included, becomes an ``error`` row) and
        console line."""
        threads = self.cfg.speed.get("threads") if check.name in ("speed", "scaling") else self.cfg.get("check_threads")
        started = time.perf_counter()
        try:
            with _threads(threads):
                outcome = check.run(case, self.ctx)
            rows, line = outcome.rows, outcome.line
        except (Exception, SystemExit) as exc:  # a crashing implementation is a finding, not a harness failure
            where = traceback.extract_tb(exc.__traceback__)[-1]
            message = str(exc).splitlines()[0] if str(exc) else ""
            detail = (f"{check.name}: {message}" if isinstance(exc, ContractError)  # names its module: no location
                      else f"{check.name}: {type(exc).__name__}: {message} "
                           f"({Path(where.filename).name}:{where.lineno})")
            rows = [row(case.labels, check=check.name, metric=CASE_ERROR, value=1, status="error", detail=detail)]
            line = f"  ERROR {check.name} {case.impl_name} {case.dtype} {case.labels['hparams']}: {detail}"
        if rows:  # what each case cost, so a slow suite can be read off its results
            labels = {k: rows[0][k] for k in ("suite", "optimizer", "impl", "dtype", "hparams", "device", "workload")}
            rows.append(row(labels, check=check.name, metric=RUN_CASE_S, value=time.perf_counter() - started, unit="s"))
        return rows, line

    def _never_silently_unchecked(self) -> None:
        """A candidate the user asked to verify must have been checked by at least one parity case."""
        candidate = self.ctx.candidate
        if candidate is None or "parity" not in self.checks:
            return
        verdicts = [r for r in self.results.rows if r["impl"] == candidate.name and r["check"] == "parity"
                    and r["metric"] == PARITY_MAX_ERR_EPS and r["fqn"] == ""]
        if not verdicts:
            why = sorted({r["detail"] for r in self.results.rows if r["impl"] == candidate.name and r["status"] in
                          NO_VERDICT | {"error"}})
            labels = {"suite": self.suites[0].name, "optimizer": self.suites[0].optimizer or "", "impl": candidate.name,
                      "dtype": "", "hparams": "", "device": self.device.type}
            detail = "the candidate was not checked by any hparam set" + (f": {why[0]}" if why else "")
            self.results.extend([row(labels, check="parity", metric=CASE_ERROR, value=1, status="error",
                                     detail=detail)])
            self.echo(f"  ERROR {candidate.name}: {detail}")

