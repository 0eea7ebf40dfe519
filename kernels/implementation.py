"""The implementation interface: how the harness builds and steps an optimizer under test."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

ParamGroups = list[dict]  # torch param groups whose "params" are (name, tensor) pairs


@dataclass
class Stepper:
    """A built optimizer and the callable that performs one step (compiled or not)."""

    optimizer: torch.optim.Optimizer
    step: Callable[..., object]


@dataclass(frozen=True)
class Implementation:
    """A named way to build an optimizer from named param groups and hyperparameters.

    ``build(groups, options)`` returns a Stepper; ``available(device, dtype)`` says why a torch
    variant cannot run there (a one-line reason) or None when it can. A candidate is never probed:
    whatever it raises is reported as an error of that case.
    """

    name: str
    optimizer_class: type
    flags: dict = field(default_factory=dict)
    compiled: bool = False
    is_candidate: bool = False
    extra_kwargs: dict = field(default_factory=dict)  # a candidate's candidate_kwargs

    def build(self, groups: ParamGroups, options: dict | None = None) -> Stepper:
        optimizer = self.optimizer_class(groups, **(options or {}), **self.extra_kwargs, **self.flags)
        step = optimizer.step
        if self.compiled:
            torch._dynamo.reset()  # a fresh cache per build: past its recompile limit dynamo runs eager
            step = torch.compile(optimizer.step)
        return Stepper(optimizer, step)

    def available(self, device: torch.device, dtype: torch.dtype) -> str | None:
        if self.is_candidate:
            return None
        shape = (2, 2) if self.optimizer_class is torch.optim.Muon else (2,)
        probe = torch.nn.Parameter(torch.zeros(shape, device=device, dtype=dtype))
        probe.grad = torch.zeros_like(probe).to_sparse() if self.optimizer_class is torch.optim.SparseAdam else torch.zeros_like(probe)
        try:
            optimizer = self.optimizer_class([probe], **self.flags)
            if self.optimizer_class is torch.optim.LBFGS:
                optimizer.step(lambda: (probe * probe).sum())
            else:
                optimizer.step()  # some check device/dtype only at step
        except (RuntimeError, ValueError, TypeError) as exc:
            return f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
        return None
