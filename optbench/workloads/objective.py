"""A seeded, deterministic objective for closure-driven optimizers (LBFGS).

    f(x) = sum_n sum_i [ a x^2 / 2 + b x^2 / (1 + sqrt(1 + (x / delta)^2)) ]_{n,i} + gamma/2 (sum_n <w_n, x_n>)^2

per parameter n, element i: a quadratic (curvature a), a pseudo-Huber term b delta^2 (sqrt(1 + (x/delta)^2) - 1)
written without cancellation (curvature a + b at 0, about a for |x| >> delta, so LBFGS's curvature pairs
go stale along the path) and one rank-one coupling across all parameters (flat order matters). Every
term is >= 0 and vanishes only at x = 0, the minimizer: floats keep their relative precision all the way
in, so float32 and float64 runs take the same branches. Constants are dyadic (exact in float64/32/16 and
bfloat16). ``sign=-1`` negates it (concave, maximized at 0: the workload of ``maximize=True``).
``value_and_grad`` is the float64 oracle (analytic gradient); ``torch_loss`` is the same
formula in torch ops in the parameters' dtype (autograd gives the gradient).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

GAMMA, DELTA = 0.25, 0.5
A_RANGE, B_RANGE = (0.25, 1.0), (0.25, 1.0)


def _dyadic(values: np.ndarray) -> np.ndarray:
    return np.round(values * 16.0) / 16.0  # multiples of 1/16: exact in every float dtype for |v| < 16


@dataclass(frozen=True)
class Objective:
    """Per parameter name: ``a`` (curvature), ``b`` (pseudo-Huber weight), ``w`` (coupling weights)."""

    names: tuple[str, ...]
    a: dict[str, np.ndarray]
    b: dict[str, np.ndarray]
    w: dict[str, np.ndarray]
    gamma: float = GAMMA
    delta: float = DELTA
    sign: float = 1.0  # -1: the negated loss, concave, maximized at 0 (for maximize=True)
    _cache: dict = field(default_factory=dict, compare=False, repr=False)  # constants as tensors per (dtype, device)

    def value_and_grad(self, params: dict[str, np.ndarray]) -> tuple[float, dict[str, np.ndarray]]:
        """f and its analytic gradient at ``params`` (name -> array), in float64."""
        x = {n: np.asarray(params[n], dtype=np.float64) for n in self.names}
        s = sum((float(np.sum(self.w[n] * x[n])) for n in self.names), 0.0)
        value, grads = 0.5 * self.gamma * s * s, {}
        for n in self.names:
            xn, a, b = x[n], self.a[n], self.b[n]
            root = np.sqrt(1.0 + (xn / self.delta) ** 2)
            value += float(np.sum(0.5 * a * xn * xn + b * xn * xn / (1.0 + root)))
            grads[n] = a * xn + b * xn / root + (self.gamma * s) * self.w[n]
        if self.sign < 0:
            return -value, {n: -g for n, g in grads.items()}
        return value, grads

    def torch_loss(self, params: dict[str, torch.Tensor]) -> torch.Tensor:
        """The same f in torch ops, in the parameters' dtype and on their device (a 0-dim tensor)."""
        first = params[self.names[0]]
        s, value = first.new_zeros(()), first.new_zeros(())
        for n in self.names:
            x = params[n]
            key = (n, x.dtype, x.device)
            if key not in self._cache:
                self._cache[key] = tuple(torch.as_tensor(c[n], dtype=x.dtype, device=x.device)
                                         for c in (self.a, self.b, self.w))
            a, b, w = self._cache[key]
            s = s + (w * x).sum()
            root = torch.sqrt(1.0 + (x / self.delta) ** 2)
            value = value + (0.5 * a * x * x + b * x * x / (1.0 + root)).sum()
        loss = value + 0.5 * self.gamma * s * s
        return -loss if self.sign < 0 else loss


def make_objective(seed: int, shapes: dict[str, tuple[int, ...]], frozen=(), sign: float = 1.0) -> Objective:
    """Seeded constants for parameters ``shapes`` (name -> shape, in group order): a and b uniform in
    [1/4, 1] and w ~ N(0, 1) / 2^k with 2^k ~ sqrt(total numel), rounded to multiples of 1/16 (of 2^-k).
    Names in ``frozen`` (parameters that never train) get a = b = w = 0: they add nothing, so the loss
    still vanishes at the trainable minimizer x = 0."""
    rng = np.random.default_rng(seed)
    total = max(1, sum(int(np.prod(s, dtype=np.int64)) for s in shapes.values()))
    w_scale = 2.0 ** -round(0.5 * np.log2(total))
    a, b, w = {}, {}, {}
    for n, shape in shapes.items():
        shape = tuple(shape)
        a[n] = np.asarray(_dyadic(rng.uniform(*A_RANGE, shape)))
        b[n] = np.asarray(_dyadic(rng.uniform(*B_RANGE, shape)))
        w[n] = np.asarray(w_scale * _dyadic(rng.standard_normal(shape)))
        if n in frozen:
            a[n], b[n], w[n] = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    return Objective(tuple(shapes), a, b, w, GAMMA, DELTA, sign)


__all__ = ["Objective", "make_objective"]
