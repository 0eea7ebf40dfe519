"""A worker's death its suite declares: the code under test ends the process with a declared status (``exits``).

Some libraries end the process on an error instead of raising (a C extension's ``exit(1)``): bitsandbytes on CUDA
at a zero-size parameter (F76). Such a declaration names a candidate and the parameters whose step ends it; those are
left out of every case's workload and stepped alone by the deviations check. When a worker dies, the parent asks its
own plan, never the worker, which case that was: only the candidate's deviations case that stands for an ``exits``
declaration covering it, ended with that status and those last words, is recorded as the declared xfail. Any other
death (another case, status or message; a parity case of the same candidate ending the same way) stays the error row
a death is (``engine.pool``), so a case cannot hide under a declaration meant for another.
"""

from __future__ import annotations

import fnmatch

from optbench.metrics import DEVIATION_OBSERVED
from optbench.results import row
from optbench.rows import bounded


def declared_exit(judge, index: int, code: int | None, stderr: str) -> tuple[list[dict], str] | None:
    """Where case ``index``'s worker died: the declared xfail if the plan's case (as the run's ``judge`` plans it,
    in a context of its own) is the candidate's deviations case of an ``exits`` declaration saying so, else None."""
    blueprint = judge.blueprint()
    entry = blueprint.entries[index]
    if entry.check != "deviations" or entry.labels["impl"] != blueprint.candidate:
        return None
    try:
        case = judge.cases.case(index, judge.new_context())
    except LookupError:
        return None
    return _declared(case, code, stderr)


def _declared(case, code: int | None, stderr: str) -> tuple[list[dict], str] | None:
    """(rows, line) of the deviations ``case`` (as the parent planned it: ``label`` the declaration's index) whose
    worker ended with ``code``, saying ``stderr`` last, where its declaration says so; else None."""
    d = case.suite.deviations[int(case.label)]
    if not (d.ended_by(code, stderr) and d.covers(case.impl) and fnmatch.fnmatchcase(case.impl_name, d.impl)):
        return None
    last = bounded(stderr.strip().splitlines()[-1] if stderr.strip() else "(nothing on stderr)", 200)
    detail = f"{d.finding}: {d.reason} Observed: still ends the process (exit {code}): {last}"
    return ([row(case.labels, check="deviation", metric=DEVIATION_OBSERVED, value=1.0, fqn=d.fqn, status="xfail",
                 detail=detail, finding=d.finding)],
            f"  XFAIL deviation {case.impl_name} {case.dtype} {d.finding} {d.fqn}: still ends the process "
            f"(exit {code}): {last}")
