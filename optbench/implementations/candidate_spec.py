"""A candidate's adapter, written in YAML: how an optimizer from another library departs from the suite's conventions
without departing from its algorithm (docs/candidates.md, "Adapting a candidate").

A spec is a file named on the command line (``candidate=specs/lion_pytorch.yaml``, its ``class:`` naming the
optimizer) or an entry of a suite file's ``candidates:`` list, used whenever ``candidate=`` names its class. It says
which constructor argument spells each of the reference's options (``rename``: one argument; a list, over which a
sequence-valued option is spread, ``eps: [eps1, eps2]``; or ``betas[0]``, a position in a tuple argument whose other
positions ``fixed`` gives), what the constructor always gets (``fixed``: never over a hyperparameter set's own
value; a string ``torch.float32`` is that dtype, ``param.dtype`` the parameters' dtype at each build), which of the
reference's options model its fixed conventions (``conventions``: a class constant, a documented variant; given to
the reference only), which methods prepare it to step (``prepare``: schedulefree's ``train()``), how the optimizer's
state reads as the reference's (``state``: a key map, keys to leave out, where ``step`` lives, a decoder for nested
layouts) and how it rejects invalid input (``rejects``, ``error_inputs``). Without a spec a candidate is taken as
written, still built with the reference's value of every option its constructor names.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch
from omegaconf import OmegaConf

from optbench.dotted import import_dotted
from optbench.hyperparameters import plain
from optbench.state.validation import flattened

KEYS = {"class", "rename", "fixed", "conventions", "prepare", "state", "rejects", "error_inputs", "note",
        "group_schedule"}
STATE_KEYS = {"keys", "ignore", "step", "decode"}
STEP_PLACES = ("param", "group", "none")  # "group:<key>" too: the count under another name in each param group
DECODERS = ("flat", "nested")  # or the dotted path of a function: state -> flat dict
PARAM_DTYPE = "param.dtype"  # a ``fixed`` value: the dtype of the parameters the optimizer is built on
POSITION = re.compile(r"^([A-Za-z_]\w*)\[(\d+)\]$")  # rename: betas[0], a position in a tuple argument


class CandidateSpecError(ValueError):
    """A spec that cannot be used as written: one line naming the file and the key."""


def _listed(value) -> list:
    return [] if value is None else [value] if isinstance(value, str) else list(value)


def _known(mapping: Mapping, allowed: set[str], where: str) -> None:
    unknown = sorted(str(k) for k in mapping if str(k) not in allowed)
    if unknown:
        raise CandidateSpecError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")


@dataclass(frozen=True)
class CandidateSpec:
    """A candidate optimizer class and how to read it as the suite's reference (see the module docstring)."""

    cls: str
    source: str = ""  # where it was declared, for messages and the report
    rename: dict = field(default_factory=dict)  # the reference's option -> the candidate's constructor argument
    fixed: dict = field(default_factory=dict)  # constructor arguments every build gets; a hparam set's own win
    # the reference's options for this candidate's fixed conventions, which its constructor does not take (a class
    # constant, a documented variant): merged into the reference's hp, never into the candidate's constructor
    conventions: dict = field(default_factory=dict)
    prepare: tuple[str, ...] = ()  # methods called, without arguments, on every optimizer built (schedulefree: train)
    state_keys: dict = field(default_factory=dict)  # the candidate's state key -> the reference's
    ignore: tuple[str, ...] = ()  # state keys compared on neither side (after the key map)
    step: str = "param"  # where the step count lives: param, group (group:<key>), none (not kept: not compared)
    decode: str = "flat"
    rejects: tuple[str, ...] = ()  # exception class names that count as rejecting an invalid input, any message
    error_inputs: tuple[str, ...] | None = None  # globs over error inputs' descriptions that apply (None: all)
    note: str = ""  # the documented differences this spec adapts, in a sentence
    # its schedule (step, warmup, averaging weights) is per param group and advances only on step() calls where the
    # group has a gradient: loaded into other groups, its continuation is another computation (heavyball's SFAdamW)
    group_schedule: bool = False

    @property
    def adapts_state(self) -> bool:
        return bool(self.state_keys or self.ignore or self.step != "param" or self.decode != "flat")

    def skipped_state(self) -> frozenset[str]:
        """Tensor names left out of every comparison, on both sides."""
        return frozenset(self.ignore) | ({"step"} if self.step == "none" else set())

    def argument(self, option: str) -> str:
        """How the candidate's constructor spells the reference's ``option``, as text (``eps1, eps2``, ``betas[0]``)."""
        target = self.rename.get(option, option)
        return ", ".join(target) if isinstance(target, list) else target

    def arguments(self, option: str) -> list[str]:
        """The constructor arguments the reference's ``option`` goes into (a position's tuple argument by name)."""
        target = self.rename.get(option, option)
        return [POSITION.sub(r"\1", t) for t in (target if isinstance(target, list) else [target])]

    def value_in(self, option: str, arguments: Mapping, missing=None):
        """The reference's ``option`` read back from constructor ``arguments`` (a tuple for a spread, one position
        of a tuple argument), ``missing`` where an argument is absent."""
        target = self.rename.get(option, option)
        if isinstance(target, list):
            return tuple(arguments.get(t, missing) for t in target) if all(t in arguments for t in target) else missing
        if match := POSITION.match(target):
            whole = arguments.get(match.group(1), missing)
            index = int(match.group(2))
            return whole[index] if isinstance(whole, (list, tuple)) and index < len(whole) else missing
        return arguments.get(target, missing)

    def resolved(self, kwargs: Mapping, groups: list[dict]) -> dict:
        """Constructor arguments with ``param.dtype`` (a ``fixed`` value) replaced by the parameters' dtype."""
        if PARAM_DTYPE not in [v for v in kwargs.values() if isinstance(v, str)]:
            return dict(kwargs)
        listed = [g["params"].values() if isinstance(g["params"], Mapping) else g["params"] for g in groups]
        tensors = [p[1] if isinstance(p, tuple) else p for params in listed for p in params]
        tensors = [t for t in tensors if isinstance(t, torch.Tensor)]
        dtype = tensors[0].dtype if tensors else torch.get_default_dtype()
        return {k: dtype if isinstance(v, str) and v == PARAM_DTYPE else v for k, v in kwargs.items()}

    def as_reference(self, arguments: Mapping) -> dict:
        """Constructor ``arguments`` (with ``fixed`` over them) as the reference's options: each renamed option read
        back from its arguments, which it replaces; the rest as they are."""
        built, missing = {**arguments, **self.fixed}, object()
        out = dict(arguments)
        for option in self.rename:
            value = self.value_in(option, built, missing)
            for name in self.arguments(option):
                out.pop(name, None)
            if value is not missing:
                out[option] = value
        return out

    def renamed(self, options: Mapping) -> dict:
        """Options as the candidate's constructor spells them: spread over several arguments, or set into a
        position of a tuple argument whose other positions come from ``fixed``."""
        out = {}
        for option, value in options.items():
            target = self.rename.get(option, option)
            if isinstance(target, list):
                if not isinstance(value, (list, tuple)) or len(value) != len(target):
                    raise ValueError(f"{self.source}: rename: {option}={value!r} spreads over {len(target)} "
                                     f"arguments ({', '.join(target)}): need a sequence of {len(target)}")
                out.update(zip(target, value))
            elif match := POSITION.match(target):
                name, index = match.group(1), int(match.group(2))
                values = list(out.get(name, self.fixed[name]))
                values[index] = value
                out[name] = tuple(values)
            else:
                out[target] = value
        return out

    def error_input_applies(self, desc: str) -> bool:
        return self.error_inputs is None or any(fnmatch.fnmatchcase(desc, g) for g in self.error_inputs)

    def decoder(self) -> Callable[[Mapping], dict]:
        if self.decode == "flat":
            return dict
        if self.decode == "nested":
            return flattened
        return import_dotted(self.decode, what=f"{self.source}: state.decode")

    def attach(self, optimizer) -> None:
        """Prepare a just-built ``optimizer`` (``prepare``: schedulefree's ``train()``, without which it refuses to
        step) and make the harness read its state as the reference keeps it (``per_parameter_state``)."""
        for method in self.prepare:
            call = getattr(optimizer, method, None)
            if not callable(call):
                raise CandidateSpecError(f"{self.source}: prepare: {type(optimizer).__name__} has no method {method}()")
            call()
        if self.adapts_state:
            optimizer.per_parameter_state = AdaptedState(optimizer, self, self.decoder())

    @classmethod
    def from_mapping(cls, mapping: Mapping, source: str) -> CandidateSpec:
        mapping = plain(mapping) or {}
        if not isinstance(mapping, Mapping):
            raise CandidateSpecError(f"{source}: a candidate spec is a mapping, got {type(mapping).__name__}")
        _known(mapping, KEYS, source)
        if not mapping.get("class"):
            raise CandidateSpecError(f"{source}: needs class: the optimizer's dotted path, e.g. lion_pytorch.Lion")
        state = mapping.get("state") or {}
        _known(state, STATE_KEYS, f"{source}: state")
        for key in ("rename", "fixed", "conventions"):
            if not isinstance(mapping.get(key) or {}, Mapping):
                raise CandidateSpecError(f"{source}: {key} must be a mapping")
        rename = {str(k): [str(t) for t in v] if isinstance(v, (list, tuple)) else str(v)
                  for k, v in (mapping.get("rename") or {}).items()}
        fixed = {str(k): _dtype_or_value(v) for k, v in (mapping.get("fixed") or {}).items()}
        for option, target in rename.items():
            names = [POSITION.sub(r"\1", t) for t in (target if isinstance(target, list) else [target])]
            if "params" in (option, *names):
                raise CandidateSpecError(f"{source}: rename: params is the parameters, never an option to rename")
            if isinstance(target, list) and (not target or any(POSITION.match(t) for t in target)):
                raise CandidateSpecError(f"{source}: rename: {option}: a list spreads a sequence over plain "
                                         f"arguments, e.g. [eps1, eps2]")
            if isinstance(target, str) and (match := POSITION.match(target)):
                name, index = match.group(1), int(match.group(2))
                if not isinstance(fixed.get(name), (list, tuple)) or index >= len(fixed[name]):
                    raise CandidateSpecError(f"{source}: rename: {option}: {target} needs fixed: {name} (the whole "
                                             f"tuple, its other positions; at least {index + 1} long)")
        step = str(state.get("step", "param"))
        if step not in STEP_PLACES and not step.startswith("group:"):
            raise CandidateSpecError(f"{source}: state.step={step}: one of {', '.join(STEP_PLACES)} or group:<key>")
        decode = str(state.get("decode", "flat"))
        if decode not in DECODERS and "." not in decode:
            raise CandidateSpecError(f"{source}: state.decode={decode}: flat, nested or a function's dotted path")
        inputs = mapping.get("error_inputs", "all")
        return cls(cls=str(mapping["class"]), source=source, rename=rename,
                   fixed=fixed, conventions=dict(mapping.get("conventions") or {}),
                   prepare=tuple(str(m) for m in _listed(mapping.get("prepare"))),
                   state_keys={str(k): str(v) for k, v in (state.get("keys") or {}).items()},
                   ignore=tuple(str(k) for k in state.get("ignore") or ()), step=step, decode=decode,
                   rejects=tuple(str(e) for e in mapping.get("rejects") or ()),
                   error_inputs=None if inputs == "all" else () if inputs in ("none", None) else
                   tuple(str(g) for g in ([inputs] if isinstance(inputs, str) else inputs)),
                   note=" ".join(str(mapping.get("note", "")).split()),
                   group_schedule=_flag(mapping.get("group_schedule", False), f"{source}: group_schedule"))


def _flag(value, where: str) -> bool:
    if not isinstance(value, bool):
        raise CandidateSpecError(f"{where}={value!r}: true or false")
    return value


def _dtype_or_value(value):
    """A ``fixed`` value: ``torch.float32`` (a string naming a torch dtype) is that dtype, anything else itself."""
    if isinstance(value, str) and value.startswith("torch.") and isinstance(getattr(torch, value[6:], None),
                                                                             torch.dtype):
        return getattr(torch, value[6:])
    return value


def load_spec_file(path: Path) -> CandidateSpec:
    try:
        mapping = OmegaConf.load(path)
    except Exception as exc:  # YAML's own message names the line
        raise CandidateSpecError(f"{path}: not a readable candidate spec: {str(exc).splitlines()[0]}") from None
    return CandidateSpec.from_mapping(mapping, str(path))


def is_spec_file(candidate: str) -> bool:
    return candidate.endswith((".yaml", ".yml"))


class AdaptedState:
    """``per_parameter_state`` of an adapted candidate: each parameter's state decoded, its keys mapped and
    left out as the spec says, ``step`` taken from the parameter's group where the candidate keeps it there."""

    def __init__(self, optimizer, spec: CandidateSpec, decode: Callable[[Mapping], dict]):
        own = getattr(optimizer, "per_parameter_state", None)  # the class's own view first (a batched one's rows)
        self.inner = own if callable(own) else (lambda: optimizer.state)
        self.optimizer, self.spec, self.decode = optimizer, spec, decode
        self.group_step = spec.step.partition(":")[2] or "step" if spec.step.startswith("group") else None

    def __call__(self) -> dict:
        inner = self.inner()
        groups = {id(p): g for g in self.optimizer.param_groups for p in g["params"]}
        out = {}
        for param, state in inner.items():
            mapped = {self.spec.state_keys.get(str(k), str(k)): v for k, v in self.decode(state).items()}
            mapped = {k: v for k, v in mapped.items() if k not in self.spec.ignore}
            if not state:  # an entry made by reading optimizer.state[p] (schedulefree's train()): no state yet
                continue
            group = groups.get(id(param))
            if self.group_step and group is not None and self.group_step in group:
                mapped["step"] = group[self.group_step]
            out[param] = mapped
        return out
