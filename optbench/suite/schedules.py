"""Learning-rate schedules applied mid-run: torch's scheduler on the implementation, the documented
formula on the reference.

A hparam set may carry ``schedule: {kind: step, step_size: 10, gamma: 0.5}`` (``StepLR``) or
``schedule: {kind: warmup_cosine, warmup: 5, total: 30}`` (``LambdaLR`` with a linear warm-up, then a
cosine decay to 0 at ``total``). The implementation gets torch's scheduler, stepped after every
optimizer step, as users write it; the reference gets the lr of each step from the closed form, so a
scheduler that misses a Tensor lr, or an optimizer that caches its lr, shows as a parity error.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

KINDS = ("step", "warmup_cosine")


def validate(schedule: Mapping) -> dict:
    """A schedule's keys, checked (a typo is an error, not a silent default)."""
    schedule = dict(schedule)
    kind = schedule.get("kind")
    allowed = {"step": {"kind", "step_size", "gamma"}, "warmup_cosine": {"kind", "warmup", "total"}}
    if kind not in allowed:
        raise ValueError(f"schedule kind {kind!r}: expected one of {', '.join(KINDS)}")
    unknown = sorted(set(schedule) - allowed[kind])
    if unknown:
        raise ValueError(f"schedule {kind} has unknown key(s) {', '.join(unknown)}; "
                         f"allowed: {', '.join(sorted(allowed[kind]))}")
    return schedule


def warmup_cosine(warmup: int, total: int):
    """The multiplicative factor after ``epoch`` scheduler steps: linear warm-up from 1/warmup to 1, then
    a half cosine down to 0 at ``total``."""

    def factor(epoch: int) -> float:
        if epoch < warmup:
            return (epoch + 1) / warmup
        progress = min((epoch - warmup) / max(total - warmup, 1), 1.0)
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    return factor


def factor(schedule: Mapping, epoch: int) -> float:
    """The documented lr factor after ``epoch`` scheduler steps (StepLR: gamma ** (epoch // step_size))."""
    if schedule["kind"] == "step":
        return float(schedule.get("gamma", 0.1)) ** (epoch // int(schedule["step_size"]))
    return warmup_cosine(int(schedule.get("warmup", 5)), int(schedule.get("total", 30)))(epoch)


def torch_scheduler(schedule: Mapping, optimizer: torch.optim.Optimizer):
    """torch's scheduler for ``schedule`` on ``optimizer``."""
    if schedule["kind"] == "step":
        return torch.optim.lr_scheduler.StepLR(optimizer, step_size=int(schedule["step_size"]),
                                               gamma=float(schedule.get("gamma", 0.1)))
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, warmup_cosine(int(schedule.get("warmup", 5)), int(schedule.get("total", 30))))


def describe(schedule: Mapping | None) -> str:
    if not schedule:
        return ""
    if schedule["kind"] == "step":
        return f"StepLR(step_size={schedule['step_size']}, gamma={schedule.get('gamma', 0.1)})"
    return f"LambdaLR(warm-up {schedule.get('warmup', 5)}, cosine to {schedule.get('total', 30)})"
