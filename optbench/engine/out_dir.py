"""A run's out_dir: held under a lock (the ``filelock`` library) for as long as the run writes there, and never
silently reused: a second run into a busy folder, or a new run into one that holds a run, is a usage error."""

from __future__ import annotations

import os
from pathlib import Path

from filelock import FileLock, Timeout

from optbench.journal import JOURNAL
from optbench.usage import UsageError

LOCK = ".optbench.lock"


def refuse_reuse(out_dir: Path) -> None:
    """A new run's out_dir must not hold a run (finished or not): a usage error naming what to do instead."""
    if (out_dir / JOURNAL).exists():
        raise UsageError(f"out_dir {out_dir}: holds an unfinished run; continue it with "
                         f"'optbench resume {out_dir}', or pick another out_dir")
    if (out_dir / "results.json").exists():
        raise UsageError(f"out_dir {out_dir}: holds a finished run (results.json); pick another out_dir "
                         "(the default names a new folder per run) or remove it")


def make_writable(out_dir: Path) -> None:
    """Create ``out_dir`` if need be and write a probe file there; a UsageError naming why not."""
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"out_dir {out_dir}: exists and is not a directory")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        probe = out_dir / f".optbench-write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"out_dir {out_dir}: cannot write there ({exc.strerror or exc})") from None


def claim(out_dir: Path, resume: bool = False) -> FileLock:
    """Lock ``out_dir`` for this run (created if need be); the held lock, to release at the end."""
    out_dir = Path(out_dir)
    make_writable(out_dir)
    lock = FileLock(out_dir / LOCK)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise UsageError(f"out_dir {out_dir}: another optbench run is writing there now; "
                         "pick another out_dir") from None
    if not resume:
        try:
            refuse_reuse(out_dir)
        except UsageError:
            lock.release()
            raise
    return lock
