"""Optimizer-state memory: bytes of state per FQN and per parameter, after one step."""

from __future__ import annotations

from optbench.cases import Case, Outcome, RunContext
from optbench.checks.speed import runnable_cases, state_bytes, stepped_once
from optbench.results import row
from optbench.suite import Suite


class MemoryCheck:
    name = "memory"
    requires = ()

    def cases(self, suite: Suite, ctx: RunContext) -> list[Case]:
        # The compiled variant keeps the for-loop's state tensors: compiling only to count them is waste.
        return [c for c in runnable_cases(suite, ctx) if not c.impl.compiled]

    def group(self, case: Case) -> tuple:
        return (case.suite.name, self.name)

    def run(self, case: Case, ctx: RunContext) -> Outcome:
        stepper, params, _ = stepped_once(case, ctx, "speed")
        per_fqn = state_bytes(stepper.optimizer, params)
        total = sum(per_fqn.values())
        numel = sum(p.numel() for p in params.values() if p.requires_grad)
        labels = case.labels
        rows = [row(labels, check="memory", metric="mem.state_bytes", value=total, unit="B"),
                row(labels, check="memory", metric="mem.state_bytes_per_param", value=total / max(numel, 1), unit="B")]
        rows += [row(labels, check="memory", metric="mem.state_bytes", value=b, unit="B", fqn=fqn) for fqn, b in per_fqn.items()]
        return Outcome(rows, f"  memory {case.impl_name:>9} {case.dtype:>8}: state {total / max(numel, 1):.2f} B/param")
