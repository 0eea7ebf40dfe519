"""A run's plan made in a worker process, so that the process orchestrating the run never runs the code under test,
nor pays for planning what its workers plan again (TorchDynamo's import, each implementation probed, a kernel built).

Every run with workers is planned so. Planning a run that checks a candidate imports the candidate's module,
inspects its class (defaults, signature) and builds it (each implementation is probed at each dtype).
``plan_in_worker`` does that in an ``engine.worker`` process and takes back only the plan as data
(``engine.blueprint``): a candidate that exits, crashes, hangs or leaves threads running at import ends that process,
never the run's, and is one line naming how. The worker says when it has started (optbench and torch imported:
``worker_handle.START_TIMEOUT_S``) and when the run's config is resolved (the candidate imported, inspected and built:
``case_timeout_s``), then plans (each implementation probed, a kernel perhaps built: ``worker_handle.START_TIMEOUT_S``).
The answers of a planning worker are read as data and checked (the fingerprint against the entries); what it prints
is its own log, cut to its last lines in the message.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import tempfile
import threading

from optbench.engine.blueprint import Blueprint
from optbench.engine.worker_handle import START_TIMEOUT_S, STDERR_TAIL_LINES, how_it_ended, start_worker, stop_groups
from optbench.usage import UsageError

_KEPT: dict[str, Blueprint] = {}  # a plan kept for the next run of its config (the command's check, then its run)


def plan_in_worker(config: dict, config_dirs: list[str], timeout_s: float, keep: bool = False) -> Blueprint:
    """The blueprint of the run ``config`` (resolved, as results.json records it), made in a worker process; a
    UsageError (one line) for a candidate the worker refuses or that ends or hangs it. ``keep``: the next call for
    the same config takes this plan instead of making one (``optbench run`` plans a run before Hydra's app runs
    it), once."""
    key = json.dumps([{k: v for k, v in config.items() if k != "out_dir"}, config_dirs, sys.path], sort_keys=True,
                     default=str)
    if key in _KEPT:
        return _KEPT.pop(key)
    blueprint = _plan(config, config_dirs, timeout_s)
    if keep:
        _KEPT[key] = blueprint
    return blueprint


def _plan(config: dict, config_dirs: list[str], timeout_s: float) -> Blueprint:
    request = json.dumps({"op": "plan", "cfg": config, "config_dirs": config_dirs, "sys_path": list(sys.path)})
    candidate = config.get("candidate")
    whose = f"candidate {candidate}: " if candidate else ""
    phases = {"started": (START_TIMEOUT_S, "starting"),
              "resolved": (timeout_s, "importing and building it (case_timeout_s)" if candidate else
                           "resolving the run's config"),
              "answer": (START_TIMEOUT_S, "planning its cases")}
    with tempfile.TemporaryFile() as log:
        proc = start_worker(log)  # killed with its group
        events: queue.Queue = queue.Queue()
        threading.Thread(target=_read, args=(proc, events), daemon=True).start()
        answer = None
        try:
            proc.stdin.write(request.encode() + b"\n")
            proc.stdin.close()
            for phase, (limit, doing) in phases.items():
                try:
                    event = events.get(timeout=limit)
                except queue.Empty:
                    raise UsageError(f"{whose}the worker process planning the run ran past {limit:g} s "
                                     f"{doing} and was stopped{_tail(log)}") from None
                if event is None:
                    proc.wait()
                    raise UsageError(f"{whose}the worker process planning the run "
                                     f"{how_it_ended(proc.returncode)} while {doing}{_tail(log)}")
                if event["ev"] in ("planned", "refused", "failed"):
                    answer = event
                    break
        except BrokenPipeError:
            proc.wait()
            raise UsageError(f"{whose}the worker process planning the run "
                             f"{how_it_ended(proc.returncode)} before reading its request{_tail(log)}") from None
        finally:  # an interrupt, a timeout, or threads it left: nothing it started outlives the planning
            stop_groups([proc])
    if answer is None:
        raise UsageError(f"{whose}the worker process planning the run sent no plan")
    if answer["ev"] == "refused":
        raise UsageError(answer["error"])
    if answer["ev"] != "planned":  # an exception the planning did not turn into a usage error (SystemExit, ...)
        how = "importing and building it, in a worker process" if candidate else "in a worker process"
        raise UsageError(f"{whose}planning the run ({how}) failed: {str(answer.get('error'))[:500]}")
    try:
        return Blueprint.from_json(answer["blueprint"])
    except (KeyError, TypeError, ValueError) as exc:
        raise RuntimeError(f"the worker planning the run sent a malformed plan: {exc}") from None


def _read(proc: subprocess.Popen, events: queue.Queue) -> None:
    """The planning worker's events, in order, then None when its output ends."""
    for line in proc.stdout:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and isinstance(event.get("ev"), str):
            events.put(event)
    events.put(None)


def _tail(log) -> str:
    log.seek(0)
    lines = [line for line in log.read().decode("utf-8", "replace").splitlines() if line.strip()]
    tail = " | ".join(line.strip()[:200] for line in lines[-STDERR_TAIL_LINES:])
    return f"; stderr: {tail}" if tail else ""
