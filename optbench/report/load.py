"""Read a saved results file back into (metadata, rows), validating its schema."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from optbench.results import COLUMNS, READABLE_SCHEMAS


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
        raise bad(f"schema_version {data['schema_version']!r}; this optbench reads {', '.join(map(str, READABLE_SCHEMAS))}")
    rows = data.get("rows")
    if not isinstance(rows, list):
        raise bad("no 'rows' list")
    meta = {k: v for k, v in data.items() if k != "rows"}
    return meta, normalize(pd.DataFrame(rows, columns=COLUMNS))


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
    text = ["suite", "optimizer", "impl", "dtype", "workload", "fqn", "tensor", "detail", "status", "check", "metric", "unit"]
    rows[text] = rows[text].fillna("").astype(str)
    return rows
