"""The zygote process (``engine.zygote`` starts it, or forks it from optbench's command): ``serve`` preloads
``PRELOAD``, then forks a worker per request and reports how each ended; ``_child`` is a forked worker's start."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys

from optbench.engine.worker import PARENT  # the process a worker (and the zygote) dies with

PRELOAD = ("numpy", "torch", "torch._dynamo", "omegaconf", "optbench.engine.worker", "optbench.engine.executor",
           "optbench.engine.planner")


NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"  # torch.cuda.is_available() asks NVML, not the CUDA driver


def gpu_build(torch) -> bool:
    """Whether this torch is a CUDA or ROCm build: CUDA does not survive a fork of a process that initialised it, and
    an import may initialise it unseen (``_child``)."""
    return torch.version.cuda is not None or getattr(torch.version, "hip", None) is not None


def serve(fd: int) -> None:
    """The zygote: preload, then fork a worker per request on socket ``fd`` and report how each ended."""
    import importlib
    import select

    from optbench.engine.descendants import die_with_parent

    die_with_parent(int(os.environ.get(PARENT, os.getppid())))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock = socket.socket(fileno=fd)
    import torch

    if gpu_build(torch):
        fresh = not _preloaded_forks_keep_cuda(torch)  # else each worker is a new interpreter (``_child``)
    else:
        fresh = False
        for name in PRELOAD:
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


def _preloaded_forks_keep_cuda(torch) -> bool:
    """With a CUDA or ROCm build: preload, then whether a fork of this process can still start CUDA. A CUDA
    availability check starts the CUDA driver, which no fork survives (on an H200 ``torch.cuda.is_available()`` alone,
    and one of ``PRELOAD``, made every fork's first CUDA call raise "Cannot re-initialize CUDA in forked subprocess",
    though ``torch.cuda.is_initialized()`` stayed False): the preload runs with torch's NVML-based check, which
    starts no driver, and the environment is restored after it. A forked canary then starts CUDA (where a device
    is visible): if it cannot, or CUDA is initialised here, the workers are new interpreters (False)."""
    import importlib

    before = os.environ.get(NVML_CHECK)
    os.environ[NVML_CHECK] = "1"
    try:
        for name in PRELOAD:
            importlib.import_module(name)
    finally:
        if before is None:
            os.environ.pop(NVML_CHECK, None)
        else:
            os.environ[NVML_CHECK] = before
    if torch.cuda.is_initialized():
        return False
    pid = os.fork()
    if pid == 0:  # the canary: the zygote's image, the caller's environment, CUDA started as a worker would
        code = 1
        try:
            if torch.cuda.is_available():
                torch.cuda.init()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def _send(sock: socket.socket, event: dict) -> None:
    try:
        sock.send(json.dumps(event).encode())
    except OSError:
        pass  # its parent is gone: what it forked dies with it


def _child(request: dict, fds: list[int], closing: tuple, fresh: bool = False) -> None:
    """In the forked worker: its own session and streams, the requested directory and environment, then the worker's
    main; never returns. ``fresh`` (a CUDA or ROCm build of torch whose forks cannot start CUDA,
    ``_preloaded_forks_keep_cuda``): the worker's main in a new interpreter (``exec``), not in this forked image;
    such a worker keeps the zygote's session and reaping, not its preload."""
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
        end_fork(code)


def end_fork(code: int) -> None:
    """End this forked process with ``code``: its standard streams flushed, none of its parent's clean-up run."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
