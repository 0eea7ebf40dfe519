"""Parity: step an implementation and the float64 reference on the same inputs, compare every step.

For each step, each parameter name (FQN) and each tensor (the parameter and every state tensor),
the error is ``max|actual - reference| / (eps(dtype) * scale)`` where ``scale`` is the largest
magnitude that reference tensor has had up to that step: a normwise error in units of the dtype's
machine epsilon, stable when a value crosses zero. NaN where both have
NaN and equal infinities count as agreement; any other non-finite mismatch, a shape mismatch, or a
state key only one side has is an infinite error.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from optbench.kernels import Implementation
from optbench.suite import HparamSet, Suite
from optbench.workload import Workload

TINY = np.finfo(np.float64).tiny


def magnitude(x: np.ndarray) -> float:
    finite = x[np.isfinite(x)]
    return float(np.abs(finite).max()) if finite.size else 0.0


def err_eps(actual: np.ndarray, expected: np.ndarray, eps: float, scale: float = 0.0) -> float:
    """Normwise error of ``actual`` against ``expected`` in units of ``eps``, relative to
    ``max(scale, max|expected|)`` (see module doc)."""
    if actual.shape != expected.shape:
        return float("inf")
    if expected.size == 0:
        return 0.0
    finite = np.isfinite(expected) & np.isfinite(actual)
    agree = (np.isnan(expected) & np.isnan(actual)) | (np.isinf(expected) & (actual == expected))
    if not np.all(finite | agree):
        return float("inf")
    if not finite.any():
        return 0.0
    scale = max(scale, float(np.abs(expected[finite]).max()), TINY)
    return float(np.abs(actual[finite] - expected[finite]).max()) / (eps * scale)


def as_array(value) -> np.ndarray | None:
    """A state value as float64 NumPy (tensors and Python numbers); None for anything else."""
    if isinstance(value, torch.Tensor):  # a copy: .to() returns float64 CPU tensors themselves
        return value.detach().to(device="cpu", dtype=torch.float64, copy=True).numpy()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return np.float64(value)
    return None


def snapshot(optimizer: torch.optim.Optimizer, params: dict[str, torch.Tensor]) -> dict[tuple[str, str], np.ndarray]:
    """Every parameter and state tensor, keyed (fqn, "param" | state key), as float64 NumPy."""
    out = {}
    for name, p in params.items():
        out[(name, "param")] = as_array(p)
        for key, value in optimizer.state.get(p, {}).items():
            array = as_array(value)
            if array is not None:
                out[(name, key)] = array
    return out


@dataclass
class Trajectory:
    """Per-step errors against the reference; optionally the implementation's snapshots."""

    errors: pd.DataFrame  # columns: step, fqn, tensor, err_eps
    snapshots: list[dict] = field(default_factory=list)


def set_gradients(params: dict[str, torch.nn.Parameter], workload: Workload, step: int) -> None:
    for name, p in params.items():
        p.grad = workload.gradient(step, name, p) if p.requires_grad else None


def run_parity(
    impl: Implementation,
    suite: Suite,
    hset: HparamSet,
    workload: Workload,
    dtype: torch.dtype,
    device: torch.device,
    keep_snapshots: bool = False,
) -> Trajectory:
    """Run ``workload.steps`` steps of ``impl`` and of the reference, comparing after each step."""
    params = workload.materialize(dtype, device)
    stepper = impl.build(hset.param_groups(params), hset.options)
    eps = torch.finfo(dtype).eps
    reference = suite.reference
    group_hp = {
        name: {**opts, "dtype_eps": eps}
        for names, opts in zip(hset.assign(list(params)), hset.group_options())
        for name in names
    }
    ref_params = {n: p.detach().to(device="cpu", dtype=torch.float64).numpy().copy() for n, p in params.items()}
    ref_state: dict[str, dict] = {}
    rows, snapshots, scales = [], [], {}
    for step in range(workload.steps):
        set_gradients(params, workload, step)
        stepper.step()
        for name, p in params.items():
            grad = workload.reference_gradient(p.grad)
            if grad is None:
                continue
            if name not in ref_state:
                ref_state[name] = reference.init(ref_params[name], group_hp[name])
            ref_params[name], ref_state[name] = reference.update(ref_params[name], grad, ref_state[name], group_hp[name])
        actual = snapshot(stepper.optimizer, params)
        expected = {(n, "param"): v for n, v in ref_params.items()}
        expected.update({(n, k): np.asarray(v) for n, st in ref_state.items() for k, v in st.items()})
        for key in sorted(expected.keys() | actual.keys()):
            if key in expected and key in actual:
                scales[key] = max(scales.get(key, 0.0), magnitude(expected[key]))
                e = err_eps(actual[key], expected[key], eps, scales[key])
            else:
                e = float("inf")  # a state tensor only one side keeps
            rows.append((step + 1, key[0], key[1], e))
        if keep_snapshots:
            snapshots.append(actual)
    return Trajectory(pd.DataFrame(rows, columns=["step", "fqn", "tensor", "err_eps"]), snapshots)


def tolerance_eps(step) -> float:
    """Allowed error in eps units after ``step`` steps: 16 for one step's rounding (amplified by
    divisions and square roots) plus 1 per step of accumulation (docs/tolerances.md)."""
    return 16.0 + step


def cross_error(snapshots: list[dict], baseline: list[dict], eps: float) -> float:
    """Max error in eps units of one implementation's trajectory against another's (e.g. for-loop)."""
    worst, scales = 0.0, {}
    for mine, theirs in zip(snapshots, baseline):
        for key in mine.keys() | theirs.keys():
            if key not in mine or key not in theirs:
                return float("inf")
            scales[key] = max(scales.get(key, 0.0), magnitude(theirs[key]))
            worst = max(worst, err_eps(mine[key], theirs[key], eps, scales[key]))
    return worst
