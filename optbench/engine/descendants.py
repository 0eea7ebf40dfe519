"""Nothing the code under test starts outlives its case, and no worker outlives the run.

Linux's ``prctl`` makes both hold without root: a worker asks for SIGKILL when its parent dies
(``PR_SET_PDEATHSIG``: a run killed with SIGKILL takes its workers with it), and becomes the *subreaper* of its
descendants (``PR_SET_CHILD_SUBREAPER``): a process the code under test starts, even one that leaves the worker's
session with ``setsid()`` and whose own parent exits, is reparented to the worker, which kills every child it
did not start for itself at the end of each case (torch's compile workers are its own). The process that runs an
``optbench`` command is the subreaper of the workers' descendants in turn (a worker killed for a timeout leaves
its orphans to it) and kills what is left when the run ends. Elsewhere than Linux these are no-ops.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from pathlib import Path

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
KEPT = ("torch._inductor.compile_worker",)  # children torch starts for itself (compile workers), reused across cases


def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def die_with_parent(parent: int) -> None:
    """This process is killed when ``parent`` (its parent at start) dies; if it has died already, exit now."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the request took hold
        os._exit(1)


def adopt_orphans() -> bool:
    """Become the subreaper of this process's descendants (whether it could)."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)


def children(pid: int | None = None) -> list[int]:
    """The processes whose parent is ``pid`` (this process by default), from /proc."""
    pid = os.getpid() if pid is None else pid
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text.rpartition(")")[2].split()  # after the command name, which may hold spaces
        if len(fields) > 1 and fields[1] == str(pid):
            out.append(int(stat.parent.name))
    return out


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def kill_strays(spare=()) -> int:
    """Kill (SIGKILL, with their process groups where they lead one) this process's children but ``spare`` and
    torch's own compile workers; how many."""
    killed = 0
    for pid in children():
        if pid in spare or any(k in _command(pid) for k in KEPT):
            continue
        for kill in (lambda: os.killpg(pid, signal.SIGKILL) if os.getpgid(pid) == pid else None,
                     lambda: os.kill(pid, signal.SIGKILL)):
            try:
                kill()
            except (ProcessLookupError, PermissionError):
                pass
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        killed += 1
    return killed
