"""A candidate's state_dict round-trip is judged in the parent: its worker records what the candidate did in each
scenario (``checks.tape.Tape``), the judge replays it through the check's own code. A candidate that forges
the comparison in its process, or a recording that does not answer what the check asks, never reads as a pass."""

from __future__ import annotations

import json

import numpy as np
import pytest

from optbench.checks.tape import Tape, snapshot_in, snapshot_out
from optbench.numerics.recording_file import Answers, RecordingError, load_recording, save_answers
from optbench.state.names import StateDictNameError
from tests import warm_command

FORGES_THE_COMPARISON = """
import torch
import optbench.checks.roundtrip_scenario as scenario

scenario.compare = lambda *args, **kwargs: (True, "bit for bit the uninterrupted run")  # in its own process


class Adam(torch.optim.Adam):  # loses its state at every load: a resumed run starts its moments afresh
    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        self.state.clear()
"""

RUN = ["run", "suite=adam", "dtype=float32", "checks=[roundtrip]", "impl=[candidate]", "history_dir=null",
       "roundtrip.scenarios=[same_order,reversed]", "roundtrip.every_dtype=[]"]


@pytest.mark.parametrize("jobs, code", [("1", 1), pytest.param("0", 0, marks=pytest.mark.slow)])  # (slow tier:
# the contrast in one process; CI keeps the worker's case)
def test_a_candidate_that_forges_the_comparison_in_its_worker_fails_the_judges(tmp_path, jobs, code):
    """Judged in the parent, a candidate that drops its state at a load fails, though it made optbench's comparison
    pass in its own process; where everything runs in one process (jobs=0) the forgery would have held."""
    (tmp_path / "forger.py").write_text(FORGES_THE_COMPARISON)
    done = warm_command.run(*RUN, "candidate=forger.Adam", f"jobs={jobs}", f"out_dir={tmp_path / 'out'}",
                            cwd=tmp_path, timeout=300)
    assert done.returncode == code, done.stdout + done.stderr
    rows = json.loads((tmp_path / "out" / "results.json").read_text())["rows"]
    by_name = {r["metric"]: r for r in rows if r["metric"].startswith("roundtrip.") and r["status"] != "info"}
    assert set(by_name) == {"roundtrip.same_order", "roundtrip.reversed"}, by_name
    if code:
        assert {r["status"] for r in by_name.values()} == {"fail"}, by_name
        assert "differs at" in by_name["roundtrip.same_order"]["detail"]
    else:
        assert {r["status"] for r in by_name.values()} == {"pass"}, by_name


def test_the_judges_round_trip_verdicts_are_the_workers_for_an_honest_candidate(tmp_path):
    """Every row but the case's cost is the same judged in the parent as run in one process (jobs=0)."""
    seen = {}
    for jobs in ("1", "0"):
        out = tmp_path / jobs
        done = warm_command.run(*RUN[:-2], "candidate=torch.optim.Adam", f"jobs={jobs}", f"out_dir={out}",
                                cwd=tmp_path, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        rows = json.loads((out / "results.json").read_text())["rows"]
        seen[jobs] = sorted((r["metric"], r["status"], r["value"], r["detail"]) for r in rows
                            if r["metric"] != "run.case_s")
    assert seen["1"] == seen["0"]
    assert sum(status == "pass" for _, status, *_ in seen["1"]) >= 15


def test_a_tape_replays_what_it_recorded_and_refuses_anything_else(tmp_path):
    recording = Tape()
    snap = {("w", "param"): np.arange(6.0).reshape(2, 3), ("w", "exp_avg"): np.full((2, 3), 0.1)}
    assert recording.take("continued", lambda: snap, snapshot_out, snapshot_in) is snap
    with pytest.raises(StateDictNameError):
        recording.take("load", lambda: (_ for _ in ()).throw(StateDictNameError("no saved FQN 'w'")))
    path = save_answers(recording.entries, tmp_path / "case-0.npz")
    answers = load_recording(path, 1 << 20)
    assert isinstance(answers, Answers)

    replay = Tape(answers.entries)
    back = replay.take("continued", lambda: pytest.fail("ran code under test"), snapshot_out, snapshot_in)
    assert back.keys() == snap.keys() and all(np.array_equal(back[k], snap[k]) for k in snap)
    with pytest.raises(StateDictNameError, match="no saved FQN 'w'"):  # optbench's own class, matched by name
        replay.take("load", lambda: None)
    replay.finished()

    with pytest.raises(RecordingError, match="holds 'continued' where the check asks 'load'"):
        Tape(answers.entries).take("load", lambda: None)
    with pytest.raises(RecordingError, match="ends before"):
        Tape(()).take("load", lambda: None)
    leftover = Tape(answers.entries)
    leftover.take("continued", lambda: None, decode=snapshot_in)
    with pytest.raises(RecordingError, match="1 answers the check never asked for"):
        leftover.finished()
    with pytest.raises(RecordingError, match="not a well-formed answer"):
        Tape(({"what": "continued", "value": [["w", 3, "not an array"]]},)).take("continued", lambda: None,
                                                                               decode=snapshot_in)


CUTS_ITS_TAPE = """
import torch
import optbench.checks.roundtrip as roundtrip

written = roundtrip.save_answers
roundtrip.save_answers = lambda entries, path: written(entries[:4], path)  # the rest would show a failure

Adam = torch.optim.Adam
"""


def test_a_tape_cut_short_in_the_worker_is_an_error_never_a_pass(tmp_path):
    (tmp_path / "cutter.py").write_text(CUTS_ITS_TAPE)
    done = warm_command.run(*RUN, "candidate=cutter.Adam", "jobs=1", f"out_dir={tmp_path / 'out'}", cwd=tmp_path,
                            timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    rows = json.loads((tmp_path / "out" / "results.json").read_text())["rows"]
    mine = [r for r in rows if r["check"] == "roundtrip" and r["metric"] != "run.case_s"]
    assert [r["status"] for r in mine] == ["error"], mine
    assert "the recording ends before" in mine[0]["detail"]
