"""A candidate's adapter, written in YAML: how an optimizer from another library departs from the suite's conventions
without departing from its algorithm (docs/candidates.md, "Adapting a candidate").

A spec is a file named on the command line (``candidate=specs/lion_pytorch.yaml``, its ``class:`` naming the
optimizer) or an entry of a suite file's ``candidates:`` list, used whenever ``candidate=`` names its class. Each
of its keys is a module of this package, registered with ``registry.adapter_key`` (its docstring documents it);
``from_mapping`` reads a spec by iterating the registry. Without a spec a candidate is taken as written, still built
with the reference's value of every option its constructor names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import OmegaConf

import optbench.plugins as plugins
from optbench.adapters import (  # noqa: F401 (each registers its key)
    also,
    conventions,
    dtypes,
    error_inputs,
    fixed,
    group_hparams,
    group_options,
    group_schedule,
    held_as,
    not_taken,
    note,
    prepare,
    quantized,
    rejects,
    rename,
    sparse,
    state,
    stochastic_rounding,
)
from optbench.adapters.registry import KEYS, CandidateSpecError, adapter_key, reject_unknown
from optbench.hyperparameters import plain

plugins.load("optbench.adapters")  # other packages' keys (optbench.plugins), after the built-in ones

__all__ = ["KEYS", "CandidateSpec", "CandidateSpecError", "is_spec_file", "load_spec_file"]


@adapter_key("class", fields=lambda cls: {"cls": cls}, required=True)
def optimizer_class(value, source: str) -> str:
    """``class``: the optimizer's dotted path (required)."""
    if not value:
        raise CandidateSpecError(f"{source}: needs class: the optimizer's dotted path, e.g. lion_pytorch.Lion")
    return str(value)


@dataclass(frozen=True)
class CandidateSpec:
    """A candidate optimizer class and how to read it as the suite's reference (each field documented by its key's
    module: rename.py, fixed.py, ...)."""

    cls: str
    source: str = ""  # where it was declared, for messages and the report
    rename: dict = field(default_factory=dict)  # the reference's option -> the candidate's constructor argument
    fixed: dict = field(default_factory=dict)  # constructor arguments every build gets; a hparam set's own win
    conventions: dict = field(default_factory=dict)  # the reference's options for the class's fixed conventions
    group_options: dict = field(default_factory=dict)  # options every param group the harness builds carries
    not_taken: tuple[str, ...] = ()  # options its **kwargs keeps without acting on them: their sets unsupported
    prepare: tuple[str, ...] = ()  # methods called, without arguments, on every optimizer built
    state_keys: dict = field(default_factory=dict)  # state: keys, the candidate's state key -> the reference's
    ignore: tuple[str, ...] = ()  # state: ignore
    step: str = "param"  # state: step, where the step count lives
    decode: str = "flat"  # state: decode
    rejects: tuple[str, ...] = ()  # exception class names that count as rejecting an invalid input
    error_inputs: tuple[str, ...] | None = None  # globs over error inputs' descriptions that apply (None: all)
    note: str = ""  # the documented differences this spec adapts, in a sentence
    group_schedule: bool = False  # its schedule is per param group: round-trips that regroup are skipped
    extra: dict = field(default_factory=dict)  # a registered key without a field of its own: its value, by key

    @property
    def adapts_state(self) -> bool:
        return state.adapts(self)

    def skipped_state(self) -> frozenset[str]:
        """Tensor names left out of every comparison, on both sides."""
        return state.skipped(self)

    def argument(self, option: str) -> str:
        return rename.argument(self.rename, option)

    def arguments(self, option: str) -> list[str]:
        return rename.arguments(self.rename, option)

    def value_in(self, option: str, arguments: Mapping, missing=None):
        return rename.value_in(self.rename, option, arguments, missing)

    def as_reference(self, arguments: Mapping) -> dict:
        return rename.as_reference(self.rename, self.fixed, arguments)

    def renamed(self, options: Mapping) -> dict:
        return rename.renamed(self.rename, self.fixed, options, self.source)

    def resolved(self, kwargs: Mapping, groups: list[dict]) -> dict:
        return fixed.resolved(kwargs, groups)

    def error_input_applies(self, desc: str) -> bool:
        return error_inputs.applies(self.error_inputs, desc)

    def decoder(self) -> Callable[[Mapping], dict]:
        return state.decoder(self)

    def attach(self, optimizer) -> None:
        """Each key's ``attach`` on a just-built ``optimizer``, in registration order (``prepare``: schedulefree's
        ``train()``; ``state``: the harness reads its state as the reference keeps it)."""
        for key in KEYS.values():
            if key.attach:
                key.attach(self, optimizer)

    @classmethod
    def from_mapping(cls, mapping: Mapping, source: str) -> CandidateSpec:
        mapping = plain(mapping) or {}
        if not isinstance(mapping, Mapping):
            raise CandidateSpecError(f"{source}: a candidate spec is a mapping, got {type(mapping).__name__}")
        reject_unknown(mapping, KEYS, source)
        values = {}
        for key in sorted(KEYS.values(), key=lambda k: not k.required):  # a missing class first
            if key.name in mapping or key.required:
                parsed = key.parse(mapping.get(key.name), source)
                values.update(key.fields(parsed) if key.fields else {key.name: parsed})
        own = {f.name for f in dataclasses.fields(cls)} - {"source", "extra"}
        spec = cls(source=source, **{k: v for k, v in values.items() if k in own},
                   extra={k: v for k, v in values.items() if k not in own})
        for key in KEYS.values():
            if key.check:
                key.check(spec, source)
        return spec


def load_spec_file(path: Path) -> CandidateSpec:
    try:
        mapping = OmegaConf.load(path)
    except Exception as exc:  # YAML's own message names the line
        raise CandidateSpecError(f"{path}: not a readable candidate spec: {str(exc).splitlines()[0]}") from None
    return CandidateSpec.from_mapping(mapping, str(path))


def is_spec_file(candidate: str) -> bool:
    return candidate.endswith((".yaml", ".yml"))
