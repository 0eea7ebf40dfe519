"""A run's plan: the run config resolved once (or a one-line UsageError), and every (check, case) pair in order.

``Planner`` reads the composed config once, through ``engine.selection``: suites (their hparam sets, options and
device-scoped declarations), device, checks, steps and seed, jobs and timeouts, and every block of settings
(``optbench.settings``); then, unless ``with_candidate`` is false, the candidate, implementations and dtypes, into
the ``RunContext`` the checks read (never the raw config). ``plan()`` asks each selected check for its cases: per
suite, cases of one group together, checks in registry order; ``blueprint()`` is the plan as data
(``engine.blueprint``), whose fingerprint a worker's and a resumed run's plan must match. A parent process
whose cases run in workers takes the blueprint from a worker (``engine.remote_plan``); one that checks a candidate
there builds its Planner ``with_candidate=False``: it never imports the code under test.
"""

from __future__ import annotations

import sys
from pathlib import Path

from omegaconf import DictConfig, open_dict

from optbench.cases import Case, RunContext
from optbench.checks import REGISTRY
from optbench.checks.forms import form_facts
from optbench.checks.registry import alone_checks, check_blocks
from optbench.engine.blueprint import Blueprint, Entry, digest, fingerprint, group_key
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
from optbench.hyperparameters import as_data
from optbench.implementations.candidate import candidate_meta
from optbench.reference import load_reference
from optbench.settings import Settings
from optbench.suite.catalog import is_meta, replaced, resolve, suite_files
from optbench.usage import UsageError


class Planner:
    """The run config, resolved once into what the run needs, and the plan of (check, case) pairs."""

    def __init__(self, cfg: DictConfig, config_dirs=(), with_candidate: bool = True):
        if cfg.suite is None or ("reference" not in cfg.suite and not is_meta(cfg.suite)):
            raise UsageError("no suite selected: pass suite=<name> (see 'optbench list')")
        self.cfg, self.config_dirs = cfg, [str(d) for d in config_dirs]
        if (mine := replaced(cfg.suite, config_dirs)) is not cfg.suite:  # the run records the suite it runs
            with open_dict(cfg):
                cfg.suite = mine
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
        self.dtypes = {s.name: resolve_dtypes(cfg, s) for s in self.suites}
        self.settings = Settings.of(cfg, check_blocks())
        history = cfg.get("history_dir")
        self.history_dir = str(history) if history else None
        self._plan: list | None = None
        self._blueprint: Blueprint | None = None
        self.ctx: RunContext | None = None
        if with_candidate or not cfg.candidate or self.jobs == 0:  # jobs=0: the cases run here
            self._context(cfg, meta)

    def _context(self, cfg: DictConfig, meta: bool) -> None:
        """The candidate (imported and built here), the implementations and dtypes: the checks' RunContext."""
        candidate = resolve_candidate(cfg, self.suites[0]) if cfg.candidate else None
        self.ctx = RunContext(
            settings=self.settings, device=self.device, steps=self.steps, seed=self.seed,
            impls={s.name: resolve_implementations(cfg, s, candidate, lenient=meta) for s in self.suites},
            dtypes=self.dtypes,
            compile_dtypes=resolve_compile_dtypes(cfg), compile_hparams=resolve_compile_hparams(cfg, self.suites),
            candidate=candidate, checks=tuple(self.selected_checks()))

    def plan(self) -> list[tuple[object, Case]]:
        """Every (check, case) pair; per suite, cases of one group together, checks in registry order."""
        if self._plan is not None:
            return self._plan
        if self.ctx is None:
            raise RuntimeError("this Planner was built without the candidate: its plan is made in a worker")
        out = []
        for suite in self.suites:
            order: dict[tuple, int] = {}
            items = []
            for rank, name in enumerate(n for n in REGISTRY if n in self.checks):
                check = REGISTRY[name]
                for case in check.cases(suite, self.ctx):
                    if not self.ctx.takes_part(case.impl, name):
                        continue
                    items.append((order.setdefault(check.group(case), len(order)), rank, len(items), check, case))
            out += [(check, case) for *_, check, case in sorted(items, key=lambda item: item[:3])]
        self._plan = out
        return out

    def blueprint(self) -> Blueprint:
        """The plan as data, with the candidate's description (``implementations.candidate.candidate_meta``)."""
        if self._blueprint is None:
            entries = tuple(Entry(check.name, case.labels, group_key(case.suite.name, check.group(case)),
                                  bool(getattr(case.impl, "compiled", False))) for check, case in self.plan())
            candidate, meta, judging, suite = self.ctx.candidate, None, None, self.suites[0]
            if candidate is not None:
                defaults = suite.defaults(candidate.optimizer_class, candidate.spec)
                meta = candidate_meta(candidate, defaults)
                judging = {"defaults": {k: as_data(v) for k, v in defaults.items()},
                           "foreign": suite.foreign(candidate), "inherits_deviations": candidate.inherits_deviations,
                           "named": candidate.named, "forms": form_facts(suite, candidate.optimizer_class)}
            name, inputs = candidate.name if candidate is not None else None, self.inputs()
            self._blueprint = Blueprint(entries, fingerprint(entries, inputs), name, meta, inputs, judging)
        return self._blueprint

    def inputs(self) -> dict[str, str]:
        """What the plan read from files, by name, each a digest of its content: a meta-suite's member suite files
        (a single suite's content is in the run's config), each suite's reference module, the candidate's module
        and spec files."""
        out = {}
        files = suite_files(self.config_dirs) if is_meta(self.cfg.suite) else {}
        for suite in self.suites:
            if suite.name in files:
                out[f"suite file {files[suite.name]}"] = digest(files[suite.name].read_bytes())
            out[f"reference {suite.reference_name}"] = _file_digest(getattr(load_reference(suite.reference_name),
                                                                             "__file__", None))
        candidate = self.ctx.candidate if self.ctx is not None else None
        if candidate is not None:
            module = sys.modules.get(candidate.optimizer_class.__module__)
            out[f"candidate module {candidate.optimizer_class.__module__}"] = _file_digest(getattr(module, "__file__",
                                                                                                    None))
            if candidate.spec is not None and candidate.spec.source and Path(candidate.spec.source).is_file():
                out[f"candidate spec {candidate.spec.source}"] = _file_digest(candidate.spec.source)
        return out

    def selected_checks(self) -> list[str]:
        """The run's checks, in registry order."""
        return [c for c in REGISTRY if c in self.checks]

    def measuring_only(self) -> bool:
        """Whether every check of the run measures (speed, memory, scaling): its cases then run one at a time."""
        return set(self.selected_checks()) <= set(alone_checks())


def _file_digest(path) -> str:
    """The digest of a file's bytes ("" where there is no file: a built-in or a namespace module)."""
    try:
        return digest(Path(path).read_bytes()) if path else ""
    except OSError:
        return ""
