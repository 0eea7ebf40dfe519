"""Signals that stop a run: SIGTERM (a CI job cancelled, ``kill``) stops it as Ctrl-C (SIGINT) does, so that the
run keeps what it measured, marks itself interrupted and exits 128 + the signal's number."""

from __future__ import annotations

import signal
from contextlib import contextmanager


class MaxFailuresReached(Exception):
    """The run recorded ``max_failures`` failing cases and stops there (a CI's fail-fast)."""

    def __init__(self, failures: int):
        super().__init__(f"stopped after {failures} failing case(s) (max_failures={failures})")


class Interrupted(BaseException):
    """The run was asked to stop by a signal (SIGTERM; Ctrl-C arrives as KeyboardInterrupt). A BaseException, as
    KeyboardInterrupt is: a case's own error handling (``except Exception``) must never record it as its error."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextmanager
def sigterm_interrupts():
    """SIGTERM (a CI job cancelled, ``kill``) stops the run as Ctrl-C does: results kept and marked."""
    def stop(signum, frame):
        raise Interrupted(signum)

    try:
        before = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
