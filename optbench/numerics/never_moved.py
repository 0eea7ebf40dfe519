"""The "never moved" diagnosis: tensors an implementation left as they were while the reference moved them.

A parameter a step never updates (a group skipped, a mask inverted, an update written into a copy) departs from
the reference by the whole of its movement, and a trajectory names it only as a large error somewhere in a table.
From the implementation's snapshots after each step: a parameter still at its initial value bit for bit, a state
tensor still at the value it had after the first step. Among the tensors that failed, those are the likely bug, and
the failing case's line leads with them.
"""

from __future__ import annotations

import numpy as np


def never_moved(snapshots: list[dict], initial: dict[str, np.ndarray]) -> set[tuple[str, str]]:
    """(fqn, tensor) keys whose value is the same after every step: a parameter its ``initial`` value, a state
    tensor its value after step 1 (with one step, state cannot be judged: none). ``snapshots`` are the
    implementation's, keyed (fqn, tensor), one per step."""
    if not snapshots:
        return set()
    first = {**snapshots[0], **{(n, "param"): v for n, v in initial.items()}}
    out = set()
    for key, value in first.items():
        judged = snapshots if key[1] == "param" else snapshots[1:]
        if judged and all(key in s and _same(s[key], value) for s in judged):
            out.add(key)
    return out


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=True))


def diagnosis(keys: set[tuple[str, str]], steps: int) -> str:
    """The words for the failing tensors ``keys`` that never moved ("" for none), named first on the case's line."""
    if not keys:
        return ""
    params = sorted(f"{f}/{t}" for f, t in keys if t == "param")
    state = sorted(f"{f}/{t}" for f, t in keys if t != "param")
    parts = []
    if params:
        parts.append(f"{len(params)} parameter(s) never moved from their initial value in {steps} steps "
                     f"(the reference moves them), e.g. {', '.join(params[:3])}")
    if state:
        parts.append(f"{len(state)} state tensor(s) never changed after step 1 (the reference's do), e.g. "
                     f"{', '.join(state[:3])}")
    return "; ".join(parts)
