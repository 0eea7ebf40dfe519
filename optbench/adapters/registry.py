"""The keys a candidate spec takes: each key's module registers its parser with ``@adapter_key("name")``, and
``CandidateSpec.from_mapping`` (spec.py) reads a spec by iterating them, so a library's next quirk is one new module.

A parser takes the value as written and the spec's source (for messages) and returns the value normalized, or
raises ``CandidateSpecError``, one line naming the source and the key. Optional hooks: ``fields`` (the normalized
value as ``CandidateSpec`` fields; by default the field of the key's name, else ``spec.extra[name]``), ``check``
(a rule across keys, on the built spec) and ``attach`` (run on every optimizer built from the spec).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass


class CandidateSpecError(ValueError):
    """A spec that cannot be used as written: one line naming the file and the key."""


@dataclass(frozen=True)
class AdapterKey:
    name: str
    parse: Callable[[object, str], object]  # (the value as written, the spec's source) -> the value normalized
    fields: Callable[[object], dict] | None = None  # the normalized value as CandidateSpec fields
    check: Callable[[object, str], None] | None = None  # (the built spec, its source): a rule across keys
    attach: Callable[[object, object], None] | None = None  # (spec, optimizer): on every optimizer built
    required: bool = False  # parsed (from None) when the spec leaves it out


KEYS: dict[str, AdapterKey] = {}  # by name, in registration order (attach hooks run in it)


def adapter_key(name: str, *, fields=None, check=None, attach=None, required: bool = False):
    """Register the decorated ``parse(value, source)`` as the candidate spec key ``name``."""
    def register(parse):
        if name in KEYS:
            raise ValueError(f"candidate spec key {name!r} is registered twice")
        KEYS[name] = AdapterKey(name, parse, fields, check, attach, required)
        return parse

    return register


def unregister(name: str) -> None:
    """Take the key ``name`` out of the registry (a test's own key, when it is done)."""
    del KEYS[name]


def reject_unknown(mapping: Mapping, allowed, where: str) -> None:
    """A key not in ``allowed`` is one line naming it and the allowed ones."""
    unknown = sorted(str(k) for k in mapping if str(k) not in allowed)
    if unknown:
        raise CandidateSpecError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")
