"""Optimizer memory on the timing workload: state bytes per FQN and per parameter, and the step's peak
transient allocation (optbench.perf.peak_memory) per implementation, after one step created the state."""

from __future__ import annotations

from optbench.cases import Case, Outcome, RunContext
from optbench.checks.registry import register_check
from optbench.metrics import (
    MEM_PEAK_TRANSIENT_BYTES,
    MEM_PEAK_TRANSIENT_BYTES_PER_PARAM,
    MEM_STATE_BYTES,
    MEM_STATE_BYTES_PER_PARAM,
)
from optbench.perf.case_timing import runnable_cases, setting_names, state_bytes, stepped_once
from optbench.perf.peak_memory import peak_transient_bytes
from optbench.report import performance
from optbench.results import row
from optbench.suite.spec import Suite


@register_check(
    default=True, alone=True,
    # dtypes: those measured, of the run's (null or all: every one; an implementation that runs none of them is
    # measured at its first)
    config={"dtypes": None},
    sections=lambda rows: [("Memory (state, and the step's peak transient allocation)", performance.memory(rows))])
class MemoryCheck:
    name = "memory"
    requires = ()

    def cases(self, suite: Suite, ctx: RunContext) -> list[Case]:
        # The compiled variant keeps the for-loop's state tensors: compiling only to count them is waste.
        return [c for c in runnable_cases(suite, ctx, setting_names(ctx.settings.memory.dtypes, None))
                if not c.impl.compiled]

    def group(self, case: Case) -> tuple:
        return (case.suite.name, self.name)

    def run(self, case: Case, ctx: RunContext) -> Outcome:
        stepper, params, step, _ = stepped_once(case, ctx)
        per_fqn = state_bytes(stepper.optimizer, params)
        total = sum(per_fqn.values())
        numel = max(1, sum(p.numel() for p in params.values() if p.requires_grad))
        peak = peak_transient_bytes(step, ctx.device)
        labels = case.labels
        how = "allocator peak" if ctx.device.type == "cuda" else "torch.profiler memory records"
        rows = [row(labels, check="memory", metric=MEM_STATE_BYTES, value=total, unit="B"),
                row(labels, check="memory", metric=MEM_STATE_BYTES_PER_PARAM, value=total / numel, unit="B"),
                row(labels, check="memory", metric=MEM_PEAK_TRANSIENT_BYTES, value=peak, unit="B", detail=how),
                row(labels, check="memory", metric=MEM_PEAK_TRANSIENT_BYTES_PER_PARAM, value=peak / numel, unit="B",
                    detail=how)]
        rows += [row(labels, check="memory", metric=MEM_STATE_BYTES, value=b, unit="B", fqn=fqn)
                 for fqn, b in per_fqn.items()]
        return Outcome(rows, f"  memory {case.impl_name:>9} {case.dtype:>8}: state {total / numel:.2f} B/param, "
                             f"peak transient {peak / numel:.2f} B/param ({peak / 1e6:.1f} MB)")
