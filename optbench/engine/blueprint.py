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
from dataclasses import asdict, dataclass, field

from optbench.metrics import CASE_ERROR
from optbench.results import row


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


def fingerprint(entries, inputs: dict | None = None) -> str:
    """A digest of the planned cases in order and of the inputs the plan read (``inputs``: name -> digest of its
    content): a worker's plan and a resumed run's must equal the run's."""
    text = json.dumps([[[e.check, e.labels] for e in entries], inputs or {}], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def digest(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()[:16]


def changed_inputs(before: dict, now: dict) -> list[str]:
    """The inputs whose content differs between two plans (or that one of them lacks), by name."""
    return sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))


def group_key(suite: str, group) -> str:
    return json.dumps([suite, group], default=str)


@dataclass(frozen=True)
class Blueprint:
    """The plan's entries, its fingerprint, the candidate (its implementation's name and its description for
    results.json; None without one) and the inputs the plan read (name -> digest of its content: each suite as
    resolved, its reference module's file, the candidate's module and spec files)."""

    entries: tuple[Entry, ...]
    fingerprint: str
    candidate: str | None = None
    candidate_meta: dict | None = None
    inputs: dict = field(default_factory=dict)
    # what the judge of a candidate's parity (``engine.judge``) reads of its class, which it never imports: the
    # reference defaults (``hyperparameters.as_data``), whether it is ``foreign`` to the suite's class and whether
    # the suite's declared deviations cover it; found where the plan was made, before any case ran
    judging: dict | None = None

    def to_json(self) -> dict:
        return asdict(self) | {"entries": [asdict(e) for e in self.entries]}

    @classmethod
    def from_json(cls, data: dict) -> Blueprint:
        """A blueprint sent by a planning worker: its entries re-read, and its fingerprint checked against them."""
        entries = tuple(Entry(str(e["check"]), dict(e["labels"]), str(e["group"]), bool(e["compiled"]))
                        for e in data["entries"])
        inputs = {str(k): str(v) for k, v in dict(data.get("inputs") or {}).items()}
        judging = data.get("judging")
        made = cls(entries, str(data["fingerprint"]), data.get("candidate"), data.get("candidate_meta"), inputs,
                   {"defaults": dict(judging["defaults"]), "foreign": bool(judging["foreign"]),
                    "inherits_deviations": bool(judging["inherits_deviations"]),
                    "named": bool(judging.get("named", True)), "forms": _form_facts(judging.get("forms"))}
                   if judging else None)
        if fingerprint(entries, inputs) != made.fingerprint:
            raise ValueError("the plan's entries do not match its fingerprint")
        return made

    def labels_of(self, index: int) -> dict:
        entry = self.entries[index]
        return {"check": entry.check, **entry.labels}


def _form_facts(data) -> dict | None:
    """``checks.forms.form_facts`` as a planning worker sent them, checked (None: none sent)."""
    if data is None:
        return None
    return {"defaults": dict(data["defaults"]), "takes": {str(k): bool(v) for k, v in dict(data["takes"]).items()},
            "tensor": {str(k): bool(v) for k, v in dict(data["tensor"]).items()}}


def error_outcome(labels: dict, detail: str) -> tuple[list[dict], str]:
    """A planned case recorded as an ``error`` row naming ``detail``, and its console line; ``labels``: the case's
    (``Blueprint.labels_of``, the check's name among them)."""
    labels = dict(labels)
    check = labels.pop("check")
    return ([row(labels, check=check, metric=CASE_ERROR, value=1, status="error", detail=detail)],
            f"  ERROR {check} {labels['impl']} {labels['dtype']} {labels['hparams']}: {detail}")
