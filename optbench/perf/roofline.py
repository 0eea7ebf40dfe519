"""The least a step must do: bytes moved (and, for Muon, matmul FLOPs), per optimizer and option set.

A step of an elementwise optimizer must at least read each parameter and its gradient and write the
parameter, and read and write each state tensor once: ``streams`` counts those parameter-sized passes,
times the parameter's element size (torch keeps state in the parameter's dtype). The model is the
algorithm's, not an implementation's: a variant that moves more (a foreach temporary, a second pass)
shows as a lower % of roofline, never as a bigger model. At float32:

========================================  =======  ==========================================
optimizer (options)                        B/param  passes
========================================  =======  ==========================================
SGD                                        12       p r/w, g r
SGD, momentum > 0                          20       + momentum_buffer r/w
Adam, AdamW, NAdam, RAdam, Adamax          28       + exp_avg r/w, exp_avg_sq (exp_inf) r/w
Adam, AdamW with amsgrad                   36       + max_exp_avg_sq r/w
Adagrad                                    20       + sum r/w
Adadelta                                   28       + square_avg, acc_delta r/w
RMSprop                                    20       + square_avg; +8 momentum > 0; +8 centered
Rprop                                      28       + prev, step_size r/w
ASGD                                       20       + ax r/w
Adafactor, >= 2-D                          16       p r/w, g r twice (the factor means must be
                                                    complete before any element is updated), plus
                                                    row_var/col_var r/w (rows + columns elements)
Adafactor, 1-D and 0-D                     20       + variance r/w
Muon (2-D)                                 20       + momentum_buffer r/w; plus Newton-Schulz
                                                    FLOPs: ns_steps x (4 a^2 b + 2 a^3), a <= b
========================================  =======  ==========================================

The roofline time is ``max(bytes / bandwidth, flops / matmul rate)`` with both ceilings measured in
the same run (``optbench.perf.ceilings``). A candidate whose spec declares quantized state (``quantized:``) has
its state passes counted at what it keeps: a code (a byte; 4-bit, half of one) and a float32 scale per block for
each element of a parameter it quantizes (an 8-bit AdamW at float32: 12 + 4 x 1.016 = 16.1 B/param, not 28). A
suite for an optimizer not in this table declares its own
(``roofline: {streams: 5}`` for Lion: p r/w, g r, exp_avg r/w; ``optbench.suite.keys.declared_cost``).
LBFGS (a closure, line search and history) and SparseAdam (work in proportion to the gradient's nonzeros) have
no model: their rows carry no % of roofline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

STREAMS = {"SGD": 3, "Adam": 7, "AdamW": 7, "NAdam": 7, "RAdam": 7, "Adamax": 7, "Adagrad": 5, "Adadelta": 7,
           "RMSprop": 5, "Rprop": 7, "ASGD": 5, "Adafactor": 5, "Muon": 5}


@dataclass(frozen=True)
class StepCost:
    """What one step must move and compute; ``working_set``: distinct bytes it touches (p, g, state)."""

    bytes: int
    flops: int
    working_set: int
    params: int

    @property
    def bytes_per_param(self) -> float:
        return self.bytes / max(self.params, 1)


def _streams(optimizer: str, group: dict, p: torch.Tensor) -> int:
    """Parameter-sized passes for ``p`` (elements of its own size)."""
    n = STREAMS[optimizer]
    if optimizer == "SGD" and group.get("momentum", 0):
        n += 2
    elif optimizer in ("Adam", "AdamW") and group.get("amsgrad"):
        n += 2
    elif optimizer == "RMSprop":
        n += 2 * bool(group.get("momentum", 0)) + 2 * bool(group.get("centered"))
    elif optimizer == "Adafactor" and p.dim() >= 2:
        n = 4
    return n


def _factor_elements(p: torch.Tensor) -> int:
    """Adafactor's row_var and col_var elements for a >= 2-D parameter (read and written)."""
    *batch, rows, cols = p.shape
    return (rows + cols) * (int(torch.Size(batch).numel()) if batch else 1)


def _newton_schulz_flops(p: torch.Tensor, ns_steps: int) -> int:
    a, b = sorted(p.shape[-2:])
    return ns_steps * (4 * a * a * b + 2 * a ** 3)


def step_cost(optimizer: str, param_groups: list[dict], declared: dict | None = None,
              state_bytes: Callable[[torch.Tensor], float] | None = None) -> StepCost | None:
    """The model for ``optimizer`` (a torch.optim class name), or the one a suite ``declared``
    (``optbench.suite.keys.declared_cost``), over its param groups' parameters that have a gradient; None for
    optimizers without a model. ``state_bytes``: the bytes per element of a parameter's state arrays where they are
    not the parameter's own (an 8-bit optimizer's codes and per-block scales); the parameter and its gradient keep
    theirs."""
    if declared:
        return _declared_step_cost(declared, param_groups, state_bytes)
    if optimizer not in STREAMS:
        return None
    moved = flops = working = params = 0
    for group in param_groups:
        for p in group["params"]:
            if p.grad is None or p.grad.is_sparse:
                continue
            size = p.element_size()
            state_size = state_bytes(p) if state_bytes is not None else size
            streams = _streams(optimizer, group, p)
            extra = 2 * _factor_elements(p) if optimizer == "Adafactor" and p.dim() >= 2 else 0
            moved += (3 * p.numel() + extra) * size + (streams - 3) * p.numel() * state_size
            state_arrays = (streams - 3) // 2 if optimizer != "Adafactor" or p.dim() < 2 else 0
            working += (2 * p.numel() + extra // 2) * size + state_arrays * p.numel() * state_size
            params += p.numel()
            if optimizer == "Muon":
                flops += _newton_schulz_flops(p, int(group.get("ns_steps", 5)))
    return StepCost(moved, flops, working, params)


def _declared_step_cost(declared: dict, param_groups: list[dict],
                        state_bytes: Callable[[torch.Tensor], float] | None) -> StepCost:
    moved = flops = working = params = 0
    streams = declared["streams"]
    for group in param_groups:
        for p in group["params"]:
            if p.grad is None or p.grad.is_sparse:
                continue
            size = p.element_size()
            state_size = state_bytes(p) if state_bytes is not None else size
            moved += 3 * p.numel() * size + (streams - 3) * p.numel() * state_size
            working += 2 * p.numel() * size + (streams - 3) // 2 * p.numel() * state_size
            flops += int(declared["flops_per_param"] * p.numel())
            params += p.numel()
    return StepCost(moved, flops, working, params)
