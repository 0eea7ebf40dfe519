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
    step: Callable[[], object]


@dataclass(frozen=True)
class Implementation:
    """A named way to build an optimizer from named param groups and hyperparameters.

    ``build(groups, hp)`` returns a Stepper; ``available(device, dtype)`` says why it cannot run
    there (a one-line reason) or None when it can.
    """

    name: str
    optimizer_class: type
    flags: dict = field(default_factory=dict)
    compiled: bool = False
    is_candidate: bool = False

    def build(self, groups: ParamGroups, hp: dict) -> Stepper:
        optimizer = self.optimizer_class(groups, **hp, **self.flags)
        step = optimizer.step
        if self.compiled:
            torch._dynamo.reset()  # a fresh cache per build: past its recompile limit dynamo runs eager
            step = torch.compile(optimizer.step)
        return Stepper(optimizer, step)

    def available(self, device: torch.device, dtype: torch.dtype) -> str | None:
        probe = torch.nn.Parameter(torch.zeros(2, device=device, dtype=dtype))
        probe.grad = torch.zeros_like(probe).to_sparse() if self.optimizer_class is torch.optim.SparseAdam else torch.zeros_like(probe)
        try:
            self.optimizer_class([probe], **self.flags).step()  # some check device/dtype only at step
        except (RuntimeError, ValueError, TypeError) as exc:
            return f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
        return None
