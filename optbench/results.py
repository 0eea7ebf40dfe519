"""The tidy results table: one row per case and metric, saved atomically as JSON and CSV, and read back.

The JSON file (``results.json``) is the record: schema version, machine, config, how the run ended
(``run``: finished or not, planned and finished cases) and rows. The CSV (``results.csv``) holds the same rows
for pandas/spreadsheets. Both are written once, when the run ends (an interrupt included), through a
temporary file and ``os.replace``: never half-written. While it runs, each case's rows go to its journal
(``optbench.journal``) as the case finishes, so a killed run loses nothing it measured.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from optbench.consistency import contradicted
from optbench.metrics import RUN_CASE_S, TIME_UNSTABLE
from optbench.rows import (
    CASE_KEY,
    COLUMNS,
    DECLARED,
    FAILING,
    NO_VERDICT,
    PASSING,
    READABLE_SCHEMAS,
    SCHEMA_VERSION,
    STATUSES,
    VERIFIED,
    Row,
    as_float,
    row,
)
from optbench.usage import EXIT_CHECK_FAILED, EXIT_INCOMPLETE, EXIT_NOTHING_VERIFIED, EXIT_OK, UsageError

MEASURING_CHECKS = ("speed", "memory", "scaling")  # checks whose product is a measurement (info rows), not a verdict
PASS, FAIL, MEASURED, NOTHING_VERIFIED = "PASS", "FAIL", "MEASURED", "NOTHING VERIFIED"
INCOMPLETE = "INCOMPLETE"
FINISHED = "finished"
STOPPED = "stopped"  # at max_failures failing cases: a FAIL whatever the rest would have said


@dataclass(frozen=True)
class Verdict:
    """A run's (or a case's) verdict: ``name`` (PASS, FAIL, MEASURED, NOTHING VERIFIED) and why, in words."""

    name: str
    why: str = ""

    @property
    def exit_code(self) -> int:
        return {FAIL: EXIT_CHECK_FAILED, NOTHING_VERIFIED: EXIT_NOTHING_VERIFIED,
                INCOMPLETE: EXIT_INCOMPLETE}.get(self.name, EXIT_OK)

    def __str__(self) -> str:
        return f"{self.name}: {self.why}" if self.why else self.name


def _some(texts, n: int = 2, sep: str = "; ") -> str:
    texts = list(dict.fromkeys(str(t) for t in texts if t))
    return sep.join(texts[:n]) + (f"{sep}and {len(texts) - n} more" if len(texts) > n else "")


def _case(r: dict) -> tuple:
    return (r.get("check"), *(r.get(k) for k in CASE_KEY))


def _cases(rows: list[dict]) -> str:
    """How many cases (check x CASE_KEY) the rows are of, and of which checks: ``3 case(s) of parity, cross``."""
    return f"{len(set(map(_case, rows)))} case(s) of {_some((r.get('check') for r in rows), 9, ', ')}"


def incomplete(run: dict | None) -> str:
    """Why a run (results.json's ``run``) is incomplete, in words ("" when it finished, or says nothing)."""
    if not isinstance(run, dict) or run.get("status", FINISHED) == FINISHED:
        return ""
    done, planned = run.get("finished_cases", "?"), run.get("planned_cases", "?")
    return f"{done} of {planned} cases ran ({run.get('how') or run.get('status')})"


def verdict(rows, checks=(), run: dict | None = None) -> Verdict:
    """The one rule, over ``rows``, a run's ``run`` record deciding first.

    INCOMPLETE: the run did not finish its plan (``run``: results.json's record of how it ended): exit 4, never a
    PASS, whatever its rows say (FAIL where it stopped at ``max_failures`` failing cases); the rest of the rule
    applies to a finished run (``checks``: the run's, to name when none had a case).

    FAIL: a ``fail`` or ``error`` row. PASS: else a row that verified something (pass, fail, xfail, xpass).
    MEASURED: else measurements (``info`` rows) of the measuring checks only (speed, memory, scaling).
    NOTHING VERIFIED: else (no row at all, or only skip, unsupported and info): exit 3, never a PASS."""
    if isinstance(rows, pd.DataFrame):  # the columns the rule reads, as lists (DataFrame.to_dict: 40 ms a run)
        columns = [c for c in ("check", "status", "metric", "value", "detail", *CASE_KEY) if c in rows]
        rows = [dict(zip(columns, values)) for values in zip(*(rows[c].tolist() for c in columns))]
    rows = list(rows)
    if isinstance(run, dict) and run.get("status") == STOPPED and any(r["status"] in FAILING for r in rows):
        return Verdict(FAIL, f"{verdict(rows, checks).why}; {incomplete(run)}")
    if why := incomplete(run):
        so_far = verdict(rows, checks)
        return Verdict(INCOMPLETE, f"{why}; so far {so_far.name}" + (f": {so_far.why}" if so_far.why else ""))
    failing = [r for r in rows if r["status"] in FAILING]
    if failing:
        return Verdict(FAIL, f"{_cases(failing)} failed")
    verified = [r for r in rows if r["status"] in VERIFIED]
    skipped = [r for r in rows if r["status"] in NO_VERDICT]
    what = "skipped" if all(r["status"] != "unsupported" for r in skipped) else "skipped or unsupported"
    busy = [r for r in rows if r.get("metric") == TIME_UNSTABLE and r.get("value") == 1]
    noisy = f"; {_cases(busy)} timed on a busy machine (UNSTABLE: their times are not the step's own)" if busy else ""
    if verified:
        return Verdict(PASS, f"{_cases(verified)} verified" + (f"; {_cases(skipped)} {what}" if skipped else "")
                       + noisy)
    unrun = set(map(_case, skipped))  # a skipped case's info rows (its sizes, its time) measured nothing
    measured = [r for r in rows if r["status"] == "info" and r.get("metric") != RUN_CASE_S and _case(r) not in unrun]
    if measured and all(r.get("check") in MEASURING_CHECKS for r in rows):
        return Verdict(MEASURED, f"{_cases(measured)} measured; these checks verify nothing{noisy}")
    if not rows:
        named = f" (checks: {', '.join(map(str, checks))})" if len(checks) else ""
        return Verdict(NOTHING_VERIFIED, f"no check had a case to run{named}")
    if not skipped:
        return Verdict(NOTHING_VERIFIED, "no case produced a verdict")
    reasons = f" ({_some(r.get('detail') or r.get('metric') for r in skipped)})"
    if measured:
        return Verdict(NOTHING_VERIFIED, f"only measurements; {_cases(skipped)} {what}{reasons}")
    return Verdict(NOTHING_VERIFIED, f"every case was {what}{reasons}")


def atomic_write(path: Path, text: str | bytes) -> None:
    """``text`` into ``path`` through a new temporary file renamed into place: never half-written, and a link at
    ``path`` is replaced, not written through."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; results are ordinary files
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text if isinstance(text, bytes) else text.encode("utf-8"))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _json_value(v):
    return str(v) if isinstance(v, float) and not math.isfinite(v) else v


@dataclass
class Results:
    """Rows for one run, with the run's metadata (machine, config, wall time, ``run``: how it ended)."""

    out_dir: Path
    meta: dict
    rows: list[dict] = field(default_factory=list)

    def extend(self, rows: list[dict]) -> None:
        """Add ``rows``, each checked (``Row.from_dict``): a malformed one is a one-line ValueError here, not a
        corrupt results file."""
        self.rows.extend([Row.from_dict(r).as_dict() for r in rows])

    @property
    def table(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=COLUMNS)

    @property
    def failed(self) -> bool:
        return any(r["status"] in FAILING for r in self.rows)

    @property
    def verdict(self) -> Verdict:
        return verdict(self.rows, (self.meta.get("config") or {}).get("checks") or (), self.meta.get("run"))

    def finish(self) -> Path:
        """Write results.json and results.csv (each through a temporary file); the JSON's path."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        header = {"schema_version": SCHEMA_VERSION, "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                  **{k: v for k, v in self.meta.items() if k != "digest"}}
        plain = [{k: _json_value(v) for k, v in r.items()} for r in self.rows]
        header["digest"] = content_digest({**json.loads(json.dumps(header, allow_nan=False)), "rows": plain})
        rows = ",\n".join(json.dumps(r, allow_nan=False) for r in plain)
        text = json.dumps(header, indent=1, allow_nan=False)[:-2] + ',\n "rows": [\n' + rows + "\n ]\n}\n"
        path = self.out_dir / "results.json"
        atomic_write(path, text)
        atomic_write(self.out_dir / "results.csv", self.table.to_csv(index=False))
        return path


def content_digest(data: dict) -> str:
    """The digest results.json carries of everything else it holds (its rows and the run): a file edited after the
    run no longer matches it. Evidence of an edit, not a signature: whoever edits the file can recompute it."""
    text = json.dumps({k: v for k, v in data.items() if k != "digest"}, sort_keys=True, separators=(",", ":"),
                      allow_nan=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def load_results(path, trust_edited: bool = False) -> tuple[dict, pd.DataFrame]:
    """Read a results file; return (metadata without ``rows``, DataFrame of the rows). One whose digest does not
    match its content (edited after the run) is refused unless ``trust_edited``."""
    def bad(reason: str) -> ValueError:
        return ValueError(f"{path}: not an optbench results file ({reason})")

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise bad(f"not JSON: {e}".replace("\n", " ")) from None
    if not isinstance(data, dict):
        raise bad(f"top level is a JSON {type(data).__name__}, not an object")
    from optbench.pytest_benchmark_bridge import is_pytest_benchmark, rows_of

    if is_pytest_benchmark(data):  # --benchmark-json / --benchmark-autosave output
        meta, rows = rows_of(data)
        return meta, normalize(pd.DataFrame(rows, columns=COLUMNS))
    if "schema_version" not in data:
        raise bad("no schema_version")
    if data["schema_version"] not in READABLE_SCHEMAS:
        raise bad(f"schema_version {data['schema_version']!r}; "
                  f"this optbench reads {', '.join(map(str, READABLE_SCHEMAS))}")
    rows = data.get("rows")
    if not isinstance(rows, list):
        raise bad("no 'rows' list")
    meta = {k: v for k, v in data.items() if k != "rows"}
    for key in ("config", "machine", "candidate", "run", "tolerances"):
        if meta.get(key) is not None and not isinstance(meta[key], dict):
            raise bad(f"its {key!r} is a JSON {type(meta[key]).__name__}, not an object")
    if not all(isinstance(r, dict) for r in rows):
        raise bad("a row that is not a JSON object")
    if data["schema_version"] >= 5 and not trust_edited and data.get("digest") != content_digest(data):
        raise ValueError(f"{path}: its content does not match the digest it was written with (edited after the "
                         "run?): --trust-edited reads it anyway")
    if not trust_edited and (why := contradicted(rows)):
        raise ValueError(f"{path}: its rows contradict themselves ({why}): --trust-edited reads it anyway")
    frame = normalize(pd.DataFrame(rows, columns=COLUMNS))
    unknown = sorted(set(frame["status"]) - set(STATUSES))
    if unknown:  # a status no check writes: the verdict rule could not read the row
        raise bad(f"row status {unknown[0]!r} is none of {', '.join(STATUSES)}")
    if data["schema_version"] < 4:  # the finding was written only into the detail then: lift it into its column
        declared = frame["status"].isin(DECLARED)
        frame.loc[declared, "finding"] = frame.loc[declared, "detail"].map(
            lambda d: ",".join(dict.fromkeys(re.findall(r"\bF\d{2,3}\b", d))))
    return meta, frame


def normalize(rows: pd.DataFrame) -> pd.DataFrame:
    """Floats in ``value``, hashable text in ``hparams``, "" for missing text fields."""
    rows = rows.reindex(columns=COLUMNS).copy()
    rows["value"] = rows["value"].map(as_float).astype(float)
    rows["hparams"] = rows["hparams"].map(
        lambda h: h if isinstance(h, str) else "" if h is None else json.dumps(h, sort_keys=True))
    text = ["suite", "optimizer", "impl", "dtype", "workload", "fqn", "tensor", "detail", "status", "gate", "finding",
            "check", "metric", "unit"]
    rows[text] = rows[text].astype(object).fillna("").astype(str)
    return rows


def load_run(arg: Path, trust_edited: bool = False) -> tuple[dict, pd.DataFrame]:
    """(meta, rows) of a results.json or of the run directory holding one; a run directory with only a journal
    (its run was killed before writing results.json) reads as that run, incomplete. A bad path is a UsageError."""
    from optbench.journal import JOURNAL

    path = arg / "results.json" if arg.is_dir() else arg
    if arg.is_dir() and not path.is_file() and (arg / JOURNAL).is_file():
        return from_journal(arg / JOURNAL)
    if not path.is_file():
        raise UsageError(f"no results file at {path}")
    try:
        return load_results(path, trust_edited)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def from_journal(path: Path) -> tuple[dict, pd.DataFrame]:
    """(meta, rows) of a run read back from its journal, which ends without an end record when it was killed."""
    from optbench.journal import read

    record = read(path)
    meta = dict(record.header.get("meta") or {})
    how = (record.end or {}).get("how") or "killed: the journal has no end record"
    meta["run"] = {"status": (record.end or {}).get("status", "killed"), "how": how,
                   "planned_cases": len(record.planned), "finished_cases": len(record.cases)}
    rows = [r for i in sorted(record.cases) for r in record.cases[i]]
    return meta, normalize(pd.DataFrame(rows, columns=COLUMNS))


__all__ = ["CASE_KEY", "COLUMNS", "DECLARED", "FAILING", "NO_VERDICT", "PASSING", "READABLE_SCHEMAS", "SCHEMA_VERSION",
           "STATUSES", "VERIFIED", "Row", "row"]
