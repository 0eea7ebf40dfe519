"""A BatchedOptimizer base, after icefall's: the parameters of each param group are bucketed by
(dtype, device, shape), a bucket's parameters and gradients stacked along a new leading dim and
stepped at once, and the rows written back to the real parameters.

A bucket's state is kept stacked (tensors with the bucket size B as leading dim) under its *holder*,
the bucket's first parameter in group order, with ``batch_names``: the bucket's parameter names in
stacking order (None where the optimizer has no names). ``per_parameter_state()`` shows each parameter
its own rows, as views. Buckets come in order of first appearance; zero-size parameters are in none.

On CPU a bucket is stepped in chunks of whole rows of at most ``chunk_bytes`` per stacked tensor, so
that its stacked copies and temporaries stay in cache (a whole stacked bucket makes every elementwise
op a pass through memory, and allocates fresh pages for each temporary); elsewhere (CUDA: kernel
launches dominate) a bucket at once. Nothing here knows the update: a subclass steps each ``Batch``.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import torch
from torch import Tensor
from torch.optim import Optimizer

BATCH_NAMES = "batch_names"


class Batch(NamedTuple):
    """Rows of one bucket for one step: their real parameters and gradients (zeros for a None grad),
    the bucket's state dict (stacked tensors, ``step``...), the rows' slices of its stacked tensors, and
    how to stack ``params``/``grads`` along a new leading dim."""

    params: list[Tensor]
    grads: list[Tensor]
    state: dict
    rows: dict
    stack: Callable[[list[Tensor]], Tensor] = torch.stack


def checked_names(parameters_names, param_groups: list[dict]) -> list[list[str]] | None:
    """icefall's ``parameters_names`` (one list of names per group), checked against the groups."""
    if parameters_names is None:
        return None
    names = [list(n) for n in parameters_names]
    if [len(n) for n in names] != [len(g["params"]) for g in param_groups]:
        raise ValueError("parameters_names must hold one name per parameter, one list per param group")
    return names


def write_back(params: list[Tensor], rows: Tensor) -> None:
    """Copy ``rows`` (B, *shape) into the real parameters."""
    torch._foreach_copy_(params, list(rows.unbind(0)))


def add_back(params: list[Tensor], delta: Tensor) -> None:
    """``p <- p + delta`` row by row on the real parameters (no stacked copy to write back)."""
    torch._foreach_add_(params, list(delta.unbind(0)))


class BatchedOptimizer(Optimizer):
    """An Optimizer that steps same-(dtype, shape) parameters of a group stacked (see the module)."""

    parameters_names: list[list[str]] | None = None
    chunk_bytes: int | None = 1 << 20  # on CPU; None: a bucket at once

    def names(self, group: dict) -> list[str | None]:
        """The group's parameter names: torch's ``param_names`` (named parameters), else this
        optimizer's ``parameters_names``, else None each."""
        if "param_names" in group:
            return list(group["param_names"])
        index = next(i for i, g in enumerate(self.param_groups) if g is group)
        if self.parameters_names is not None and index < len(self.parameters_names):
            return list(self.parameters_names[index])
        return [None] * len(group["params"])

    def buckets(self, group: dict) -> list[list[int]]:
        """Indices into ``group["params"]`` of each bucket, in stacking order (first appearance)."""
        out: dict[tuple, list[int]] = {}
        for i, p in enumerate(group["params"]):
            if p.numel():
                out.setdefault((p.dtype, p.device, tuple(p.shape)), []).append(i)
        return list(out.values())

    def batches(self, group: dict, init: Callable[[Tensor], dict]) -> list[Batch]:
        """The group's buckets for this step, in chunks of rows. A bucket without state gets
        ``init(stacked params)`` (its stacked tensors, ``step``...) and its ``batch_names``."""
        params, names, out = group["params"], None, []
        for bucket in self.buckets(group):
            members = [params[i] for i in bucket]
            state = self.state[members[0]]
            if BATCH_NAMES not in state:
                names = self.names(group) if names is None else names
                state[BATCH_NAMES] = [names[i] for i in bucket]
            if not any(isinstance(v, Tensor) for v in state.values()):
                state.update(init(torch.stack(members)))
            stacked = _stacked(state, len(members))
            grads = [torch.zeros_like(p) if p.grad is None else p.grad for p in members]
            for lo, hi in self._chunks(members):
                out.append(Batch(members[lo:hi], grads[lo:hi], state, {k: v[lo:hi] for k, v in stacked.items()}))
        return out

    def _chunks(self, members: list[Tensor]) -> list[tuple[int, int]]:
        """Row ranges stepped together: all rows, or on CPU at most ``chunk_bytes`` of them, a last
        single row joined to the chunk before it (torch reduces a lone row's elements in another order
        than a row among others; this way a row's reductions do not depend on where it is stacked)."""
        size, row = len(members), members[0].numel() * members[0].element_size()
        step = size if self.chunk_bytes is None or members[0].device.type != "cpu" else max(1, self.chunk_bytes // row)
        starts = list(range(0, size, step))
        if step > 1 and len(starts) > 1 and size - starts[-1] == 1:
            starts.pop()
        return list(zip(starts, starts[1:] + [size]))

    def per_parameter_state(self) -> dict[Tensor, dict]:
        """Each parameter's state as a per-tensor optimizer keeps it: row i of every stacked tensor (a
        view: writing into it writes the optimizer's state), the bucket's other plain values (``step``)
        shared; ``batch_names`` and dicts (a group's bookkeeping) left out. A bucket whose holder's state
        does not have its rows (a load from other parameters: stepping it raises) shows none."""
        out: dict[Tensor, dict] = {}
        for group in self.param_groups:
            params = group["params"]
            for bucket in self.buckets(group):
                state = self.state.get(params[bucket[0]])
                tensors = [v for v in state.values() if isinstance(v, Tensor)] if state else []
                if not tensors or any(v.dim() == 0 or v.shape[0] != len(bucket) for v in tensors):
                    continue
                for row, i in enumerate(bucket):
                    out[params[i]] = {k: v[row] if isinstance(v, Tensor) else v for k, v in state.items()
                                      if k != BATCH_NAMES and not isinstance(v, dict)}
        return out

    def load_state_dict(self, state_dict: dict) -> None:
        """torch's positional load, ``batch_names`` kept intact (torch's loader rebuilds every string
        in the state as the string of a generator: it iterates anything iterable)."""
        shield = self.register_load_state_dict_pre_hook(_shield_names)  # after the pre-hooks already there
        unshield = self.register_load_state_dict_post_hook(_unshield_names, prepend=True)
        try:
            super().load_state_dict(state_dict)
        finally:
            shield.remove()
            unshield.remove()


def _stacked(state: dict, size: int) -> dict[str, Tensor]:
    """A bucket state's stacked tensors, checked to have the bucket's ``size`` rows."""
    stacked = {k: v for k, v in state.items() if isinstance(v, Tensor)}
    wrong = [k for k, v in stacked.items() if v.dim() == 0 or v.shape[0] != size]
    if wrong:
        raise RuntimeError(f"stacked state {wrong} under {state.get(BATCH_NAMES)} does not have its bucket's {size} "
                           "rows (loaded from an optimizer with other parameters?)")
    return stacked


class _Name:
    """A name torch's loader leaves alone (not iterable)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name


def _shield_names(optimizer, state_dict: dict) -> dict:
    state = {k: {**v, BATCH_NAMES: [n if n is None else _Name(n) for n in v[BATCH_NAMES]]}
             if isinstance(v, dict) and BATCH_NAMES in v else v for k, v in state_dict["state"].items()}
    return {**state_dict, "state": state}


def _unshield_names(optimizer) -> None:
    for state in optimizer.state.values():
        if BATCH_NAMES in state:
            state[BATCH_NAMES] = [n.name if isinstance(n, _Name) else n for n in state[BATCH_NAMES]]
