"""Worker processes for a run: units of the plan run in ``engine.worker`` processes, ``jobs`` at a time.

A worker that dies (a segfault, an abort, ``os._exit``, the kernel's OOM killer) or whose case outlives
``case_timeout_s`` is killed and replaced: its case becomes an ``error`` row naming how it ended (signal,
exit code or timeout) with the last lines of its stderr, and the rest of its unit runs in a fresh worker,
which first replays the unit's finished cases (without recording them again) to rebuild the scratch
later cases read. A unit whose worker dies twice records its remaining cases as not run. A death in a part the
case named (``RunContext.part``: a round-trip scenario) is not yet the case's: the case runs again in a fresh
worker and records that part as an error row naming how the worker died there, up to ``CRASHED_PARTS`` parts. A
death a suite declares (``exits``: a candidate ends the process with that status on the parameters the case steps)
is that case's xfail where the parent's own plan says so (``engine.declared_exits``); it counts as no
death of the unit.
"""

from __future__ import annotations

import queue
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from optbench.engine.blueprint import error_outcome
from optbench.engine.declared_exits import declared_exit
from optbench.engine.units import Unit
from optbench.engine.worker_handle import START_TIMEOUT_S, Worker, WorkerStartError, how_it_ended, stop_groups
from optbench.rows import bounded

CRASHED_PARTS = 8  # a case whose worker dies in a part it named runs again without it, this many times at most


class Pool:
    """Run units on up to ``jobs`` workers; ``record(index, rows, line)`` is called once per planned case, in
    the order cases finish, in this (the parent's) thread: the run's one writer. A case whose verdict is the
    judge's (``engine.judge``: a candidate's parity) is recorded once judged; a worker that sends the result of a
    case it is not running is killed, that case an error row. ``fingerprint()`` is the plan's,
    which each worker's must match: asked once a worker is ready, so workers may be started (``prestart``) while
    the parent still plans."""

    def __init__(self, jobs: int, init: dict, logs: Path, timeout_s: float, labels_of: Callable[[int], dict],
                 record: Callable[[int, list[dict], str], None], fingerprint: Callable[[], str], judge=None):
        self.jobs, self.init, self.logs, self.timeout_s = max(1, jobs), init, logs, float(timeout_s)
        self.labels_of, self.record, self.fingerprint = labels_of, record, fingerprint
        self.events: queue.Queue = queue.Queue()
        # ``judge(events)``: the run's ``engine.judge.Judge`` (a candidate's parity verdicts), told where to report
        self.judge = judge(self.events) if judge is not None else None
        if self.judge is not None:
            self.init = {**init, "record_dir": str(self.judge.folder)}
        self.workers: list[Worker] = []
        self.started = 0  # workers started so far: a new number means a fresh process
        self.fresh = True

    def run(self, units: list[Unit], jobs: int | None = None, fresh: bool = True) -> None:
        """Run ``units`` (at most ``jobs`` at once, default the pool's); returns when every case is recorded.
        ``fresh=False`` (one worker): a unit goes on from the state the worker's last unit left."""
        self.fresh = fresh
        pending = deque(units)
        limit = self.jobs if jobs is None else max(1, jobs)
        while pending or any(w.unit for w in self.workers) or (self.judge is not None and self.judge.busy):
            idle = [w for w in self.workers if w.unit is None and w.ready]
            while pending and (idle or len(self.workers) < limit) and self._busy() < limit:
                worker = idle.pop() if idle else self._start()
                self._assign(worker, pending.popleft())
            self._handle(pending)

    def prestart(self, jobs: int | None = None) -> None:
        """Start the pool's workers (``jobs``, default the pool's) now: they import torch and plan the run while this
        process plans it too."""
        while len(self.workers) < min(self.jobs, jobs or self.jobs):
            self._start()

    def _busy(self) -> int:
        return sum(w.unit is not None for w in self.workers)

    def _start(self) -> Worker:
        self.started += 1
        worker = Worker(self.started, self.init, self.logs, self.events)
        self.workers.append(worker)
        return worker

    def _assign(self, worker: Worker, unit: Unit) -> None:
        worker.unit = unit
        items = unit.requests()
        if self.judge is not None:  # a recording left by an earlier run of a case (a run killed, then resumed)
            self.judge.forget([index for index, *_ in items])
        worker.started_at = time.monotonic()
        fresh = self.fresh or worker.units_run == 0 or bool(unit.done)
        worker.queued = {"op": "unit", "items": items, "fresh": fresh}
        worker.units_run += 1
        if worker.ready:
            worker.send(worker.queued)

    def _handle(self, pending: deque) -> None:
        busy = [w for w in self.workers if w.unit is not None]
        deadline = min([w.started_at + self.timeout_s for w in busy if w.ready and w.current is not None]
                       + [w.born + START_TIMEOUT_S for w in self.workers if not w.ready]
                       + [t for t in [self.judge and self.judge.deadline()] if t], default=None)
        wait = 1.0 if deadline is None else min(1.0, max(0.0, deadline - time.monotonic()) + 0.05)
        try:  # never blocks for long: Ctrl-C and SIGTERM reach this thread within a second
            worker, event = self.events.get(timeout=wait)
        except queue.Empty:
            now = time.monotonic()
            for w in self.workers:
                if not w.ready and now - w.born > START_TIMEOUT_S:
                    w.kill()
                    raise WorkerStartError(f"a worker did not start in {START_TIMEOUT_S} s: "
                                           f"{w.stderr_tail() or 'no output'}")
            for w in busy:
                if w.current is not None and now - w.started_at > self.timeout_s:
                    w.kill()
                    self._died(w, pending, f"ran past case_timeout_s={self.timeout_s:g} s and was killed")
            for index, rows, line in self.judge.given_up(now) if self.judge is not None else []:
                self.record(index, rows, line)
            return
        if worker is self.judge:
            if (judged := self.judge.done(event)) is not None:
                self.record(*judged)
            return
        if worker not in self.workers:
            return  # a replaced worker's last words
        kind = event["ev"]
        if kind == "ready":
            if event["fingerprint"] != self.fingerprint():
                raise WorkerStartError("a worker planned other cases than the run did (plan fingerprints differ)")
            worker.ready = True
            if worker.unit is not None:
                worker.send(worker.queued)
        elif kind == "failed":
            raise WorkerStartError(f"a worker could not build the run: {event['error']}")
        elif kind == "start":
            worker.current, worker.started_at, worker.doing = event["index"], time.monotonic(), ""
        elif kind == "progress":
            if event.get("index") == worker.current:
                worker.doing = bounded(str(event.get("what", "")), 200)
        elif kind == "case":
            index, unit = event.get("index"), worker.unit
            if unit is None or index != worker.current or index not in unit.items or (
                    ("rows" in event) == (index in unit.done)):  # rows once per case run, none for a replay
                worker.kill()
                self._died(worker, pending, "sent the result of a case it was not running and was killed")
                return
            worker.current, worker.doing = None, ""
            if "rows" in event:
                index, rows, line = event["index"], event["rows"], event.get("line", "")
                worker.unit.done.append(index)
                if self.judge is not None and self.judge.wants(index):  # its verdict is the judge's
                    taken = self.judge.take(index, rows, line)
                    if taken is not None:
                        self.record(index, *taken)
                else:
                    self.record(index, rows, line)
            elif self.judge is not None and self.judge.wants(index):  # a replay: the judge may need its trajectory
                self.judge.replayed(index)
        elif kind == "unit-done":
            worker.unit = None
        elif kind == "exit":
            if not worker.ready:
                self._retire(worker)
                raise WorkerStartError(f"a worker died starting ({how_it_ended(worker.proc.returncode)}): "
                                       f"{worker.stderr_tail() or 'no output'}")
            if worker.unit is not None:
                self._died(worker, pending, how_it_ended(worker.proc.returncode))
            else:
                self._retire(worker)

    def _died(self, worker: Worker, pending: deque, how: str) -> None:
        """Record the case the worker died in; the rest of its unit goes back to the front of the queue."""
        unit, index = worker.unit, worker.current
        worker.keep_log = True  # the evidence of how it died: kept under out_dir/workers/
        self._retire(worker)
        tail = worker.stderr_tail()
        running = index is not None and index not in unit.done
        declared = (declared_exit(self.judge, index, worker.proc.returncode, tail)
                    if running and self.judge is not None else None)
        if declared is not None:  # the end its suite declares for this case: recorded, the unit goes on
            self.record(index, *declared)
            unit.lost.append(index)
            if any(i not in unit.done and i not in unit.lost for i in unit.items):
                pending.appendleft(unit)
            return
        parts = unit.crashed.setdefault(index, {}) if running else {}
        if running and worker.doing and worker.doing not in parts and len(parts) < CRASHED_PARTS:
            # it died in a part the case named: the case runs again in a fresh worker, without that part
            parts[worker.doing] = f"its worker process {how}" + (f"; stderr: {tail}" if tail else "")
            pending.appendleft(unit)
            return
        unit.deaths += 1
        if running:
            where = f" ({worker.doing})" if worker.doing else ""
            detail = f"its worker process {how} during this case{where}" + (f"; stderr: {tail}" if tail else "")
            if parts:
                detail += f"; it had died before {'; '.join(parts)} (each run again without it)"
            self._error(index, detail)
            unit.lost.append(index)
        elif index is not None:  # it died replaying a case that had finished before: nothing more is trusted
            unit.deaths += 1
        rest = [i for i in unit.items if i not in unit.done and i not in unit.lost]
        if not rest:
            return
        if unit.deaths > 1:
            for i in rest:
                self._error(i, f"not run: the worker process of its group of cases died twice (last: it {how})")
            return
        pending.appendleft(unit)

    def _error(self, index: int, detail: str) -> None:
        self.record(index, *error_outcome(self.labels_of(index), detail))

    def _retire(self, worker: Worker) -> None:
        worker.kill()
        worker.close()
        if not worker.keep_log or not worker.stderr_tail():
            worker.log.unlink(missing_ok=True)
        if worker in self.workers:
            self.workers.remove(worker)

    def close(self) -> None:
        """Stop every worker (at the end, or on an interrupt: their unfinished cases stay unrecorded)."""
        if self.judge is not None:
            self.judge.close()
        for worker in self.workers:  # idle or abandoned: nothing of theirs is left to wait for
            worker.close()
        stop_groups([worker.proc for worker in self.workers])
        for worker in self.workers:
            worker.log.unlink(missing_ok=True)
        self.workers.clear()
        try:
            self.logs.rmdir()  # only when empty: a dead worker's log stays
        except OSError:
            pass
