"""Runs as a CI owner meets them: code under test that kills its process or hangs, interrupts (SIGINT, SIGTERM,
SIGKILL), a full disk, resume, busy or used out_dirs, and the same rows whatever the number of workers."""

import errno
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from filelock import FileLock

from optbench.cli import main
from optbench.config import compose_config
from optbench.engine.runner import SuiteRun
from optbench.journal import JOURNAL, Journal
from optbench.results import load_run, verdict
from tests import warm_command
from tests.conftest import run_inline

REPO = Path(__file__).parents[1]
# one case worker: what a candidate does to its worker needs no second (the rows with 2 workers: PLAIN_RUN)
CANDIDATE_RUN = ["jobs=1", "suite=sgd", "dtype=float32", "impl=[for-loop,candidate]", "options={lr: 0.1}",
                 "checks=[parity,cross]", "steps=8", "history_dir=null"]
# five of SGD's hparam sets (the round-trip's among them): units enough to share among workers and to interrupt
PLAIN_RUN = ["jobs=2", "suite=sgd", "dtype=float32", "impl=[for-loop,foreach]",
             "checks=[parity,cross,roundtrip,errors]", "steps=5", "history_dir=null",
             "hparams=[default,momentum,nesterov,maximize_weight_decay,momentum_dampening_maximize_groups]"]


def optbench(*args, timeout=600) -> subprocess.CompletedProcess:
    return warm_command.run(*args, cwd=REPO, timeout=timeout)


AT_IMPORT = {  # a candidate module that does this when imported, and the one line the run answers with
    "exits": ("import os\nos._exit(0)\n", "the worker process planning the run exited with code 0 while importing "
                                          "and building it (case_timeout_s)"),
    "segfaults": ("import ctypes, sys\nprint('about to crash', file=sys.stderr, flush=True)\nctypes.string_at(0)\n",
                  "the worker process planning the run was killed by SIGSEGV while importing and building it "
                  "(case_timeout_s); stderr: about to crash"),
    "hangs": ("import time\ntime.sleep(3600)\n", "the worker process planning the run ran past 5 s importing and "
                                                 "building it (case_timeout_s) and was stopped"),
}
SGD_AT_THE_END = "import torch\n\nclass SGD(torch.optim.SGD):\n    pass\n"


@pytest.mark.parametrize("what", [pytest.param(w, marks=pytest.mark.slow) if w == "hangs" else w  # (slow tier:
                                  for w in sorted(AT_IMPORT)])  # a hang stopped at case_timeout_s; CI keeps the others)
def test_a_candidate_that_exits_crashes_or_hangs_at_import_is_one_line_and_the_run_writes_nothing(tmp_path, what):
    code, message = AT_IMPORT[what]
    (tmp_path / f"{what}_at_import.py").write_text(code + SGD_AT_THE_END)
    done = warm_command.run("run", *CANDIDATE_RUN, "case_timeout_s=5", f"candidate={what}_at_import.SGD", "out_dir=run",
                            cwd=tmp_path, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr == f"optbench: error: candidate {what}_at_import.SGD: {message}\n"
    assert not (tmp_path / "run").exists()


@pytest.mark.slow  # (slow tier; CI keeps a candidate ending or hanging its worker, never imported by the run, resume)
def test_optbench_run_refuses_a_candidate_that_exits_at_import_before_writing_anything(tmp_path, monkeypatch):
    """optbench.run, as the command, has the candidate imported and built in a planning worker first: a candidate
    that ends that process is a UsageError, and neither out_dir nor a case worker came to be."""
    import optbench
    from optbench.usage import UsageError

    (tmp_path / "exits_before_run.py").write_text("import os\nos._exit(0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "run"
    with pytest.raises(UsageError, match="exited with code 0 while importing and building it"):
        optbench.run([*CANDIDATE_RUN, "candidate=exits_before_run.SGD", f"out_dir={out}"])
    assert not out.exists()


def test_the_parent_never_imports_the_candidate_and_its_threads_never_hold_the_run(tmp_path, monkeypatch, capsys):
    """A candidate that starts a non-daemon thread at import (as loggers and telemetry do) and records that it was
    imported: the run ends with its verdict, and the process that judges it never imported it."""
    (tmp_path / "threads_at_import.py").write_text(
        "import os, threading, time\n"
        "open(f'imported-by-{os.getpid()}', 'w').close()\n"
        "threading.Thread(target=time.sleep, args=(3600,)).start()\n" + SGD_AT_THE_END)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["run", *CANDIDATE_RUN, "candidate=threads_at_import.SGD", "out_dir=run"]) == 0
    assert "verdict: PASS" in capsys.readouterr().out
    assert "threads_at_import" not in sys.modules and not (tmp_path / f"imported-by-{os.getpid()}").exists()
    assert len(list(tmp_path.glob("imported-by-*"))) >= 2  # the planning worker and the case workers
    meta = json.loads((tmp_path / "run" / "results.json").read_text())["candidate"]
    assert meta["class"].endswith("threads_at_import.SGD"), meta  # described by the worker that planned it


@pytest.mark.slow  # (slow tier; CI keeps the parent never importing the candidate, above)
def test_a_run_with_workers_is_planned_in_one_and_its_parent_probes_nothing(tmp_path, monkeypatch, capsys):
    """Planning probes each implementation (TorchDynamo's import, a kernel's build), which the workers do again: the
    process that orchestrates a run with workers takes their plan instead of making its own."""
    from optbench.implementations.adapter import Implementation

    def probed_here(*_):
        raise AssertionError("the parent probed an implementation")

    monkeypatch.setattr(Implementation, "available", probed_here)  # the workers' optbench is their own
    assert run_inline([*PLAIN_RUN[1:], "jobs=1", "hparams=[default]", f"out_dir={tmp_path}"]) == 0
    assert "verdict: PASS" in capsys.readouterr().out


SPAWNS = """import os, subprocess, time, torch

class SGD(torch.optim.SGD):
    def step(self, closure=None):
        if not getattr(self, "_spawned", False):  # a daemon, out of the worker's session, its parent gone
            self._spawned = True
            subprocess.run(["sh", "-c", "setsid sleep 1000 & echo $! >> spawned.txt"], check=True)
        return super().step(closure)
"""
HANGS = """import os, time, torch

class SGD(torch.optim.SGD):
    def step(self, closure=None):
        if self.param_groups[0]["params"][0].dtype == torch.float32 and os.environ.get("OPTBENCH_PARENT_PID"):
            with open(f"hanging-{os.getpid()}", "w"):
                pass
            time.sleep(3600)
        return super().step(closure)
"""


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl: Linux only")
def test_what_a_candidate_starts_in_its_own_session_dies_with_its_case(tmp_path):
    (tmp_path / "spawns.py").write_text(SPAWNS)
    done = warm_command.run("run", *CANDIDATE_RUN, "candidate=spawns.SGD", "out_dir=run", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    pids = [int(p) for p in (tmp_path / "spawned.txt").read_text().split()]
    assert pids and not [p for p in pids if alive(p)]


@pytest.mark.slow  # (slow tier; CI keeps a candidate ending or hanging its worker, never imported by the run, resume)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl: Linux only")
def test_workers_die_with_a_run_killed_by_sigkill(tmp_path):
    (tmp_path / "hangs.py").write_text(HANGS)
    proc = subprocess.Popen([sys.executable, "-m", "optbench", "run", *CANDIDATE_RUN, "case_timeout_s=600",
                             "candidate=hangs.SGD", "out_dir=run"], cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not list(tmp_path.glob("hanging-*")):
        time.sleep(0.2)
    hanging = [int(p.name.split("-")[1]) for p in tmp_path.glob("hanging-*")]
    assert hanging and all(alive(p) for p in hanging), "no case hung in a worker"
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(alive(p) for p in hanging):
        time.sleep(0.2)
    assert not [p for p in hanging if alive(p)]


def verdict_rows(out: Path) -> list[dict]:
    """Every row but the timing ones (a case's wall time differs from run to run)."""
    rows = json.loads((out / "results.json").read_text())["rows"]
    return [r for r in rows if r["metric"] != "run.case_s"]


def test_a_worker_started_before_the_plan_that_never_gets_ready_ends_the_run(tmp_path, monkeypatch):
    """Workers start while the run is planned (``Pool.prestart``), before any unit is theirs: one stuck starting is
    still a WorkerStartError after START_TIMEOUT_S, not a run that waits for it forever."""
    from optbench.engine import pool as pool_module
    from optbench.engine import worker_handle
    from optbench.engine.units import Unit

    monkeypatch.setattr(worker_handle.zygote, "SUPPORTED", False)  # started with python -c, which never gets ready
    monkeypatch.setattr(worker_handle, "BOOT", "import time; time.sleep(60)")
    monkeypatch.setattr(pool_module, "START_TIMEOUT_S", 1.5)
    workers = pool_module.Pool(1, {"op": "init"}, tmp_path / "workers", 60, lambda i: {}, lambda *a: None,
                               lambda: "fingerprint")
    workers.prestart()
    started = time.monotonic()
    try:
        with pytest.raises(pool_module.WorkerStartError, match="did not start in 1.5 s"):
            workers.run([Unit([0])])
    finally:
        workers.close()
    assert time.monotonic() - started < 10


def test_a_crash_in_a_round_trip_scenario_is_its_row_and_the_other_scenarios_still_report(tmp_path):
    """The round-trip runs its scenarios in one case; a worker that dies in one (in the load by name, or in torch's
    positional load beside it) is an error row naming that scenario, or a positional verdict 'crashes', and the case
    runs again in a fresh worker without it, so every other scenario reports as it would have."""
    out = tmp_path / "run"
    done = optbench("run", "jobs=1", "suite=sgd", "dtype=float32", "impl=[candidate]", "checks=[roundtrip]",
                    "roundtrip.scenarios=[same_order,reversed,name_aware]", "history_dir=null",
                    "candidate=tests.candidates.SegfaultsOnReversedOrderSGD", f"out_dir={out}")
    assert done.returncode == 1, done.stderr
    rows = {r["metric"]: r for r in json.loads((out / "results.json").read_text())["rows"] if r["check"] == "roundtrip"}
    assert rows["roundtrip.same_order"]["status"] == "pass" and rows["roundtrip.reversed"]["status"] == "pass"
    assert rows["roundtrip.positional.reversed"]["value"] == 3.0, rows["roundtrip.positional.reversed"]
    assert "killed by SIGSEGV in torch's positional load" in rows["roundtrip.positional.reversed"]["detail"]
    assert rows["roundtrip.positional.same_order"]["detail"].startswith("right")
    # the hook-based load hands the class the file as saved: it dies in the load by name, in that scenario alone
    assert rows["roundtrip.name_aware"]["status"] == "error"
    assert "killed by SIGSEGV in this scenario" in rows["roundtrip.name_aware"]["detail"]
    assert "run.case_error" not in rows and "1 fail" in done.stdout and "1 crashes" in done.stdout


def test_a_case_that_keeps_dying_in_its_parts_is_one_error_row_naming_them(tmp_path, monkeypatch):
    """A case is run again without the part it died in CRASHED_PARTS times at most; then it is one error row
    naming every part it died in (a load that always segfaults: every scenario would cost a process)."""
    from optbench.engine import pool

    monkeypatch.setattr(pool, "CRASHED_PARTS", 1)
    out = tmp_path / "run"
    assert run_inline(["jobs=1", "suite=sgd", "dtype=float32", "impl=[for-loop,candidate]", "checks=[roundtrip]",
                       "roundtrip.scenarios=[same_order,reversed]", "history_dir=null",
                       "candidate=tests.candidates.LoadSegfaultsSGD", f"out_dir={out}"]) == 1
    rows = json.loads((out / "results.json").read_text())["rows"]
    errors = [r for r in rows if r["status"] == "error"]
    assert len(errors) == 1 and errors[0]["impl"] == "candidate:tests.candidates.LoadSegfaultsSGD", errors
    said = re.fullmatch(r"its worker process was killed by SIGSEGV during this case \(in round-trip scenario "
                        r"'reversed'\); it had died before in round-trip scenario 'same_order' \(each run again "
                        r"without it\)", errors[0]["detail"])
    assert said, errors[0]["detail"]
    assert any(r["impl"] == "for-loop" and r["check"] == "roundtrip" and r["status"] == "pass" for r in rows)


def test_how_a_worker_ended_is_said_in_words():
    from optbench.engine.worker_handle import how_it_ended

    assert how_it_ended(0) == "exited with code 0" and how_it_ended(3) == "exited with code 3"
    assert how_it_ended(-11) == "was killed by SIGSEGV" and how_it_ended(-200) == "was killed by signal 200"
    assert how_it_ended(None) == "still running"


@pytest.mark.parametrize("candidate, how", [  # (an exit is a death as a segfault is: its words are the test above)
    pytest.param("ExitsSGD", "its worker process exited with code 0 during this case", marks=pytest.mark.slow),
    ("SegfaultsSGD", "its worker process was killed by SIGSEGV during this case; stderr: segfaulting now"),
    ("SystemExitSGD", "parity: SystemExit: 0"),
    ("HangsSGD", "its worker process ran past case_timeout_s=10 s and was killed during this case"),
])
def test_a_candidate_that_ends_or_hangs_its_process_is_an_error_row_and_the_run_goes_on(tmp_path, candidate, how):
    out = tmp_path / "run"
    # short only where the timeout is the subject: a worker importing torch on a busy 2-core CI machine took over
    # 3 s to plan the run, under the same limit
    timeout = 10 if candidate == "HangsSGD" else 60
    done = optbench("run", *CANDIDATE_RUN, f"candidate=tests.candidates.{candidate}", f"case_timeout_s={timeout}",
                    f"out_dir={out}")
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines()[-1].startswith("verdict: FAIL")
    data = json.loads((out / "results.json").read_text())
    assert data["run"]["status"] == "finished"
    errors = [r for r in data["rows"]
              if r["status"] == "error" and r["check"] == "parity" and r["hparams"] == "options"]
    assert [r["impl"] for r in errors] == [f"candidate:tests.candidates.{candidate}"] and how in errors[0]["detail"]
    # the cases beside it ran: the for-loop's parity passed in its group, after the crash too
    assert any(r["impl"] == "for-loop" and r["check"] == "parity" and r["status"] == "pass" for r in data["rows"])


@pytest.fixture(scope="session")
def uninterrupted(tmp_path_factory):
    """The plain run with two workers, and in this process (jobs=0); once per test session, whichever pytest-xdist
    worker asks first (xdist's recipe for a session fixture: a lock in the temporary folder the workers share;
    pytest 9.2 drops the node-id suffix xdist's loadgroup distribution relies on)."""
    base = tmp_path_factory.getbasetemp()  # under xdist, a worker's folder in the session's: its parent is shared
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # (else it is every session's)
    outs = {jobs: shared / "uninterrupted" / f"jobs{jobs}" for jobs in (2, 0)}
    with FileLock(shared / "uninterrupted.lock"):
        for jobs, out in outs.items():
            if not (out / "results.json").is_file():
                done = optbench("run", *PLAIN_RUN[1:], f"jobs={jobs}", f"out_dir={out}")
                assert done.returncode == 0, done.stderr
    return outs


@pytest.mark.slow  # (slow tier; CI keeps a candidate ending or hanging its worker, never imported by the run, resume)
def test_the_rows_are_the_same_whatever_the_number_of_workers(uninterrupted):
    """Two workers, each taking several units, and no worker at all (jobs=0) give the same rows."""
    two = verdict_rows(uninterrupted[2])
    assert len(two) > 300 and two == verdict_rows(uninterrupted[0])


@pytest.mark.slow  # (two workers against none: above, in CI)
def test_one_worker_gives_the_rows_of_two(uninterrupted, tmp_path):
    done = optbench("run", *PLAIN_RUN[1:], "jobs=1", f"out_dir={tmp_path / 'one'}")
    assert done.returncode == 0, done.stderr
    assert verdict_rows(tmp_path / "one") == verdict_rows(uninterrupted[2])


def _interrupted(out: Path, signum: int, after_cases: int = 12) -> tuple[int, str]:
    """The plain run, stopped by ``signum`` once its journal holds ``after_cases`` finished cases."""
    # SIGINT as a terminal delivers it: a test process may have inherited it ignored (a child then ignores it too)
    proc = subprocess.Popen([sys.executable, "-m", "optbench", "run", *PLAIN_RUN, f"out_dir={out}"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        journal = out / JOURNAL
        if journal.is_file() and journal.read_text().count('{"case"') >= after_cases:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=120)
    return proc.returncode, stderr


@pytest.mark.parametrize("signum, code, resumes", [
    (signal.SIGINT, 130, True),
    pytest.param(signal.SIGTERM, 143, False, marks=pytest.mark.slow),  # (SIGINT's path; SIGTERM's 143: below)
    pytest.param(signal.SIGKILL, -9, True, marks=pytest.mark.slow)])  # (SIGINT's resume; a SIGKILL'd run's workers:
    # test_workers_die_with_a_run_killed_by_sigkill, in CI)
def test_an_interrupted_run_says_incomplete_everywhere_and_resumes_to_the_uninterrupted_rows(
        uninterrupted, tmp_path, signum, code, resumes, capsys):
    """SIGTERM ends a run as SIGINT does (results.json written and marked), so only SIGINT's run (resumed from
    results.json and its journal) and SIGKILL's (from the journal alone) are resumed: the paths that differ."""
    out = tmp_path / "run"
    returncode, stderr = _interrupted(out, signum)
    assert returncode == code
    if signum != signal.SIGKILL:  # one line, no traceback; results.json written and marked
        name = signal.Signals(signum).name
        assert re.fullmatch(rf"optbench: interrupted by {name}: \d+ of \d+ cases ran; 'optbench resume .*' "
                            r"runs the rest\n", stderr), stderr
        assert json.loads((out / "results.json").read_text())["run"]["status"] == "interrupted"
    meta, rows = load_run(out)  # a killed run is read back from its journal
    assert verdict(rows, (), meta["run"]).name == "INCOMPLETE"
    assert main(["report", str(out)]) == 0
    said = capsys.readouterr().out
    assert "verdict: INCOMPLETE: " in said and "PASS:" not in said.split("so far")[0]
    assert (out / "report.md").read_text().startswith("**INCOMPLETE: ")
    assert main(["compare", str(uninterrupted[2]), str(out)]) == 1  # not whole: no comparison passes
    assert "the new run is INCOMPLETE" in capsys.readouterr().out
    assert main(["run", *PLAIN_RUN, f"out_dir={out}"]) == 2  # never silently reused
    assert "holds an unfinished run; continue it with 'optbench resume" in capsys.readouterr().err
    if not resumes:
        return
    resumed = optbench("resume", out)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.splitlines()[-1].startswith("verdict: PASS")
    assert verdict_rows(out) == verdict_rows(uninterrupted[2])
    assert not (out / JOURNAL).exists()
    assert optbench("resume", out).returncode == 2  # finished: nothing to resume


def test_a_full_disk_keeps_what_was_measured_and_is_never_a_pass(tmp_path, monkeypatch, capsys):
    written = []

    def fills_up(self, index, rows):
        if len(written) == 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written.append(index)
        self._write({"case": index, "rows": rows})

    monkeypatch.setattr(Journal, "case", fills_up)
    cfg = compose_config([*PLAIN_RUN[1:], "jobs=0"])
    results = SuiteRun(cfg, tmp_path / "run").run()
    run = results.meta["run"]
    assert run["status"] == "crashed" and "No space left on device" in run["how"]
    assert results.verdict.name == "INCOMPLETE" and results.verdict.exit_code == 4
    assert len({r["check"] + r["hparams"] for r in results.rows}) >= 1


def test_a_full_disk_at_start_is_one_line_and_leaves_nothing(tmp_path):
    """A run into a full file system is refused in one line before Hydra writes its .hydra/ there (Hydra's save of
    its config failed: a traceback, exit 1): a real full file system, a small tmpfs (mounting one needs root)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("mounting a small tmpfs needs root")
    try:
        fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(fd, bytes(4096)):
                pass
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
        finally:
            os.close(fd)
        done = optbench("run", *PLAIN_RUN, f"out_dir={disk / 'run'}")
        assert (done.returncode, done.stdout) == (2, ""), done.stderr
        assert done.stderr == f"optbench: error: out_dir {disk / 'run'}: cannot write there (No space left on device)\n"
        assert [p.name for p in disk.iterdir()] == ["filler"]
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)


def test_an_out_dir_in_use_is_refused_in_one_line(tmp_path, capsys):
    out = tmp_path / "busy"
    out.mkdir()
    with FileLock(out / ".optbench.lock"):
        assert main(["run", *PLAIN_RUN, f"out_dir={out}"]) == 2
    assert capsys.readouterr().err == (f"optbench: error: out_dir {out}: another optbench run is writing there now; "
                                       "pick another out_dir\n")
    (out / "results.json").write_text("{}")
    assert main(["run", *PLAIN_RUN, f"out_dir={out}"]) == 2
    assert "holds a finished run (results.json)" in capsys.readouterr().err


def test_an_out_dir_holding_the_users_files_or_none_is_refused_and_nothing_is_touched(tmp_path, capsys, monkeypatch):
    mine = tmp_path / "mine"
    (mine / "workers").mkdir(parents=True)
    for name in ("report.md", "results.csv", "workers/worker-1.log"):
        (mine / name).write_text("the user's own\n")
    assert main(["run", *PLAIN_RUN, f"out_dir={mine}"]) == 2
    err = capsys.readouterr().err
    assert err == (f"optbench: error: out_dir {mine}: holds 3 file(s) of its own (report.md, results.csv, workers): "
                   "a run writes only into a new or empty folder\n")
    assert sorted(p.name for p in mine.rglob("*")) == ["report.md", "results.csv", "worker-1.log", "workers"]
    assert all(p.read_text() == "the user's own\n" for p in mine.rglob("*") if p.is_file())
    monkeypatch.chdir(tmp_path)
    assert main(["run", *PLAIN_RUN, "out_dir="]) == 2
    assert capsys.readouterr().err == ("optbench: error: out_dir='': name a new folder (the default names a new one "
                                       "per run)\n")


def test_a_link_planted_where_a_report_file_goes_is_replaced_not_written_through(tmp_path):
    from optbench.results import atomic_write

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / "report.md").symlink_to(victim)
    atomic_write(tmp_path / "report.md", "report\n")
    assert victim.read_text() == "precious\n"
    assert not (tmp_path / "report.md").is_symlink() and (tmp_path / "report.md").read_text() == "report\n"


def test_resume_refuses_a_run_whose_candidate_or_member_suite_changed_naming_what(tmp_path, monkeypatch, capsys):
    """Interrupted after its first case; the candidate's module edited: resume names it and runs nothing."""
    (tmp_path / "edited_sgd.py").write_text(SGD_AT_THE_END)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    written = []

    def interrupts_after_one(self, index, rows):
        if len(written) == 1:
            raise KeyboardInterrupt
        written.append(index)
        self._write({"case": index, "rows": rows})

    monkeypatch.setattr(Journal, "case", interrupts_after_one)
    out = tmp_path / "run"
    assert main(["run", *CANDIDATE_RUN, "jobs=0", "candidate=edited_sgd.SGD", f"out_dir={out}"]) == 130
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "edited_sgd.py").write_text(SGD_AT_THE_END + "\n# a fix, after the interrupt\n")
    capsys.readouterr()
    assert main(["resume", str(out)]) == 2
    assert capsys.readouterr().err == (f"optbench: error: {out / JOURNAL}: candidate module edited_sgd changed since "
                                       "the run started: resuming would mix rows of both; start a new run\n")


def test_what_the_code_under_test_says_is_bounded_and_inert_in_every_output(tmp_path, monkeypatch, capsys):
    """A step that raises a 1 MB message of HTML and Markdown: the row, results.json, report.md and the console
    keep a bounded head and tail, and report.md renders none of it as a tag, a link or a table cell."""
    (tmp_path / "loud.py").write_text(
        "import torch\n\nclass SGD(torch.optim.SGD):\n    def step(self, closure=None):\n"
        "        raise ValueError('<img src=x onerror=alert(1)> | [click](http://evil.example) `' + 'A' * 1_000_000"
        " + ' the end')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "run"
    assert main(["run", *CANDIDATE_RUN, "jobs=0", "candidate=loud.SGD", f"out_dir={out}"]) == 1
    console = capsys.readouterr().out
    assert len(console) < 20_000 and "characters cut" in console and "the end" in console
    details = [r["detail"] for r in json.loads((out / "results.json").read_text())["rows"] if "onerror" in r["detail"]]
    assert details and all(len(d) < 2_200 and "characters cut" in d for d in details)
    report = (out / "report.md").read_text()
    assert len(report) < 100_000 and "&lt;img" in report and "\\[click\\](http" in report, report
    assert not [line for line in report.splitlines() if "<img" in line or re.search(r"(?<!\\)\]\(http", line)]


def test_default_out_dirs_of_two_runs_started_in_the_same_second_differ():
    names = {optbench("run", "suite=sgd", "--cfg", "job", "--resolve").stdout.split("out_dir: ")[1].split()[0]
             for _ in range(2)}
    assert len(names) == 2 and all(re.search(r"-\d{8}-\d{6}-[0-9a-f]{4}$", n) for n in names), names
    assert re.search(r"-[0-9a-f]{4}$", str(compose_config(["suite=sgd"]).out_dir))


def test_a_declared_raise_matches_a_subclass_as_torch_compile_wraps_it():
    """Each unit starts with TorchDynamo reset, so a compiled case really compiles (before, a compiled case that
    followed enough others could run past dynamo's recompile limit, eagerly). Compiled LBFGS on a non-contiguous
    parameter then raises F17's RuntimeError as dynamo's TorchRuntimeError, a RuntimeError subclass."""
    from torch._dynamo.exc import TorchRuntimeError

    from optbench.suite.spec import Deviation

    f17 = Deviation(finding="F17", reason="", raises="RuntimeError")
    assert f17.raised_by(RuntimeError("view")) and f17.raised_by(TorchRuntimeError("fake tensor call"))
    assert not f17.raised_by(ValueError("view")) and not Deviation(finding="F", reason="").raised_by(RuntimeError())


@pytest.mark.slow  # (slow tier; CI keeps a candidate ending or hanging its worker, never imported by the run, resume)
def test_sigterm_while_planning_says_so_and_is_never_a_pass(tmp_path):
    """Planning probes every implementation, which can take minutes (the adafactor suite's C++ kernel builds in an
    empty extensions folder); a SIGTERM then ended the process silently (no line, no results). Now: one line, results
    marked INCOMPLETE, exit 143."""
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(tmp_path / "ext"), "OPTBENCH_PLOTS": "false"}
    proc = subprocess.Popen([sys.executable, "-m", "optbench", "run", "suite=adafactor", "checks=[parity]",
                             f"out_dir={tmp_path / 'run'}", "history_dir=null"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    assert proc.stdout.readline().startswith("optbench: 1 suite(s) (adafactor)")  # planning starts after this line
    deadline = time.monotonic() + 60
    while not list((tmp_path / "ext").glob("*/build.ninja")) and time.monotonic() < deadline:
        time.sleep(0.02)  # until the kernel's build has begun (it then takes seconds)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 143, out
    assert "interrupted by SIGTERM while planning" in out and "verdict: INCOMPLETE" in out, out
    meta, _ = load_run(tmp_path / "run")
    assert meta["run"]["status"] == "interrupted"
    assert not list((tmp_path / "ext").glob("*/lock"))  # torch's build lock let go


def test_a_unit_starts_from_torchs_defaults_whatever_an_earlier_one_set():
    """Code under test that changes torch's process-wide settings (default dtype, grad mode, deterministic
    algorithms, anomaly detection, threads) changes no later unit of its worker."""
    import torch

    from optbench.engine.executor import Executor

    class Ctx:
        scratch = {"left": "by an earlier unit"}

    executor, threads = Executor(Ctx(), seed=0), torch.get_num_threads()
    torch.set_default_dtype(torch.float64)
    torch.set_grad_enabled(False)
    torch.use_deterministic_algorithms(True)
    torch.autograd.set_detect_anomaly(True)
    torch.set_num_threads(threads + 1)
    try:
        executor.reset_for_unit()
        assert torch.get_default_dtype() == torch.float32 and torch.is_grad_enabled() and not Ctx.scratch
        assert not torch.are_deterministic_algorithms_enabled() and not torch.is_anomaly_enabled()
        assert torch.get_num_threads() == threads
    finally:
        torch.set_default_dtype(torch.float32)
        torch.set_grad_enabled(True)
        torch.use_deterministic_algorithms(False)
        torch.autograd.set_detect_anomaly(False)
        torch.set_num_threads(threads)


def test_jobs_past_the_cores_is_capped_at_them_in_one_line(capsys):
    """jobs=999 starts no more workers than there are cores (each worker is a copy of torch sharing them)."""
    import os

    from omegaconf import OmegaConf

    from optbench.engine.selection import resolve_jobs

    cores = len(os.sched_getaffinity(0))
    assert resolve_jobs(OmegaConf.create({"jobs": 999})) == cores
    assert resolve_jobs(OmegaConf.create({"jobs": 0})) == 0 and resolve_jobs(OmegaConf.create({"jobs": 1})) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"optbench: jobs=999 capped at this machine's {cores} core(s)", err


def test_a_candidates_step_is_never_run_on_state_of_another_shape_in_the_positional_comparison(tmp_path):
    """torch's positional load hands a candidate state of another shape; stepping it there may corrupt the worker's
    memory for the case's later scenarios (DeepSpeed's CPU ops), so it is reported as loaded and not stepped."""
    out = tmp_path / "run"
    assert run_inline(["jobs=1", "suite=sgd", "dtype=float32", "impl=[candidate]", "checks=[roundtrip]",
                       "hparams=[momentum]", "roundtrip.scenarios=[same_order,reversed]", "roundtrip.every_dtype=[]",
                       "history_dir=null", "candidate=tests.candidates.UncheckedShapeSGD", f"out_dir={out}"]) == 0
    rows = {r["metric"]: r for r in json.loads((out / "results.json").read_text())["rows"] if r["check"] == "roundtrip"}
    assert rows["roundtrip.reversed"]["status"] == "pass"
    positional = rows["roundtrip.positional.reversed"]["detail"]
    assert "not stepped: a candidate's step on it may corrupt" in positional and "SIGSEGV" not in positional
