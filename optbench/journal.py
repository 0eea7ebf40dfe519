"""A run's journal (``journal.jsonl`` in its out_dir): append-only, one JSON line per event, written by the
run's one writer (the parent process) as each case finishes.

Line 1 is the header: what the run is (its config, config folders, metadata) and its plan (every case's
labels, the plan's fingerprint). Then one ``{"case": i, "rows": [...]}`` line per finished case, in the
order cases finished, and at the end one ``{"end": ...}`` line saying how the run ended. ``optbench resume``
continues a run from its journal; ``optbench report`` reads one whose results.json was never written (a
SIGKILL). A line cut short by a kill mid-write is ignored when read back, and dropped on resume.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from optbench.rows import Row
from optbench.usage import UsageError

JOURNAL = "journal.jsonl"
VERSION = 1


def _plain(value):
    """What ``json`` cannot write as is: NumPy scalars and anything else as text."""
    item = getattr(value, "item", None)
    return item() if callable(item) else str(value)


def dumps(obj) -> str:
    return json.dumps(obj, default=_plain)


class Journal:
    """The open journal of a running (or resumed) run."""

    def __init__(self, path: Path, header: dict | None = None, keep: list[str] | None = None):
        """A new journal with ``header``, or (``keep``: its readable lines) one rewritten to continue."""
        self.path = Path(path)
        if keep is None:
            keep = [dumps({"journal": VERSION} | header)]
        text = "".join(line + "\n" for line in keep)
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, self.path)
        self._file = self.path.open("a", encoding="utf-8")

    def case(self, index: int, rows: list[dict]) -> None:
        """Append a finished case's ``rows``, each checked (``Row.from_dict``; a ValueError in one line)."""
        self._write({"case": index, "rows": [Row.from_dict(r).as_dict() for r in rows]})

    def end(self, how: dict) -> None:
        self._write({"end": how})

    def _write(self, record: dict) -> None:
        self._file.write(dumps(record) + "\n")
        self._file.flush()

    def close(self) -> None:
        try:
            self._file.close()
        except OSError:
            pass


@dataclass
class Record:
    """A journal read back: header, each finished case's rows by plan index, the end (None: never written)."""

    path: Path
    header: dict
    cases: dict[int, list[dict]] = field(default_factory=dict)
    end: dict | None = None
    lines: list[str] = field(default_factory=list)  # the readable lines, to rewrite the journal on resume

    @property
    def planned(self) -> list[dict]:
        return self.header.get("plan") or []


def read(path: Path) -> Record:
    """Read a journal; a UsageError (one line) when it is not one or a line before the last is damaged."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the journal ({exc.strerror})") from None
    parsed = []
    for number, line in enumerate(lines, 1):
        try:
            parsed.append((line, json.loads(line)))
        except ValueError:
            if number < len(lines):  # only the last line can be cut short by a kill
                raise UsageError(f"{path}:{number}: not a journal line (damaged); "
                                 "the lines after it cannot be trusted") from None
    if not parsed or not isinstance(parsed[0][1], dict) or parsed[0][1].get("journal") != VERSION:
        raise UsageError(f"{path}: not an optbench journal (version {VERSION})")
    record = Record(path, parsed[0][1], lines=[parsed[0][0]])
    for line, entry in parsed[1:]:
        if isinstance(entry, dict) and isinstance(entry.get("case"), int) and isinstance(entry.get("rows"), list):
            record.cases[entry["case"]] = entry["rows"]
            record.lines.append(line)
        elif isinstance(entry, dict) and "end" in entry:
            record.end = entry["end"]
        else:
            raise UsageError(f"{path}: a line that is neither a case nor the end: {line[:80]}")
    return record
