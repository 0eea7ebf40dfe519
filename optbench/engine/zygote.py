"""Worker processes forked from a zygote: one process that imported torch, NumPy and optbench's engine once.

Starting a worker with ``python -c`` imports torch and torch._dynamo again (about 4 s of CPU here), for every
worker, every planning worker and every worker that replaces one that died. A zygote does that once per
process that runs optbench (per environment, working directory and thread), then forks a worker for each
request in milliseconds. It never imports or runs the code under test: it imports only ``PRELOAD`` and runs no
tensor operation (no thread pool to break across a fork), so every worker starts from the same pristine state
a fresh interpreter would reach, whatever an earlier worker did to its own copy of torch, NumPy or optbench.

A forked worker is what a ``python -c`` one was: its own session, its standard streams the ones the parent
passed (over a Unix socket), this environment, killed when its parent (the zygote) dies, as the zygote is when
the process that started it dies. ``spawn`` returns a handle with ``subprocess.Popen``'s surface the pool uses
(``pid``, ``stdin``, ``stdout``, ``poll``, ``wait``, ``kill``, ``returncode``, negative for a signal): the zygote
reaps its children and reports how each ended. Where there is no ``fork`` or ``socket.send_fds``, or the zygote
cannot start, a worker starts as before, with ``python -c``. With a CUDA build of torch each worker execs a new
interpreter instead of running in the fork (``_child``): CUDA does not survive a fork of a process that initialised it.
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

PRELOAD = ("numpy", "torch", "torch._dynamo", "omegaconf", "optbench.engine.worker", "optbench.engine.executor",
           "optbench.engine.planner")
ROOT = str(Path(__file__).resolve().parents[2])
BOOT = (f"import sys; sys.path.insert(0, {ROOT!r}); from optbench.engine.zygote import serve; "
        "serve(int(sys.argv[1]))")
KEPT = 2  # zygotes kept per process (one per environment, working directory and thread), oldest retired first
SUPPORTED = sys.platform.startswith("linux") and hasattr(socket, "send_fds") and hasattr(os, "fork")


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
        self.proc = subprocess.Popen([sys.executable, "-c", BOOT, str(theirs.fileno())], pass_fds=[theirs.fileno()],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True, env=env)
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


_ZYGOTES: dict[tuple, Zygote] = {}
_GUARD = threading.Lock()


def spawn(stderr: int, env: dict) -> Forked | None:
    """A worker forked from this process's zygote for ``env`` (started at the first request), or None where a
    zygote cannot be had: the caller then starts a worker with ``python -c``."""
    if not SUPPORTED:
        return None
    key = (tuple(sorted((k, v) for k, v in env.items() if k != PARENT)), os.getcwd(), threading.get_ident())
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


# --- the zygote process ---

def serve(fd: int) -> None:
    """The zygote: preload, then fork a worker per request on socket ``fd`` and report how each ended."""
    import importlib
    import select

    from optbench.engine.descendants import die_with_parent

    die_with_parent(int(os.environ.get(PARENT, os.getppid())))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock = socket.socket(fileno=fd)
    import torch

    # a CUDA (or ROCm) build: see ``_child``; then nothing more is preloaded
    fresh = torch.version.cuda is not None or getattr(torch.version, "hip", None) is not None
    for name in () if fresh else PRELOAD:
        importlib.import_module(name)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sock.send(b'{"ready": true}')
    children: set[int] = set()
    accepting = True
    while accepting or children:
        readable, _, _ = select.select([sock, wake_r] if accepting else [wake_r], [], [], 1.0)
        if wake_r in readable:
            os.read(wake_r, 4096)
        for pid in list(children):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                children.discard(pid)
                _send(sock, {"exited": pid, "code": os.waitstatus_to_exitcode(status)})
        if accepting and sock in readable:
            message, fds, _, _ = socket.recv_fds(sock, 1 << 20, 3)
            if not message:
                accepting = False  # retired or its parent ended: no more forks
                continue
            pid = os.fork()
            if pid == 0:
                _child(json.loads(message), fds, closing=(fd, wake_r, wake_w), fresh=fresh)
            for received in fds:
                os.close(received)
            children.add(pid)
            _send(sock, {"forked": pid})
    os._exit(0)


def _send(sock: socket.socket, event: dict) -> None:
    try:
        sock.send(json.dumps(event).encode())
    except OSError:
        pass  # its parent is gone: what it forked dies with it


def _child(request: dict, fds: list[int], closing: tuple, fresh: bool = False) -> None:
    """In the forked worker: its own session and streams, the requested directory and environment, then the worker's
    main; never returns. ``fresh`` (a CUDA or ROCm build of torch): the worker's main in a new interpreter
    (``exec``), not in this forked image. CUDA cannot be used in a fork of a process that initialised it, and with
    such a build the zygote cannot tell whether an import did (on an H200 its forks were refused CUDA although
    ``torch.cuda.is_initialized()`` was False after each import): such a worker keeps the zygote's session and
    reaping, not its preload."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        for fd in closing:
            os.close(fd)
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"], **{PARENT: str(os.getppid())})  # it dies with the zygote
        if fresh:
            from optbench.engine.worker import BOOT

            os.execv(sys.executable, [sys.executable, "-c", BOOT])
        from optbench.engine.worker import main

        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)
