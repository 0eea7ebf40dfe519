"""What an implementation does over a workload's steps, recorded as data: the judge needs nothing else.

``record_trajectory`` builds the implementation, steps it on the workload's gradients (or its objective, for a
closure-driven optimizer) and records, per step, the gradients it was given, its parameters and state before
(where asked) and after the step as float64 NumPy, the learning rate its param groups held, and what the step
changed of what the caller gave it. ``numerics.trajectory`` steps the float64 reference beside a ``Recording``
and judges it; it never steps the implementation. Nothing here imports or runs a reference.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from optbench.implementations import Implementation
from optbench.numerics.caller_contract import Given
from optbench.numerics.precision import kept_in
from optbench.state.batched import per_parameter_state
from optbench.state.subclasses import plain_state, wraps_tensors
from optbench.suite.schedules import torch_scheduler
from optbench.suite.spec import HparamSet
from optbench.workloads import Workload, reference_gradient


def as_array(value) -> np.ndarray | None:
    """A state value as float64 NumPy (tensors and Python numbers); None for anything else (a tensor subclass that
    wraps others included: ``plain_state`` reads those)."""
    if wraps_tensors(value):
        return None
    if isinstance(value, torch.Tensor):  # a copy: .to() returns float64 CPU tensors themselves
        if value.is_sparse:
            value = value.to_dense()
        if value.is_complex():
            return value.detach().to(device="cpu", dtype=torch.complex128, copy=True).numpy()
        return value.detach().to(device="cpu", dtype=torch.float64, copy=True).numpy()
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)):
        return np.float64(value)
    if isinstance(value, np.ndarray) and value.dtype.kind in "fiuc":
        return value.astype(np.float64) if value.dtype.kind != "c" else value
    return None


def as_arrays(values: list) -> list[np.ndarray | None]:
    """``as_array`` of each value; the plain dense real tensors of one dtype and device converted together (one
    concatenation and one cast instead of one per tensor: the same numbers, each array a read-only view of one copy,
    so that code which broke the reference contract by writing into its inputs raises instead of changing another
    tensor's numbers)."""
    out: list = [None] * len(values)
    together: dict[tuple, list[int]] = {}
    for i, value in enumerate(values):
        if (type(value) in (torch.Tensor, torch.nn.Parameter) and value.layout == torch.strided
                and not value.is_complex()):
            together.setdefault((value.dtype, value.device), []).append(i)
        else:
            out[i] = as_array(value)
    for indices in together.values():
        tensors = [values[i].detach() for i in indices]
        flat = torch.cat([t.reshape(-1) for t in tensors]).to(device="cpu", dtype=torch.float64).numpy()
        flat.flags.writeable = False
        for i, t, part in zip(indices, tensors, np.split(flat, np.cumsum([t.numel() for t in tensors])[:-1])):
            out[i] = part.reshape(t.shape)
    return out


def snapshot(optimizer: torch.optim.Optimizer, params: dict[str, torch.Tensor]) -> dict[tuple[str, str], np.ndarray]:
    """Every parameter and state tensor, keyed (fqn, "param" | state key), as float64 NumPy (a tensor subclass that
    wraps others as those, ``key.attr``: ``optbench.state.subclasses``)."""
    keys, values, states = [], [], per_parameter_state(optimizer)
    for name, p in params.items():
        keys.append((name, "param"))
        values.append(p)
        for key, value in plain_state(states.get(p, {})).items():
            keys.append((name, key))
            values.append(value)
    return {key: array for key, array in zip(keys, as_arrays(values)) if array is not None}


def kinds(optimizer: torch.optim.Optimizer, params: dict[str, torch.Tensor]) -> dict[tuple[str, str], str]:
    """What each parameter and state value of ``snapshot`` is held as: a tensor's dtype, else its Python type."""
    out, states = {}, per_parameter_state(optimizer)
    for name, p in params.items():
        out[(name, "param")] = str(p.dtype).removeprefix("torch.")
        for key, value in plain_state(states.get(p, {})).items():
            if as_array(value) is not None:
                out[(name, key)] = (str(value.dtype).removeprefix("torch.") if isinstance(value, torch.Tensor)
                                    else type(value).__name__)
    return out


def set_gradients(params: dict[str, torch.nn.Parameter], workload: Workload, step: int) -> None:
    for name, p in params.items():
        p.grad = workload.gradient(step, name, p) if p.requires_grad else None


def objective_closure(optimizer: torch.optim.Optimizer, params: dict[str, torch.nn.Parameter], workload: Workload):
    def closure():
        optimizer.zero_grad(set_to_none=True)
        loss = workload.objective.torch_loss(params)
        loss.backward()
        return loss

    return closure


@dataclass
class RecordedStep:
    """One step of the implementation: what it was given and what it held before and after."""

    grads: dict | None  # FQN -> the gradient it received (``reference_gradient``); None for a closure-driven step
    after: dict  # ``snapshot`` after the step (and after the scheduler's step)
    before: dict | None = None  # ``snapshot`` before the step, where asked (``record_trajectory``'s ``before``)
    lrs: dict = field(default_factory=dict)  # FQN -> its param group's lr as held before the step (schedules)
    model: dict = field(default_factory=dict)  # FQN -> the model's own parameter after the step (masters only)


@dataclass
class Recording:
    """An implementation's run over a workload, as data."""

    names: list[str]  # the workload's FQNs, in order
    start: dict[str, np.ndarray]  # the parameters it started from, float64 (complex128)
    judged: torch.dtype  # the precision it steps in: the dtype, or float32 for float32 masters
    masters: bool  # it steps float32 masters of the model's parameters (``model`` rows)
    frozen: list[str] = field(default_factory=list)  # FQNs of parameters that take no gradient
    steps: list[RecordedStep] = field(default_factory=list)
    kept: dict = field(default_factory=dict)  # ``precision.kept_in`` at the end
    breaches: dict = field(default_factory=dict)  # (fqn, "grad" | "param kind") -> what a step changed, first time
    contract: list = field(default_factory=list)  # its rows: (step, fqn, tensor, inf, 0.0)


def record_trajectory(impl: Implementation, hset: HparamSet, workload: Workload, dtype: torch.dtype,
                      device: torch.device, *, closure_driven: bool = False, before: bool = False) -> Recording:
    """Run ``workload.steps`` steps of ``impl`` with ``hset``; ``before``: also snapshot each step's start."""
    params = workload.materialize(dtype, device)
    stepper = hset.build(impl, params)
    stepped = stepper.params or params  # float32 masters: implementations.master_weights
    out = Recording(list(params), {n: as_array(p) for n, p in params.items()}, stepper.precision or dtype,
                    stepped is not params, [n for n, p in params.items() if not p.requires_grad])
    scheduler = torch_scheduler(hset.schedule, stepper.optimizer) if hset.schedule else None
    groups = _groups_by_name(stepper.optimizer, stepped) if hset.schedule else {}
    closure = objective_closure(stepper.optimizer, params, workload) if closure_driven else None
    for step in range(workload.steps):
        lrs = {n: _held(group["lr"]) for n, group in groups.items()}
        grads = taken = None
        if closure_driven:
            stepper.step(closure)
        else:
            set_gradients(params, workload, step)
            grads = {n: reference_gradient(p.grad) for n, p in params.items()}
            taken = snapshot(stepper.optimizer, stepped) if before else None
            given = Given(params)
            stepper.step()
            for key, what in given.breaches(params).items():
                if key not in out.breaches:
                    out.breaches[key] = f"{what} (step {step + 1})"
                    out.contract.append((step + 1, key[0], key[1], float("inf"), 0.0))
        if scheduler is not None:
            scheduler.step()
        model = {n: p.detach().to("cpu", copy=True) for n, p in params.items()} if out.masters else {}
        out.steps.append(RecordedStep(grads, snapshot(stepper.optimizer, stepped), taken, lrs, model))
    out.kept = kept_in(stepper.optimizer, stepped, params)
    return out


def _held(lr):
    """A param group's lr as data: a number, or a CPU copy of the Tensor it is held in (its dtype matters)."""
    return lr.detach().to("cpu", copy=True) if isinstance(lr, torch.Tensor) else lr


def _groups_by_name(optimizer: torch.optim.Optimizer, params: dict[str, torch.Tensor]) -> dict[str, dict]:
    """FQN -> its param group, by tensor identity (an optimizer built from plain tensors records no param_names)."""
    names = {id(p): n for n, p in params.items()}
    return {names[id(p)]: group for group in optimizer.param_groups for p in group["params"] if id(p) in names}
