"""A worker process as the parent holds it: started (forked from the run's zygote, else ``python -c``), read
(its events, in a thread, onto the pool's queue), stopped (SIGTERM, then SIGKILL with its process group) and
described when it ends ("was killed by SIGSEGV"). ``engine.pool`` runs units on them; ``engine.remote_plan`` plans
the run in one."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from optbench.engine import zygote
from optbench.engine.units import Unit
from optbench.engine.worker import BOOT, PARENT
from optbench.engine.zygote import Forked
from optbench.rows import bounded

STDERR_TAIL_LINES = 6
START_TIMEOUT_S = 300  # importing torch and building the run's plan takes seconds; a worker stuck there ends the run
STOP_GRACE_S = 5.0  # a worker stopped at the end of a run or on an interrupt has this long to let go of its locks


def worker_env() -> dict:
    """A worker's environment: this one, and this process's pid (the worker dies with it: engine.descendants)."""
    return {**os.environ, PARENT: str(os.getpid())}


def start_worker(stderr) -> subprocess.Popen | Forked:
    """A worker process (``engine.worker.main``) writing its stderr to the file ``stderr``: forked from this
    process's zygote (``engine.zygote``), else started with ``python -c``; its own session either way (a terminal's
    Ctrl-C reaches the parent only)."""
    return zygote.spawn(stderr.fileno(), worker_env()) or subprocess.Popen(
        [sys.executable, "-c", BOOT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
        start_new_session=True, env=worker_env())


def kill_group(proc: subprocess.Popen | Forked) -> None:
    """SIGKILL a worker and its process group (what it started there: reshard's ranks), and reap it."""
    if isinstance(proc, Forked):
        proc.kill()
    elif proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
    proc.wait()


def stop_groups(procs: list, grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM workers and their process groups, then ``kill_group`` each, at once if it has ended, else after what is
    left of ``grace_s``. A worker turns SIGTERM into an exception (``engine.worker``): what it holds is let go on the
    way out, as torch's lock on a C++ extension it is building, which a SIGKILL would leave to hang the next build."""
    for proc in procs:
        if proc.poll() is None and proc.pid is not None:
            zygote.signal_group(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        kill_group(proc)  # its group too: what it started may outlive it


class WorkerStartError(RuntimeError):
    """A worker could not build the run (the same config built in the parent): the run cannot go on."""


def how_it_ended(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


class Worker:
    """One ``optbench.engine.worker`` process (started by ``BOOT``) and the thread that reads its events."""

    def __init__(self, number: int, init: dict, logs: Path, events: queue.Queue):
        self.number, self.events = number, events
        logs.mkdir(parents=True, exist_ok=True)
        self.log = logs / f"worker-{number}.log"
        with self.log.open("wb") as err:
            self.proc = start_worker(err)
        self.unit: Unit | None = None
        self.current: int | None = None  # the plan index of the case running now
        self.doing = ""  # the part of that case it said runs now (a round-trip scenario): named if it dies there
        self.started_at = 0.0
        self.born = time.monotonic()  # a worker not ready START_TIMEOUT_S after this ends the run
        self.ready = False
        self.keep_log = False
        self.units_run = 0
        self.queued: dict = {}  # the unit request to send once the worker is ready
        threading.Thread(target=self._read, daemon=True).start()
        self.send(init)

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                self.events.put((self, json.loads(line)))
            except ValueError:
                continue
        self.proc.wait()
        self.events.put((self, {"ev": "exit"}))

    def send(self, request: dict) -> None:
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # it died: the reader thread reports its exit

    def stderr_tail(self) -> str:
        try:
            lines = [ln.strip() for ln in self.log.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            return ""
        return " | ".join(bounded(line, 300) for line in lines[-STDERR_TAIL_LINES:])

    def kill(self) -> None:
        kill_group(self.proc)

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
