"""A result row: its columns, the statuses it may carry and their groups, the schema version, and how one is
made."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from numbers import Real

SCHEMA_VERSION = 5  # 5: ``digest``; 4: ``gate`` and ``finding``; 3: ``workload`` (a timing row's workload)
READABLE_SCHEMAS = (2, 3, 4, 5)  # columns an older schema lacks read back as ""
# The columns that name a case (``Case.labels`` writes them on every row); each table keys cases by these, or
# by a projection of them it documents.
CASE_KEY = ("suite", "impl", "dtype", "hparams", "device", "workload")
# pass/fail: a check's verdict; error: the case raised; xfail/xpass: a declared deviation still
# deviates / no longer does; unsupported: the implementation does not take this hparam set;
# skip: cannot run here (device, dtype); info: a measurement without a verdict.
STATUSES = ("pass", "fail", "error", "xfail", "xpass", "unsupported", "skip", "info")
# The groups of STATUSES that code reads, each spelled here only.
PASSING = frozenset({"pass", "xpass"})  # the case holds: as documented, or a declared deviation now fixed
FAILING = frozenset({"fail", "error"})  # the run fails (exit 1)
VERIFIED = frozenset({"pass", "fail", "xfail", "xpass"})  # a row that verified something, either way
DECLARED = frozenset({"xfail", "xpass"})  # the verdict of a declared deviation (its ``finding`` names it)
NO_VERDICT = frozenset({"skip", "unsupported"})  # the case did not run here; ``info`` is a measurement
assert PASSING | FAILING | VERIFIED | DECLARED | NO_VERDICT | {"info"} == set(STATUSES)


@dataclass(frozen=True)
class Row:
    """A result row as it enters a run's record (``Results.extend``, the journal): its fields are the columns,
    in order. Inside a run rows are plain dicts (``row``); ``Row.from_dict(r).as_dict()`` checks one."""

    suite: str
    optimizer: str
    impl: str
    dtype: str
    hparams: str
    device: str
    workload: str
    check: str
    fqn: str
    tensor: str
    step: int | None
    metric: str
    value: float
    unit: str
    status: str
    gate: str
    finding: str
    detail: str

    @classmethod
    def from_dict(cls, d: dict) -> Row:
        """``d`` as a Row: a ValueError (one line, naming the bad field) when its status is none of STATUSES, its
        value not a number, a column naming its case missing, or a key no column; other missing columns are ""."""
        def bad(why: str) -> ValueError:
            return ValueError(f"result row ({d.get('check', '?')} {d.get('metric', '?')}): {why}")

        if not isinstance(d, dict):
            raise ValueError(f"result row: a {type(d).__name__}, not a dict")
        if unknown := [k for k in d if k not in COLUMNS]:
            raise bad(f"{unknown[0]!r} is no column of {', '.join(COLUMNS)}")
        if missing := [k for k in (*CASE_KEY, "check", "metric", "value", "status") if k not in d]:
            raise bad(f"no {missing[0]!r} column")
        if d["status"] not in STATUSES:
            raise bad(f"status {d['status']!r} is none of {', '.join(STATUSES)}")
        if isinstance(d["value"], bool) or not isinstance(d["value"], Real):
            raise bad(f"value {d['value']!r} is not a number")
        text = {c: bounded(d[c]) for c in ("detail", "tensor", "fqn") if isinstance(d.get(c), str)}
        return cls(**({c: "" for c in COLUMNS} | {"step": None} | d | {"value": float(d["value"])} | text))

    def as_dict(self) -> dict:
        return {c: getattr(self, c) for c in COLUMNS}


COLUMNS = [f.name for f in fields(Row)]
TEXT_LIMIT = 2000  # characters of a row's text (an exception message, a crash's stderr) kept in its record


def bounded(text: str, limit: int = TEXT_LIMIT) -> str:
    """``text`` as recorded: whole up to ``limit`` characters, else its head and tail with the cut said (the code
    under test's messages can be megabytes; a dead worker's whole log stays in the run's workers/ folder)."""
    if len(text) <= limit:
        return text
    head, tail = text[: limit * 2 // 3], text[-(limit // 3):]
    return f"{head} [... {len(text) - len(head) - len(tail)} characters cut ...] {tail}"


def first_words(message: str) -> str:
    """An exception's message as a row names it: its first line, and the next non-empty one where the first only
    introduces it (ends with a colon: TorchInductor's "backend='inductor' raised:")."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if not lines:
        return ""
    return f"{lines[0]} {lines[1]}" if lines[0].endswith(":") and len(lines) > 1 else lines[0]


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


def as_float(x) -> float:
    """A row's value as a float: a number, or "inf", "-inf", "nan" as text; NaN for anything else."""
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan
