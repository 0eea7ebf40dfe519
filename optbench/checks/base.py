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


def not_taken_reason(impl, hset) -> str:
    """Why the candidate does not take this set, as parity says it ("" if it does): an option its constructor lacks,
    or one its class fixes by convention at another value (``conventions``)."""
    if missing := impl.options_not_taken(hset.option_names()):
        return f"unsupported by candidate: {impl.not_taking(missing)}"
    clash = next(filter(None, (impl.differs_from_conventions(o) for o in (hset.options, *(g.options
                                                                                          for g in hset.groups)))), "")
    return f"unsupported by candidate: {clash}" if clash else ""


def reference_defaults(case, judging) -> dict:
    """The defaults a case's hparam sets are completed from: what the judge was handed (``judging``: the parent never
    imports a candidate), else the suite's reading of the implementation's class."""
    return judging.defaults if judging is not None else case.suite.defaults(case.impl.optimizer_class, case.impl.spec)


def handed_over(tape, ctx, labels: dict, check: str) -> Outcome | None:
    """After a case's questions: where its worker records, the case awaits its judge (that outcome); where the judge
    replays, every recorded answer must have been asked for; None: judge it now."""
    if ctx.recording_to is not None:
        return awaiting_judge(labels, check)
    if tape.replaying:
        tape.finished()
    return None


def awaiting_judge(labels: dict, check: str) -> Outcome:
    """What a worker writes for a case it recorded for the judge (``engine.judge``): an error row, which the judge's
    verdict replaces (and which stays, saying so, if that verdict never comes)."""
    return Outcome([row(labels, check=check, metric=CASE_ERROR, value=1, status="error",
                        detail="recorded for the judge, whose verdict never came")])
