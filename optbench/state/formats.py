"""Lossless converters between the three optimizer state_dict forms.

* torch's own: ``{"state": {id: {key: value}}, "param_groups": [{"params": [id, ...], "param_names":
  [fqn, ...], **hparams}]}``, from an optimizer built on ``model.named_parameters()`` (torch >= 2.5);
* the RFC's name-keyed form: ``{"state": {fqn: {key: value}}, "param_groups": [{"params": [fqn, ...],
  **hparams}]}``;
* the flat form of distributed checkpointing (``get_optimizer_state_dict(..., options=StateDictOptions(
  flatten_optimizer_state_dict=True))``): ``{"state.{fqn}.{key}": value, "param_groups.{fqn}.{hparam}": value}``.

Converters share values (tensors are not copied), as ``Optimizer.state_dict`` does. torch -> either form
-> torch gives back the same ids, names, hyperparameters (Tensor ones included) and state objects, for
any ``optimizer.state_dict()`` whose ids are numbered in group order (torch always numbers them so);
only the position of ``param_names`` among a group's keys may change. ``as_torch`` takes any form.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from optbench.state.names import StateDictNameError
from optbench.state.names import group_names as _group_names
from optbench.state.subclasses import context, inner_tensors, wraps_tensors

_STATE, _GROUPS = "state.", "param_groups."


def _id_names(state_dict, where: str = "state_dict") -> dict:
    """Map each parameter id of a torch-form state_dict to its name."""
    if not isinstance(state_dict, Mapping) or not {"state", "param_groups"} <= set(state_dict):
        raise StateDictNameError(f"{where} is not torch's optimizer state_dict: it needs 'state' and 'param_groups'")
    names, by_id = _group_names(state_dict["param_groups"], where), {}
    for gi, (group, group_names) in enumerate(zip(state_dict["param_groups"], names)):
        if len(group["params"]) != len(group_names):
            raise StateDictNameError(f"{where} param group {gi} has {len(group['params'])} params but "
                                     f"{len(group_names)} param_names")
        by_id.update(zip(group["params"], group_names))
    stray = [k for k in state_dict["state"] if k not in by_id]
    if stray:
        raise StateDictNameError(f"{where} has state for ids no param group lists: {stray}")
    return by_id


def same_value(a, b) -> bool:
    """Exact equality of state or hyperparameter values, Tensors included (same dtype, shape and elements;
    NaN equals NaN; a subclass wrapping tensors by its inner ones), lists, tuples and dicts element by element."""
    if wraps_tensors(a) or wraps_tensors(b):  # torchao's quantized state: by what it holds
        return (wraps_tensors(a) and wraps_tensors(b) and context(a) == context(b)
                and same_value(inner_tensors(a), inner_tensors(b)))
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype
                and a.shape == b.shape and a.device == b.device
                and bool(torch.equal(a, b) or a.is_floating_point() and torch.allclose(a, b, 0, 0, equal_nan=True)))
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, Mapping):
        return isinstance(b, Mapping) and a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def to_name_keyed(state_dict: dict) -> dict:
    """torch's form -> the RFC's: state keyed by parameter name, groups list names in ``params`` (and
    drop the now redundant ``param_names``). Raises StateDictNameError without ``param_names``."""
    names = _id_names(state_dict)
    return {
        "state": {names[i]: s for i, s in state_dict["state"].items()},
        "param_groups": [{k: ([names[i] for i in v] if k == "params" else v) for k, v in g.items()
                          if k != "param_names"} for g in state_dict["param_groups"]],
    }


def _numbered(groups: list[dict], names: list[list[str]], state_by_name: Mapping, where: str) -> dict:
    """torch's form from hyperparameter dicts, their names and per-name state: ids 0, 1, ... in group order."""
    ids: dict[str, int] = {}
    out_groups = []
    for group, group_names in zip(groups, names):
        for n in group_names:
            if n in ids:
                raise StateDictNameError(f"{where} parameter name '{n}' is in more than one place")
            ids[n] = len(ids)
        out = {k: v for k, v in group.items() if k not in ("params", "param_names")}
        if "param_names" in group and list(group["param_names"]) != list(group_names):
            raise StateDictNameError(f"{where} param group {len(out_groups)}: 'param_names' disagree with "
                                     "its parameters")
        out["param_names"] = list(group_names)
        out["params"] = [ids[n] for n in group_names]
        out_groups.append(out)
    unknown = [n for n in state_by_name if n not in ids]
    if unknown:
        raise StateDictNameError(f"{where} has state for parameters no param group lists: {', '.join(unknown)}")
    return {"state": {ids[n]: s for n, s in state_by_name.items()}, "param_groups": out_groups}


def from_name_keyed(name_keyed: dict) -> dict:
    """The RFC's name-keyed form -> torch's, with ``param_names`` and integer ids numbered in group order
    (as ``Optimizer.state_dict`` numbers them)."""
    if not isinstance(name_keyed, Mapping) or not {"state", "param_groups"} <= set(name_keyed):
        raise StateDictNameError("name-keyed state_dict needs 'state' and 'param_groups'")
    names = []
    for gi, group in enumerate(name_keyed["param_groups"]):
        bad = [p for p in group["params"] if not isinstance(p, str)]
        if bad:
            raise StateDictNameError(f"name-keyed param group {gi} lists non-name params: {bad[:3]}")
        names.append(list(group["params"]))
    return _numbered(name_keyed["param_groups"], names, name_keyed["state"], "name-keyed state_dict")


def to_flat(state_dict: dict) -> dict[str, object]:
    """torch's form -> DCP's flat form: ``state.{fqn}.{key}`` and, for every parameter of every group,
    ``param_groups.{fqn}.{hparam}`` (``param_names`` included, as DCP writes it; it is what lets
    ``from_flat`` restore the exact grouping). Equal, key for key and in order, to what
    ``get_optimizer_state_dict(model, optim, options=StateDictOptions(flatten_optimizer_state_dict=True))``
    returns for a plain module in one process, for states of tensors and numbers. Unlike DCP it keeps a
    nested-dict or list state value (LBFGS's history) whole under one key instead of flattening it (DCP
    refuses lists; a nested dict DCP flattened comes back from ``from_flat`` as dotted keys). A param
    group without parameters, or two entries that flatten to one key, raise StateDictNameError."""
    names = _id_names(state_dict)
    flat: dict[str, object] = {}
    for i, state in state_dict["state"].items():
        for key, value in state.items():
            if not isinstance(key, str):
                raise StateDictNameError(f"state key {key!r} of '{names[i]}' is not a string: the flat form "
                                         "cannot hold it")
            _put(flat, f"{_STATE}{names[i]}.{key}", value)
    for gi, group in enumerate(state_dict["param_groups"]):
        if not group["params"]:
            raise StateDictNameError(f"param group {gi} has no parameters: the flat form keeps hyperparameters "
                                     "per parameter, so it cannot hold an empty group")
        for i in group["params"]:
            for k, v in group.items():
                if k != "params":
                    _put(flat, f"{_GROUPS}{names[i]}.{k}", v)
    return flat


def _put(flat: dict, key: str, value) -> None:
    if key in flat:  # e.g. parameters 'a' and 'a.b' with state keys 'b.c' and 'c'
        raise StateDictNameError(f"two entries flatten to the same key {key!r}")
    flat[key] = value


def _template_names(template) -> list[list[str]]:
    groups = getattr(template, "param_groups", template)
    if isinstance(groups, Mapping):  # a torch-form state_dict
        groups = groups["param_groups"]
    return _group_names(list(groups), "template")


def _known_names(flat: Mapping, template) -> set[str]:
    """The parameter names the flat keys are made of: from the saved ``param_names``, else the template,
    else each ``param_groups`` key up to its last dot (hyperparameter names hold no dots)."""
    lists = [v for k, v in flat.items() if k.startswith(_GROUPS) and k.endswith(".param_names")]
    if lists:
        if not all(isinstance(names, (list, tuple)) and all(isinstance(n, str) for n in names) for names in lists):
            raise StateDictNameError("flat param_groups.{fqn}.param_names must be lists of names")
        return {n for names in lists for n in names}
    if template is not None:
        return {n for names in _template_names(template) for n in names}
    known = set()
    for key in flat:
        if key.startswith(_GROUPS):
            fqn, dot, hparam = key[len(_GROUPS):].rpartition(".")
            if not (fqn and dot and hparam):
                raise StateDictNameError(f"malformed flat key {key!r}: expected 'param_groups.{{fqn}}.{{hparam}}'")
            known.add(fqn)
    return known


def _split(key: str, prefix: str, known: set[str]) -> tuple[str, str]:
    """``prefix + fqn + "." + rest`` -> (fqn, rest) for the one known fqn that fits; dotted fqns and
    dotted state keys both split right, and a key two known names fit is refused, not guessed."""
    body = key[len(prefix):]
    fits = [(body[:i], body[i + 1:]) for i, c in enumerate(body) if c == "." and body[:i] in known and body[i + 1:]]
    if len(fits) == 1:
        return fits[0]
    if not fits:
        raise StateDictNameError(f"malformed flat key {key!r}: no known parameter name followed by '.key'")
    raise StateDictNameError(f"ambiguous flat key {key!r}: "
                             + " or ".join(f"parameter '{f}' key '{r}'" for f, r in fits))


def from_flat(flat: Mapping[str, object], template=None) -> dict:
    """DCP's flat form -> torch's. Parameter names are split off the keys using the known names (the
    saved ``param_names``, else ``template``'s), never by a naive split, so dotted names and dotted state
    keys are safe.

    Grouping, in order of preference: (1) the saved ``param_names`` of every parameter, which ``to_flat``
    and DCP always write: the exact groups, order and ids, so the round trip is lossless; (2) without
    them, ``template`` (an optimizer, its ``param_groups`` or a torch-form state_dict) supplies the groups,
    in its order; (3) with neither, parameters with identical hyperparameters form one group, groups and
    parameters in first-appearance order: two distinct groups with equal hyperparameters then merge into
    one (the only loss; optimizer steps are the same, but ``load_state_dict`` into the original optimizer
    sees another group count). Parameters of one group with differing hyperparameters raise
    StateDictNameError, as does any key that names no known parameter."""
    if not isinstance(flat, Mapping):
        raise StateDictNameError(f"flat optimizer state_dict must be a mapping, not {type(flat).__name__}")
    for key in flat:
        if not isinstance(key, str) or not key.startswith((_STATE, _GROUPS)):
            raise StateDictNameError(f"malformed flat key {key!r}: expected 'state.{{fqn}}.{{key}}' or "
                                     "'param_groups.{fqn}.{hparam}'")
    if not any(key.startswith(_GROUPS) for key in flat):
        raise StateDictNameError("flat optimizer state_dict has no 'param_groups.{fqn}.{hparam}' entries")
    known = _known_names(flat, template)
    hparams: dict[str, dict] = {}
    state: dict[str, dict] = {}
    for key, value in flat.items():
        prefix, into = (_STATE, state) if key.startswith(_STATE) else (_GROUPS, hparams)
        fqn, rest = _split(key, prefix, known)
        into.setdefault(fqn, {})[rest] = value
    order = list(hparams)
    if any("param_names" in h for h in hparams.values()):
        lacking = [n for n in order if "param_names" not in hparams[n]]
        if lacking:
            raise StateDictNameError(f"flat state_dict lacks 'param_names' for: {', '.join(lacking)}")
        groups = list({tuple(h["param_names"]): None for h in hparams.values()})
    elif template is not None:
        groups = _template_names(template)
    else:
        groups = []
        for fqn in order:
            match = next((g for g in groups if same_value(hparams[g[0]], hparams[fqn])), None)
            if match is None:
                groups.append(match := [])
            match.append(fqn)
    grouped = [n for g in groups for n in g]
    if sorted(grouped) != sorted(order):
        missing = [n for n in order if n not in grouped]
        extra = [n for n in grouped if n not in hparams]
        raise StateDictNameError("flat param groups do not cover the parameters: "
                                 + "; ".join(p for p in (missing and f"in no group: {', '.join(missing)}",
                                                         extra and f"no hyperparameters: {', '.join(extra)}") if p))
    out_groups = []
    for names in groups:
        first = hparams[names[0]]
        for n in names[1:]:
            if not same_value(hparams[n], first):
                raise StateDictNameError(f"'{names[0]}' and '{n}' share a param group but not its hyperparameters")
        out_groups.append(first)
    return _numbered(out_groups, [list(g) for g in groups], state, "flat state_dict")


def as_torch(state_dict, optimizer=None) -> dict:
    """Any of the three forms -> torch's (a torch-form dict is returned as is). ``optimizer`` serves as
    ``from_flat``'s template. Feed the result to ``load_state_dict_by_name``."""
    if isinstance(state_dict, Mapping) and {"state", "param_groups"} <= set(state_dict):
        params = [p for g in state_dict["param_groups"] for p in g.get("params", ())]
        if params and all(isinstance(p, str) for p in params):
            return from_name_keyed(state_dict)
        if all(isinstance(p, int) for p in params):
            return state_dict
        raise StateDictNameError("param groups mix integer ids and names in 'params'")
    if isinstance(state_dict, Mapping) and state_dict:
        return from_flat(state_dict, template=optimizer)
    keys = list(state_dict)[:3] if isinstance(state_dict, Mapping) else type(state_dict).__name__
    raise StateDictNameError(f"not an optimizer state_dict in torch's, the name-keyed or the flat form: {keys}")


def optimizer_from_dict(optimizer_class, params, **options):
    """Build ``optimizer_class`` from the RFC's ``Dict[str, Tensor]`` (``dict(model.named_parameters())``),
    or from a list of param-group dicts whose ``params`` is such a mapping, recording ``param_names``.

    torch 2.13 does not take a dict itself: ``AdamW(dict(model.named_parameters()))`` iterates the keys and
    raises TypeError ("optimizer can only optimize Tensors, but one of the params is str"). This passes
    the (name, tensor) pairs in the mapping's order, so the optimizer equals one built from
    ``named_parameters()``. A name in two groups raises StateDictNameError; wrong types raise TypeError."""
    single = isinstance(params, Mapping)
    groups = [{"params": params}] if single else params
    if not isinstance(groups, (list, tuple)) or not all(isinstance(g, Mapping) for g in groups):
        raise TypeError("params must be a Mapping[str, Tensor] or a list of param-group dicts")
    seen: set[str] = set()
    built = []
    for gi, group in enumerate(groups):
        named = group.get("params")
        if not isinstance(named, Mapping):
            raise TypeError(f"param group {gi}: 'params' must be a Mapping[str, Tensor], not {type(named).__name__}")
        for name, tensor in named.items():
            if not isinstance(name, str) or not isinstance(tensor, torch.Tensor):
                raise TypeError(f"param group {gi}: expected str -> Tensor, got {type(name).__name__} -> "
                                f"{type(tensor).__name__}")
            if name in seen:
                raise StateDictNameError(f"parameter name '{name}' is in more than one param group")
            seen.add(name)
        built.append({**group, "params": list(named.items())})
    return optimizer_class(built[0]["params"] if single else built, **options)
