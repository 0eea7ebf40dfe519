"""Cross-implementation agreement: each variant's trajectory against torch's for-loop at the same dtype.

It reads the snapshots the parity check kept for the same group (dtype x hparam set), so it ``requires`` parity
(a run with cross and without parity is a usage error); where parity left none, a ``skip`` row says so. Tensors under
a declared deviation for either side are left out, as in parity. Each side may be ``tolerance_eps``
away from the reference, so the bound is ``cross_tolerance_eps``. A candidate judged with conventions of its own
(a step per param group, debiased moments) has another reference than the for-loop's: a ``skip`` row says so (with
a per-group step, a parameter that missed a gradient rightly takes another bias correction than torch's).
"""

from __future__ import annotations

import torch

from optbench.adapters.quantized import quantizes
from optbench.cases import Case, Outcome, RunContext
from optbench.checks.parity import BASELINE, ParityCheck
from optbench.checks.registry import register_check
from optbench.metrics import CASE_SKIPPED, PARITY_XMAX_ERR_EPS_VS_FORLOOP
from optbench.numerics.accuracy import cross_error, cross_tolerance_eps
from optbench.report import tables
from optbench.results import row
from optbench.suite.spec import DTYPES, Suite


@register_check(default=True, counted="cross", judged="from_parity",
                sections=lambda rows: [("Cross-implementation agreement", tables.cross(rows))])
class CrossCheck:
    name = "cross"
    requires = ("parity",)

    def cases(self, suite: Suite, ctx: RunContext) -> list[Case]:
        if not any(i.name == BASELINE for i in ctx.impls[suite.name]):
            return []
        return [c for c in ParityCheck().cases(suite, ctx) if not c.skip and c.impl.name != BASELINE]

    def group(self, case: Case) -> tuple:
        return case.trajectory_group

    def run(self, case: Case, ctx: RunContext) -> Outcome:
        suite_options = case.suite.reference_options
        own = {k: v for k, v in case.impl.reference_options(suite_options).items() if suite_options.get(k) != v}
        if own:  # a candidate's conventions: its reference is another, and the two trajectories may rightly differ
            return Outcome([row(case.labels, check="cross", metric=CASE_SKIPPED, value=1, status="skip",
                                detail=f"judged by another reference than the for-loop's (its conventions: "
                                       f"{', '.join(f'{k}={v}' for k, v in sorted(own.items()))}): parity holds each "
                                       "to its own")])
        mine = ctx.scratch.get(("snapshots", case.impl_name))
        base = ctx.scratch.get(("snapshots", BASELINE))
        if mine is None or base is None:  # one side errored, was skipped or unsupported: parity's row says which
            side = case.impl_name if mine is None else BASELINE
            return Outcome([row(case.labels, check="cross", metric=CASE_SKIPPED, value=1, status="skip",
                                detail=f"parity left no trajectory of {side} for this case (its parity row says why)")])
        skip = ctx.scratch.get(("declared", case.impl_name), set()) | ctx.scratch.get(("declared", BASELINE), set())
        skip |= {k for snap in (*mine, *base) for k in snap if k[1] in case.impl.skipped_state}  # a candidate spec's
        quantized = {f for snap in base for (f, t), a in snap.items()  # judged by the quantized check, not parity
                     if t == "param" and quantizes(case.impl.spec, a.size)}
        elsewhere = {k for snap in base for k in snap if k[0] in quantized} - skip
        skip |= elsewhere
        compared = {k for snap in (*mine, *base) for k in snap} - skip
        if not compared:  # nothing left to compare never passes
            return Outcome([row(case.labels, check="cross", metric=CASE_SKIPPED, value=1, status="skip",
                                detail=f"nothing to compare: all {len(skip)} tensors are under declared deviations")])
        eps = torch.finfo(DTYPES[case.dtype]).eps
        x = cross_error(mine, base, eps, skip=frozenset(skip))
        bound = cross_tolerance_eps(len(base))
        status = "pass" if x <= bound else "fail"
        declared = len(skip) - len(elsewhere)
        detail = f"max {x:.3g} eps against the for-loop (bound {bound:.3g} eps" + (
            f", {declared} declared-deviation tensors left out" if declared else "") + (
            f", {len(quantized)} parameters' quantized state left to the quantized check" if quantized else "") + ")"
        rows = [row(case.labels, check="cross", metric=PARITY_XMAX_ERR_EPS_VS_FORLOOP, value=x, unit="eps",
                    status=status, detail=detail)]
        return Outcome(rows, "" if status == "pass"
                       else f"  FAIL  cross  {case.impl_name:>10} {case.dtype:>8} {case.hset.name}: {detail}")
