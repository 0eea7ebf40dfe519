"""State of optimizers that stack same-shape parameters (icefall's BatchedOptimizer, optbench's
BatchedScaledAdam), seen and restored per parameter name.

Such an optimizer keeps one state per (dtype, shape) bucket, stacked along a leading dim, under one of
the bucket's parameters (its holder). torch's positional ``load_state_dict`` then has two ways to go
wrong when parameters come in another order: the stacked state lands under a parameter that is no
longer its bucket's holder, or under the holder with its rows in the old order. Either way every row
now belongs to another FQN, silently.

optbench's batched kernels keep ``batch_names`` (the FQNs in stacking order) in each holder's state and
offer ``per_parameter_state()``: each parameter's rows as views. Checks read state through
``per_parameter_state(optimizer)`` here, so a batched optimizer is compared by FQN like any other, and
``restacked`` (used by ``load_state_dict_by_name``) re-keys a saved batched state_dict row by row.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping

import torch

BATCH_NAMES = "batch_names"


def per_parameter_state(optimizer: torch.optim.Optimizer) -> Mapping[torch.Tensor, dict]:
    """Each parameter's state as a per-tensor optimizer would keep it: the optimizer's own
    ``per_parameter_state()`` where it stacks its state, else ``optimizer.state``."""
    view = getattr(optimizer, "per_parameter_state", None)
    return view() if callable(view) else optimizer.state


def is_batched(state_dict: dict) -> bool:
    return any(isinstance(s, dict) and BATCH_NAMES in s for s in state_dict.get("state", {}).values())


def _rows(state: dict, size: int) -> list[dict]:
    """A holder's stacked state split into ``size`` per-parameter states (keys that are not stacked, such
    as ``step``, go to every row; ``batch_names`` and a group's bookkeeping, a dict, to none)."""
    stacked = {k for k, v in state.items() if isinstance(v, torch.Tensor) and v.dim() > 0 and v.shape[0] == size}
    return [{k: v[i].clone() if k in stacked else v for k, v in state.items()
             if k != BATCH_NAMES and not isinstance(v, dict)} for i in range(size)]


def unstacked(state_dict: dict) -> dict[str, dict]:
    """FQN -> its own state, from a batched state_dict."""
    out = {}
    for state in state_dict["state"].values():
        names = state.get(BATCH_NAMES)
        if names is None:
            continue
        if any(n is None for n in names):
            raise KeyError("the batched state_dict holds no parameter names: build the optimizer from named parameters")
        out.update(zip(names, _rows(state, len(names))))
    return out


def group_bookkeeping(state_dict: dict) -> dict[int, dict]:
    """Parameter id -> its state's entries that belong to its group, not to it: a dict that one parameter of the
    group keeps and no other does (ScaledAdam's clipping statistics, under its first). A dict that several
    parameters keep is their own nested state (``{"moments": {"m": ..., "v": ...}}``) and moves with each by name."""
    out = {}
    for group in state_dict.get("param_groups", []):
        states = {pid: state_dict["state"][pid] for pid in group["params"] if pid in state_dict["state"]}
        holders = Counter(k for state in states.values() for k, v in state.items() if isinstance(v, dict))
        for pid, state in states.items():
            alone = {k: v for k, v in state.items() if isinstance(v, dict) and holders[k] == 1}
            if alone:
                out[pid] = alone
    return out


def stacks(optimizer: torch.optim.Optimizer) -> bool:
    """Whether ``optimizer`` keeps its state stacked per bucket: it says how through ``buckets(group)``,
    the indices into ``group["params"]`` of each bucket in stacking order (``kernels.batched``)."""
    return callable(getattr(optimizer, "buckets", None))


def _named_rows(keyed: dict, bookkeeping: dict[int, dict]) -> dict[str, dict]:
    """FQN -> its own state (its group's bookkeeping left out), from a state_dict with ``param_names``, batched or
    not."""
    if is_batched(keyed):
        return unstacked(keyed)
    names = {pid: n for g in keyed["param_groups"] for pid, n in zip(g["params"], g["param_names"])}
    return {names[pid]: {k: v for k, v in s.items() if k not in bookkeeping.get(pid, {})}
            for pid, s in keyed["state"].items()}


def relaid(optimizer: torch.optim.Optimizer, keyed: dict, check: Callable[[str, dict], None] | None = None) -> dict:
    """``keyed`` (a state_dict re-keyed to ``optimizer``'s parameter ids by name, ``state.by_name.by_name``)
    laid out as ``optimizer`` keeps state. From a batched save each stack sits under its saved holder's FQN,
    which need not be a holder here, rows in the saved order: the rows are taken by FQN (each passed to
    ``check(fqn, row)`` first) and, for a batched optimizer, stacked in its own bucket order under its
    holders (for a per-tensor one, each under its FQN; a per-tensor save into a batched optimizer is
    stacked the same way). A group's bookkeeping (its clipping statistics) goes under the group's first
    parameter, where the optimizer looks for it."""
    bookkeeping = group_bookkeeping(keyed)
    rows = _named_rows(keyed, bookkeeping)
    if check is not None:
        for name, row in rows.items():
            check(name, row)
    state: dict[int, dict] = {}
    for group, saved_group in zip(optimizer.param_groups, keyed["param_groups"]):
        names, ids = saved_group["param_names"], saved_group["params"]
        if stacks(optimizer):
            for bucket in optimizer.buckets(group):
                members = [names[i] for i in bucket]
                have = [n for n in members if n in rows]
                if have and len(have) != len(members):
                    raise KeyError(f"the state_dict holds state for {', '.join(have)} but not for "
                                   f"{', '.join(n for n in members if n not in rows)}, which share their bucket now")
                if have:
                    first = rows[members[0]]
                    entry = {k: torch.stack([rows[n][k] for n in members]) if isinstance(v, torch.Tensor) else v
                             for k, v in first.items()}
                    state[ids[bucket[0]]] = {**entry, BATCH_NAMES: members}
        else:
            state.update((pid, dict(rows[n])) for n, pid in zip(names, ids) if n in rows)
        mine = {k: v for pid in ids for k, v in bookkeeping.get(pid, {}).items()}
        if mine and ids:
            state.setdefault(ids[0], {}).update(mine)
    return {"state": state, "param_groups": keyed["param_groups"]}
