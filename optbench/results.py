"""The tidy results table: one row per case and metric, saved atomically as JSON and CSV, and read back.

The JSON file (``results.json``) is the record: schema version, machine, config and rows. The CSV
(``results.csv``) holds the same rows for pandas/spreadsheets. Both are rewritten through a temporary
file and ``os.replace`` (never half-written) every few seconds and at the end; between rewrites every
case's rows are appended to ``results.partial.jsonl`` at once, so an interrupted run loses nothing.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from optbench.usage import UsageError

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
FAILING = {"fail", "error"}


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


def atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; results are ordinary files
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _json_value(v):
    return str(v) if isinstance(v, float) and not math.isfinite(v) else v


@dataclass
class Results:
    """Rows for one run, with the run's metadata (machine, config, wall time)."""

    out_dir: Path
    meta: dict
    rows: list[dict] = field(default_factory=list)
    save_every_s: float = 5.0
    _saved_at: float = field(default=0.0, repr=False)

    @property
    def journal(self) -> Path:
        return self.out_dir / "results.partial.jsonl"

    def extend(self, rows: list[dict]) -> None:
        """Add one case's rows: appended to the journal now, in results.json at the next save."""
        self.rows.extend(rows)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        with self.journal.open("a", encoding="utf-8") as f:
            f.writelines(json.dumps({k: _json_value(v) for k, v in r.items()}) + "\n" for r in rows)
        if time.monotonic() - self._saved_at > self.save_every_s:
            self.save()

    @property
    def table(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=COLUMNS)

    @property
    def failed(self) -> bool:
        return any(r["status"] in FAILING for r in self.rows)

    def save(self) -> Path:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        header = {"schema_version": SCHEMA_VERSION, "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                  **self.meta}
        rows = ",\n".join(json.dumps({k: _json_value(v) for k, v in r.items()}, allow_nan=False) for r in self.rows)
        text = json.dumps(header, indent=1, allow_nan=False)[:-2] + ',\n "rows": [\n' + rows + "\n ]\n}\n"
        path = self.out_dir / "results.json"
        atomic_write(path, text)
        atomic_write(self.out_dir / "results.csv", self.table.to_csv(index=False))
        self._saved_at = time.monotonic()
        return path

    def finish(self) -> Path:
        """The final save; the journal is no longer needed."""
        path = self.save()
        self.journal.unlink(missing_ok=True)
        return path

def load_results(path) -> tuple[dict, pd.DataFrame]:
    """Read a results file; return (metadata without ``rows``, DataFrame of the rows)."""
    def bad(reason: str) -> ValueError:
        return ValueError(f"{path}: not an optbench results file ({reason})")

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise bad(f"not JSON: {e}".replace("\n", " ")) from None
    if not isinstance(data, dict):
        raise bad(f"top level is a JSON {type(data).__name__}, not an object")
    if "schema_version" not in data:
        raise bad("no schema_version")
    if data["schema_version"] not in READABLE_SCHEMAS:
        raise bad(f"schema_version {data['schema_version']!r}; "
                  f"this optbench reads {', '.join(map(str, READABLE_SCHEMAS))}")
    rows = data.get("rows")
    if not isinstance(rows, list):
        raise bad("no 'rows' list")
    meta = {k: v for k, v in data.items() if k != "rows"}
    frame = normalize(pd.DataFrame(rows, columns=COLUMNS))
    if data["schema_version"] < 4:  # the finding was written only into the detail then: lift it into its column
        declared = frame["status"].isin(["xfail", "xpass"])
        frame.loc[declared, "finding"] = frame.loc[declared, "detail"].map(
            lambda d: ",".join(dict.fromkeys(re.findall(r"\bF\d{2,3}\b", d))))
    return meta, frame


def as_float(x) -> float:
    try:
        return float(x)  # also takes "inf", "-inf", "nan"
    except (TypeError, ValueError):
        return math.nan


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


def load_run(arg: Path) -> tuple[dict, pd.DataFrame]:
    """(meta, rows) of a results.json or of the run directory holding one; a bad path is a UsageError."""
    path = arg / "results.json" if arg.is_dir() else arg
    if not path.is_file():
        raise UsageError(f"no results file at {path}")
    try:
        return load_results(path)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
