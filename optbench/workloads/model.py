"""The workload data model: named parameters, their initial values and a per-step gradient stream.

A workload is generated once in float64 NumPy from a seed. Every implementation and the reference
then consume the same values rounded to the dtype under test (``materialize`` / ``gradient``), so
the only difference between them is the optimizer. A gradient is a dense array, a ``SparseGrad``
(COO over the leading dimension, possibly uncoalesced) or None (no gradient that step). A
closure-driven workload carries an ``objective`` instead of a gradient stream.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import torch


@dataclass(frozen=True)
class ParamSpec:
    """One named parameter. ``kind`` is dense, frozen, noncontiguous or sometimes_none."""

    name: str
    shape: tuple[int, ...]
    kind: str = "dense"
    init_std: float = 0.02

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


@dataclass(frozen=True)
class SparseGrad:
    """A COO gradient: ``indices`` [sparse_dim, nnz] (duplicates allowed), ``values`` [nnz, ...]."""

    indices: np.ndarray
    values: np.ndarray
    coalesced: bool = True  # hand torch a coalesced tensor (as most code does) or the raw entries

    def to_torch(self, like: torch.Tensor) -> torch.Tensor:
        indices = torch.from_numpy(self.indices).to(like.device)
        values = torch.from_numpy(self.values).to(device=like.device, dtype=like.dtype)
        grad = torch.sparse_coo_tensor(indices, values, like.shape, check_invariants=False)
        return grad.coalesce() if self.coalesced else grad


Gradient = np.ndarray | SparseGrad | None


@dataclass(frozen=True)
class Workload:
    """Named initial values and a per-step gradient stream (or an objective), all float64."""

    name: str
    specs: tuple[ParamSpec, ...]
    init: dict[str, np.ndarray]
    grads: tuple[dict[str, Gradient], ...]
    objective: object | None = None  # optbench.workloads.objective.Objective for closure-driven optimizers
    notes: tuple[str, ...] = field(default=())  # what edge cases this workload holds, for reports
    meta: dict = field(default_factory=dict)  # FQN -> attributes its torch parameter carries (u-muP's mup_type)

    @property
    def steps(self) -> int:
        return len(self.grads)

    @property
    def numel(self) -> int:
        return sum(s.numel for s in self.specs)

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.specs]

    def restricted(self, keep) -> Workload:
        """The same workload (same values, same bits) with only the parameters ``keep(spec)`` accepts
        (an objective then covers only those parameters)."""
        specs = tuple(s for s in self.specs if keep(s))
        objective = self.objective
        if objective is not None:
            names = {s.name for s in specs}
            objective = replace(objective, names=tuple(n for n in objective.names if n in names))
        return replace(self, specs=specs, objective=objective)

    def materialize(self, dtype: torch.dtype, device: torch.device) -> dict[str, torch.nn.Parameter]:
        """Fresh torch parameters, in spec order, rounded to ``dtype`` (never aliasing ``init``)."""
        params = {}
        for spec in self.specs:
            value = torch.from_numpy(self.init[spec.name]).to(device=device, dtype=dtype, copy=True)
            if spec.kind == "noncontiguous":
                value = value.t().contiguous().t()  # same values, column-major strides
            params[spec.name] = torch.nn.Parameter(value, requires_grad=spec.kind != "frozen")
            for key, attribute in self.meta.get(spec.name, {}).items():
                setattr(params[spec.name], key, attribute)
        return params

    def gradient(self, step: int, name: str, like: torch.Tensor) -> torch.Tensor | None:
        """The gradient for ``name`` at ``step`` (0-based) like ``like``: same dtype, device and
        strides, or sparse COO."""
        g = self.grads[step].get(name)
        if g is None:
            return None
        if isinstance(g, SparseGrad):
            return g.to_torch(like)
        dense = torch.from_numpy(g).to(device=like.device, dtype=like.dtype, copy=True)
        return torch.empty_strided(like.shape, like.stride(), dtype=like.dtype, device=like.device).copy_(dense)


def reference_gradient(grad: torch.Tensor | None):
    """What the reference sees for a torch gradient: float64 NumPy (complex128 for a complex one), or
    ``(indices, values)`` if sparse (uncoalesced entries kept as they are)."""
    if grad is None:
        return None
    wide = torch.complex128 if grad.is_complex() else torch.float64
    if grad.is_sparse:
        return grad._indices().cpu().numpy().copy(), grad._values().to(device="cpu", dtype=wide, copy=True).numpy()
    return grad.detach().to(device="cpu", dtype=wide, copy=True).numpy()
