"""A run's plan as data: what the parent process needs of each planned case, and nothing of the code under test.

A ``Blueprint`` is what the process that orchestrates a run (dispatch, journal, timeouts, results) reads of the
plan: each case's check, labels, group (the cases that share scratch run in one process) and whether it compiles
(the costly ones go first), the plan's fingerprint and the candidate's name and description.
``Planner.blueprint()`` makes it where the plan is made; where a candidate is checked in worker processes, the
plan is made in a worker too (``engine.remote_plan``) and only its blueprint, plain JSON, reaches the parent: the
parent never imports, inspects or builds the code under test.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Entry:
    """One planned (check, case), as data."""

    check: str
    labels: dict
    group: str  # the cases of one group (equal strings) share scratch: they run in one process, in plan order
    compiled: bool = False

    @property
    def suite(self) -> str:
        return self.labels["suite"]


def fingerprint(entries) -> str:
    """A digest of the planned cases in order: a worker's plan and a resumed run's must equal the run's."""
    text = json.dumps([[e.check, e.labels] for e in entries], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def group_key(suite: str, group) -> str:
    return json.dumps([suite, group], default=str)


@dataclass(frozen=True)
class Blueprint:
    """The plan's entries, its fingerprint, and the candidate (its implementation's name and its description for
    results.json; None without one)."""

    entries: tuple[Entry, ...]
    fingerprint: str
    candidate: str | None = None
    candidate_meta: dict | None = None

    def to_json(self) -> dict:
        return asdict(self) | {"entries": [asdict(e) for e in self.entries]}

    @classmethod
    def from_json(cls, data: dict) -> Blueprint:
        """A blueprint sent by a planning worker: its entries re-read, and its fingerprint checked against them."""
        entries = tuple(Entry(str(e["check"]), dict(e["labels"]), str(e["group"]), bool(e["compiled"]))
                        for e in data["entries"])
        made = cls(entries, str(data["fingerprint"]), data.get("candidate"), data.get("candidate_meta"))
        if fingerprint(entries) != made.fingerprint:
            raise ValueError("the plan's entries do not match its fingerprint")
        return made

    def labels_of(self, index: int) -> dict:
        entry = self.entries[index]
        return {"check": entry.check, **entry.labels}
