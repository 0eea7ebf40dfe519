"""Load an optimizer state_dict by parameter name instead of by position (PyTorch #1489).

torch >= 2.5 records ``param_groups[i]["param_names"]`` when an optimizer is built from
``named_parameters()``, but ``Optimizer.load_state_dict`` still pairs saved and current parameters
by position, so an optimizer whose parameters come in another order silently gets the wrong state
(and the saved names overwrite the right ones). ``load_state_dict_by_name`` re-keys the saved state
to the current optimizer's layout by name, then hands it to torch's own loader; ``name_aware`` makes
``optimizer.load_state_dict`` itself do so, through torch's load_state_dict pre-hook. A batched
optimizer's stacked state (``optbench.state.batched``) is re-stacked row by row by name.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Mapping

import torch

from optbench.hyperparameters import IMPLEMENTATION_FLAGS
from optbench.state.batched import BATCH_NAMES, group_bookkeeping, is_batched, relaid, stacks
from optbench.state.formats import as_torch, same_value
from optbench.state.names import StateDictNameError, group_names
from optbench.state.subclasses import wraps_tensors
from optbench.state.validation import refuse_foreign, state_checker, transactional_load, trial_load
from optbench.state.validation import shape_mismatch as shape_mismatch  # the rule, for optbench.state.positional

Rename = Mapping[str, str] | Callable[[str], str] | None


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


def group_state(optimizer, groups: list[dict]) -> dict:
    """The state ``groups`` (saved param groups) keep as a group's, not as options: keys the optimizer's
    constructor does not take (pytorch-optimizer's per-group ``step``, schedulefree's ``k`` and ``weight_sum``, an
    LR scheduler's ``initial_lr``), each with the value every group holding it agrees on. A key the groups disagree
    on maps to ``DISAGREE``: there is no one value for a parameter moved between them to continue from (a value of
    None is a value: heavyball keeps ``step: None`` in its groups)."""
    taken = _constructor_arguments(type(optimizer))
    out: dict = {}
    for group in groups:
        for key, value in group.items():
            if key in taken or key in ("params", "param_names"):
                continue
            if key not in out:
                out[key] = copy.deepcopy(value)
            elif out[key] is not DISAGREE and not _same(out[key], value):
                out[key] = DISAGREE
    return out


DISAGREE = object()  # group_state's value for a key the saved groups disagree on


def _constructor_arguments(cls: type) -> set[str]:
    """The named arguments ``cls`` is built with: its ``__init__``'s, and while an ``__init__`` passes ``**kwargs``
    on, its bases' too (a subclass that forwards them to torch's optimizer takes torch's options)."""
    taken: set[str] = set()
    for klass in cls.__mro__:
        if "__init__" not in vars(klass) or klass is torch.optim.Optimizer:
            continue
        try:
            parameters = inspect.signature(vars(klass)["__init__"]).parameters.values()
        except (TypeError, ValueError):
            break
        taken |= {p.name for p in parameters if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
        if not any(p.kind == p.VAR_KEYWORD for p in parameters):
            break
    return taken


def _same(a, b) -> bool:
    if wraps_tensors(a) or wraps_tensors(b):
        return same_value(a, b)
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
                and bool(torch.equal(a.cpu(), b.cpu())))
    return type(a) is type(b) and a == b


def by_name(optimizer, state_dict: dict, *, strict: bool = True, rename: Rename = None) -> dict:
    """``state_dict`` re-keyed to ``optimizer``'s layout by name: the dict torch's positional
    ``load_state_dict`` then loads correctly (see ``load_state_dict_by_name``). ``state_dict`` may be in
    torch's form, the RFC's name-keyed form or DCP's flat form (``optbench.state.formats``). Everything it
    refuses (``optbench.state.validation``) it refuses here, before the optimizer is touched."""

    state_dict = as_torch(state_dict, optimizer)
    saved_groups = state_dict["param_groups"]
    saved_names = _renamed(group_names(saved_groups, "saved"), rename)
    flat = [n for group in saved_names for n in group]
    if len(set(flat)) != len(flat):
        raise StateDictNameError(f"rename maps two saved parameters to one name: "
                                 f"{', '.join(sorted({n for n in flat if flat.count(n) > 1}))}")
    current_names = group_names(optimizer.param_groups, "optimizer")
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
    refuse_foreign(optimizer, state_dict, strict)

    if (isinstance(optimizer, torch.optim.LBFGS)
            and [n for g in saved_names for n in g] != [n for g in current_names for n in g]):
        raise StateDictNameError("LBFGS keeps its state as flat vectors over all its parameters in order: it can "
                                 "only load a state_dict of the same parameters in the same order")
    check = state_checker(optimizer, state_dict["state"].values())
    bookkeeping = group_bookkeeping(state_dict)  # a group's, not a parameter's: never shape-checked against one
    new_groups, new_state, next_id = [], {}, 0
    for gi, names in enumerate(current_names):
        current_group = optimizer.param_groups[gi]
        sources = sorted({saved_at[n][0] for n in names if n in saved_at})
        # A group that is one saved group again (bar parameters the optimizer no longer has) resumes with the
        # saved hyperparameters; a regrouped one keeps its own: hyperparameters follow the new groups.
        resumed = len(sources) == 1 and all(n in names for n in saved_names[sources[0]] if n in current)
        template = saved_groups[sources[0]] if resumed else current_group
        group = {k: copy.deepcopy(v) for k, v in template.items() if k not in ("params", "param_names")}
        if not resumed and sources:  # the group's own state (a step counter) follows its parameters
            for key, value in group_state(optimizer, [saved_groups[s] for s in sources]).items():
                if value is DISAGREE:
                    raise StateDictNameError(
                        f"param group {gi} ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''}) takes "
                        f"parameters from saved groups whose {key!r} differ: there is no one value to continue from")
                group[key] = value
        for key, value in current_group.items():  # keys the save lacks (a flag newer than the checkpoint), and
            # how this optimizer runs: a checkpoint holds what was learned, not foreach/fused/capturable (F47)
            if (key not in group or key in IMPLEMENTATION_FLAGS) and key not in ("params", "param_names"):
                group[key] = copy.deepcopy(value)
        group["params"], group["param_names"] = [], list(names)
        for name, param in zip(names, current_group["params"]):
            group["params"].append(next_id)
            if name in saved_at:
                sgi, spi = saved_at[name]
                saved_id = saved_groups[sgi]["params"][spi]
                if saved_id in state_dict["state"]:
                    state = state_dict["state"][saved_id]
                    if isinstance(optimizer, torch.optim.LBFGS):
                        _check_flat(state, optimizer)
                    elif BATCH_NAMES in state:  # a stack of several parameters' rows: checked row by row below
                        pass
                    else:
                        check(name, {k: v for k, v in state.items() if k not in bookkeeping.get(saved_id, {})}, param)
                    new_state[next_id] = state
            elif param in optimizer.state:  # starts fresh: keep what the optimizer set up at construction (Adagrad)
                new_state[next_id] = dict(optimizer.state[param])
            next_id += 1
        new_groups.append(group)
    for pid, state in new_state.items():  # a batched stack names its rows: by their current names too
        if state.get(BATCH_NAMES) is not None and rename is not None:
            new_state[pid] = {**state, BATCH_NAMES: _renamed([list(state[BATCH_NAMES])], rename)[0]}
    keyed = {"state": new_state, "param_groups": new_groups}
    if not (is_batched(keyed) or stacks(optimizer) or group_bookkeeping(keyed)):
        return keyed
    params = {n: p for g in optimizer.param_groups for n, p in zip(g["param_names"], g["params"])}
    return relaid(optimizer, keyed,
                  check=lambda name, row: check(name, row, params[name]) if name in params else None)


def _check_flat(state: dict, optimizer) -> None:
    """LBFGS's vectors (d, prev_flat_grad, its history) span every parameter: their length must be the total."""
    total = sum(p.numel() for g in optimizer.param_groups for p in g["params"])
    for key, value in state.items():
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(v, torch.Tensor) and v.dim() == 1 and v.numel() not in (1, total):
                raise StateDictNameError(f"LBFGS's flat state has {v.numel()} elements ({key}), "
                                         f"its parameters {total}: a parameter changed shape")


def with_param_names(state_dict: dict, names) -> dict:
    """``state_dict`` saved without ``param_names`` (torch < 2.5, or an optimizer built from
    ``model.parameters()``) with names attached: ``names`` lists the FQNs in the order the saving optimizer
    held its parameters (one flat list, e.g. ``[n for n, _ in model.named_parameters()]``, or one list per
    group), so that it can be loaded by name."""
    names = list(names)
    groups = state_dict["param_groups"]
    per_group = names if names and not isinstance(names[0], str) else None
    if per_group is None:
        sizes = [len(g["params"]) for g in groups]
        if len(names) != sum(sizes):
            raise StateDictNameError(f"{len(names)} names for a state_dict of {sum(sizes)} parameters")
        starts = [sum(sizes[:i]) for i in range(len(sizes))]
        per_group = [names[s:s + n] for s, n in zip(starts, sizes)]
    elif [len(g) for g in per_group] != [len(g["params"]) for g in groups]:
        raise StateDictNameError("names per group do not match the state_dict's param groups in number")
    return {"state": state_dict["state"],
            "param_groups": [{**g, "param_names": list(n)} for g, n in zip(groups, per_group)]}


def load_state_dict_by_name(optimizer, state_dict: dict, *, strict: bool = True, rename: Rename = None) -> None:
    """Load ``state_dict`` into ``optimizer`` matching parameters by name, not position.

    A current param group that holds the parameters of one saved group (bar any it no longer has) resumes
    with that group's saved hyperparameters; parameters regrouped otherwise (split, merged, moved) take
    the hyperparameters of their new group, and keys the save lacks (a flag newer than the checkpoint)
    keep the current group's value. The implementation flags (``IMPLEMENTATION_FLAGS``: foreach, fused,
    capturable, differentiable) always keep the loading optimizer's own: torch's loader takes the checkpoint's,
    so a capturable optimizer that loads a non-capturable checkpoint can no longer be captured (finding F47).
    A group's own state (keys its constructor does not take: a per-group step
    counter, see ``group_state``) follows the parameters: a regrouped group continues from the value its
    parameters' saved groups agree on, and is refused naming the key where they disagree. With ``strict`` (the
    default) a current name missing from the save, a saved name the optimizer does not have, or state under ids
    no saved group lists raise StateDictNameError naming them; with ``strict=False`` such parameters start with
    fresh state and the rest is dropped. ``rename`` maps saved names to current ones: a mapping
    (``{"module.fc.weight": "fc.weight"}``) or a callable (``lambda n: n.removeprefix("_orig_mod.")``).

    Refused whatever ``strict``, naming the parameter and key: a state tensor of another shape than the optimizer
    would give it (``optbench.state.validation.shape_mismatch``: parameter-shaped state exactly the parameter's
    shape; a fused CPU step would corrupt memory, finding F31), another optimizer class's state. The load is
    transactional: on any error, torch's own loader's included, the optimizer is left exactly as it was.
    """
    transactional_load(optimizer, by_name(optimizer, state_dict, strict=strict, rename=rename))


def name_aware(optimizer, *, strict: bool = True, rename: Rename = None):
    """Make ``optimizer.load_state_dict`` match parameters by name (as ``load_state_dict_by_name``)
    through ``register_load_state_dict_pre_hook``; returns the hook's handle, whose ``.remove()``
    restores torch's positional loading. It refuses what ``load_state_dict_by_name`` refuses, and tries the load
    on a detached copy first, so that a load that fails leaves the optimizer as it was."""
    group_names(optimizer.param_groups, "optimizer")  # refuse an unnamed optimizer now, not at load time

    def hook(opt, state_dict: dict) -> dict:
        keyed = by_name(opt, state_dict, strict=strict, rename=rename)
        trial_load(opt, keyed)
        return keyed
    return optimizer.register_load_state_dict_pre_hook(hook)
