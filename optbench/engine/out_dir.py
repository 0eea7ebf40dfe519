"""A run's out_dir: held under a lock (the ``filelock`` library) for as long as the run writes there, and never
silently reused: a second run into a busy folder, a new run into one that holds a run, or into a folder that
holds anything else (the user's files: optbench would overwrite report.md, results.csv, .hydra/ and clear
workers/), is a usage error. A new run's folder is new or empty, so it holds no link planted to redirect a write;
the files a run writes are written to a temporary name and renamed into place (``results.atomic_write``), which
replaces a link rather than writing through it."""

from __future__ import annotations

import os
from pathlib import Path

from filelock import FileLock, Timeout

from optbench.journal import JOURNAL
from optbench.usage import UsageError

LOCK = ".optbench.lock"


JOB_FILE = "job.json"  # a sweep job's number and overrides (engine.sweep), written before the run claims out_dir
WRITTEN_BEFORE_THE_RUN = (".hydra", JOB_FILE)  # what Hydra (and a sweep's callback) write into out_dir first


def refuse_reuse(out_dir: Path, written_by_hydra: bool = False) -> None:
    """A new run's out_dir must be new or empty (but for what Hydra writes first, where ``written_by_hydra``, as the
    run claims it): a usage error naming what to do instead."""
    if not str(out_dir) or str(out_dir) == ".":
        raise UsageError("out_dir='': name a new folder (the default names a new one per run)")
    if (out_dir / JOURNAL).exists():
        raise UsageError(f"out_dir {out_dir}: holds an unfinished run; continue it with "
                         f"'optbench resume {out_dir}', or pick another out_dir")
    if (out_dir / "results.json").exists():
        raise UsageError(f"out_dir {out_dir}: holds a finished run (results.json); pick another out_dir "
                         "(the default names a new folder per run) or remove it")
    if out_dir.is_dir() and (held := sorted(p.name for p in out_dir.iterdir() if p.name != LOCK
                                                and not (written_by_hydra and p.name in WRITTEN_BEFORE_THE_RUN))):
        raise UsageError(f"out_dir {out_dir}: holds {len(held)} file(s) of its own ({', '.join(held[:3])}"
                         f"{', ...' if len(held) > 3 else ''}): a run writes only into a new or empty folder")


PROBE_BYTES = 1 << 20  # written and synced before a run: more than what Hydra and the journal write first


def make_writable(out_dir: Path, keep: bool = True) -> None:
    """Create ``out_dir`` if need be and write ``PROBE_BYTES`` there, synced (a full disk fails the sync where it did
    not fail the write); a UsageError naming why not, and nothing left behind (a folder it made is removed). With
    ``keep=False`` a folder it made is removed once the probe passed too: a check before the run, which may name its
    folder anew (the default out_dir's time, a second later) and must not leave an empty one behind."""
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"out_dir {out_dir}: exists and is not a directory")
    made = not out_dir.exists()
    probe = out_dir / f".optbench-write-test-{os.getpid()}"
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        with open(probe, "wb") as f:
            f.write(bytes(PROBE_BYTES))
            f.flush()
            os.fsync(f.fileno())
        probe.unlink()
        if made and not keep:
            out_dir.rmdir()
    except OSError as exc:
        try:  # nothing left behind, where there is anything
            probe.unlink(missing_ok=True)
            if made and out_dir.is_dir() and not any(out_dir.iterdir()):
                out_dir.rmdir()
        except OSError:
            pass
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
            refuse_reuse(out_dir, written_by_hydra=True)
        except UsageError:
            lock.release()
            raise
    return lock
