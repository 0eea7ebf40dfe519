"""Cases: one thing to check (suite x implementation x dtype x hyperparameter set), and the run
context checks share (the resolved choices, the workloads, a scratch space per group of cases).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from optbench.implementations import Implementation
from optbench.settings import Settings
from optbench.suite.spec import DTYPES, PARAM_FILTERS, HparamSet, Suite
from optbench.workloads import Workload, build
from optbench.workloads import speed as speed_workloads
from optbench.workloads.complex import complexify


@dataclass(frozen=True)
class Case:
    """One unit of work of one check. ``skip`` carries the reason when it cannot run here."""

    suite: Suite
    impl: Implementation | None
    dtype: str = ""
    hset: HparamSet | None = None
    device: torch.device = torch.device("cpu")
    label: str = ""  # what the hparams column shows when there is no hparam set (e.g. an error input)
    skip: str = ""
    workload: str = ""  # a timing case's workload (optbench.workloads.speed): model, an edge case, a size

    @property
    def impl_name(self) -> str:
        return self.impl.name if self.impl is not None else "torch"

    @property
    def labels(self) -> dict:
        """The columns every result row of this case carries."""
        return {"suite": self.suite.name, "optimizer": self.suite.optimizer or "", "impl": self.impl_name,
                "dtype": self.dtype, "hparams": self.hset.name if self.hset else self.label, "device": self.device.type,
                "workload": self.workload}

    @property
    def trajectory_group(self) -> tuple:
        """Cases that share a workload and so can be compared with each other."""
        return (self.suite.name, "trajectory", self.dtype, self.hset.name if self.hset else "")


@dataclass(frozen=True)
class Outcome:
    """What running one case produced: result rows and an optional console line."""

    rows: list[dict]
    line: str = ""


@dataclass(frozen=True)
class Judging:
    """A candidate's parity case judged from what its worker recorded (``engine.judge``): the recording, checked
    against the case (``numerics.recording_file.of_the_case``), and what the plan found of the candidate's class,
    which the judging process never imports (``Blueprint.judging``)."""

    recording: object  # numerics.recording.Recording
    defaults: dict  # the reference defaults its hparam sets are completed from
    foreign: bool  # another class than the suite's (``Suite.foreign``)


@dataclass
class RunContext:
    """What every check of one run shares."""

    settings: Settings  # the run config, resolved and read-only: settings.speed.params, settings.workload.width
    device: torch.device
    steps: int
    seed: int
    impls: dict[str, list[Implementation]]  # suite name -> implementations to check
    dtypes: dict[str, list[str]]  # suite name -> dtypes to check
    compile_dtypes: tuple[str, ...] | None  # None: the compiled variant runs at every dtype
    compile_hparams: tuple[str, ...] | None = ("default",)  # None: every hparam set; "default": see below
    candidate: Implementation | None = None
    candidate_name: str = ""  # the run's candidate where it is not built here (the judge's, from the plan)
    checks: tuple[str, ...] = ()  # the run's checks (a case may say what none of them judges)
    scratch: dict = field(default_factory=dict)  # per group of cases; cleared between groups
    # a case says which part of it runs now ("round-trip scenario 'reversed'"): a worker that dies names it
    progress: Callable[[str], None] = field(default=lambda what: None, repr=False)  # (no one listens: jobs=0)
    crashed: dict[str, str] = field(default_factory=dict, repr=False)  # part -> how a worker died in it before
    # a candidate's parity case in a worker writes its recording here, for the judge (``engine.judge``) ...
    recording_to: object = field(default=None, repr=False)  # a Path, or None
    judging: Judging | None = field(default=None, repr=False)  # ... which judges it from this
    _workloads: dict = field(default_factory=dict, repr=False)
    _available: dict = field(default_factory=dict, repr=False)

    @property
    def run_candidate(self) -> str:
        """The run's candidate implementation's name ("" without one), wherever this context is."""
        return self.candidate.name if self.candidate is not None else self.candidate_name

    def part(self, what: str) -> str:
        """Say the case now runs ``what`` (a worker that dies there names it); returns how a worker died in that
        part of this case before ("" if none did): the case then records the part as an error, leaves it out and
        runs its other parts (the pool ran it again in a fresh worker)."""
        self.progress(what)
        return self.crashed.get(what, "")

    def takes_part(self, impl: Implementation | None, check: str) -> bool:
        """Whether ``impl`` runs in ``check``: the compiled variant in ``compile_checks`` only, a variant that takes
        part in some checks only (``implementations.master_weights``) in those. The plan keeps only such cases, and
        a check that gathers its own (a timing set) keeps them too."""
        if impl is None:
            return True
        if impl.compiled and check not in (self.settings.compile_checks or (check,)):
            return False
        return impl.checks is None or check in impl.checks

    def unavailable(self, impl: Implementation, dtype: str) -> str:
        """Why ``impl`` cannot run at ``dtype`` on this device ("" if it can), probed once."""
        key = (impl.name, impl.optimizer_class, dtype)
        if key not in self._available:
            why = impl.available(self.device, DTYPES[dtype])
            if not why and impl.compiled and not self.runs_compiled_at(dtype):
                why = (f"the compiled variant runs at {', '.join(self.compile_dtypes)} by default "
                       "(compile_dtypes=all runs it at every dtype)")
            self._available[key] = why or ""
        return self._available[key]

    def workload(self, suite: Suite, hset: HparamSet | None, dtype: str, steps: int | None = None,
                 purpose: str = "parity") -> Workload:
        """The seeded workload an hparam set runs on, with the suite's parameter filter and without
        FQNs a declared deviation says raise (those are checked alone)."""
        name = suite.workload_of(hset) if hset is not None else suite.workload
        raising = tuple(d for d in suite.deviations if d.stops and not d.whole_case and d.check == "parity"
                        and d.matches_dtype(dtype) and suite.met_in_run(d, self.run_candidate)
                        and (hset is None or fnmatch.fnmatchcase(hset.name, d.hparams)))
        sizes = tuple(sorted(suite.workload_sizes.items())) if purpose != "speed" else ()
        return self._workload(name, dtype, steps or self.steps, purpose, suite.params, raising, sizes)

    def timing_workload(self, suite: Suite, hset: HparamSet, dtype: str, name: str = "model"):
        """What a step is timed on: the model-shaped workload ``name`` (optbench.workloads.speed) with the
        suite's parameter filter, or, for a suite whose workload is not a dense gradient stream (sparse
        gradients, a closure), its own workload at the ``speed`` sizes (``name`` must be ``model``)."""
        if suite.workload_of(hset) != "transformer":
            if name != "model":
                raise ValueError(f"the {suite.workload_of(hset)} workload has no {name} variant")
            return self.workload(suite, hset, dtype, steps=1, purpose="speed")
        size = (self.settings.scaling.tensors_params if name.startswith("tensors-") else
                self.settings.speed.params * suite.speed_scale)
        workload = speed_workloads.by_name(name, float(size), self.seed)
        return workload.restricted(PARAM_FILTERS[suite.params])

    def _workload(self, name: str, dtype: str, steps: int, purpose: str, params: str, raising: tuple,
                  sizes: tuple = ()) -> Workload:
        key = (name, dtype, steps, purpose, params, raising, sizes)
        if key not in self._workloads:
            if len(self._workloads) > 16:
                self._workloads.clear()
            self._workloads[key] = self._generate(*key)
        return self._workloads[key]

    def _generate(self, name: str, dtype: str, steps: int, purpose: str, params: str, raising: tuple,
                  suite_sizes: tuple) -> Workload:
        sizes = {**(self.settings.speed if purpose == "speed" else self.settings.workload), **dict(suite_sizes)}
        by_dtype = self.settings.workload.grad_log10_range_by_dtype
        grad_range = tuple(by_dtype.get(dtype, self.settings.workload.grad_log10_range))
        full = build(name, seed=self.seed, steps=steps, width=int(sizes["width"]), layers=int(sizes["layers"]),
                     vocab=int(sizes["vocab"]), grad_log10_range=grad_range)
        if DTYPES[dtype].is_complex:
            full = complexify(full, self.seed)
        keep = PARAM_FILTERS[params]
        return full.restricted(lambda spec: keep(spec) and not any(d.matches_spec(spec) for d in raising))

    def runs_compiled_at(self, dtype: str) -> bool:
        return self.compile_dtypes is None or dtype in self.compile_dtypes

    def compiled_hparams(self, suite: Suite) -> list[str] | None:
        """The hparam sets the compiled variant runs (None: all). ``first`` stands for the suite's first
        set, ``default`` for it and the round-trip set (usually the one with several param groups)."""
        if self.compile_hparams is None:
            return None
        names = []
        for name in self.compile_hparams:
            names += ([suite.hparams[0].name, suite.roundtrip_hparams] if name == "default"
                      else [suite.hparams[0].name] if name == "first" else [name])
        return list(dict.fromkeys(names))
