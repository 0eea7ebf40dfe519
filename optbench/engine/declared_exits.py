"""A worker's death its suite declares: the code under test ends the process with a declared status (``exits``).

Some libraries end the process on an error instead of raising (a C extension's ``exit(1)``): bitsandbytes on CUDA
at a zero-size parameter (F76). Such a declaration names the parameters whose step ends it; those are left out of
every case's workload and stepped alone by the deviations check, whose worker says, before it steps them, which
declarations the case may end by (``Executor.declared_exits``). When that worker then dies, the parent records the
case as the declared xfail only where its own plan agrees: the declaration is an ``exits`` one of the case's suite,
it covers the case's implementation, dtype and set, and the status and last words are those declared. Anything else
stays the error row a death is (``engine.pool``), so a case cannot hide under a declaration meant for another.
"""

from __future__ import annotations

from types import SimpleNamespace

from optbench.metrics import DEVIATION_OBSERVED
from optbench.results import row
from optbench.rows import bounded


def declared_exit(planner, blueprint, index: int, said: list[int], code: int | None,
                  stderr: str) -> tuple[list[dict], str] | None:
    """(rows, line) of case ``index`` whose worker ended with ``code`` after saying it may end by the declarations
    ``said`` (indices in its suite's deviations), or None where no declaration of the plan's explains it."""
    entry = blueprint.entries[index]
    labels = entry.labels
    suite = next((s for s in planner.suites if s.name == labels["suite"]), None)
    if suite is None:
        return None
    facts = blueprint.judging or {}
    is_candidate = blueprint.candidate is not None and labels["impl"] == blueprint.candidate
    impl = SimpleNamespace(name=labels["impl"],
                           inherits_deviations=bool(facts.get("inherits_deviations")) if is_candidate else True)
    for k in said:
        if not 0 <= k < len(suite.deviations):
            continue
        d = suite.deviations[k]
        if not d.ended_by(code, stderr) or d not in suite.deviations_for(impl, labels["dtype"], labels["hparams"],
                                                                           d.check):
            continue
        last = bounded(stderr.strip().splitlines()[-1] if stderr.strip() else "(nothing on stderr)", 200)
        detail = f"{d.finding}: {d.reason} Observed: still ends the process (exit {code}): {last}"
        check = "deviation" if entry.check == "deviations" else entry.check
        return ([row(labels, check=check, metric=DEVIATION_OBSERVED, value=1.0, fqn=d.fqn, status="xfail",
                     detail=detail, finding=d.finding)],
                f"  XFAIL {check} {labels['impl']} {labels['dtype']} {d.finding} {d.fqn}: still ends the process "
                f"(exit {code}): {last}")
    return None
