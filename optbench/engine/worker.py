"""A worker process: runs the units of a run's plan that the parent (``engine.pool``) sends, one at a time.

Started by ``engine.worker_handle`` (forked from the zygote, or ``python -c``: the parent's optbench imported first,
then ``main()``). It speaks JSON lines: requests on stdin, events on a private copy of its original stdout; its
own stdout and stderr (the code under test's prints, a crash's last words) go to the log file the parent gave it as
stderr, which the parent reads back when the worker dies.

A planning worker (``engine.remote_plan``) is sent one ``{"op": "plan", "cfg": ..., "config_dirs": ...,
"sys_path": ...}``, answers ``planned`` (the plan as data), ``refused`` (a usage error) or ``failed``, and exits.
Requests: ``{"op": "init", "cfg": ..., "config_dirs": ..., "sys_path": ..., "record_dir": ...}`` once (a candidate's
parity cases write their recordings into ``record_dir`` for the parent's judge, ``engine.judge``), then ``{"op": "unit",
"items": [[index, "run" | "replay"], ...], "fresh": true}`` (``fresh: false`` goes on from the state the last
request left: the pytest gate sends a group's cases one request each). Events: ``ready`` (the plan's size and
fingerprint, which the parent compares with its own), ``start`` (a case began: the parent's clock for the
per-case timeout starts), ``progress`` (the part of the case that runs now, which a death names), ``case`` (its
rows and console line; a ``replay`` only rebuilds the scratch a later case of its group reads, and sends no rows),
``unit-done``, or ``failed`` (init raised). A unit starts from
the same state whatever ran before it in this process (scratch, torch's settings, RNGs, compiled graphs reset), so
which worker runs which unit never changes a row."""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback
from pathlib import Path

from optbench.engine.descendants import kill_strays
from optbench.journal import dumps

PARENT = "OPTBENCH_PARENT_PID"  # the process that started this worker: when it dies, so does the worker
# A worker started with ``python -c BOOT`` imports the optbench this process runs, its folder first on sys.path:
# ``python -m`` would put the working directory first, and a folder named optbench there (a clone of the
# repository) would shadow it in part.
BOOT = (f"import sys; sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r}); "
        "from optbench.engine.worker import main; main()")


def _send(out, event: dict) -> None:
    out.write(dumps(event) + "\n")
    out.flush()


def serve(requests, out) -> None:
    """Answer ``requests`` (an iterable of JSON lines) until it ends."""
    from omegaconf import OmegaConf

    planner = plan = executor = None
    for line in requests:
        request = json.loads(line)
        if request["op"] == "init":
            sys.path[:] = request["sys_path"]
            try:
                from optbench.engine.executor import Executor, quiet_torch
                from optbench.engine.planner import Planner

                quiet_torch()
                planner = Planner(OmegaConf.create(request["cfg"]), config_dirs=request["config_dirs"])
                plan = planner.plan()
                executor = Executor(planner.ctx, planner.seed, request.get("record_dir"))
            except BaseException as exc:
                _send(out, {"ev": "failed", "error": f"{type(exc).__name__}: {exc}".splitlines()[0],
                            "traceback": traceback.format_exc()})
                return
            _send(out, {"ev": "ready", "cases": len(plan), "fingerprint": planner.blueprint().fingerprint})
        elif request["op"] == "plan":  # the plan as data, for a parent that never imports the code under test
            _send(out, _plan(request, lambda phase: _send(out, {"ev": phase})))
            os._exit(0)  # whatever threads the code under test left: this process answered, it is done
        elif request["op"] == "unit":  # fresh: False goes on from the last unit's state (the pytest gate's items)
            def started(index: int) -> None:
                _send(out, {"ev": "start", "index": index})

            def progress(index: int, what: str) -> None:
                _send(out, {"ev": "progress", "index": index, "what": str(what)})  # (the parent bounds it)

            for index, mode, rows, line in executor.run_unit(plan, request["items"], request.get("fresh", True),
                                                             started, progress):
                kill_strays()  # nothing the case started outlives it
                _send(out, {"ev": "case", "index": index} | ({"rows": rows, "line": line} if mode == "run" else {}))
            _send(out, {"ev": "unit-done"})


def _plan(request: dict, reached) -> dict:
    """The ``planned`` event (the run's blueprint), ``refused`` (a usage error, its line) or ``failed``; ``reached``
    is told ``started`` (optbench imported) and ``resolved`` (the config resolved: the candidate imported and built)."""
    from omegaconf import OmegaConf

    sys.path[:] = request["sys_path"]
    from optbench.engine.executor import quiet_torch
    from optbench.engine.planner import Planner
    from optbench.usage import UsageError

    reached("started")
    try:
        quiet_torch()
        planner = Planner(OmegaConf.create(request["cfg"]), config_dirs=request["config_dirs"])
        reached("resolved")
        return {"ev": "planned", "blueprint": planner.blueprint().to_json()}
    except UsageError as exc:
        return {"ev": "refused", "error": str(exc)}
    except BaseException as exc:  # SystemExit at import included
        return {"ev": "failed", "error": f"{type(exc).__name__}: {exc}".splitlines()[0],
                "traceback": traceback.format_exc()}


def _stopped(signum, frame) -> None:
    """The parent stops this worker: unwind, so that what it holds is let go (``finally`` blocks run: torch's lock
    on a C++ extension it is building)."""
    raise SystemExit(128 + signum)


def main() -> None:
    from optbench.engine.descendants import adopt_orphans, die_with_parent

    die_with_parent(int(os.environ.get(PARENT, os.getppid())))  # a run killed with SIGKILL takes us with it
    adopt_orphans()  # what the code under test starts and abandons is ours to kill (after each case)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what an interrupt stops, and kills us
    signal.signal(signal.SIGTERM, _stopped)  # ... SIGTERM first (``worker_handle.stop_groups``), then SIGKILL
    events = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # the code under test's prints go to the log, never into the event stream
    sys.stdout = os.fdopen(1, "w", encoding="utf-8", buffering=1)
    serve(sys.stdin, events)


if __name__ == "__main__":
    main()
