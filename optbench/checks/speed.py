"""Step time and optimizer-state memory of an implementation, via torch.utils.benchmark.

The step is timed on a fixed set of gradients with ``Timer.blocked_autorange`` (warm-up, then
repeated blocks; median and IQR come from its Measurement). Effective GB/s counts the bytes a step
must touch at least once: read param and grad, write param, read and write every state tensor.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.utils.benchmark as benchmark

from optbench.kernels import Implementation
from optbench.parity import set_gradients
from optbench.suite import HparamSet
from optbench.workload import Workload


@dataclass(frozen=True)
class SpeedResult:
    median_s: float
    iqr_s: float
    rounds: int
    numel: int
    bytes_per_step: int
    state_bytes: dict[str, int]  # per FQN

    @property
    def params_per_s(self) -> float:
        return self.numel / self.median_s

    @property
    def gb_per_s(self) -> float:
        return self.bytes_per_step / self.median_s / 1e9


def state_bytes(optimizer: torch.optim.Optimizer, params: dict[str, torch.Tensor]) -> dict[str, int]:
    """Bytes of optimizer state per FQN (tensors only; Python scalars count as nothing)."""
    return {
        name: sum(v.numel() * v.element_size() for v in optimizer.state.get(p, {}).values() if isinstance(v, torch.Tensor))
        for name, p in params.items()
    }


def measure_speed(
    impl: Implementation, hset: HparamSet, workload: Workload, dtype, device, min_run_time: float
) -> SpeedResult:
    """Time one step of ``impl`` on ``workload``'s first gradients."""
    params = workload.materialize(dtype, device)
    stepper = impl.build(hset.param_groups(params), hset.options)
    set_gradients(params, workload, 0)
    stepper.step()  # creates state (and compiles, for the compiled variant) outside the timing
    timer = benchmark.Timer(
        stmt="step()",
        globals={"step": stepper.step},
        label=f"{impl.name} step",
        sub_label=str(dtype),
        num_threads=torch.get_num_threads(),
    )
    measurement = timer.blocked_autorange(min_run_time=min_run_time)
    per_fqn = state_bytes(stepper.optimizer, params)
    with_grad = [p for p in params.values() if p.grad is not None]
    touched = sum(3 * p.numel() * p.element_size() for p in with_grad) + 2 * sum(per_fqn.values())
    return SpeedResult(
        median_s=measurement.median,
        iqr_s=measurement.iqr,
        rounds=len(measurement.times),
        numel=sum(p.numel() for p in with_grad),
        bytes_per_step=touched,
        state_bytes=per_fqn,
    )
