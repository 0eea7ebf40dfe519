"""Worker processes forked from a zygote: one process that imported torch, NumPy and optbench's engine once.

Starting a worker with ``python -c`` imports torch and torch._dynamo again (about 4 s of CPU here), for every
worker, every planning worker and every worker that replaces one that died. A zygote does that once per
process that runs optbench (per environment, ``UNKEYED`` aside, working directory and thread), then forks a
worker for each request in milliseconds. It never imports or runs the code under test: it imports only
``PRELOAD`` and runs no tensor operation (no thread pool to break across a fork), so every worker starts from the
same pristine state a fresh interpreter would reach, whatever an earlier worker did to its own copy of torch, NumPy
or optbench.

A forked worker is what a ``python -c`` one was: its own session, its standard streams the ones the parent
passed (over a Unix socket), this environment, killed when its parent (the zygote) dies, as the zygote is when
the process that started it dies. ``spawn`` returns a handle with ``subprocess.Popen``'s surface the pool uses
(``pid``, ``stdin``, ``stdout``, ``poll``, ``wait``, ``kill``, ``returncode``, negative for a signal): the zygote
reaps its children and reports how each ended. Where there is no ``fork`` or ``socket.send_fds``, or the zygote
cannot start, a worker starts as before, with ``python -c``. With a CUDA build of torch the zygote preloads under
torch's NVML-based availability check and a forked canary then starts CUDA: where it cannot, each worker execs a new
interpreter instead of running in the fork (``zygote_process``): CUDA does not survive a fork of a process that started
the CUDA driver (on an H200 a preloaded fork saved about 9 s of each worker's start: a run of suite=sgd's speed, 39.5 s
to 22.4 s).

In optbench's own command (``allow_fork_here``) the zygote is a fork of the command itself, which has imported
torch, NumPy and optbench already: it then imports only what the command has not (TorchDynamo), about 1.6 s of CPU
less a run; it holds none of the command's descriptors and none of its threads (there is only one, or it is not
forked). The process side is ``engine.zygote_process``.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

from optbench.engine.worker import PARENT  # the process a worker (and the zygote) dies with
from optbench.engine.zygote_process import gpu_build, serve

ROOT = str(Path(__file__).resolve().parents[2])
BOOT = (f"import sys; sys.path.insert(0, {ROOT!r}); from optbench.engine.zygote_process import serve; "
        "serve(int(sys.argv[1]))")
KEPT = 2  # zygotes kept per process (one per environment, working directory and thread), oldest retired first
SUPPORTED = sys.platform.startswith("linux") and hasattr(socket, "send_fds") and hasattr(os, "fork")
# variables that say which process or test asks, not how to import: they choose no zygote (a worker still gets
# them as asked, ``zygote_process._child``); pytest sets PYTEST_CURRENT_TEST anew for every test and its phases,
# and the gate's items each start a worker: keyed by it, every item started a zygote of its own (3 s of CPU each)
UNKEYED = (PARENT, "PYTEST_CURRENT_TEST")


class Forked:
    """A worker forked by a zygote, seen as a ``subprocess.Popen``."""

    def __init__(self, stdin, stdout):
        self.stdin, self.stdout = stdin, stdout
        self.returncode: int | None = None
        self.pid: int | None = None  # None until its zygote has forked it
        self._killed = False
        self._ended = threading.Event()

    def _started(self, pid: int) -> None:
        self.pid = pid
        if self._killed:  # killed before its zygote got to fork it: it ended then, its fork dies now
            self._signal()

    def _end(self, code: int) -> None:
        if self.returncode is None:
            self.returncode = code
        self._ended.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired("optbench worker", timeout)
        return self.returncode

    def kill(self) -> None:
        """SIGKILL it and its process group (its own session), now or, if its zygote has not forked it yet (still
        importing, or stuck there), the moment it does: it has ended either way, so ``wait`` returns."""
        self._killed = True
        if self.pid is None:
            self._end(-signal.SIGKILL)
        elif self.returncode is None:
            self._signal()

    def _signal(self) -> None:
        signal_group(self.pid, signal.SIGKILL)


def signal_group(pid: int, signum: int) -> None:
    """Send ``signum`` to the process group a forked worker leads (its own session), else, in the instant before its
    ``setsid()``, to the process alone."""
    for send in (os.killpg, os.kill):
        try:
            send(pid, signum)
            return
        except (ProcessLookupError, PermissionError):
            continue


class Zygote:
    """The parent's side of one zygote process: fork requests out, pids and exit codes back."""

    def __init__(self, env: dict):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        if _may_fork_here(env):  # this process is optbench's command, as it started: its torch is already imported
            self.proc: subprocess.Popen | ForkedZygote = ForkedZygote(theirs.fileno())
        else:
            self.proc = subprocess.Popen([sys.executable, "-c", BOOT, str(theirs.fileno())],
                                         pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                                         env=env)
        theirs.close()
        self.sock, self.lock = ours, threading.Lock()
        self.waiting: queue.Queue = queue.Queue()  # handles whose fork is requested, in request order
        self.children: dict[int, Forked] = {}
        self.alive, self.ready = True, threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                message = self.sock.recv(65536)
            except OSError:
                message = b""
            if not message:
                break
            event = json.loads(message)
            if "ready" in event:
                self.ready.set()
            elif "forked" in event:
                handle = self.waiting.get()
                self.children[event["forked"]] = handle
                handle._started(event["forked"])
            elif "exited" in event and event["exited"] in self.children:
                self.children.pop(event["exited"])._end(event["code"])
        self.alive = False  # it died or was retired: its children died with it (PR_SET_PDEATHSIG)
        self.ready.set()
        for handle in [*self.children.values(), *list(self.waiting.queue)]:
            handle._end(-signal.SIGKILL)
        self.proc.wait()

    def spawn(self, stderr: int, env: dict) -> Forked:
        """A worker running ``engine.worker.main`` with ``stderr`` (a file descriptor) as its stderr."""
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        handle = Forked(os.fdopen(in_w, "wb"), os.fdopen(out_r, "rb"))
        request = json.dumps({"cwd": os.getcwd(), "env": env}).encode()
        with self.lock:
            self.waiting.put(handle)
            try:
                socket.send_fds(self.sock, [request], [in_r, out_w, stderr])
            except OSError:
                handle._end(-signal.SIGKILL)
        os.close(in_r)
        os.close(out_w)
        return handle

    def retire(self) -> None:
        """No more forks: it exits once the workers it forked have ended (it still reports them)."""
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass


_FORK_HERE = {"allowed": False}  # set by optbench's command (``allow_fork_here``), never by a library's caller


def allow_fork_here() -> None:
    """This process is optbench's own command: its zygote may be a fork of it rather than a new interpreter (it
    has imported torch, NumPy and optbench already: about 1.6 s of CPU a run saved), where ``_may_fork_here``
    holds. A process optbench is only a library of (``optbench.run`` in a user's program, the pytest gate) never
    is: its threads, CUDA context and memory are its own."""
    _FORK_HERE["allowed"] = True


def _may_fork_here(env: dict) -> bool:
    """Fork the zygote from this process: allowed by the command, with this process's environment (what was
    imported read it), no thread but the main one (a fork copies no other thread, and whatever lock one held
    stays held), and a torch built without CUDA or ROCm (with one, the zygote imports torch alone, ``serve``)."""
    if not _FORK_HERE["allowed"] or threading.active_count() != 1 or "torch" not in sys.modules:
        return False
    if gpu_build(sys.modules["torch"]):
        return False
    return _keyed(env) == _keyed(os.environ)


def _keyed(env) -> dict:
    """The part of ``env`` that chooses a zygote: all of it but ``UNKEYED``."""
    return {k: v for k, v in env.items() if k not in UNKEYED}


class ForkedZygote:
    """A zygote forked from this process (``subprocess.Popen``'s ``pid``, ``poll`` and ``wait``): its own session,
    /dev/null for its standard streams, no file descriptor of this process but its socket (``fd``), then ``serve``.
    Its garbage collector is frozen (``gc.freeze``): an object of this process's that it never uses is never
    collected there, so no file object closes a descriptor number it has reused."""

    def __init__(self, fd: int):
        self.returncode: int | None = None
        self.pid = os.fork()
        if self.pid == 0:
            self._become_zygote(fd)

    @staticmethod
    def _become_zygote(fd: int) -> None:
        try:
            import gc

            gc.freeze()
            signal.set_wakeup_fd(-1)
            for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
                signal.signal(signum, signal.SIG_DFL)
            os.setsid()
            null = os.open(os.devnull, os.O_RDWR)
            for target in (0, 1, 2):
                os.dup2(null, target)
            for name in os.listdir("/proc/self/fd"):
                if int(name) > 2 and int(name) != fd:
                    try:
                        os.close(int(name))
                    except OSError:
                        pass
            sys.argv = ["-c", str(fd)]
            os.environ[PARENT] = str(os.getppid())  # it dies with this process, as a started zygote does
            serve(fd)
        finally:
            os._exit(1)

    def poll(self) -> int | None:
        return self._reap(os.WNOHANG)

    def wait(self) -> int:
        return self._reap(0)

    def _reap(self, flags: int) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, flags)
            except ChildProcessError:  # reaped elsewhere (the command's end kills and reaps what is left)
                self.returncode = -signal.SIGKILL
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


_ZYGOTES: dict[tuple, Zygote] = {}
_GUARD = threading.Lock()


def spawn(stderr: int, env: dict) -> Forked | None:
    """A worker forked from this process's zygote for ``env`` (started at the first request), or None where a
    zygote cannot be had: the caller then starts a worker with ``python -c``."""
    if not SUPPORTED:
        return None
    key = (tuple(sorted(_keyed(env).items())), os.getcwd(), threading.get_ident())
    with _GUARD:
        zygote = _ZYGOTES.get(key)
        if zygote is None or not zygote.alive:
            try:
                zygote = _ZYGOTES[key] = Zygote(env)
            except OSError:
                return None
            while len(_ZYGOTES) > KEPT:
                _ZYGOTES.pop(next(iter(_ZYGOTES))).retire()
    if not zygote.ready.wait(0) and zygote.proc.poll() is not None:
        return None
    return zygote.spawn(stderr, env)


@atexit.register
def _retire_all() -> None:
    for zygote in _ZYGOTES.values():
        zygote.retire()
