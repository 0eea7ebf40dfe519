"""Derivatives through k steps, both ways: autograd through the implementation's differentiable steps (a
Jacobian-vector product along a seeded direction) and Richardson-extrapolated central differences of the float64
reference, compared per FQN (``compare``). The differentiable check (``checks.differentiable``) runs a case through
``Derivatives``; what the implementation gives is recorded for the judge as ``side_out`` writes it.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from optbench.cases import Case, RunContext
from optbench.hyperparameters import complete, for_torch
from optbench.numerics.recording_file import raised_data, raised_from
from optbench.reference.contract import eager_state
from optbench.rows import bounded

WRT = ("grad", "lr", "param")
DTYPE = "float64"
EPS = float(np.finfo(np.float64).eps)
H = 1e-4  # the relative move of the finite differences (and 2H)
TOLERANCE = 1e-6  # relative error allowed where the differences resolve the derivative
NOISE = 4.0  # the differences' rounding allowed: NOISE * eps * (|p_0| + |update|) / H per FQN
KINK = 1e-3  # extrapolation error or second-difference misfit past this (relative): a kink, left out


def pick(workload, hset, limit: int) -> list[str]:
    """The first trainable parameter of each (param group, ndim, kind), up to ``limit``, with a step-1
    gradient that has no exact zero (autograd's chain through sqrt(0) is 0 * inf = NaN there)."""
    group = {n: i for i, names in enumerate(hset.assign(workload.names)) for n in names}
    out, seen = [], set()
    for spec in workload.specs:
        g, key = workload.grads[0].get(spec.name), (group[spec.name], len(spec.shape), spec.kind)
        if spec.kind != "frozen" and spec.numel and isinstance(g, np.ndarray) and np.all(g != 0) and key not in seen:
            seen.add(key)
            out.append(spec.name)
    return out[:limit]


class Derivatives:
    """One case's inputs and directions, and its two sides: torch's differentiable steps, the reference."""

    def __init__(self, case: Case, ctx: RunContext, steps: tuple[int, ...], limit: int, defaults: dict):
        self.case, self.suite, self.device = case, case.suite, ctx.device
        self.workload = ctx.workload(case.suite, case.hset, DTYPE, steps=max(steps), purpose="differentiable")
        self.names = pick(self.workload, case.hset, limit)
        self.defaults = defaults
        rng = np.random.default_rng(ctx.seed)
        self.x = {"grad": [self.workload.grads[0][n] for n in self.names],
                  "lr": [np.float64(complete(case.hset.options, self.defaults).get("lr", 0.0))],
                  "param": [self.workload.init[n] for n in self.names]}
        self.d = {k: [v * (rng.standard_normal(np.shape(v)) if k != "lr" else 1.0) for v in xs]
                  for k, xs in self.x.items()}

    def tensors(self, values) -> list[torch.Tensor]:
        return [torch.from_numpy(np.array(v)).to(self.device) for v in values]

    def inputs(self, wrt: str) -> list[torch.Tensor]:
        """Input ``wrt`` as torch takes it (parameters with the workload's strides)."""
        if wrt == "param":
            start = self.workload.materialize(torch.float64, self.device)
            return [start[n].detach() for n in self.names]
        return self.tensors(self.x[wrt])

    def torch_updates(self, wrt: str, k: int, inputs: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        """The updates after ``k`` steps, with ``inputs`` standing in for input ``wrt``."""
        given = {w: inputs if w == wrt else None for w in WRT}
        p0 = given["param"] or self.inputs("param")
        params = {n: p.clone() for n, p in zip(self.names, p0)}  # not leaves: the step runs on autograd's graph
        options = {**for_torch(self.case.hset.options), "differentiable": True,
                   **({"lr": inputs[0]} if wrt == "lr" else {})}
        stepper = self.case.impl.build(self.case.hset.torch_groups(params), options)
        for step in range(k):
            grads = (given["grad"] or self.tensors(self.x["grad"])) if step == 0 else [
                None if (g := self.workload.grads[step].get(n)) is None else self.tensors([g])[0] for n in self.names]
            for n, g in zip(self.names, grads):
                params[n].grad = g
            stepper.step()
        return tuple(params[n] - p for n, p in zip(self.names, p0))

    def reference_updates(self, wrt: str, k: int, t: float) -> list[np.ndarray]:
        """The reference's updates after ``k`` steps with input ``wrt`` moved to ``x + t d``."""
        x = {w: [a + t * b for a, b in zip(self.x[w], self.d[w])] if w == wrt else self.x[w] for w in WRT}
        hset = replace(self.case.hset, options={**self.case.hset.options, "lr": float(x["lr"][0])})
        hp = hset.reference_hp(self.names, self.defaults, {**self.suite.reference_options, "dtype_eps": EPS})
        ref, params, state = self.suite.reference, dict(zip(self.names, x["param"])), {}
        if eager_state(ref):
            state = {n: ref.init(params[n], hp[n]) for n in self.names}
        for step in range(k):
            for i, n in enumerate(self.names):
                g = x["grad"][i] if step == 0 else self.workload.grads[step].get(n)
                if g is not None:
                    state[n] = state[n] if n in state else ref.init(params[n], hp[n])
                    params[n], state[n] = ref.update(params[n], g, state[n], hp[n])
        return [params[n] - p for n, p in zip(self.names, x["param"])]


def compare(jd: list[np.ndarray], at: dict[float, list[np.ndarray]], p0: list[np.ndarray]) -> list[tuple]:
    """Per FQN: (error, tolerance, kinks left out, resolved) of torch's ``jd`` against the reference's
    updates ``at`` (t -> per-FQN updates at x + t d)."""
    out = []
    for j, a in enumerate(jd):
        f = {t: v[j] for t, v in at.items()}
        d1, d2 = (f[H] - f[-H]) / (2 * H), (f[2 * H] - f[-2 * H]) / (4 * H)
        fd = (4 * d1 - d2) / 3  # Richardson: the H**2 term cancels
        # ~0 unless a kink
        bend = np.abs((f[2 * H] - 2 * f[0.0] + f[-2 * H]) - 4 * (f[H] - 2 * f[0.0] + f[-H])) / (2 * H)
        noise = NOISE * EPS * np.max(np.abs(p0[j]) + np.abs(f[0.0]), initial=0.0) / H
        size = np.max(np.abs(fd), initial=0.0)
        scale = max(size, noise)
        smooth = np.maximum(np.abs(d1 - d2), bend) <= KINK * size + 4 * noise
        diff = np.max(np.abs(a - fd)[smooth], initial=0.0) if np.all(np.isfinite(a[smooth])) else np.inf
        out.append((diff / scale if scale else 0.0, (TOLERANCE * size + noise) / scale if scale else 1.0,
                    int((~smooth).sum()), noise <= TOLERANCE * size))
    return out


def side_out(side: tuple[str, object]) -> list:
    kind, found = side
    return [kind, raised_data(found) if kind == "raised" else found]


def side_in(data: list, run: Derivatives) -> tuple[str, object]:
    """The implementation's side as recorded: why it is unsupported, what it raised, or its Jacobian-vector
    product, one array per parameter of the case, of its shape."""
    kind, found = data
    if kind == "unsupported" and isinstance(found, str):
        return kind, bounded(found)
    if kind == "raised":
        return kind, raised_from(found).exception()
    shapes = [np.shape(run.x["param"][i]) for i in range(len(run.names))]
    if kind != "jvp" or [np.shape(a) for a in found] != shapes or not all(isinstance(a, np.ndarray) for a in found):
        raise ValueError(f"a {bounded(str(kind), 40)!r} answer where an unsupported, raised or jvp one of the case's "
                         "parameters' shapes is recorded")
    return kind, list(found)
