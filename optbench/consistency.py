"""Whether a case's rows agree with themselves: a ``pass`` that its own tolerance contradicts is no pass.

A parity case writes its verdict row (``parity.max_err_eps``, no FQN: the worst error) beside its tolerance
(``parity.tol_eps``: the largest tolerance any of its rows was held to) and each tensor's worst error. A ``pass``
holds only where every one of those errors is a number within that tolerance, so a ``pass`` row whose figures say
otherwise was not written by the check that measured them (a worker that forged its verdict, a file edited after
the run). The run records such a case as an error (``engine.writer``); ``optbench report`` and ``compare`` refuse a
results file that holds one (``results.load_results``).
"""

from __future__ import annotations

import math

from optbench.metrics import PARITY_MAX_ERR_EPS, PARITY_TOL_EPS
from optbench.rows import CASE_KEY, as_float


def contradicted(rows: list[dict]) -> str:
    """Why the ``pass`` verdicts among ``rows`` (any number of cases) contradict their own figures, "" if none do."""
    cases: dict[tuple, dict] = {}
    for r in rows:
        if r.get("check") == "parity" and r.get("metric") in (PARITY_MAX_ERR_EPS, PARITY_TOL_EPS):
            case = cases.setdefault(tuple(r.get(k, "") for k in CASE_KEY), {"tol": None, "verdict": None, "errs": []})
            if r["metric"] == PARITY_TOL_EPS:
                case["tol"] = as_float(r.get("value"))
            elif not r.get("fqn"):
                case["verdict"] = r
            else:
                case["errs"].append((f"{r.get('fqn')}/{r.get('tensor')}", as_float(r.get("value"))))
    for key, case in cases.items():
        verdict = case["verdict"]
        if verdict is None or verdict.get("status") != "pass":
            continue
        name = " ".join(str(k) for k in key[1:4])
        tol = case["tol"]
        if tol is None or not math.isfinite(tol):
            return f"parity {name}: a pass without a finite tolerance beside it ({PARITY_TOL_EPS})"
        for what, err in [("the case", as_float(verdict.get("value"))), *case["errs"]]:
            if not (err <= tol):  # NaN too
                return f"parity {name}: a pass, but {what} measured {err:.4g} eps over its tolerance {tol:.4g} eps"
    return ""
