"""``python -m optbench ARGS`` (or ``python -m pytest ARGS``, the pytest gate) for the tests, started as a fork of a
process that has imported it (tests only).

A command that checks one case costs about 10 s of CPU on these 2-core machines, 8 of them starting: the
interpreter, torch, TorchDynamo, Hydra, pandas and optbench imported again. Tests whose subject is what a run does
(isolation, resume, a candidate from the working directory, sweeps, the pytest gate's items) run it with ``run``
instead: a fork of a server process that imported all that once per pytest process, and never ran a tensor
operation or code under test (one Python thread, so nothing is lost in the fork, as in optbench's own zygote). The
command is then what a new interpreter would run: its own process and session, the working directory,
environment, ``sys.argv`` and ``sys.path`` (the working directory, then ``PYTHONPATH``) of a ``python -m`` started
there, its own standard streams, the default signal handlers, its exit code (negative for a signal) and its
``atexit`` functions; the server imported with that environment (one is started for each other environment).
What it does not test is the start itself: which modules a new interpreter finds, the console script, a clone of
optbench in the working directory, signals sent while it imports. The tests of those start ``python -m optbench``
or the console script themselves (tests/test_cli.py, tests/test_bring_your_own.py, tests/test_isolation.py).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from optbench.engine.zygote import UNKEYED, signal_group
from optbench.engine.zygote_process import end_fork

ROOT = Path(__file__).resolve().parents[1]
PRELOAD = ("torch", "torch._dynamo", "numpy", "pandas", "hydra", "omegaconf", "optbench.cli", "optbench.engine.runner",
           "optbench.engine.worker", "optbench.report", "optbench.config", "pytest")
MODULES = ("optbench", "pytest")  # what a command may run: python -m <module>
BOOT = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from tests.warm_command import serve; serve(int(sys.argv[1]))"


def serve(fd: int) -> None:
    """The server: preload, then for each request fork the command, and answer with its pid and how it ended."""
    import importlib

    from optbench.engine.descendants import die_with_parent

    die_with_parent(os.getppid())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a ^C at the test's terminal is the test's
    sock = socket.socket(fileno=fd)
    for name in PRELOAD:
        importlib.import_module(name)
    sys.path.remove(str(ROOT))  # BOOT's; and -c's "" (the server's directory): each command puts its working
    sys.path[:] = [p for p in sys.path if p]  # directory first, as -m does
    threads = threading.active_count()  # (torch's import starts a native thread, as in optbench's own zygote)
    sock.send(json.dumps({"ready": threads == 1, "threads": threads}).encode())
    while True:
        message, fds, _, _ = socket.recv_fds(sock, 1 << 20, 3)
        if not message:
            os._exit(0)
        pid = os.fork()
        if pid == 0:
            _command(json.loads(message), fds, fd)
        for received in fds:
            os.close(received)
        sock.send(json.dumps({"forked": pid}).encode())
        sock.send(json.dumps({"exited": pid, "code": os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])}).encode())


def _command(request: dict, fds: list[int], server_fd: int) -> None:
    """In the fork: become ``python -m MODULE ARGS`` started in ``cwd`` with ``env``; never returns."""
    import atexit
    import runpy

    code = 1
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.close(server_fd)
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.path.insert(0, os.getcwd())
        sys.argv = ["-m", *request["argv"]]  # as -m has it while it finds the module; runpy sets argv[0]
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, int) and exc.code is not None:
            print(exc.code, file=sys.stderr)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()  # the command's own, as its interpreter's exit would run them
        finally:
            end_fork(code)


class _Server:
    def __init__(self, env: dict):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen([sys.executable, "-c", BOOT, str(theirs.fileno())], pass_fds=[theirs.fileno()],
                                     stdin=subprocess.DEVNULL, start_new_session=True, env=env)
        theirs.close()
        self.sock = ours
        ready = json.loads(self.sock.recv(4096))
        assert ready["ready"], f"the command server has {ready['threads']} threads: a fork would lose them"

    def close(self) -> None:
        self.sock.close()  # the server exits at the end of its socket
        self.proc.wait()

    def run(self, module: str, argv: list[str], cwd, env: dict, timeout: float | None) -> subprocess.CompletedProcess:
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, open(os.devnull, "rb") as null:
            request = {"module": module, "argv": argv, "cwd": str(cwd), "env": env}
            socket.send_fds(self.sock, [json.dumps(request).encode()], [null.fileno(), out.fileno(), err.fileno()])
            pid = json.loads(self.sock.recv(4096))["forked"]
            self.sock.settimeout(timeout)
            try:
                ended = json.loads(self.sock.recv(4096))
            except TimeoutError:
                signal_group(pid, signal.SIGKILL)
                self.sock.settimeout(None)
                self.sock.recv(4096)
                raise subprocess.TimeoutExpired([module, *argv], timeout) from None
            finally:
                self.sock.settimeout(None)
            out.seek(0)
            err.seek(0)
            return subprocess.CompletedProcess([module, *argv], ended["code"], out.read().decode(),
                                               err.read().decode())


def _keyed(env: dict) -> dict:
    """The environment a server imports with, all of it but the test's name: what a module reads from it when
    imported (a registry's plugins found on PYTHONPATH, say) is what a new interpreter would have read."""
    return {k: v for k, v in env.items() if k not in UNKEYED}  # (as optbench's zygotes are chosen)


_SERVERS: dict[str, _Server] = {}  # by environment, the most recently used last
KEPT = 2  # servers kept at once (each holds ~0.5 GB): the tests' own environment and one other (a plugin's path, say)
_LOCK = threading.Lock()


def run(*args, cwd=ROOT, env: dict | None = None, timeout: float | None = 600,
        module: str = "optbench") -> subprocess.CompletedProcess:
    """``subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env=env, capture_output=True,
    text=True, timeout=timeout)``, forked from this pytest process's command server for ``env`` (started at the
    first call with it; the ``KEPT`` most recently used are kept)."""
    assert module in MODULES, module
    env = dict(os.environ if env is None else env)
    key = json.dumps(_keyed(env), sort_keys=True)
    with _LOCK:
        server = _SERVERS.pop(key, None)
        if server is not None and server.proc.poll() is not None:
            server.close()
            server = None
        while len(_SERVERS) >= KEPT:
            _SERVERS.pop(next(iter(_SERVERS))).close()
        server = _SERVERS[key] = server or _Server(env)
        return server.run(module, [str(a) for a in args], cwd, env, timeout)
