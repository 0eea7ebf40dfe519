"""``rename``: which constructor argument spells each of the reference's options. A value is one argument
(``weight_decay: wd``); a list, over which a sequence-valued option is spread (``eps: [eps1, eps2]``);
``{each: [...]}``, arguments that each take the option's whole value (``t_alpha_beta3: {each: [t_alpha, t_beta3]}``:
one warmup the library takes twice; read back only where they agree); or ``betas[0]``, one position in a tuple
argument whose other positions ``fixed`` gives whole. ``params`` is never renamed. Default ``{}``: every option by
its own name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from optbench.adapters.registry import CandidateSpecError, adapter_key

POSITION = re.compile(r"^([A-Za-z_]\w*)\[(\d+)\]$")  # betas[0], a position in a tuple argument
EACH = "each"  # {each: [a, b]}: every argument gets the option's whole value


class Each(tuple):
    """The arguments that each take an option's whole value (``{each: [...]}``)."""


def _targets(target) -> list[str]:
    return list(target) if isinstance(target, (list, Each)) else [target]


def positions_have_fixed(spec, source: str) -> None:
    """``betas[0]`` needs ``fixed: {betas: [...]}``, long enough, for the tuple's other positions."""
    for option, target in spec.rename.items():
        if isinstance(target, str) and (match := POSITION.match(target)):
            name, index = match.group(1), int(match.group(2))
            if not isinstance(spec.fixed.get(name), (list, tuple)) or index >= len(spec.fixed[name]):
                raise CandidateSpecError(f"{source}: rename: {option}: {target} needs fixed: {name} (the whole "
                                         f"tuple, its other positions; at least {index + 1} long)")


@adapter_key("rename", check=positions_have_fixed)
def parse(value, source: str) -> dict:
    if not isinstance(value or {}, Mapping):
        raise CandidateSpecError(f"{source}: rename must be a mapping")
    rename = {str(k): _target(v, f"{source}: rename: {k}") for k, v in (value or {}).items()}
    for option, target in rename.items():
        if "params" in (option, *[POSITION.sub(r"\1", t) for t in _targets(target)]):
            raise CandidateSpecError(f"{source}: rename: params is the parameters, never an option to rename")
        if isinstance(target, (list, Each)) and (not target or any(POSITION.match(t) for t in target)):
            raise CandidateSpecError(f"{source}: rename: {option}: a list spreads a sequence over plain "
                                     f"arguments, e.g. [eps1, eps2]; {{each: [a, b]}} gives each the whole value")
    return rename


def _target(value, where: str):
    if isinstance(value, Mapping):
        if set(value) != {EACH} or not isinstance(value[EACH], (list, tuple)):
            raise CandidateSpecError(f"{where}: a mapping here is {{each: [argument, ...]}}, got {dict(value)!r}")
        return Each(str(t) for t in value[EACH])
    return [str(t) for t in value] if isinstance(value, (list, tuple)) else str(value)


def argument(rename: Mapping, option: str) -> str:
    """How the candidate's constructor spells the reference's ``option``, as text (``eps1, eps2``, ``betas[0]``)."""
    return ", ".join(_targets(rename.get(option, option)))


def arguments(rename: Mapping, option: str) -> list[str]:
    """The constructor arguments the reference's ``option`` goes into (a position's tuple argument by name)."""
    return [POSITION.sub(r"\1", t) for t in _targets(rename.get(option, option))]


def value_in(rename: Mapping, option: str, given: Mapping, missing=None):
    """The reference's ``option`` read back from constructor arguments ``given`` (a tuple for a spread, one
    position of a tuple argument), ``missing`` where an argument is absent."""
    target = rename.get(option, option)
    if isinstance(target, Each):
        values = [given.get(t, missing) for t in target]
        return values[0] if all(v is not missing and v == values[0] for v in values) else missing
    if isinstance(target, list):
        return tuple(given.get(t, missing) for t in target) if all(t in given for t in target) else missing
    if match := POSITION.match(target):
        whole = given.get(match.group(1), missing)
        index = int(match.group(2))
        return whole[index] if isinstance(whole, (list, tuple)) and index < len(whole) else missing
    return given.get(target, missing)


def as_reference(rename: Mapping, fixed: Mapping, given: Mapping) -> dict:
    """Constructor arguments ``given`` (with ``fixed`` over them) as the reference's options: each renamed option
    read back from its arguments, which it replaces; the rest as they are."""
    built, missing = {**given, **fixed}, object()
    out = dict(given)
    for option in rename:
        value = value_in(rename, option, built, missing)
        for name in arguments(rename, option):
            out.pop(name, None)
        if value is not missing:
            out[option] = value
    return out


def renamed(rename: Mapping, fixed: Mapping, options: Mapping, source: str) -> dict:
    """Options as the candidate's constructor spells them: spread over several arguments, or set into a position
    of a tuple argument whose other positions come from ``fixed``."""
    out = {}
    for option, value in options.items():
        target = rename.get(option, option)
        if isinstance(target, Each):
            out.update(dict.fromkeys(target, value))
        elif isinstance(target, list):
            if not isinstance(value, (list, tuple)) or len(value) != len(target):
                raise ValueError(f"{source}: rename: {option}={value!r} spreads over {len(target)} "
                                 f"arguments ({', '.join(target)}): need a sequence of {len(target)}")
            out.update(zip(target, value))
        elif match := POSITION.match(target):
            name, index = match.group(1), int(match.group(2))
            values = list(out.get(name, fixed[name]))
            values[index] = value
            out[name] = tuple(values)
        else:
            out[target] = value
    return out
