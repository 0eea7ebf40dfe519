"""Complex workloads: the seeded real workload with every value given a seeded random phase.

Each initial value and each gradient element ``x`` becomes ``x * exp(i theta)`` with ``theta`` uniform
in [0, 2 pi), drawn from its own stream of the run's seed (same seed, same bits). The modulus is the
real workload's, so the real and imaginary parts both carry its magnitudes (gradient scales from 1e-8
to 1e2, per tensor and step) in every proportion; everything else is kept: which gradients are None,
the sparse rows (duplicates and explicitly stored zeros stay zeros), zero-size and 0-dim parameters.

A closure-driven workload gets an objective over the parameters' real pairs (``ComplexObjective``): the
real objective's formula on ``view_as_real(p)``, with its own constants per real and imaginary part,
so that torch's autograd gradient (d/d Re + i d/d Im, the conjugate Wirtinger convention) is exactly the
gradient the complex reference sees.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from optbench.reference.complex import joined, pairs
from optbench.workloads.model import SparseGrad, Workload
from optbench.workloads.objective import Objective, make_objective

PHASE_STREAM = 0xC0  # the phases' own stream of the seed: the real draws are untouched


@dataclass(frozen=True)
class ComplexObjective:
    """``real`` (over each parameter's ``(..., 2)`` real view) seen from complex parameters."""

    real: Objective
    names: tuple[str, ...]

    def _real(self) -> Objective:
        return self.real if self.names == self.real.names else replace(self.real, names=self.names)

    def value_and_grad(self, params: dict[str, np.ndarray]) -> tuple[float, dict[str, np.ndarray]]:
        value, grads = self._real().value_and_grad({n: pairs(np.asarray(params[n])) for n in self.names})
        return value, {n: joined(g) for n, g in grads.items()}

    def torch_loss(self, params: dict[str, torch.Tensor]) -> torch.Tensor:
        return self._real().torch_loss({n: torch.view_as_real(p) if p.is_complex() else p for n, p in params.items()})


def complexify(workload: Workload, seed: int) -> Workload:
    """``workload`` with complex128 values (see the module docstring), deterministically from ``seed``."""
    rng = np.random.default_rng([seed, PHASE_STREAM])

    def rotate(x: np.ndarray) -> np.ndarray:
        return np.asarray(x * np.exp(1j * rng.uniform(0.0, 2.0 * np.pi, np.shape(x))))  # 0-dim stays an array

    def rotate_grad(g):
        if isinstance(g, SparseGrad):
            return replace(g, values=rotate(g.values))
        return None if g is None else rotate(g)

    init = {n: rotate(v) for n, v in workload.init.items()}
    grads = tuple({n: rotate_grad(g) for n, g in step.items()} for step in workload.grads)
    objective = workload.objective
    if objective is not None:
        frozen = {s.name for s in workload.specs if s.kind == "frozen"}
        shapes = {s.name: tuple(s.shape) + (2,) for s in workload.specs}
        objective = ComplexObjective(make_objective(seed, shapes, frozen=frozen), tuple(objective.names))
    return replace(workload, init=init, grads=grads, objective=objective,
                   notes=workload.notes + ("complex: each value given a seeded random phase",))
