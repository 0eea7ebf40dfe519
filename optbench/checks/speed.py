"""Step time of each implementation, via torch.utils.benchmark.

The step is timed on a fixed set of gradients (or, closure-driven, on the objective's closure) with
``Timer.blocked_autorange`` (warm-up, then repeated blocks; median and IQR come from its
Measurement). Effective GB/s counts the bytes a step must touch at least once: read param and grad,
write param, read and write every state tensor.
"""

from __future__ import annotations

import torch
import torch.utils.benchmark as benchmark

from optbench.cases import Case, Outcome, RunContext
from optbench.results import row
from optbench.suite import DTYPES, Suite
from optbench.trajectory import objective_closure, set_gradients


def state_bytes(optimizer: torch.optim.Optimizer, params: dict[str, torch.Tensor]) -> dict[str, int]:
    """Bytes of optimizer state per FQN (tensors only; Python scalars count as nothing)."""
    return {
        name: sum(v.numel() * v.element_size() for v in optimizer.state.get(p, {}).values() if isinstance(v, torch.Tensor))
        for name, p in params.items()
    }


def stepped_once(case: Case, ctx: RunContext, purpose: str):
    """Build the case's optimizer on the ``purpose`` workload, step once; (stepper, params, step callable)."""
    workload = ctx.workload(case.suite, case.hset, case.dtype, steps=1, purpose=purpose)
    params = workload.materialize(DTYPES[case.dtype], ctx.device)
    stepper = case.hset.build(case.impl, params)
    if workload.objective is not None:
        closure = objective_closure(stepper.optimizer, params, workload)
        step = lambda: stepper.step(closure)  # noqa: E731
    else:
        set_gradients(params, workload, 0)
        step = stepper.step
    step()  # creates state (and compiles, for the compiled variant) outside any timing
    return stepper, params, step


def runnable_cases(suite: Suite, ctx: RunContext) -> list[Case]:
    hset = suite.hparams[0]
    return [Case(suite, impl, dtype, hset, ctx.device) for dtype in ctx.dtypes[suite.name]
            for impl in ctx.impls[suite.name] if not ctx.unavailable(impl, dtype)]


class SpeedCheck:
    name = "speed"
    requires = ()

    def cases(self, suite: Suite, ctx: RunContext) -> list[Case]:
        return runnable_cases(suite, ctx)

    def group(self, case: Case) -> tuple:
        return (case.suite.name, self.name)

    def run(self, case: Case, ctx: RunContext) -> Outcome:
        stepper, params, step = stepped_once(case, ctx, "speed")
        timer = benchmark.Timer(stmt="step()", globals={"step": step}, label=f"{case.impl_name} step",
                                sub_label=case.dtype, num_threads=torch.get_num_threads())
        m = timer.blocked_autorange(min_run_time=float(ctx.cfg.speed.min_run_time))
        with_grad = [p for p in params.values() if p.requires_grad]
        numel = sum(p.numel() for p in with_grad)
        touched = sum(3 * p.numel() * p.element_size() for p in with_grad) + 2 * sum(state_bytes(stepper.optimizer, params).values())
        labels = case.labels
        rows = [row(labels, check="speed", metric="time.step_ms", value=m.median * 1e3, unit="ms"),
                row(labels, check="speed", metric="time.step_ms_iqr", value=m.iqr * 1e3, unit="ms"),
                row(labels, check="speed", metric="time.rounds", value=len(m.times)),
                row(labels, check="speed", metric="speed.params_per_s", value=numel / m.median, unit="params/s"),
                row(labels, check="speed", metric="speed.gb_per_s", value=touched / m.median / 1e9, unit="GB/s")]
        return Outcome(rows, f"  speed {case.impl_name:>10} {case.dtype:>8}: {m.median * 1e3:8.3f} ms/step "
                             f"(IQR {m.iqr * 1e3:.3f}), {touched / m.median / 1e9:.2f} GB/s")
