"""The one interface every check implements: cases in, result rows out."""

from __future__ import annotations

from typing import Protocol

from optbench.cases import Case, Outcome, RunContext
from optbench.metrics import CASE_ERROR
from optbench.results import row
from optbench.suite.spec import Suite


class Check(Protocol):
    """A kind of evidence about an implementation.

    ``cases`` lists the units of work for one suite; ``run`` turns one case into result rows (an
    exception escaping ``run`` is recorded by the runner as an ``error`` row of that case; a case
    should write at least one row, a ``skip`` one with the reason where it cannot say more). Checks
    that read what another check left in ``ctx.scratch`` name it in ``requires``: the runner runs
    cases of the same ``group`` together, in registry order, and clears the scratch between groups,
    and refuses (a usage error) a selection of checks without what one of them requires.
    """

    name: str
    requires: tuple[str, ...]

    def cases(self, suite: Suite, ctx: RunContext) -> list[Case]: ...

    def group(self, case: Case) -> tuple: ...

    def run(self, case: Case, ctx: RunContext) -> Outcome: ...


def awaiting_judge(labels: dict, check: str) -> Outcome:
    """What a worker writes for a case it recorded for the judge (``engine.judge``): an error row, which the judge's
    verdict replaces (and which stays, saying so, if that verdict never comes)."""
    return Outcome([row(labels, check=check, metric=CASE_ERROR, value=1, status="error",
                        detail="recorded for the judge, whose verdict never came")])
