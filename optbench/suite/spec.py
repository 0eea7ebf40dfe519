"""A suite: one optimizer, its reference, and what to check it under.

Suites are data (``suites/suite/<name>.yaml``, or a user's ``--config-dir``); this module turns the
composed config into typed objects. Hyperparameter sets list only what differs from the optimizer's
defaults (``optbench.hyperparameters`` completes them); param groups are chosen by glob patterns over
parameter names; declared deviations and error inputs are data too.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field, replace
from functools import cached_property
from types import ModuleType

import torch
from omegaconf import DictConfig, flag_override
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from optbench.hyperparameters import complete, constructor_defaults, for_torch, plain
from optbench.reference import load_reference
from optbench.reference.contract import kind_of
from optbench.suite import keys
from optbench.suite.libraries import library_deviations
from optbench.suite.schedules import validate as validate_schedule

DTYPES = {
    "float64": torch.float64,
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "complex64": torch.complex64,  # as two independent float32 parts (reference/complex.py): opt-in, in no suite's list
    "complex128": torch.complex128,
}
# The dtype of a complex dtype's real and imaginary parts: torch steps a complex parameter as those two real
# parameters (reference/complex.py), so a deviation declared for that dtype holds for the complex one too.
REAL_PARTS = {"complex64": "float32", "complex128": "float64"}
REAL_DTYPES = tuple(d for d in DTYPES if d not in REAL_PARTS)  # in the order every table lists them
PARAM_FILTERS = {"all": lambda spec: True, "2d": lambda spec: len(spec.shape) == 2}


@dataclass(frozen=True)
class GroupSpec:
    """Parameters whose names match any of ``match`` go to a group with these option overrides."""

    match: tuple[str, ...]
    options: dict


@dataclass(frozen=True)
class HparamSet:
    name: str
    options: dict  # only what differs from the defaults, in YAML form ({tensor: x} for Tensors)
    groups: tuple[GroupSpec, ...] = ()
    dtypes: tuple[str, ...] | None = None  # None: every dtype of the suite
    workload: str | None = None  # None: the suite's workload
    impls: tuple[str, ...] | None = None  # None: every implementation; else only these (see ``note``)
    note: str = ""  # why, when the set is limited to some dtypes or implementations
    schedule: dict | None = None  # an lr scheduler stepped after every step (optbench.suite.schedules)
    torch: str = ""  # the torch releases it runs on (a PEP 440 range; "": every release)

    def applies_to_torch(self, version: str | None = None) -> bool:
        """Whether this set runs on torch ``version`` (default: the one installed)."""
        if not self.torch:
            return True
        return Version(version or torch.__version__).release[:3] in _release_set(self.torch)

    def group_options(self) -> list[dict]:
        """Options of each param group (YAML form); group 0 holds everything unmatched."""
        return [dict(self.options)] + [{**self.options, **g.options} for g in self.groups]

    def option_names(self) -> set[str]:
        """Every option this set or one of its groups sets."""
        return {k for opts in self.group_options() for k in opts}

    def assign(self, names: list[str]) -> list[list[str]]:
        """Split names into param groups (first matching pattern wins; unmatched go to group 0)."""
        assigned: list[list[str]] = [[] for _ in range(len(self.groups) + 1)]
        for name in names:
            index = next(
                (i + 1 for i, g in enumerate(self.groups) if any(fnmatch.fnmatchcase(name, m) for m in g.match)),
                0,
            )
            assigned[index].append(name)
        return assigned

    def torch_groups(self, params: dict[str, torch.Tensor], order: list[str] | None = None) -> list[dict]:
        """torch param groups of (name, tensor) pairs, each with only its own overrides (the set's
        options go to the constructor, as users write it); ``order`` permutes names within groups."""
        names = order if order is not None else list(params)
        overrides = [{}] + [g.options for g in self.groups]
        return [
            {"params": [(n, params[n]) for n in group_names], **for_torch(opts)}
            for group_names, opts in zip(self.assign(names), overrides)
            if group_names
        ]

    def build(self, impl, params: dict[str, torch.Tensor], order: list[str] | None = None):
        """``impl`` built on ``params`` with this set: options as constructor arguments, groups as dicts."""
        return impl.build(self.torch_groups(params, order), for_torch(self.options))

    def reference_hp(self, names: list[str], defaults: dict, extra: dict) -> dict[str, dict]:
        """Each name's full hyperparameters as the reference sees them."""
        return {
            name: {**complete(opts, defaults), **extra}
            for group_names, opts in zip(self.assign(names), self.group_options())
            for name in group_names
        }


def _glob(value) -> str:
    return "*" if value is None else str(value)


class _Releases:
    """A PEP 440 specifier over release tuples, so "2.14.1+cu130" and "2.14.1" are one version."""

    def __init__(self, spec: str):
        self.spec = SpecifierSet(spec)

    def __contains__(self, release: tuple) -> bool:
        return self.spec.contains(".".join(map(str, release)), prereleases=True)


def _torch_range(spec) -> str:
    """A ``torch:`` range, checked now (an unreadable one is the suite file's error); "" for none."""
    if not spec:
        return ""
    _release_set(str(spec))
    return str(spec)


def _roundtrip_set(name, hparams: tuple, elsewhere: tuple) -> str:
    """``roundtrip_hparams``, or the first set; one whose torch: range leaves it out here falls back to the first."""
    if not name or str(name) in {h.name for h in elsewhere}:
        return hparams[0].name
    return str(name)


def _release_set(spec: str) -> _Releases:
    try:
        return _Releases(spec)
    except InvalidSpecifier:
        raise ValueError(f"torch: {spec!r} is not a version range (PEP 440, e.g. '<2.14' or '>=2.13,<2.15')") from None


def _torch_class_name(name) -> str | None:
    """``nearest:``: a torch.optim optimizer's class name, or None."""
    if name is None:
        return None
    cls = getattr(torch.optim, str(name), None)
    if not (isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer)):
        raise ValueError(f"nearest: {name!r} is not a torch.optim optimizer class (e.g. AdamW)")
    return str(name)


def _positive(value, key: str) -> float:
    """A positive finite number (``speed_scale:``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise ValueError(f"{key}: {value!r} is not a positive number (e.g. 0.0625 for 1/16)")
    return float(value)


@dataclass(frozen=True)
class Deviation:
    """An upstream departure from the documented algorithm, declared with its finding id.

    It applies to cases whose impl, dtype and hparams match the globs, and to tensors whose FQN and
    tensor name match. Matching tensors are judged apart: xfail while they deviate, xpass once fixed;
    past ``max_err_eps`` (if given) it is not the known deviation and fails. With ``raises`` the step
    raises on the parameters it names (fqn, size, kind): they are left out of the case's workload and
    checked alone; naming none, the whole case is expected to raise (xfail while it does). With ``exits`` the
    code under test ends the process with that status instead (a C library's ``exit()``; ``stderr``: a regex its
    last words must match): the same, the parameters checked alone in a worker whose death the parent records as
    the declared xfail (``engine.pool``).
    """

    finding: str
    reason: str
    impl: str = "*"
    dtype: str = "*"
    hparams: str = "*"
    fqn: str = "*"
    tensor: str = "*"
    raises: str | None = None
    max_err_eps: float | None = None
    size: str = "any"  # "zero": only zero-size parameters; "scalar": only 0-dim ones
    kind: str = "*"  # glob over the workload's parameter kinds (dense, frozen, noncontiguous, sometimes_none)
    intermittent: bool = False  # shows on some runs only (a rounding that may or may not flip): no xpass
    check: str = "parity"  # the check it concerns: parity (and cross), or roundtrip
    gate: str = "*"  # the parity gate it covers: trajectory, one-step, or both (docs/tolerances.md); for
    # check: roundtrip, a glob over the scenario names (optbench.state.scenarios)
    torch: str = ""  # the torch versions it is declared for (a PEP 440 specifier, "<2.14"); "": every version
    device: str = "*"  # a glob over the device type of the run it is declared for (cpu, cuda): a kernel's finding
    exits: int | None = None  # the step ends the process with this status (instead of raising)
    stderr: str = ""  # with exits: a regex the process's last words (its stderr's tail) must match

    def applies_to_torch(self, version: str | None = None) -> bool:
        """Whether the running torch (or ``version``) is in the declared range; local labels (+cpu) ignored."""
        if not self.torch:
            return True
        return Version(version or torch.__version__).release[:3] in _release_set(self.torch)

    @property
    def stops(self) -> bool:
        """The step does not complete where this declaration applies: it raises, or ends the process."""
        return bool(self.raises) or self.exits is not None

    @property
    def whole_case(self) -> bool:
        """A ``raises`` (or ``exits``) deviation that names no parameter: the case itself is expected to stop."""
        return self.stops and self.fqn == "*" and self.size == "any" and self.kind == "*"

    def ended_by(self, code: int | None, stderr: str) -> bool:
        """Whether a process that ended with ``code``, saying ``stderr`` last, is the declared ``exits``."""
        return (self.exits is not None and code == self.exits
                and (not self.stderr or re.search(self.stderr, stderr) is not None))

    def raised_by(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the declared ``raises``: that class or a subclass of it (under torch.compile,
        dynamo re-raises a RuntimeError from the step as its TorchRuntimeError, a RuntimeError)."""
        return bool(self.raises) and any(c.__name__ == self.raises for c in type(exc).__mro__)

    def matches_shape(self, shape: tuple[int, ...]) -> bool:
        if self.size == "zero":
            return 0 in shape
        return self.size != "scalar" or len(shape) == 0

    def matches_spec(self, spec) -> bool:
        """Whether a workload parameter (a ParamSpec) is one this deviation names."""
        return (fnmatch.fnmatchcase(spec.name, self.fqn) and self.matches_shape(spec.shape)
                and fnmatch.fnmatchcase(spec.kind, self.kind))

    def matches_dtype(self, dtype: str) -> bool:
        """``dtype`` matches the glob, or is complex and its parts' dtype does (complex128: float64's)."""
        return any(fnmatch.fnmatchcase(d, self.dtype) for d in (dtype, REAL_PARTS.get(dtype, dtype)))

    def covers(self, impl) -> bool:
        """Whether this declaration may describe ``impl`` (an Implementation, or a name: torch's) at all: torch's
        variants and a candidate that inherits the suite's declarations do; any other candidate only where the
        declaration names candidates (``impl: candidate:...``, a library's own finding)."""
        return getattr(impl, "inherits_deviations", True) or self.impl.startswith("candidate:")

    def matches_case(self, impl: str, dtype: str, hparams: str) -> bool:
        return self.matches_dtype(dtype) and all(fnmatch.fnmatchcase(v, p)
                                                 for v, p in ((impl, self.impl), (hparams, self.hparams)))

    def matches_scenario(self, scenario: str) -> bool:
        return fnmatch.fnmatchcase(scenario, self.gate)

    @classmethod
    def from_config(cls, c) -> Deviation:
        keys.check(c, keys.DEVIATION, "a deviation")
        if c.get("torch"):
            _release_set(str(c.torch))  # an unreadable range is the suite file's error, named now
        return cls(finding=str(c.finding), reason=" ".join(str(c.reason).split()), impl=_glob(c.get("impl")),
                   dtype=_glob(c.get("dtype")), hparams=_glob(c.get("hparams")), fqn=_glob(c.get("fqn")),
                   tensor=_glob(c.get("tensor")), raises=c.get("raises"),
                   max_err_eps=float(c.max_err_eps) if c.get("max_err_eps") is not None else None,
                   size=str(c.get("size", "any")), kind=_glob(c.get("kind")),
                   intermittent=bool(c.get("intermittent", False)), check=str(c.get("check", "parity")),
                   gate=_glob(c.get("gate")), torch=str(c.get("torch") or ""), device=_glob(c.get("device")),
                   exits=_exit_status(c), stderr=str(c.get("stderr") or ""))


def _exit_status(c) -> int | None:
    """A declaration's ``exits`` (an exit status, 1 to 255), checked with ``raises`` and ``stderr``."""
    exits, raises, stderr = c.get("exits"), c.get("raises"), c.get("stderr")
    if exits is None:
        if stderr:
            raise ValueError(f"{c.get('finding')}: stderr: is the last words of a process that exits: (none given)")
        return None
    if raises:
        raise ValueError(f"{c.get('finding')}: raises and exits together: a step either raises or ends the process")
    if not str(c.get("impl") or "").startswith("candidate:"):
        raise ValueError(f"{c.get('finding')}: exits: declared for candidates only (impl: candidate:...): torch's "
                         "variants raise")
    if all(str(c.get(k) or default) == default for k, default in (("fqn", "*"), ("size", "any"), ("kind", "*"))):
        raise ValueError(f"{c.get('finding')}: exits: name the parameters whose step ends the process (fqn, size or "
                         "kind): they are stepped alone, where the worker's end is the declared one")
    if isinstance(exits, bool) or not isinstance(exits, int) or not 1 <= exits <= 255:
        raise ValueError(f"{c.get('finding')}: exits: {exits!r} is not an exit status (1 to 255)")
    if stderr:
        re.compile(str(stderr))  # an unreadable pattern is the suite file's error, named now
    return int(exits)


_library_parsed: tuple = (None, ())


def _library_declared() -> tuple[Deviation, ...]:
    """The library files' deviations (``library_deviations``), parsed once for every suite of the process."""
    global _library_parsed
    raw = library_deviations()
    if _library_parsed[0] is not raw:
        _library_parsed = (raw, tuple(Deviation.from_config(d) for d in raw))
    return _library_parsed[1]


@dataclass(frozen=True)
class ErrorInput:
    """An invalid use torch must reject: built (or, ``at: step``, stepped) this way it must raise
    ``raises`` (or warn, for a Warning class) with a message matching ``match``."""

    desc: str
    options: dict = field(default_factory=dict)
    params: str = "default"  # a shape of params from optbench.checks.error_inputs.PARAMS
    raises: str = "ValueError"
    match: str = ""
    at: str = "construct"  # or "step" (YAML reads a key named "on" as a boolean, hence "at")
    grad: str = "dense"  # the gradients a step gets: dense or sparse
    meta: dict | None = None  # attributes set on its parameters (u-muP's mup_type); None: the suite's error_param_meta

    @classmethod
    def from_config(cls, c) -> ErrorInput:
        keys.check(c, keys.ERROR_INPUT, f"error input {c.get('desc')!r}")
        return cls(desc=str(c.desc), options=plain(c.get("options", {})) or {}, params=str(c.get("params", "default")),
                   raises=str(c.get("raises", "ValueError")), match=str(c.get("match", "")),
                   at=str(c.get("at", "construct")), grad=str(c.get("grad", "dense")),
                   meta=dict(plain(c.meta)) if c.get("meta") is not None else None)


@dataclass(frozen=True)
class Suite:
    name: str
    optimizer: str | None  # torch.optim class name or dotted path; None: only a candidate runs
    reference_name: str
    dtypes: tuple[str, ...]
    hparams: tuple[HparamSet, ...]
    roundtrip_hparams: str
    workload: str = "transformer"
    params: str = "all"  # which workload parameters the optimizer takes: all, or 2d (Muon)
    workload_sizes: dict = field(default_factory=dict)  # overrides of the run's workload width/layers/vocab
    reference_options: dict = field(default_factory=dict)  # reference-only knobs, merged into hp
    update_precision: str | None = None  # a dtype whose eps bounds each update's precision by design
    one_step_skip: tuple[str, ...] = ()  # dtypes where the one-step gate is not meaningful (see one_step_note)
    one_step_note: str = ""
    deviations: tuple[Deviation, ...] = ()
    error_inputs: tuple[ErrorInput, ...] = ()
    description: str = ""
    variants: tuple[str, ...] | None = None  # which of the optimizer's own variants run (None: all it offers)
    implementations: dict = field(default_factory=dict)  # more implementations: name -> dotted class path
    candidate_named: bool = True  # False: a candidate gets plain tensors (it cannot take named parameters)
    describes: str | None = None  # a suite without a torch optimizer: the dotted class its deviations describe
    error_param_meta: dict = field(default_factory=dict)  # attributes every error input's parameters carry
    candidates: tuple = ()  # CandidateSpecs: how third-party classes read as this suite's reference (candidates:)
    roofline: dict = field(default_factory=dict)  # a declared step cost (optbench.suite.keys.declared_cost)
    nearest: str | None = None  # a candidate-only suite: the torch.optim class its speed is set against
    speed_scale: float = 1.0  # the timing workload's size as a fraction of speed.params (a step superlinear in it)
    # declared for other torch versions (``torch:`` ranges that exclude this one): not applied, judged plainly
    deviations_elsewhere: tuple = ()
    hparams_elsewhere: tuple = ()  # hparam sets whose torch: range leaves out the installed torch

    def candidate_spec(self, dotted_path: str):
        """The suite's adapter for the class ``dotted_path`` (``candidates:``), or None; one that adapts it under
        ``also`` (``optbench.adapters.also``) as that class's."""
        if found := next((c for c in self.candidates if c.cls == dotted_path), None):
            return found
        return next((replace(c, cls=dotted_path) for c in self.candidates if c.cls in self._aliased(dotted_path)),
                    None)

    def met_in_run(self, d: Deviation, candidate: str) -> bool:
        """Whether a run whose candidate is ``candidate`` ("" for none) can meet ``d``: a declaration naming
        candidates (a library's finding) only where the run's candidate is one of them, or shares its code."""
        if not d.impl.startswith("candidate:"):
            return True
        if not candidate:
            return False
        names = [candidate, *(f"candidate:{c}" for c in self._aliased(candidate.removeprefix("candidate:")))]
        return any(fnmatch.fnmatchcase(n, d.impl) for n in names)

    def _aliased(self, dotted_path: str) -> list[str]:
        """The classes whose specs name ``dotted_path`` under ``also``: the same code under another name."""
        from optbench.adapters import also

        return [c.cls for c in self.candidates if also.named(c, dotted_path)]

    def hparam_set(self, name: str) -> HparamSet:
        return next(h for h in self.hparams if h.name == name)

    @cached_property
    def reference(self) -> ModuleType:
        return load_reference(self.reference_name)

    @property
    def closure_driven(self) -> bool:
        return kind_of(self.reference) == "closure"

    def optimizer_class(self) -> type | None:
        from optbench.implementations import optimizer_class

        return optimizer_class(self.optimizer) if self.optimizer else None

    def defaults(self, fallback_class: type | None = None, spec=None) -> dict:
        """The constructor defaults the reference completes hparam sets from: the suite's optimizer's, or in a suite
        without one ``fallback_class``'s (the candidate's), read back through its spec's renames (``spec``:
        ``eps1``, ``eps2`` as the reference's ``eps``)."""
        own = self.optimizer_class()
        cls = own or fallback_class
        found = constructor_defaults(cls) if cls is not None else {}
        return spec.as_reference(found) if own is None and spec is not None else found

    def workload_of(self, hset: HparamSet) -> str:
        return hset.workload or self.workload

    def deviations_for(self, impl, dtype: str, hparams: str, check: str = "parity") -> list[Deviation]:
        """The declared deviations that cover a case of ``impl`` (an Implementation, or a name: torch's).

        They describe the suite's optimizer class: a candidate is covered only when it inherits them
        (``Implementation.inherits_deviations``: it is, or subclasses, that class, or opted in); any other
        candidate is judged at plain tolerance, bar a deviation whose ``impl`` names candidates explicitly
        (``candidate:pytorch_optimizer.*``: a third-party library's own finding). A deviation a complex dtype
        inherits from its parts' dtype need not show there: never an xpass."""
        name = getattr(impl, "name", impl)  # a class another spec names under also: that class's declarations too
        names = [name, *(f"candidate:{c}" for c in self._aliased(name.removeprefix("candidate:")))]
        return [d if fnmatch.fnmatchcase(dtype, d.dtype) else replace(d, intermittent=True)
                for d in self.deviations if d.check == check and any(d.matches_case(n, dtype, hparams) for n in names)
                and d.covers(impl)]

    def described_by_deviations(self, cls: type) -> bool:
        """Whether ``cls`` is, or subclasses, the class this suite's deviations describe (its torch optimizer,
        or ``describes:`` for a suite without one)."""
        own = self.optimizer_class() if self.optimizer else None
        if own is not None:
            return issubclass(cls, own)
        return bool(self.describes) and any(f"{c.__module__}.{c.__qualname__}" == self.describes
                                            for c in cls.__mro__)

    def foreign(self, impl) -> bool:
        """Whether ``impl`` is a candidate of another class than the one this suite describes (nor a subclass of it):
        held to the documented algorithm, not to torch's messages, conventions or state_dicts."""
        return impl.is_candidate and not self.described_by_deviations(impl.optimizer_class)

    def on_device(self, device: str) -> Suite:
        """This suite as a run on ``device`` (a device type) declares it: deviations declared for another device
        move to ``deviations_elsewhere`` (a CPU kernel's finding is judged plainly on CUDA, and the reverse)."""
        here = tuple(d for d in self.deviations if fnmatch.fnmatchcase(device, d.device))
        return replace(self, deviations=here,
                       deviations_elsewhere=self.deviations_elsewhere + tuple(d for d in self.deviations
                                                                              if d not in here))

    def hparam_names(self, value) -> list[str]:
        """The set names ``value`` selects: ``first``, ``default`` (the first and the round-trip set) or names."""
        first = [self.hparams[0].name]
        if value == "first":
            return first
        if value == "default":
            return list(dict.fromkeys(first + [self.roundtrip_hparams]))
        return [str(v) for v in ([value] if isinstance(value, str) else value)]

    def selected(self, value) -> Suite:
        """This suite with the hparam sets ``value`` selects (``hparam_names``): the ones it has, else its first."""
        return self.restricted(hparams=self.hparam_names(value))

    def restricted(self, *, hparams: list[str] | None = None, dtypes: list[str] | None = None) -> Suite:
        """This suite with only some hparam sets (by name; unknown names ignored) and dtypes."""
        keep = tuple(h for h in self.hparams if hparams is None or h.name in hparams) or self.hparams[:1]
        roundtrip = self.roundtrip_hparams if any(h.name == self.roundtrip_hparams for h in keep) else keep[0].name
        return replace(self, hparams=keep, roundtrip_hparams=roundtrip,
                       dtypes=(tuple(d for d in self.dtypes if dtypes is None or d in dtypes)
                               or tuple(dtypes or self.dtypes)))

    @classmethod
    def from_config(cls, cfg: DictConfig) -> Suite:
        """The suite a suite file's config describes (read with struct mode off: OmegaConf raises and catches an
        exception for every absent optional key of a struct config, half the time of a run's set-up)."""
        with flag_override(cfg, "struct", False):
            return cls._from_config(cfg)

    @classmethod
    def _from_config(cls, cfg: DictConfig) -> Suite:
        from optbench.adapters.spec import CandidateSpec

        keys.check(cfg, keys.SUITE, f"suite {cfg.get('name')!r}")
        keys.check(cfg.get("one_step") or {}, keys.ONE_STEP, "one_step")
        for h in cfg.hparams:
            keys.check(h, keys.HPARAM_SET, f"hparam set {h.get('name')!r}")
            for g in h.get("groups") or ():
                keys.check(g, keys.GROUP, f"hparam set {h.get('name')!r}: a group")
        hparams = tuple(
            HparamSet(
                name=str(h.name),
                options=plain(h.get("options", {})) or {},
                groups=tuple(GroupSpec(tuple(g.match), plain(g.options)) for g in h.get("groups", [])),
                dtypes=tuple(h.dtypes) if h.get("dtypes") else None,
                workload=h.get("workload"),
                impls=tuple(h.impls) if h.get("impls") else None,
                note=" ".join(str(h.get("note", "")).split()),
                schedule=validate_schedule(plain(h.schedule)) if h.get("schedule") else None,
                torch=_torch_range(h.get("torch")),
            )
            for h in cfg.hparams
        )
        hparams_elsewhere = tuple(h for h in hparams if not h.applies_to_torch())
        hparams = tuple(h for h in hparams if h.applies_to_torch())
        if not hparams:
            raise ValueError(f"suite {cfg.name}: no hparam set runs on torch {torch.__version__} (each has a torch: "
                             "range that leaves it out)")
        # a library's own findings first: narrow (its base class's, on one tensor or scenario), they keep what they
        # cover where a suite's finding of one class covers every tensor of a set
        declared = [*_library_declared(), *(Deviation.from_config(d) for d in cfg.get("deviations") or [])]
        return cls(
            name=str(cfg.name),
            optimizer=cfg.get("optimizer"),
            reference_name=str(cfg.reference),
            dtypes=tuple(cfg.dtypes),
            hparams=hparams,
            hparams_elsewhere=hparams_elsewhere,
            roundtrip_hparams=_roundtrip_set(cfg.get("roundtrip_hparams"), hparams, hparams_elsewhere),
            workload=str(cfg.get("workload", "transformer")),
            params=str(cfg.get("params", "all")),
            workload_sizes=plain(cfg.get("workload_sizes", {})) or {},
            reference_options=plain(cfg.get("reference_options", {})) or {},
            update_precision=cfg.get("update_precision"),
            one_step_skip=tuple(cfg.get("one_step", {}).get("skip_dtypes", ())),
            one_step_note=" ".join(str(cfg.get("one_step", {}).get("note", "")).split()),
            deviations=tuple(d for d in declared if d.applies_to_torch()),
            deviations_elsewhere=tuple(d for d in declared if not d.applies_to_torch()),
            error_inputs=tuple(ErrorInput.from_config(e) for e in cfg.get("error_inputs", [])),
            description=" ".join(str(cfg.get("description", "")).split()),
            variants=tuple(cfg.variants) if cfg.get("variants") is not None else None,
            implementations={str(k): str(v) for k, v in (plain(cfg.get("implementations", {})) or {}).items()},
            candidate_named=bool(cfg.get("candidate_named", True)),
            describes=str(cfg.describes) if cfg.get("describes") else None,
            error_param_meta=plain(cfg.get("error_param_meta", {})) or {},
            candidates=tuple(CandidateSpec.from_mapping(c, f"suite {cfg.name}: candidates[{i}]")
                             for i, c in enumerate(cfg.get("candidates") or ())),
            roofline=keys.declared_cost(plain(cfg.get("roofline"))),
            nearest=_torch_class_name(cfg.get("nearest")),
            speed_scale=_positive(plain(cfg.get("speed_scale", 1.0)), "speed_scale"),
        )
