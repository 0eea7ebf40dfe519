"""What a case's code under test did, as a tape: written where it runs, read back by the judge.

A candidate's case of a check that asks its code several things (a state_dict round-trip: build it on these options,
save after ``save_at`` steps, load by name, continue, run uninterrupted; the differentiable check: its derivatives
through the step) runs in its worker as any case does; each question goes through ``Tape.take``, which records what
came back (snapshots of parameters and state, the dtypes they are held in, a refusal's words, what torch's
positional load did, a Jacobian-vector product, or what was raised) into the case's recording. The judge
(``engine.judge``), which never imports the candidate, runs the same check code with a tape that replays: the same
questions in the same order get the recorded answers, and the check's own comparisons (bit for bit, tolerance,
what a refusal must name, finite differences of the reference) give the verdict. A question asked out of order, or a
tape that ends early or runs on, is refused (``RecordingError``): the case is an error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from optbench.numerics.recording_file import RecordingError, raised_data, raised_from
from optbench.rows import bounded
from optbench.state.names import StateDictNameError


class Tape:
    """Records (``replay`` None) or replays (the recorded entries) what ``take`` asks, in order; ``record`` False:
    neither (a case no judge replays: each ``take`` just runs)."""

    def __init__(self, replay: tuple | None = None, record: bool = True):
        self.entries: list[dict] = []
        self._replay = list(replay) if replay is not None else None
        self.record = record

    @property
    def replaying(self) -> bool:
        return self._replay is not None

    def take(self, what: str, run: Callable[[], Any], encode: Callable = lambda v: v,
             decode: Callable = lambda v: v):
        """``run()`` here, recording ``encode`` of what it returned (or what it raised, raised again); replaying,
        ``decode`` of the recorded value (or the recorded exception: ``StateDictNameError`` as optbench's own)."""
        if self._replay is None and not self.record:
            return run()
        if self._replay is None:
            try:
                value = run()
            except Exception as exc:
                self.entries.append({"what": what, "raised": raised_data(exc)})
                raise
            self.entries.append({"what": what, "value": encode(value)})
            return value
        if not self._replay:
            raise RecordingError(f"the recording ends before {what}")
        entry = self._replay.pop(0)
        if entry.get("what") != what:
            raise RecordingError(f"the recording holds {bounded(str(entry.get('what')), 120)!r} where the check "
                                 f"asks {what!r}")
        try:
            if "raised" in entry:
                raised = raised_from(entry["raised"])
            else:
                return decode(entry["value"])
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise RecordingError(f"{what}: not a well-formed answer ({type(exc).__name__}: {exc})") from None
        if StateDictNameError.__name__ in raised.names:  # optbench's own, raised there by its by-name load
            raise StateDictNameError(raised.message)
        raise raised.exception()

    def finished(self) -> None:
        """Replaying: refuse a tape with answers the check never asked for."""
        if self._replay:
            raise RecordingError(f"the recording holds {len(self._replay)} answers the check never asked for, "
                                 f"first {bounded(str(self._replay[0].get('what')), 120)!r}")


def snapshot_out(snap: dict) -> list:
    """A snapshot ((fqn, tensor) -> array) as tape data."""
    return [[fqn, key, np.asarray(a)] for (fqn, key), a in snap.items()]


def snapshot_in(data: list) -> dict:
    out = {}
    for fqn, key, a in data:
        if not isinstance(fqn, str) or not isinstance(key, str) or not isinstance(a, np.ndarray):
            raise TypeError("a snapshot row is not [fqn, tensor, array]")
        out[(fqn, key)] = a
    return out


def kinds_out(held: dict) -> list:
    """What each (fqn, key) is held as (``numerics.recording.kinds``) as tape data."""
    return [[fqn, key, str(kind)] for (fqn, key), kind in held.items()]


def kinds_in(data: list) -> dict:
    return {(str(fqn), str(key)): str(kind) for fqn, key, kind in data}


def text_in(value) -> str | None:
    """A recorded message or nothing (None), checked."""
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{type(value).__name__} where a message or null is recorded")
    return value
