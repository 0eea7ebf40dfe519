"""The tidy results table: one row per case and metric, saved atomically as JSON and CSV.

The JSON file (``results.json``) is the record: schema version, machine, config and rows. The CSV
(``results.csv``) holds the same rows for pandas/spreadsheets. Both are rewritten after every case,
through a temporary file and ``os.replace``, so an interrupted run keeps everything measured so far.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

SCHEMA_VERSION = 1
COLUMNS = [
    "suite", "optimizer", "impl", "dtype", "hparams", "device", "check",
    "fqn", "tensor", "step", "metric", "value", "unit", "status", "detail",
]
FAILING = {"fail", "error"}


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
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
    """Rows for one run; ``case(...)`` fixes the columns shared by one case's rows."""

    out_dir: Path
    meta: dict
    rows: list[dict] = field(default_factory=list)

    def add(self, *, metric: str, value: float, status: str = "info", unit: str = "", detail: str = "",
            fqn: str = "", tensor: str = "", step: int | None = None, **case) -> None:
        row = {c: "" for c in COLUMNS} | case
        row.update(metric=metric, value=float(value), status=status, unit=unit, detail=detail,
                   fqn=fqn, tensor=tensor, step=step)
        self.rows.append(row)

    @property
    def table(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=COLUMNS)

    @property
    def failed(self) -> bool:
        return any(r["status"] in FAILING for r in self.rows)

    def save(self) -> Path:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        record = {
            "schema_version": SCHEMA_VERSION,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            **self.meta,
            "rows": [{k: _json_value(v) for k, v in r.items()} for r in self.rows],
        }
        path = self.out_dir / "results.json"
        _atomic_write(path, json.dumps(record, indent=1, allow_nan=False))
        _atomic_write(self.out_dir / "results.csv", self.table.to_csv(index=False))
        return path
