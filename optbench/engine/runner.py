"""Run suites: suite -> cases -> (reference | implementation) -> checks -> results -> report.

The runner only orchestrates: it resolves the configuration (or raises a one-line UsageError), asks
each selected check for its cases, runs cases of the same group together (so a check can read what
another left in the group's scratch), records an exception as an ``error`` row and goes on, and
writes results after every case. ``Results.verdict`` (``optbench.results.verdict``) decides the exit code.
"""

from __future__ import annotations

import logging
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
from optbench.engine.machine import machine_info
from optbench.engine.selection import (
    resolve_candidate,
    resolve_checks,
    resolve_compile_dtypes,
    resolve_compile_hparams,
    resolve_device,
    resolve_dtypes,
    resolve_implementations,
    resolve_options,
    resolve_steps,
    resolve_timing,
)
from optbench.metrics import CASE_ERROR, PARITY_MAX_ERR_EPS, RUN_CASE_S
from optbench.report import render_report
from optbench.results import SCHEMA_VERSION, Results, row
from optbench.suite.catalog import is_meta, resolve
from optbench.usage import UsageError


def _quiet_torch() -> None:
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

    def __init__(self, cfg: DictConfig, out_dir: Path, echo=print, config_dirs=()):
        if cfg.suite is None or ("reference" not in cfg.suite and not is_meta(cfg.suite)):
            raise UsageError("no suite selected: pass suite=<name> (see 'optbench list')")
        self.cfg, self.echo = cfg, echo
        self.steps, self.seed = resolve_steps(cfg)
        resolve_timing(cfg)
        suites = resolve(cfg.suite, config_dirs)
        meta = is_meta(cfg.suite)
        if meta and (cfg.candidate or cfg.get("options")):
            raise UsageError("candidate= and options= need a single-optimizer suite, "
                             f"not the meta-suite {cfg.suite.name!r}")
        self.suites = [resolve_options(cfg, s) for s in suites]
        self.device = resolve_device(cfg.device.name)
        self.checks = resolve_checks(cfg)
        candidate = resolve_candidate(cfg, self.suites[0]) if cfg.candidate else None
        self.ctx = RunContext(
            cfg=cfg, device=self.device, steps=self.steps, seed=self.seed,
            impls={s.name: resolve_implementations(cfg, s, candidate, lenient=meta) for s in self.suites},
            dtypes={s.name: resolve_dtypes(cfg, s) for s in self.suites},
            compile_dtypes=resolve_compile_dtypes(cfg), compile_hparams=resolve_compile_hparams(cfg),
            candidate=candidate)
        meta_info = {"machine": machine_info(self.device), "config": OmegaConf.to_container(cfg, resolve=True),
                     "suites": [s.name for s in self.suites]}
        self.results = Results(Path(out_dir), meta_info)

    def plan(self) -> list[tuple[object, Case]]:
        """Every (check, case) pair; per suite, cases of one group together, checks in registry order."""
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
        return out

    def run(self) -> Results:
        self.start()
        plan = self.plan()
        with _progress(len(plan)) as bar:
            echo = bar.write if not bar.disable else self.echo
            for check, case in plan:
                bar.set_description(f"{case.suite.name} {check.name} {case.impl_name} {case.dtype}".strip())
                self.run_case(check, case, echo)
                bar.update(1)
        return self.finish()

    def start(self) -> None:
        """Before the first case: torch's warnings quietened, the clock started, what runs said."""
        _quiet_torch()
        self._started, self._group = time.perf_counter(), None
        dtypes = sorted({d for ds in self.ctx.dtypes.values() for d in ds})
        names = ", ".join(s.name for s in self.suites)
        self.echo(f"optbench: {len(self.suites)} suite(s) ({names}) on {self.device}, dtypes {', '.join(dtypes)}, "
                  f"checks {', '.join(c for c in REGISTRY if c in self.checks)}")

    def run_case(self, check, case: Case, echo=None) -> list[dict]:
        """Run one planned (check, case), called in plan order (a new group clears the scratch); its rows."""
        key = (case.suite.name, check.group(case))
        if key != self._group:
            self.ctx.scratch.clear()
            self._group = key
        first = len(self.results.rows)
        self._run_one(check, case, echo or self.echo)
        return self.results.rows[first:]

    def finish(self, write: bool = True) -> Results:
        """After the last case: a candidate never silently unchecked, the wall time and (``write``)
        results.json/csv, the history copy and report.md."""
        self._never_silently_unchecked()
        self.results.meta["wall_s"] = round(time.perf_counter() - self._started, 2)
        if write:
            path = self.results.finish()
            # a history problem warns, never loses the run
            record_quietly(path, self.cfg.get("history_dir"), self.echo)
            render_report(self.results.meta | {"schema_version": SCHEMA_VERSION}, self.results.table, path.parent)
        return self.results

    def _run_one(self, check, case: Case, echo) -> None:
        threads = self.cfg.speed.get("threads") if check.name in ("speed", "scaling") else self.cfg.get("check_threads")
        started = time.perf_counter()
        try:
            with _threads(threads):
                outcome = check.run(case, self.ctx)
            rows, line = outcome.rows, outcome.line
        except Exception as exc:  # a crashing implementation is a finding, not a harness failure
            where = traceback.extract_tb(exc.__traceback__)[-1]
            message = str(exc).splitlines()[0] if str(exc) else ""
            detail = f"{check.name}: {type(exc).__name__}: {message} ({Path(where.filename).name}:{where.lineno})"
            rows = [row(case.labels, check=check.name, metric=CASE_ERROR, value=1, status="error", detail=detail)]
            line = f"  ERROR {check.name} {case.impl_name} {case.dtype} {case.labels['hparams']}: {detail}"
        if rows:  # what each case cost, so a slow suite can be read off its results
            labels = {k: rows[0][k] for k in ("suite", "optimizer", "impl", "dtype", "hparams", "device", "workload")}
            rows.append(row(labels, check=check.name, metric=RUN_CASE_S, value=time.perf_counter() - started, unit="s"))
        self.results.extend(rows)
        if line:
            echo(line)

    def _never_silently_unchecked(self) -> None:
        """A candidate the user asked to verify must have been checked by at least one parity case."""
        candidate = self.ctx.candidate
        if candidate is None or "parity" not in self.checks:
            return
        verdicts = [r for r in self.results.rows if r["impl"] == candidate.name and r["check"] == "parity"
                    and r["metric"] == PARITY_MAX_ERR_EPS and r["fqn"] == ""]
        if not verdicts:
            why = sorted({r["detail"] for r in self.results.rows if r["impl"] == candidate.name and r["status"] in
                          ("unsupported", "error", "skip")})
            labels = {"suite": self.suites[0].name, "optimizer": self.suites[0].optimizer or "", "impl": candidate.name,
                      "dtype": "", "hparams": "", "device": self.device.type}
            detail = "the candidate was not checked by any hparam set" + (f": {why[0]}" if why else "")
            self.results.extend([row(labels, check="parity", metric=CASE_ERROR, value=1, status="error",
                                     detail=detail)])
            self.echo(f"  ERROR {candidate.name}: {detail}")
