"""Turn the run config into concrete choices (device, dtypes, steps, implementations, candidate,
ad-hoc options), or a one-line UsageError naming what is wrong and what would be right."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import torch
from omegaconf import DictConfig, ListConfig, OmegaConf

from optbench.adapters.spec import CandidateSpec, CandidateSpecError, is_spec_file, load_spec_file
from optbench.checks import REGISTRY
from optbench.checks.error_attempts import exception_class
from optbench.hyperparameters import not_taken, plain
from optbench.implementations import (
    TORCH_VARIANTS,
    CandidateError,
    Implementation,
    candidate_implementation,
    load_optimizer_class,
    master_variants,
    torch_implementations,
)
from optbench.suite.spec import DTYPES, HparamSet, Suite
from optbench.usage import UsageError, did_you_mean, say_once


def _names(value, what: str) -> list[str]:
    if value is None or value == "all":
        return []
    names = list(value) if isinstance(value, (list, tuple, ListConfig)) else [value]
    if not names:
        raise UsageError(f"{what}=[] selects nothing")
    return [str(n) for n in names]


def _int(cfg: DictConfig, key: str, minimum: int) -> int:
    value = OmegaConf.select(cfg, key)
    try:
        number = int(value)
        if number != float(value):
            raise ValueError
    except (TypeError, ValueError):
        raise UsageError(f"{key}={value}: need a whole number") from None
    if number < minimum:
        raise UsageError(f"{key}={value}: need at least {minimum}")
    return number


def resolve_checks(cfg: DictConfig) -> list[str]:
    """The checks to run, by name: each known, at least one, and each with the checks it ``requires``."""
    value = cfg.checks
    checks = [str(c) for c in (value if isinstance(value, (list, tuple, ListConfig)) else [value])]
    if not checks:
        raise UsageError(f"checks=[] selects nothing: available: {', '.join(REGISTRY)}")
    unknown = [c for c in checks if c not in REGISTRY]
    if unknown:
        raise UsageError(f"unknown check(s) {', '.join(unknown)}: available: {', '.join(REGISTRY)}")
    for name in checks:
        missing = [need for need in REGISTRY[name].requires if need not in checks]
        if missing:
            fixed = [c for c in REGISTRY if c in checks or c in missing]
            raise UsageError(f"check '{name}' needs '{missing[0]}' (it reads what {missing[0]} computes for the same "
                             f"cases): use checks=[{','.join(fixed)}]")
    return checks


def resolve_steps(cfg: DictConfig) -> tuple[int, int]:
    """(steps, seed), validated, with the workload's sizes and gradient range."""
    for key in ("workload.width", "workload.layers", "workload.vocab", "speed.width", "speed.layers", "speed.vocab"):
        if OmegaConf.select(cfg, key) is not None:
            _int(cfg, key, 1)
    ranges = {"workload.grad_log10_range": OmegaConf.select(cfg, "workload.grad_log10_range")}
    by_dtype = OmegaConf.select(cfg, "workload.grad_log10_range_by_dtype") or {}
    ranges |= {f"workload.grad_log10_range_by_dtype.{k}": v for k, v in by_dtype.items()}
    for key, value in ranges.items():
        try:
            low, high = (float(v) for v in value)
            if not low <= high:
                raise ValueError
        except (TypeError, ValueError):
            raise UsageError(f"{key}={value}: need [low, high] (log10 of the gradients' magnitudes), "
                             "low <= high") from None
    return _int(cfg, "steps", 1), _int(cfg, "seed", 0)


def resolve_device(name: str) -> torch.device:
    if name == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"device=cuda: CUDA is not available here (torch {torch.__version__}); use device=cpu")
    if name not in ("cpu", "cuda"):
        raise UsageError(f"unknown device '{name}': {did_you_mean(name, ['cpu', 'cuda'])}")
    return torch.device(name)


def resolve_dtypes(cfg: DictConfig, suite: Suite) -> list[str]:
    chosen = _names(cfg.dtype, "dtype") or list(suite.dtypes)
    for name in chosen:
        if name not in DTYPES:
            raise UsageError(f"unknown dtype '{name}': {did_you_mean(name, DTYPES)}")
    return chosen


def resolve_compile_dtypes(cfg: DictConfig) -> tuple[str, ...] | None:
    """The dtypes the compiled variant runs at (None: every dtype)."""
    value = cfg.get("compile_dtypes", "all")
    names = _names(value, "compile_dtypes")
    for name in names:
        if name not in DTYPES:
            raise UsageError(f"unknown compile_dtypes entry '{name}': {did_you_mean(name, DTYPES)}")
    return tuple(names) or None


def resolve_compile_hparams(cfg: DictConfig, suites=()) -> tuple[str, ...] | None:
    """The hparam sets the compiled variant runs (None: all; (): none, ``compile_hparams=none``); a name that is
    neither ``first``, ``default`` nor a set of one of ``suites`` is a usage error."""
    if cfg.get("compile_hparams") == "none":
        return ()
    names = _names(cfg.get("compile_hparams", "all"), "compile_hparams")
    known = list(dict.fromkeys(["all", "none", "first", "default", *(h.name for s in suites for h in s.hparams)]))
    for name in names:
        if suites and name not in known:
            raise UsageError(f"unknown compile_hparams entry '{name}': {did_you_mean(name, known)}")
    return tuple(names) or None


def _mapping(cfg: DictConfig, key: str) -> dict:
    value = plain(cfg.get(key))
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise UsageError(f"{key}= must be a mapping like {key}='{{lr: 0.05, amsgrad: true}}', got {value!r}")
    return dict(value)


def resolve_options(cfg: DictConfig, suite: Suite) -> Suite:
    """With ``options='{...}'`` the suite runs exactly that one hparam set, named ``options``."""
    options = _mapping(cfg, "options")
    if not options and cfg.get("options") is None:
        return suite
    cls = suite.optimizer_class()
    if cls is not None:
        unknown = not_taken(cls, options)
        if unknown:
            raise UsageError(f"options: {cls.__name__} takes no {', '.join(unknown)}")
        try:  # torch's own argument checks, on a throwaway parameter: options it refuses are the user's to fix
            cls([torch.zeros(2, 2, requires_grad=True)], **options)
        except (TypeError, ValueError) as exc:
            message = str(exc).splitlines()[0] if str(exc) else ""
            raise UsageError(f"options: {cls.__name__} refuses them: {type(exc).__name__}: {message}") from None
    hset = HparamSet("options", options)
    return replace(suite, hparams=(hset,), roundtrip_hparams="options")


def resolve_hparams(cfg: DictConfig, suite: Suite, lenient: bool = False) -> Suite:
    """``hparams=``: the suite's hparam sets a run takes: all, first, default (the first and the round-trip set), or a
    list of their names (one line naming the suite's sets for a name it lacks; ``lenient``, a meta-suite's members:
    the named ones each has, else its first; ``resolve_hparams_somewhere`` checks the names there)."""
    value = cfg.get("hparams", "all")
    if value is None or value == "all":
        return suite
    if cfg.get("options") is not None:
        raise UsageError("hparams= and options= both choose the hparam sets: give one of them")
    names = suite.hparam_names(value if value in ("first", "default") else _names(value, "hparams"))
    known = [h.name for h in suite.hparams]
    unknown = [n for n in names if n not in known]
    if unknown and not lenient:
        raise UsageError(f"hparams: suite {suite.name!r} has no hparam set '{unknown[0]}': "
                         f"{did_you_mean(unknown[0], known)}")
    return suite.selected(names)


def resolve_hparams_somewhere(cfg: DictConfig, suites: list[Suite]) -> None:
    """A meta-suite's ``hparams=`` names: each must be a set of at least one member (a typo is one line, never every
    member's first set in its place)."""
    value = cfg.get("hparams", "all")
    if value is None or value in ("all", "first", "default"):
        return
    known = sorted({h.name for s in suites for h in s.hparams})
    for name in _names(value, "hparams"):
        if name not in known:
            raise UsageError(f"hparams: no suite of this run has an hparam set '{name}': {did_you_mean(name, known)}")


CANDIDATE_DEVIATIONS = ("auto", "all", "none")


def candidate_spec(candidate: str, suite: Suite) -> CandidateSpec:
    """``candidate=``'s adapter: the spec file it names, else the suite's ``candidates:`` entry for the class it
    names, else none (the class taken as written)."""
    if is_spec_file(candidate):
        path = Path(candidate).expanduser()
        if not path.is_file():
            raise UsageError(f"candidate={candidate}: no such candidate spec file")
        spec = load_spec_file(path)
    else:
        spec = suite.candidate_spec(candidate) or CandidateSpec(cls=candidate, source="candidate=")
    for name in spec.rejects:  # a misspelt exception is the user's to fix before anything runs
        try:
            exception_class(name)
        except ValueError:
            raise UsageError(f"{spec.source}: rejects: {name!r} is no exception class of Python's or torch's") from None
    return spec


def resolve_candidate(cfg: DictConfig, suite: Suite) -> Implementation:
    """The candidate; the suite's declared deviations cover it (``candidate_deviations``) when it is or subclasses
    the class they describe (auto), always (all: it reproduces torch's departures on purpose) or never (none)."""
    try:
        spec = candidate_spec(str(cfg.candidate), suite)
        candidate = candidate_implementation(spec, suite.defaults(load_optimizer_class(spec.cls), spec),
                                             _mapping(cfg, "candidate_kwargs"))
    except (CandidateError, CandidateSpecError) as exc:
        raise UsageError(str(exc)) from None
    if unknown := not_taken(candidate.optimizer_class, _mapping(cfg, "candidate_kwargs") or {}):
        raise UsageError(f"candidate_kwargs: {candidate.optimizer_class.__name__} takes no {', '.join(unknown)}")
    rule = str(cfg.get("candidate_deviations", "auto"))
    if rule not in CANDIDATE_DEVIATIONS:
        raise UsageError(f"candidate_deviations={rule}: {did_you_mean(rule, CANDIDATE_DEVIATIONS)}")
    inherits = rule == "all" or (rule == "auto" and suite.described_by_deviations(candidate.optimizer_class))
    return replace(candidate, named=suite.candidate_named and candidate.named, inherits_deviations=inherits)


def suite_variants(suite: Suite) -> dict[str, Implementation]:
    """The suite's implementations by name: its optimizer's torch variants (those ``variants`` keeps) and its own
    ``implementations``; a class that cannot be loaded is a one-line UsageError."""
    try:
        cls = suite.optimizer_class()
    except (LookupError, CandidateError) as exc:
        raise UsageError(f"suite {suite.name!r}: {exc}") from None
    variants = torch_implementations(cls) if cls is not None else {}
    if suite.variants is not None:
        variants = {n: v for n, v in variants.items() if n in suite.variants}
    try:
        return variants | {name: Implementation(name, load_optimizer_class(path, what=f"suite {suite.name!r} "
                                                                                     "implementation"))
                           for name, path in suite.implementations.items()}
    except CandidateError as exc:
        raise UsageError(str(exc)) from None


def resolve_implementations(cfg: DictConfig, suite: Suite, candidate: Implementation | None,
                            lenient: bool = False) -> list[Implementation]:
    """The suite optimizer's variants (all, or ``impl=``), the candidate first if there is one
    (then only the for-loop runs beside it unless ``impl=`` says more). ``lenient`` (meta-suites)
    ignores ``impl=`` names a suite's optimizer does not offer."""
    variants = suite_variants(suite)
    cls = suite.optimizer_class()
    names = _names(cfg.impl, "impl")
    variants |= master_variants(names, variants)  # <variant>+master32: float32 master copies (opt-in)
    if candidate is None and cls is None:
        raise UsageError(f"suite {suite.name!r} has no optimizer of its own: pass candidate=my_pkg.MyOptimizer")
    if candidate is not None:
        names = [n for n in (names or list(variants)[:1]) if n != "candidate" and n in variants]
        return [candidate] + [variants[n] for n in names]
    for name in names:
        if name not in variants and not (lenient and name.removesuffix("+master32") in TORCH_VARIANTS):
            known = list(variants)
            raise UsageError(f"{cls.__name__} has no implementation '{name}': {did_you_mean(name, known)} "
                             "(any of them +master32 for float32 master copies)")
    chosen = [variants[n] for n in names if n in variants] if names else list(variants.values())
    if not chosen and not lenient:
        raise UsageError(f"impl={names} selects nothing {cls.__name__} offers")
    return chosen


def _number(cfg: DictConfig, key: str, low: float, high: float = float("inf"), value=None) -> float:
    value = OmegaConf.select(cfg, key) if value is None else value
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{key}={value}: need a number") from None
    if not low <= number <= high:
        raise UsageError(f"{key}={value}: need a number in [{low:g}, {high:g}]")
    return number


def resolve_timing(cfg: DictConfig) -> None:
    """The speed and scaling sections checked before anything runs: sizes, counts, times, edge cases."""
    from optbench.perf.case_timing import setting_names
    from optbench.workloads.speed import EDGE_CASES

    _number(cfg, "speed.params", 1)
    _int(cfg, "speed.min_rounds", 1)
    if OmegaConf.select(cfg, "speed.repeats") is not None:
        _int(cfg, "speed.repeats", 1)
    for key in ("speed.min_run_time", "speed.max_run_time", "speed.probe_run_time"):
        _number(cfg, key, 1e-6)
    if OmegaConf.select(cfg, "speed.threads") is not None:
        _int(cfg, "speed.threads", 1)
    for key, known in (("speed.edge_cases", EDGE_CASES), ("speed.dtypes", DTYPES), ("speed.edge_dtypes", DTYPES),
                       ("memory.dtypes", DTYPES)):
        for name in setting_names(OmegaConf.select(cfg, key), None) or ():  # as the speed check reads them
            if name not in known:
                raise UsageError(f"unknown {key} entry '{name}': {did_you_mean(name, known)}")
    for value in OmegaConf.select(cfg, "scaling.params") or ():
        _number(cfg, "scaling.params", 1, value=value)
    for value in OmegaConf.select(cfg, "scaling.tensor_counts") or ():
        if not isinstance(value, int) or value < 1:
            raise UsageError(f"scaling.tensor_counts entry {value!r}: need a whole number of at least 1")
    _number(cfg, "scaling.tensors_params", 1)
    _number(cfg, "scaling.memory_fraction", 1e-6, 1.0)


def resolve_report(cfg: DictConfig) -> None:
    """``report.plots``: true or false (``OPTBENCH_PLOTS`` in the environment sets its default)."""
    value = OmegaConf.select(cfg, "report.plots", default=True)
    if not isinstance(value, bool):
        raise UsageError(f"report.plots={value}: need true or false (OPTBENCH_PLOTS sets the default)")


DEFAULT_CASE_TIMEOUT_S = 900


def resolve_jobs(cfg: DictConfig) -> int:
    """``jobs``: auto (the cores this process may use), 0 (in this process: no isolation, for debugging) or N, at
    most the cores (more workers than cores only share them, each with its own copy of torch: one line says so)."""
    value = cfg.get("jobs", "auto")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if value in (None, "auto"):
        return cores
    try:
        jobs = int(value)
        if jobs != float(value) or jobs < 0:
            raise ValueError
    except (TypeError, ValueError):
        raise UsageError(f"jobs={value}: need auto, 0 (in this process) or a number of worker processes") from None
    if jobs > cores:
        say_once(f"optbench: jobs={jobs} capped at this machine's {cores} core(s)")
    return min(jobs, cores)



def resolve_max_failures(cfg: DictConfig) -> int:
    """``max_failures``: stop the run after this many failing cases (0: never)."""
    return _int(cfg, "max_failures", 0) if cfg.get("max_failures") is not None else 0


def resolve_case_timeout(cfg: DictConfig) -> float:
    value = cfg.get("case_timeout_s", DEFAULT_CASE_TIMEOUT_S)
    try:
        seconds = float(value)
        if not seconds > 0:
            raise ValueError
    except (TypeError, ValueError):
        raise UsageError(f"case_timeout_s={value}: need a number of seconds > 0") from None
    return seconds
