"""A candidate's parity, cross, declared-raise and error-input verdicts are the judge's (its round-trip and forms:
tests/test_judge_roundtrip.py, tests/test_judge_forms.py): the parent, which never
imports the candidate, judges what the candidate's worker recorded (``optbench.engine.judge``). Code under test that
breaks the oracle or a check in its worker, forges its verdict or tampers with its recording cannot make the run say
PASS; a recording is a file a user can open."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import torch

from optbench.engine.blueprint import Blueprint, Entry
from optbench.engine.judge import Judge
from optbench.engine.pool import Pool
from optbench.engine.units import Unit
from optbench.implementations import Implementation
from optbench.journal import JOURNAL
from optbench.numerics.recording import record_trajectory
from optbench.numerics.recording_file import (
    Raised,
    RecordingError,
    largest,
    load_recording,
    of_the_case,
    save_recording,
)
from optbench.numerics.trajectory import judge_trajectory, run_trajectory
from optbench.reference import load_reference
from optbench.suite.spec import HparamSet
from optbench.workloads import build
from tests import warm_command

CPU = torch.device("cpu")
RUN = ["run", "suite=sgd", "dtype=float32", "jobs=1", "checks=[parity]", "hparams=[default,momentum]", "steps=8",
       "history_dir=null"]
DOUBLES_LR = """
class SGD(torch.optim.SGD):  # steps with twice its lr: a wrong SGD
    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            group["lr"] = group["lr"] * 2
        try:
            return super().step(closure)
        finally:
            for group in self.param_groups:
                group["lr"] = group["lr"] / 2
"""
HOSTILE = {  # a candidate module that, at import in its worker, does this; what the run says of its parity
    "breaks the oracle": ("""
import optbench.reference.sgd as reference
_update = reference.update
reference.update = lambda param, grad, state, hp: _update(param, grad, state, {**hp, "lr": 2 * hp["lr"]})
""", "fail", "first past tolerance"),
    "forges its verdict": ("""
from optbench.cases import Outcome
from optbench.checks.parity import ParityCheck
from optbench.results import row
ParityCheck.run = lambda self, case, ctx: Outcome([row(case.labels, check="parity", metric="parity.max_err_eps",
                                                       value=0.0, status="pass", detail="within tolerance")])
""", "error", "its worker sent a verdict without a recording"),
    "cuts its recording short": ("""
import optbench.numerics.trajectory as trajectory
_save = trajectory.save_recording
def save(recording, path):
    recording.steps = recording.steps[:1]  # the first step alone: wrong from step 2 on
    return _save(recording, path)
trajectory.save_recording = save
""", "error", "its recording was refused: the recording's steps (1) are not the case's"),
    "moves its start": ("""
import optbench.numerics.trajectory as trajectory
_save = trajectory.save_recording
def save(recording, path):
    recording.start = {n: a * 2 for n, a in recording.start.items()}
    return _save(recording, path)
trajectory.save_recording = save
""", "error", "started from other parameters than the workload's"),
    "answers for another case": ("""
import optbench.engine.worker as worker
_send = worker._send
worker._send = lambda out, event: _send(out, {**event, "index": event["index"] + 1} if event["ev"] == "case" else event)
""", "error", "its worker process sent the result of a case it was not running and was killed"),
}


@pytest.mark.parametrize("how", list(HOSTILE))
def test_a_candidate_that_attacks_the_judging_in_its_worker_never_passes(tmp_path, how):
    code, status, said = HOSTILE[how]
    (tmp_path / "hostile.py").write_text("import torch\n" + code + DOUBLES_LR)
    done = warm_command.run(*RUN, "candidate=hostile.SGD", "impl=[candidate]", f"out_dir={tmp_path / 'out'}",
                            cwd=tmp_path, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    rows = json.loads((tmp_path / "out" / "results.json").read_text())["rows"]
    verdicts = [r for r in rows if r["check"] == "parity" and r["metric"] in ("parity.max_err_eps", "case.error")
                and not r["fqn"] and r["dtype"]]  # (an error case leaves the candidate unchecked: one row more)
    assert len(verdicts) == 2 and {r["status"] for r in verdicts} == {status}, verdicts
    assert all(said in r["detail"] for r in verdicts), verdicts
    assert not (tmp_path / "out" / "recordings").exists()  # judged, then deleted


def test_the_oracle_broken_in_the_process_that_judges_would_have_passed(tmp_path):
    """The mutant above is real: where the cases run in one process (jobs=0: no isolation, as documented), the same
    broken oracle passes the wrong SGD."""
    code, _, _ = HOSTILE["breaks the oracle"]
    (tmp_path / "hostile.py").write_text("import torch\n" + code + DOUBLES_LR)
    done = warm_command.run(*[a for a in RUN if a != "jobs=1"], "jobs=0", "candidate=hostile.SGD", "impl=[candidate]",
                            f"out_dir={tmp_path / 'out'}", cwd=tmp_path, timeout=300)
    assert done.returncode == 0 and done.stdout.splitlines()[-1].startswith("verdict: PASS"), done.stdout


def test_a_kept_recording_is_a_file_a_user_opens_without_optbench_and_judges_again(tmp_path):
    done = warm_command.run(*RUN, "candidate=torch.optim.SGD", "impl=[candidate]", "parity.keep_recordings=true",
                            f"out_dir={tmp_path / 'out'}", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    files = sorted((tmp_path / "out" / "recordings").glob("case-*.npz"))
    assert len(files) == 2
    with np.load(files[0], allow_pickle=False) as data:  # plain NumPy: numbered arrays and a JSON manifest
        manifest = json.loads(str(data["manifest"][()]))
        assert manifest["format"] == "optbench-recording" and len(manifest["steps"]) > 1
        fqn, tensor, (pool, offset, shape) = manifest["steps"][0]["after"][0]  # [storage dtype, offset, shape]
        first = data[pool][offset:offset + int(np.prod(shape))].reshape(shape)
        assert data[pool].dtype == np.float32 and tensor == "param" and first.shape == tuple(shape)
    back = load_recording(files[0])
    assert np.array_equal(back.steps[0].after[(fqn, "param")], first)


def _recorded(cls=torch.optim.AdamW, dtype=torch.float32, steps=4):
    hset = HparamSet("h", {"weight_decay": 0.1})
    wl = build("zoo", seed=5, steps=steps, grad_log10_range=(-8, 2))
    impl = Implementation("for-loop", cls, {"foreach": False})
    return impl, hset, wl, record_trajectory(impl, hset, wl, dtype, CPU, before=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_a_recording_judged_from_its_file_gives_the_rows_of_the_run_that_recorded_it(tmp_path, dtype):
    impl, hset, wl, recording = _recorded(dtype=dtype)
    defaults = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01, "amsgrad": False,
                "maximize": False}
    reference = load_reference("adamw")
    ran = run_trajectory(impl, hset, reference, defaults, wl, dtype, CPU, one_step=True, keep_snapshots=True)
    back = of_the_case(load_recording(save_recording(recording, tmp_path / "r.npz")), wl, dtype, CPU)
    judged = judge_trajectory(back, impl, hset, reference, defaults, wl, dtype, one_step=True, keep_snapshots=True)
    assert judged.errors.equals(ran.errors) and judged.dtypes == ran.dtypes
    assert not any(a.flags.writeable for a in back.steps[1].before.values())  # a reference that writes into it raises


def test_a_file_that_is_not_a_recording_is_one_line_and_nothing_in_it_is_unpickled(tmp_path):
    (tmp_path / "text.npz").write_text("not a zip")
    np.savez(tmp_path / "pickled.npz", manifest=np.array("{}"), a0=np.array([object()], dtype=object))
    np.savez(tmp_path / "other.npz", manifest=np.array(json.dumps({"format": "something", "version": 1})))
    for name, said in (("text.npz", "not a readable recording"), ("pickled.npz", "not a readable recording"),
                       ("other.npz", "format 'something'")):
        with pytest.raises(RecordingError, match=said) as raised:
            load_recording(tmp_path / name)
        assert "\n" not in str(raised.value)


RAISES_AT_STEP = """
import torch

class LRError(ValueError):
    pass

class SGD(torch.optim.SGD):  # a step that raises where the suite declares the whole case raises
    def step(self, closure=None):
        raise LRError("lr of zero")
"""
DECLARED = """
# @package _global_
defaults:
  - override /suite: sgd
suite:
  deviations:
    - {finding: F99, impl: "candidate:*", hparams: momentum, raises: ValueError, reason: "a test's declared raise"}
"""


def test_a_declared_raise_is_recorded_as_data_and_judged_against_the_declaration(tmp_path):
    """The case raises as its suite declares: the worker records what it raised (class names, message), the judge
    matches it against the declaration (xfail); the same raise where nothing declares it is an error."""
    (tmp_path / "raising.py").write_text(RAISES_AT_STEP)
    (tmp_path / "conf" / "declared").mkdir(parents=True)
    (tmp_path / "conf" / "declared" / "raises.yaml").write_text(DECLARED)
    done = warm_command.run("run", "--config-dir", str(tmp_path / "conf"), *RUN[1:], "candidate=raising.SGD",
                            "impl=[candidate]", "+declared=raises", f"out_dir={tmp_path / 'out'}", cwd=tmp_path,
                            timeout=300)
    rows = json.loads((tmp_path / "out" / "results.json").read_text())["rows"]
    verdict = {r["hparams"]: r for r in rows if r["check"] == "parity" and r["metric"] in (
        "parity.max_err_eps", "case.error") and not r["fqn"] and r["dtype"]}
    assert verdict["momentum"]["status"] == "xfail" and "the case raises, as declared (F99)" in verdict[
        "momentum"]["detail"], verdict
    assert verdict["default"]["status"] == "error" and "LRError: lr of zero" in verdict["default"]["detail"]
    assert done.returncode == 1, done.stdout
    raised = Raised(("LRError", "ValueError", "Exception", "BaseException"), "lr of zero").exception()
    assert isinstance(raised, ValueError) and type(raised).__name__ == "LRError" and str(raised) == "lr of zero"


def test_a_recording_that_would_unpack_past_what_the_case_can_hold_is_refused_before_it_is_read(tmp_path):
    _, _, wl, recording = _recorded()
    path = save_recording(recording, tmp_path / "r.npz")
    assert load_recording(path, largest(wl)).names == recording.names
    with pytest.raises(RecordingError, match="unpacks to .* bytes, more than the 1,000 a recording"):
        load_recording(path, 1000)


def test_a_recording_of_another_case_is_refused_naming_what_differs(tmp_path):
    _, _, wl, recording = _recorded()
    saved = load_recording(save_recording(recording, tmp_path / "r.npz"))
    with pytest.raises(RecordingError, match=r"steps \(4\) are not the case's \(5\)"):
        of_the_case(saved, build("zoo", seed=5, steps=5, grad_log10_range=(-8, 2)), torch.float32, CPU)
    with pytest.raises(RecordingError, match="precision judged in"):
        of_the_case(saved, wl, torch.float64, CPU)
    with pytest.raises(RecordingError, match="other parameters than the workload's"):
        of_the_case(saved, build("zoo", seed=6, steps=4, grad_log10_range=(-8, 2)), torch.float32, CPU)


def test_a_judgement_past_the_case_timeout_is_an_error_row_and_the_judge_goes_on(tmp_path, monkeypatch):
    labels = {"suite": "sgd", "optimizer": "SGD", "impl": "candidate:x.SGD", "dtype": "float32", "device": "cpu",
              "workload": ""}
    entries = tuple(Entry("parity", labels | {"hparams": h}, "g") for h in ("stuck", "quick"))
    blueprint = Blueprint(entries, "f", "candidate:x.SGD")
    release = threading.Event()

    def judged(self, index):
        if index == 0:
            release.wait(30)
        return [{"status": "pass", "index": index}], "judged"

    monkeypatch.setattr(Judge, "_judged", judged)
    events = __import__("queue").Queue()
    judge = Judge(None, lambda: blueprint, "x.SGD", tmp_path, False, 0.2, events)
    for index in (0, 1):
        (tmp_path / f"case-{index}.npz").write_bytes(b"")
        assert judge.wants(index) and judge.take(index, [], "") is None
    time.sleep(0.5)
    [(index, rows, _)] = judge.given_up(time.monotonic())
    assert index == 0 and rows[0]["status"] == "error" and "past case_timeout_s=0.2 s" in rows[0]["detail"]
    owner, event = events.get(timeout=10)  # the case queued behind it, judged by a fresh thread
    assert owner is judge and judge.done(event) == (1, [{"status": "pass", "index": 1}], "judged")
    release.set()  # the stuck judgement ends: what it says is dropped
    time.sleep(0.2)
    assert events.empty() and not judge.busy
    judge.close()


def test_a_recording_an_earlier_run_left_is_never_judged_as_this_runs(tmp_path):
    """A run killed after a case wrote its recording, resumed: the case runs again, and what the parent judges is what
    this run's worker recorded, or nothing."""
    labels = {"suite": "sgd", "optimizer": "SGD", "impl": "candidate:x.SGD", "dtype": "float32", "hparams": "h",
              "device": "cpu", "workload": ""}
    judge = Judge(None, lambda: Blueprint((Entry("parity", labels, "g"),), "f", "candidate:x.SGD"), "x.SGD",
                  tmp_path, True, 60, None)
    (tmp_path / "case-0.npz").write_bytes(b"left by the killed run")

    class Idle:  # a worker not ready yet: the unit is queued for it
        ready, units_run, unit = False, 0, None

    pool = Pool(1, {"op": "init"}, tmp_path / "workers", 60, lambda i: {}, lambda *a: None, lambda: "f",
                lambda events: judge)
    assert pool.init["record_dir"] == str(tmp_path)
    pool._assign(Idle(), Unit([0]))  # the case is to run again: what the killed run left is gone
    assert not (tmp_path / "case-0.npz").exists()
    rows, _ = judge.take(0, [{"status": "pass", "metric": "parity.max_err_eps"}], "PASS")
    assert rows[0]["status"] == "error" and not judge.busy


def test_a_verdict_without_a_recording_is_refused_and_rows_that_give_none_are_kept(tmp_path):
    labels = {"suite": "sgd", "optimizer": "SGD", "impl": "candidate:x.SGD", "dtype": "float32", "hparams": "h",
              "device": "cpu", "workload": ""}
    blueprint = Blueprint((Entry("parity", labels, "g"), Entry("parity", labels | {"impl": "for-loop"}, "g")), "f",
                          "candidate:x.SGD")
    judge = Judge(None, lambda: blueprint, "x.SGD", tmp_path, False, 60, None)
    assert judge.wants(0) and not judge.wants(1)
    unsupported = [{"status": "unsupported", "metric": "case.unsupported"}]
    assert judge.take(0, unsupported, "UNSUP") == (unsupported, "UNSUP")
    for status in ("pass", "xpass", "xfail"):
        rows, _ = judge.take(0, [{"status": status, "metric": "parity.max_err_eps"}], "PASS")
        assert [r["status"] for r in rows] == ["error"] and "without a recording" in rows[0]["detail"]


FORGES_CROSS = """
import optbench.checks.cross as cross
cross.cross_error = lambda *args, **kwargs: 0.0  # every trajectory agrees with the for-loop's, in this process
"""


@pytest.mark.slow  # (slow tier; CI keeps a candidate attacking the judging)
def test_a_candidate_that_forges_its_cross_agreement_in_its_worker_still_fails_it(tmp_path):
    """The cross case of a candidate is judged in the parent too: its side from its parity recording, torch's for-loop
    stepped there. A wrong SGD whose worker makes every trajectory agree still fails cross."""
    (tmp_path / "hostile.py").write_text("import torch\n" + FORGES_CROSS + DOUBLES_LR)
    done = warm_command.run(*[a if a != "checks=[parity]" else "checks=[parity,cross]" for a in RUN],
                            "candidate=hostile.SGD", "impl=[candidate,for-loop]", f"out_dir={tmp_path / 'out'}",
                            cwd=tmp_path, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    rows = json.loads((tmp_path / "out" / "results.json").read_text())["rows"]
    cross = [r for r in rows if r["check"] == "cross" and r["metric"] != "run.case_s"]
    assert len(cross) == 2 and {r["status"] for r in cross} == {"fail"}, cross
    assert all(r["value"] > 1e3 for r in cross), cross


SLOW_WITH_MOMENTUM = """
import os, time
import torch

class SGD(torch.optim.SGD):  # a correct SGD, whose momentum steps wait while a file says so
    def step(self, closure=None):
        while self.defaults["momentum"] and os.path.exists(os.path.join(os.path.dirname(__file__), "wait")):
            time.sleep(0.1)
        return super().step(closure)
"""


def killed_after(tmp_path, args: list[str], cases: int):
    """``optbench <args>`` started with ``tmp_path/wait`` in place (the test's slow candidate waits while it is) and
    killed once its journal holds ``cases`` finished cases; the file is gone again. Returns the run's out_dir."""
    (tmp_path / "wait").touch()
    out = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "optbench", *args, f"out_dir={out}"], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    journal, deadline = out / JOURNAL, time.monotonic() + 240
    while time.monotonic() < deadline and not (journal.is_file() and journal.read_text().count('{"case"') >= cases):
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    (tmp_path / "wait").unlink()
    return out


@pytest.mark.slow  # (slow tier; CI keeps a candidate attacking the judging)
def test_a_resumed_run_judges_cross_from_the_parity_case_the_killed_run_finished(tmp_path):
    """Killed after the candidate's parity case of a group was recorded and before its cross case: the resumed
    run's worker records that parity case again as it rebuilds the group, and the judge compares its trajectory
    (before, the cross case said parity left none)."""
    (tmp_path / "slow.py").write_text(SLOW_WITH_MOMENTUM)
    args = [*[a if a != "checks=[parity]" else "checks=[parity,cross]" for a in RUN], "candidate=slow.SGD",
            "impl=[candidate,for-loop]"]
    whole = warm_command.run(*args, f"out_dir={tmp_path / 'whole'}", cwd=tmp_path, timeout=300)
    assert whole.returncode == 0, whole.stdout + whole.stderr
    out = killed_after(tmp_path, args, 3)  # the default group's three cases are in; the momentum group's waits
    journal = out / JOURNAL
    lines = journal.read_text().splitlines()
    header = json.loads(lines[0])
    parity = [i for i, e in enumerate(header["plan"]) if e["hparams"] == "default" and e["check"] == "parity"]
    journal.write_text("\n".join([lines[0]] + [line for line in lines[1:] if json.loads(line).get("case") in parity])
                       + "\n")  # as if killed between the group's parity cases and its cross case
    resumed = warm_command.run("resume", str(out), cwd=tmp_path, timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr

    def verdicts(folder):
        return [r for r in json.loads((folder / "results.json").read_text())["rows"] if r["metric"] != "run.case_s"]

    again = verdicts(out)
    assert [r for r in again if r["check"] == "cross" and r["hparams"] == "default"][0]["status"] == "pass"
    assert again == verdicts(tmp_path / "whole")


TAKES_A_NEGATIVE_LR = """
import torch
import optbench.checks.error_inputs as errors

_judge = errors.judge
def judge(*args, **kwargs):  # every failing input passes, in this process
    status, detail, finding = _judge(*args, **kwargs)
    return ("pass" if status == "fail" else status), detail, finding
errors.judge = judge

class SGD(torch.optim.SGD):  # takes a negative lr as its magnitude: an input torch rejects, accepted
    def __init__(self, params, lr=1e-3, **kwargs):
        super().__init__(params, lr=abs(lr), **kwargs)
"""


@pytest.mark.slow  # (slow tier; CI keeps a candidate attacking the judging)
def test_a_candidate_that_passes_its_own_error_inputs_in_its_worker_is_judged_on_its_answers(tmp_path):
    """A candidate's error inputs are judged in the parent from the answers its worker recorded: one whose worker
    turns every failing input into a pass still fails the input it accepts."""
    (tmp_path / "lax.py").write_text(TAKES_A_NEGATIVE_LR)
    done = warm_command.run("run", "suite=sgd", "checks=[errors]", "candidate=lax.SGD", "history_dir=null", "jobs=1",
                            f"out_dir={tmp_path / 'out'}", cwd=tmp_path, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    rows = json.loads((tmp_path / "out" / "results.json").read_text())["rows"]
    mine = {r["hparams"]: r for r in rows if r["check"] == "errors" and r["impl"] == "candidate:lax.SGD"
            and r["metric"] != "run.case_s"}
    assert mine["a negative learning rate"]["status"] == "fail", mine["a negative learning rate"]
    assert "accepted" in mine["a negative learning rate"]["detail"]
    assert mine["params given as a single Tensor"]["status"] == "pass"  # the others judged as before
    assert not (tmp_path / "out" / "recordings").exists()


def test_answers_recorded_by_a_worker_are_the_errors_checks_to_read(tmp_path):
    """What an error input's recording holds is checked as it is read: another kind of recording, or more or fewer
    answers than the check asks, is refused in one line."""
    from optbench.checks.error_attempts import Answering

    asked = Answering(({"attempt": True, "raised": None, "where": "step"},))
    assert asked.attempt() == (None, "step")
    asked.finished()
    with pytest.raises(RecordingError, match="holds no attempt answer at 1"):
        Answering(({"buildable": True},)).attempt()
    with pytest.raises(RecordingError, match="holds 2 answers, the check asked 1"):
        again = Answering(({"attempt": True, "raised": None, "where": "step"}, {"buildable": False}))
        again.attempt()
        again.finished()
    raised = Answering(({"attempt": True, "raised": {"names": ["NegativeLRError", "ValueError", "Exception",
                                                               "BaseException"], "message": "lr < 0"},
                         "where": "construction"},)).attempt()[0]
    from optbench.checks.error_attempts import raised_as

    assert isinstance(raised, ValueError) and raised_as(raised, ("pytorch_optimizer.base.exception.NegativeLRError",))
    assert not raised_as(raised, ("TypeError",))


FOREACH_ONLY = """
# @package _global_
defaults:
  - override /suite: sgd
suite:
  hparams:
    - {name: only_foreach, options: {lr: 0.01, momentum: 0.9}, impls: [foreach], note: "a set the for-loop skips"}
"""


@pytest.mark.slow  # (slow tier; CI keeps a candidate attacking the judging)
def test_the_judge_plans_the_for_loop_of_a_cross_case_as_the_run_did(tmp_path):
    """A set the suite runs on other implementations than the for-loop: the run plans no for-loop trajectory for it,
    so the candidate's cross case is a skip, judged in the parent as in one process (the judge does not step the
    for-loop on a set the suite keeps from it)."""
    (tmp_path / "conf" / "declared").mkdir(parents=True)
    (tmp_path / "conf" / "declared" / "foreach_only.yaml").write_text(FOREACH_ONLY)
    cross = {}
    for jobs in ("0", "1"):
        out = tmp_path / f"out{jobs}"
        done = warm_command.run("run", "--config-dir", str(tmp_path / "conf"), "+declared=foreach_only",
                                "dtype=float32", "checks=[parity,cross]", "candidate=torch.optim.SGD",
                                "impl=[candidate,for-loop]", "history_dir=null", f"jobs={jobs}", f"out_dir={out}",
                                cwd=tmp_path, timeout=300)
        rows = json.loads((out / "results.json").read_text())["rows"]
        cross[jobs] = [(r["status"], r["detail"]) for r in rows
                       if r["check"] == "cross" and r["metric"] != "run.case_s"]
        assert done.returncode == 0, done.stdout + done.stderr
    assert cross["1"] == cross["0"] and [s for s, _ in cross["1"]] == ["skip"], cross
    assert "parity left no trajectory of for-loop" in cross["1"][0][1]


RAISES_ANOTHER_CLASS = """
import torch
from optbench.suite.spec import Deviation

Deviation.raised_by = lambda self, exc: True  # every raise is the declared one, in this process

class Adafactor(torch.optim.Adafactor):  # raises another class than torch's ZeroDivisionError (F04)
    def step(self, closure=None):
        if any(p.numel() == 0 for group in self.param_groups for p in group["params"]):
            raise RuntimeError("a zero-size parameter")
        return super().step(closure)
"""


@pytest.mark.parametrize("jobs, status", [("1", "fail"), ("0", "xfail")])
def test_a_declared_raise_on_some_parameters_is_judged_in_the_parent_from_what_the_worker_recorded(
        tmp_path, jobs, status):
    """The deviations check of a candidate (a raise its suite declares on some parameters, F04's zero-size one) is
    judged in the parent from what the worker recorded it raised: a candidate that raises another class and makes
    every raise the declared one in its process fails; where everything runs in one process (jobs=0) it would have
    been the declared raise (xfail)."""
    (tmp_path / "other.py").write_text(RAISES_ANOTHER_CLASS)
    done = warm_command.run("run", "suite=adafactor", "dtype=float32", "checks=[deviations]",
                            "candidate=other.Adafactor", "history_dir=null", f"jobs={jobs}",
                            f"out_dir={tmp_path / 'out'}", cwd=tmp_path, timeout=300)
    rows = json.loads((tmp_path / "out" / "results.json").read_text())["rows"]
    mine = [r for r in rows if r["impl"] == "candidate:other.Adafactor" and r["metric"] != "run.case_s"]
    assert [r["status"] for r in mine] == [status], mine
    assert "RuntimeError: a zero-size parameter" in mine[0]["detail"]
    assert done.returncode == (1 if status == "fail" else 0), done.stdout + done.stderr


FOREIGN_RAISING = """
from optbench.kernels.adafactor import Adafactor as Own

class Adafactor(Own):  # another class than torch's: F04 (torch's ZeroDivisionError) is not declared of it
    def step(self, closure=None):
        if RAISE and any(p.numel() == 0 for group in self.param_groups for p in group["params"]):
            raise ZeroDivisionError("float division by zero")
        return super().step(closure)
"""


@pytest.mark.parametrize("raises, status", [(True, "fail"), (False, "pass")])
def test_a_raise_declared_of_the_suites_class_never_covers_another_class(tmp_path, raises, status):
    """A candidate that neither is nor subclasses torch's Adafactor and raises torch's F04 ZeroDivisionError on a
    zero-size parameter fails (a declaration meant for torch's class hides nothing of it); one that steps it passes
    as plain parity, never an xpass that asks to remove torch's declaration."""
    (tmp_path / "foreign.py").write_text(f"RAISE = {raises}\n" + FOREIGN_RAISING)
    done = warm_command.run("run", "suite=adafactor", "dtype=float32", "checks=[deviations]",
                            "candidate=foreign.Adafactor", "history_dir=null", "jobs=1",
                            f"out_dir={tmp_path / 'out'}", cwd=tmp_path, timeout=300)
    rows = json.loads((tmp_path / "out" / "results.json").read_text())["rows"]
    mine = [r for r in rows if r["impl"] == "candidate:foreign.Adafactor" and r["metric"] != "run.case_s"]
    assert [(r["status"], r["finding"], r["value"]) for r in mine] == [(status, "", float(raises))], mine
    assert "declared of that class" in mine[0]["detail"]
    assert done.returncode == (1 if raises else 0), done.stdout + done.stderr


def test_a_candidate_with_a_sentinel_default_is_judged_in_the_parent(tmp_path):
    """A constructor default that is a bare object() (heavyball's sentinels) is written as its repr in the plan; the
    parent judges the candidate with it as a placeholder the reference never reads, not as an error of every case."""
    done = warm_command.run("run", "suite=lion", "candidate=tests.candidates.SentinelDefaultLion", "impl=[candidate]",
                            "dtype=float32", "checks=[parity]", "hparams=[default]", "history_dir=null", "jobs=1",
                            f"out_dir={tmp_path / 'out'}", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS  parity" in done.stdout and "cannot be rebuilt" not in done.stdout
