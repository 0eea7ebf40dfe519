"""A result row: its columns, the statuses it may carry and their groups, the schema version, and how one is
made."""

from __future__ import annotations

SCHEMA_VERSION = 4  # 4: ``gate`` and ``finding``; 3: ``workload`` (the speed/scaling workload a timing row timed)
READABLE_SCHEMAS = (2, 3, 4)  # columns an older schema lacks read back as ""
COLUMNS = [
    "suite", "optimizer", "impl", "dtype", "hparams", "device", "workload", "check",
    "fqn", "tensor", "step", "metric", "value", "unit", "status", "gate", "finding", "detail",
]
# pass/fail: a check's verdict; error: the case raised; xfail/xpass: a declared deviation still
# deviates / no longer does; unsupported: the implementation does not take this hparam set;
# skip: cannot run here (device, dtype); info: a measurement without a verdict.
# The columns that name a case (``Case.labels`` writes them on every row); each table keys cases by these, or
# by a projection of them it documents.
CASE_KEY = ("suite", "impl", "dtype", "hparams", "device", "workload")
STATUSES = ("pass", "fail", "error", "xfail", "xpass", "unsupported", "skip", "info")
# The groups of STATUSES that code reads, each spelled here only.
PASSING = frozenset({"pass", "xpass"})  # the case holds: as documented, or a declared deviation now fixed
FAILING = frozenset({"fail", "error"})  # the run fails (exit 1)
VERIFIED = frozenset({"pass", "fail", "xfail", "xpass"})  # a row that verified something, either way
DECLARED = frozenset({"xfail", "xpass"})  # the verdict of a declared deviation (its ``finding`` names it)
NO_VERDICT = frozenset({"skip", "unsupported"})  # the case did not run here; ``info`` is a measurement
assert PASSING | FAILING | VERIFIED | DECLARED | NO_VERDICT | {"info"} == set(STATUSES)


def row(labels: dict, *, check: str, metric: str, value: float, status: str = "info", unit: str = "",
        detail: str = "", fqn: str = "", tensor: str = "", step: int | None = None, gate: str = "",
        finding: str = "") -> dict:
    """One result row: the case's ``labels`` (suite, impl, dtype, ...) plus one metric.

    ``gate`` names what decided the row's status where a check has more than one (parity: ``trajectory`` or
    ``one-step``); ``finding`` the declared deviation(s) behind an xfail/xpass (``F07``, comma-separated).
    Code reads these, never ``detail``, which is for people."""
    assert status in STATUSES, status
    out = {c: "" for c in COLUMNS} | labels
    out.update(check=check, metric=metric, value=float(value), status=status, unit=unit, detail=detail, gate=gate,
               finding=finding, fqn=fqn, tensor=tensor, step=step)
    return out
