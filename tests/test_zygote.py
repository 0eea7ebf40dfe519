"""Workers forked from a zygote start as ``python -c`` ones did: their own session, streams, directory and
environment, an exit code Popen's way, dead with their zygote; and each starts pristine, whatever an earlier one did
to its torch, NumPy or optbench."""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from optbench.config import compose_config
from optbench.engine import zygote
from optbench.engine.runner import SuiteRun
from optbench.engine.worker_handle import kill_group, start_worker
from optbench.usage import UsageError

pytestmark = pytest.mark.skipif(not zygote.SUPPORTED, reason="the zygote needs Linux's fork and SCM_RIGHTS")

# A candidate module that knows whether a worker before it ran in the same interpreter: it marks torch, NumPy and
# optbench's SGD reference, and refuses to import where it finds a mark.
MARKS = """import numpy, torch
import optbench.reference.sgd as reference
if getattr(torch, "_marked", False) or getattr(numpy, "_marked", False) or getattr(reference, "_marked", False):
    raise RuntimeError("an earlier worker's changes are here")
torch._marked = numpy._marked = reference._marked = True
reference.update = lambda *a, **k: None  # and breaks the oracle, as a hostile candidate would

class SGD(torch.optim.SGD):
    pass
"""


def config(candidate: str) -> dict:
    cfg = compose_config(["suite=sgd", "jobs=1", "dtype=float32", "impl=[candidate]", "checks=[parity]",
                          f"candidate={candidate}", "history_dir=null"])
    return OmegaConf.to_container(cfg, resolve=True)


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def answer(proc, request: dict) -> dict:
    """A planning worker's answer to ``request``."""
    proc.stdin.write((json.dumps(request) + "\n").encode())
    proc.stdin.flush()
    for line in proc.stdout:
        event = json.loads(line)
        if event["ev"] in ("refused", "failed", "planned"):
            return event
    return {}


@pytest.mark.slow  # (slow tier; CI keeps a worker starting pristine, and every test with workers)
def test_a_forked_worker_has_its_own_session_streams_and_the_environment_asked_for(tmp_path, monkeypatch):
    monkeypatch.setenv("OPTBENCH_TEST_MARK", "forked")
    monkeypatch.chdir(tmp_path)
    with tempfile.TemporaryFile() as log:
        proc = start_worker(log)
        assert isinstance(proc, zygote.Forked)
        code = ("import os, sys; print(os.getsid(0) == os.getpid(), os.environ['OPTBENCH_TEST_MARK'], os.getcwd(), "
                "os.environ['OPTBENCH_PARENT_PID'] == str(os.getppid()), file=sys.stderr); sys.exit(3)")
        candidate = tmp_path / "says.py"
        candidate.write_text(code.replace("; ", "\n"))
        said = answer(proc, {"op": "plan", "cfg": config("says.SGD"), "config_dirs": [],
                             "sys_path": [str(tmp_path), *sys.path]})
        assert proc.wait(60) == 0  # the plan op answers, then ends the worker
        assert "raised at import: SystemExit: 3" in said["error"]
        log.seek(0)
        assert log.read().decode().split() == ["True", "forked", str(tmp_path), "True"]


@pytest.mark.slow  # (slow tier; CI keeps a worker starting pristine, and every test with workers)
def test_a_new_test_or_gate_item_reuses_the_zygote_and_its_worker_still_gets_the_environment_asked_for(
        tmp_path, monkeypatch):
    """pytest sets PYTEST_CURRENT_TEST anew for every test and gate item: a zygote chosen by it started for each
    item that needed a worker (3 s of CPU each). It chooses none now; the worker still sees the value asked for."""
    monkeypatch.chdir(tmp_path)
    said, used = [], set()
    for item in ("first::item (call)", "second::item (call)"):
        monkeypatch.setenv("PYTEST_CURRENT_TEST", item)
        with tempfile.TemporaryFile() as log:
            proc = start_worker(log)
            (tmp_path / "says.py").write_text(
                "import os, sys\nprint(os.environ['PYTEST_CURRENT_TEST'], file=sys.stderr)\nsys.exit(3)\n")
            answer(proc, {"op": "plan", "cfg": config("says.SGD"), "config_dirs": [],
                          "sys_path": [str(tmp_path), *sys.path]})
            assert proc.wait(60) == 0
            log.seek(0)
            said.append(log.read().decode().strip())
        used |= {id(z) for (_, cwd, _), z in zygote._ZYGOTES.items() if cwd == os.getcwd()}  # (this test's folder)
    assert said == ["first::item (call)", "second::item (call)"]
    assert len(used) == 1, zygote._ZYGOTES.keys()


CUDA_BUILD = ("import importlib, os, torch; torch.version.cuda = torch.version.cuda or '13.0'; "
              "torch.zygote_mark = 'preloaded'; "  # the zygote's own state; and what the preload saw of torch's check:
              "importlib.import_module = lambda n, package=None, _i=importlib.import_module: "
              "(n == 'omegaconf' and vars(torch).setdefault('nvml_seen', "
              "os.environ.get('PYTORCH_NVML_BASED_CUDA_CHECK')), _i(n, package))[1]; ")
REFUSED_IN_FORKS = ("torch.cuda.is_available = lambda: True; "
                    "torch.cuda.init = lambda: (_ for _ in ()).throw(RuntimeError('Cannot re-initialize CUDA in forked "
                    "subprocess')); ")


@pytest.mark.slow  # (slow tier; CI keeps a worker starting pristine, and every test with workers)
@pytest.mark.parametrize("forks_keep_cuda", [True, False], ids=["forks-keep-cuda", "forks-refused-cuda"])
def test_with_a_cuda_build_workers_are_forks_only_where_a_canary_fork_starts_cuda(tmp_path, monkeypatch,
                                                                                    forks_keep_cuda):
    """CUDA cannot be used in a fork of a process that started the CUDA driver, which a CUDA availability check in an
    import can do unseen: with a CUDA build the zygote preloads under torch's NVML-based check (restored after), then
    a forked canary starts CUDA. Where it can, workers are forks carrying the preload (here a mark on ``torch``; on
    a GPU machine the canary starts a real device); where it cannot, each is a new interpreter (same session,
    streams, directory and environment) and nothing of the zygote's state reaches it."""
    boot = CUDA_BUILD + ("" if forks_keep_cuda else REFUSED_IN_FORKS)
    monkeypatch.setattr(zygote, "BOOT", boot + zygote.BOOT)
    monkeypatch.setattr(zygote, "_ZYGOTES", {})
    monkeypatch.setenv("OPTBENCH_TEST_MARK", "fresh")
    monkeypatch.delenv("PYTORCH_NVML_BASED_CUDA_CHECK", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "says.py").write_text(
        "import os, sys, torch\n"
        "print(os.getsid(0) == os.getpid(), os.environ['OPTBENCH_TEST_MARK'], os.getcwd(),\n"
        "      getattr(torch, 'zygote_mark', None), getattr(torch, 'nvml_seen', None),\n"
        "      os.environ.get('PYTORCH_NVML_BASED_CUDA_CHECK'),\n"
        "      open('/proc/self/cmdline', 'rb').read().split(b'\\0')[1].decode(), file=sys.stderr)\n")
    with tempfile.TemporaryFile() as log:
        proc = start_worker(log)
        assert isinstance(proc, zygote.Forked)
        said = answer(proc, {"op": "plan", "cfg": config("says.SGD"), "config_dirs": [],
                             "sys_path": [str(tmp_path), *sys.path]})
        assert proc.wait(60) == 0
        assert "SGD" in said.get("error", "")  # the module has no SGD: refused after it ran
        log.seek(0)
        words = log.read().decode().split()
    if forks_keep_cuda:  # the zygote's image: its mark, the check it preloaded under, its argv; the variable gone
        assert words == ["True", "fresh", str(tmp_path), "preloaded", "1", "None", "-c"]
    else:
        assert words == ["True", "fresh", str(tmp_path), "None", "None", "None", "-c"]


@pytest.mark.slow  # (slow tier; CI keeps a worker starting pristine, and every test with workers)
def test_exit_codes_are_popens_and_a_killed_worker_takes_its_group(tmp_path):
    with tempfile.TemporaryFile() as log:
        proc = start_worker(log)
        proc.stdin.close()  # no request: the worker's loop ends and it exits 0
        assert proc.wait(60) == 0 and proc.poll() == 0
    with tempfile.TemporaryFile() as log:
        proc = start_worker(log)
        started = tmp_path / "started"
        (tmp_path / "sleeper.py").write_text(f"import subprocess, time\nchild = subprocess.Popen(['sleep', '300'])\n"
                                             f"open({str(started)!r}, 'w').write(str(child.pid))\ntime.sleep(300)\n")
        proc.stdin.write(json.dumps({"op": "plan", "cfg": config("sleeper.SGD"), "config_dirs": [],
                                     "sys_path": [str(tmp_path), *sys.path]}).encode() + b"\n")
        proc.stdin.flush()
        deadline = time.monotonic() + 60
        while not (started.exists() and started.read_text()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert os.getpgid(proc.pid) == proc.pid  # its own session and group
        kill_group(proc)
        assert proc.returncode == -signal.SIGKILL
        time.sleep(0.5)
        assert not alive(int(started.read_text()))  # the sleep it started died with its group


def test_each_worker_starts_pristine_whatever_the_one_before_did(tmp_path, monkeypatch):
    """The second planning worker imports a second module that refuses to import where it finds the first one's
    changes to torch, NumPy or the SGD reference (had both run in one interpreter, or a worker been forked from one
    that ran the code under test)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("marks_a", "marks_b"):  # two configs: two planning workers
        (tmp_path / f"{name}.py").write_text(MARKS)
        cfg = compose_config(["suite=sgd", "jobs=1", "dtype=float32", "impl=[candidate]", "checks=[parity]",
                              f"candidate={name}.SGD", "history_dir=null"])
        assert SuiteRun(cfg, tmp_path / name, probe_machine=False).blueprint().entries


@pytest.mark.slow  # (slow tier; CI keeps a worker starting pristine, and every test with workers)
def test_workers_die_with_their_zygote_and_the_next_worker_gets_a_new_one():
    with tempfile.TemporaryFile() as log:
        first = start_worker(log)
        deadline = time.monotonic() + 120
        while first.pid is None and time.monotonic() < deadline:
            time.sleep(0.05)
        old = next(z for z in zygote._ZYGOTES.values() if first in z.children.values())
        os.kill(old.proc.pid, signal.SIGKILL)
        assert first.wait(60) == -signal.SIGKILL
        second = start_worker(log)
        second.stdin.close()
        assert second.wait(120) == 0
        assert not old.alive


@pytest.mark.slow  # (slow tier; CI keeps a worker starting pristine, and every test with workers)
def test_a_worker_killed_before_it_is_forked_is_killed_once_it_is():
    zygote._ZYGOTES.clear()  # a fresh zygote: still importing torch when the worker is killed
    with tempfile.TemporaryFile() as log:
        proc = start_worker(log)
        proc.kill()
        assert proc.pid is None and proc.wait(1) == -signal.SIGKILL  # it has ended: nothing waits for a fork
        deadline = time.monotonic() + 120
        while proc.pid is None and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        assert proc.pid is not None and not alive(proc.pid)  # the fork that came later was killed at once


def test_a_planning_worker_that_exits_at_import_is_still_one_line(tmp_path, monkeypatch):
    (tmp_path / "leaves.py").write_text("import os\nos._exit(7)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = compose_config(["suite=sgd", "jobs=1", "dtype=float32", "impl=[candidate]", "checks=[parity]",
                          "candidate=leaves.SGD", "history_dir=null"])
    with pytest.raises(UsageError, match="exited with code 7 while importing"):
        SuiteRun(cfg, tmp_path / "run", probe_machine=False).blueprint()


def test_a_worker_killed_while_its_zygote_is_stuck_importing_ends_at_once(monkeypatch):
    """A zygote that never gets ready (a broken or hanging import) never forks: killing the worker it owes (the pool's
    start timeout does) ends it at once, never a wait on a fork that will not come."""
    monkeypatch.setattr(zygote, "BOOT", "import time; time.sleep(120)")
    monkeypatch.setattr(zygote, "_ZYGOTES", {})
    with tempfile.TemporaryFile() as log:
        proc = start_worker(log)
        stuck = next(iter(zygote._ZYGOTES.values()))
        try:
            proc.kill()  # as kill_group does, whose wait() then returns
            assert proc.wait(5) == -signal.SIGKILL
        finally:
            stuck.proc.kill()


FORKED_HERE = """import json, os, sys, tempfile
from optbench.engine import zygote
from optbench.engine.worker_handle import start_worker
zygote.allow_fork_here()  # as optbench's command does
kept_r, kept_w = os.pipe()  # a descriptor of this process's, which its zygote must not hold
with tempfile.TemporaryFile() as log:
    proc = start_worker(log)
    z = next(iter(zygote._ZYGOTES.values()))
    assert z.ready.wait(120)
    zpid = z.proc.pid
    links = {os.readlink(f"/proc/{zpid}/fd/{n}") for n in os.listdir(f"/proc/{zpid}/fd")}
    said = json.loads(sys.argv[1])
    proc.stdin.write((json.dumps(said) + "\\n").encode())
    proc.stdin.flush()
    answer = next((e for e in map(json.loads, proc.stdout) if e["ev"] in ("planned", "failed", "refused")), {})
    parent = open(f"/proc/{zpid}/stat").read().rpartition(")")[2].split()[1]
    print(json.dumps({"forked": type(z.proc).__name__, "parent": parent == str(os.getpid()),
                      "session": os.getsid(zpid) == zpid, "holds_pipe": os.readlink(f"/proc/self/fd/{kept_w}") in links,
                      "streams": [os.readlink(f"/proc/{zpid}/fd/{n}") for n in (0, 1, 2)],
                      "answer": answer.get("ev")}))
"""


@pytest.mark.slow  # (slow tier; CI keeps a worker starting pristine, and every test with workers)
def test_the_commands_zygote_is_a_fork_of_it_holding_none_of_its_descriptors(tmp_path):
    """optbench's command forks its zygote from itself (torch imported once, not twice): the fork leads its own
    session, has /dev/null for streams, holds no descriptor of the command's (a pipe a caller reads to its end, a
    lock), and its workers plan a run as a new interpreter's do."""
    import subprocess

    request = {"op": "plan", "cfg": config("torch.optim.SGD"), "config_dirs": [], "sys_path": sys.path}
    done = subprocess.run([sys.executable, "-c", FORKED_HERE, json.dumps(request)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said == {"forked": "ForkedZygote", "parent": True, "session": True, "holds_pipe": False,
                    "streams": ["/dev/null"] * 3, "answer": "planned"}, said


def test_a_zygote_is_forked_only_from_optbenchs_command_alone_in_its_environment(monkeypatch):
    """Not from a library's caller (no ``allow_fork_here``), not with a second thread (a fork copies none, and a lock
    one held stays held), not for an environment other than this process's (what was imported read this one)."""
    import threading

    env = dict(os.environ)
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    assert not zygote._may_fork_here(env)  # pytest is optbench's library's caller here
    monkeypatch.setitem(zygote._FORK_HERE, "allowed", True)
    assert zygote._may_fork_here(env) and zygote._may_fork_here({**env, zygote.PARENT: "1"})
    assert not zygote._may_fork_here({**env, "OPTBENCH_OTHER": "1"})
    monkeypatch.setattr(threading, "active_count", lambda: 2)
    assert not zygote._may_fork_here(env)
