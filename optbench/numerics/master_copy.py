"""Judging the master-copy pattern (``implementations.master_weights``): the masters' rounding yardstick and
the model's own parameters.

The masters and their state are judged like any trajectory, held to float32's tolerance
(``run_trajectory`` expresses every row in the model dtype's eps, so that is ``tolerance_eps(t) *
eps32 / eps(model dtype)``), or to ten times the distance rounding at float32 alone moves the
reference (``RoundingYardstick``) where that is more: masters start on the model dtype's coarse grid,
where a gradient cancels ``weight_decay * p`` exactly far more often than among float32 values, and a
step such as Adam's first (``lr * g / |g|``) then turns on float32's rounding of the product.

Each model parameter must be its master rounded to the model's dtype: after forgiving half an ulp of
the model dtype per element (that rounding), what is left of its distance from the reference is the
master's own error, held to the master's tolerance. A model never updated, or updated from anything
but its master, is far past it.
"""

from __future__ import annotations

import numpy as np
import torch

from optbench.numerics.accuracy import err_eps
from optbench.numerics.one_step import perturbed, ulp


class RoundingYardstick:
    """A second reference run on inputs moved by up to ``eps`` relative (the start and every gradient,
    uniformly at random, seeded): how far rounding at that precision alone moves the trajectory.
    ``make(start)`` builds the reference to run."""

    def __init__(self, make, start: dict[str, np.ndarray], eps: float, seed: int = 12345):
        self.eps, self.rng = eps, np.random.default_rng(seed)
        self.inner = make({n: self._moved(v) for n, v in start.items()})

    def _moved(self, value):
        return perturbed(value, self.eps, self.rng, scalars=True)

    def step(self, grads: dict) -> None:
        self.inner.step({n: None if g is None else self._moved(g) for n, g in grads.items()})

    def expected(self) -> dict:
        return self.inner.expected()


def model_rows(step: int, model: dict[str, torch.Tensor], expected: dict[tuple[str, str], np.ndarray],
               scales: dict[tuple[str, str], float], tols: dict[str, float]) -> list[tuple]:
    """``(step, fqn, "model", err_eps, tol)`` per parameter, in eps of the model's dtype, against the
    reference parameter ``expected[(fqn, "param")]`` at the trajectory's scale for it; ``tols`` holds
    each parameter's tolerance (its master's)."""
    rows = []
    for name, p in model.items():
        actual = p.detach().to(device="cpu", dtype=torch.float64).numpy()
        rounding = 0.5 * ulp(np.where(np.isfinite(actual), actual, 0.0), p.dtype)
        err = err_eps(actual, expected[(name, "param")], torch.finfo(p.dtype).eps, scales.get((name, "param"), 0.0),
                      rounding)
        rows.append((step, name, "model", err, tols[name]))
    return rows
