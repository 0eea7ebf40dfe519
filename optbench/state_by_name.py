"""Load an optimizer state_dict by parameter name instead of by position (PyTorch #1489).

torch >= 2.5 records ``param_groups[i]["param_names"]`` when an optimizer is built from
``named_parameters()``, but ``Optimizer.load_state_dict`` still pairs saved and current parameters
by position, so an optimizer whose parameters come in another order silently gets the wrong state
(and the saved names overwrite the right ones). ``load_state_dict_by_name`` re-keys the saved state
to the current optimizer's layout by name, then hands it to torch's own loader; ``name_aware`` makes
``optimizer.load_state_dict`` itself do so, through torch's load_state_dict pre-hook.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping

Rename = Mapping[str, str] | Callable[[str], str] | None


class StateDictNameError(KeyError):
    """A saved or current parameter name has no counterpart, or the names cannot be matched."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


def _names(groups: list[dict], where: str) -> list[list[str]]:
    names = []
    for i, group in enumerate(groups):
        if "param_names" not in group:
            raise StateDictNameError(
                f"{where} param group {i} has no 'param_names': build the optimizer from "
                "model.named_parameters() (torch >= 2.5) so its state can be matched by name"
            )
        names.append(list(group["param_names"]))
    flat = [n for group in names for n in group]
    duplicates = sorted({n for n in flat if flat.count(n) > 1})
    if duplicates:
        raise StateDictNameError(f"{where} parameter names are not unique: {', '.join(duplicates)}")
    return names


def _renamed(names: list[list[str]], rename: Rename) -> list[list[str]]:
    """Saved names as the current optimizer calls them: ``rename`` maps a saved name to its current
    one (a mapping, names it lacks unchanged, or a callable)."""
    if rename is None:
        return names
    if isinstance(rename, Mapping):
        return [[rename.get(n, n) for n in group] for group in names]
    if callable(rename):
        return [[rename(n) for n in group] for group in names]
    raise TypeError(f"rename must be a mapping or a callable, not {type(rename).__name__}")


def by_name(optimizer, state_dict: dict, *, strict: bool = True, rename: Rename = None) -> dict:
    """``state_dict`` re-keyed to ``optimizer``'s layout by name: the dict torch's positional
    ``load_state_dict`` then loads correctly (see ``load_state_dict_by_name``)."""
    saved_groups = state_dict["param_groups"]
    saved_names = _renamed(_names(saved_groups, "saved"), rename)
    flat = [n for group in saved_names for n in group]
    if len(set(flat)) != len(flat):
        raise StateDictNameError(f"rename maps two saved parameters to one name: "
                                 f"{', '.join(sorted({n for n in flat if flat.count(n) > 1}))}")
    current_names = _names(optimizer.param_groups, "optimizer")
    saved_at = {name: (gi, pi) for gi, names in enumerate(saved_names) for pi, name in enumerate(names)}
    current = {name for names in current_names for name in names}
    missing = [n for names in current_names for n in names if n not in saved_at]
    unexpected = [n for n in saved_at if n not in current]
    if strict and (missing or unexpected):
        parts = []
        if missing:
            parts.append(f"missing from the state_dict: {', '.join(missing)}")
        if unexpected:
            parts.append(f"unexpected in the state_dict: {', '.join(unexpected)}")
        raise StateDictNameError("; ".join(parts))

    new_groups, new_state, next_id = [], {}, 0
    for gi, names in enumerate(current_names):
        sources = sorted({saved_at[n][0] for n in names if n in saved_at})
        if len(sources) > 1:
            moved = [n for n in names if n in saved_at and saved_at[n][0] != sources[0]]
            raise StateDictNameError(
                f"optimizer param group {gi} mixes parameters from saved groups {sources}: {', '.join(moved)}"
            )
        template = saved_groups[sources[0]] if sources else optimizer.param_groups[gi]
        group = {k: copy.deepcopy(v) for k, v in template.items() if k not in ("params", "param_names")}
        group["params"], group["param_names"] = [], list(names)
        for name in names:
            group["params"].append(next_id)
            if name in saved_at:
                sgi, spi = saved_at[name]
                saved_id = saved_groups[sgi]["params"][spi]
                if saved_id in state_dict["state"]:
                    new_state[next_id] = state_dict["state"][saved_id]
            next_id += 1
        new_groups.append(group)
    return {"state": new_state, "param_groups": new_groups}


def load_state_dict_by_name(optimizer, state_dict: dict, *, strict: bool = True, rename: Rename = None) -> None:
    """Load ``state_dict`` into ``optimizer`` matching parameters by name, not position.

    Each current param group takes its hyperparameters from the saved group that held its
    parameters. With ``strict`` (the default) a current name missing from the save, or a saved name
    the optimizer does not have, raises StateDictNameError naming them; with ``strict=False`` such
    parameters start with fresh state and saved-only names are dropped. ``rename`` maps saved names
    to current ones: a mapping (``{"module.fc.weight": "fc.weight"}``) or a callable
    (``lambda n: n.removeprefix("_orig_mod.")``).
    """
    optimizer.load_state_dict(by_name(optimizer, state_dict, strict=strict, rename=rename))


def name_aware(optimizer, *, strict: bool = True, rename: Rename = None):
    """Make ``optimizer.load_state_dict`` match parameters by name (as ``load_state_dict_by_name``)
    through ``register_load_state_dict_pre_hook``; returns the hook's handle, whose ``.remove()``
    restores torch's positional loading."""
    _names(optimizer.param_groups, "optimizer")  # refuse an unnamed optimizer now, not at load time
    return optimizer.register_load_state_dict_pre_hook(
        lambda opt, state_dict: by_name(opt, state_dict, strict=strict, rename=rename))
