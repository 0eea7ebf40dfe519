"""A candidate's hyperparameter forms (Tensor lr, betas, weight_decay; schedulers) are judged in the parent as its
parity cases are, each Tensor form against its float twin there: a candidate that breaks the oracle in its worker
fails them, and an honest one reads the same judged as run in one process."""

from __future__ import annotations

import json

import pytest

from optbench.journal import JOURNAL
from tests import warm_command
from tests.test_judge import DOUBLES_LR, HOSTILE, killed_after

RUN = ["run", "suite=sgd", "dtype=float32", "checks=[forms]", "impl=[candidate]", "steps=8", "history_dir=null"]


def form_rows(out):
    rows = json.loads((out / "results.json").read_text())["rows"]
    return [r for r in rows if r["check"] == "forms" and r["metric"] != "run.case_s"]


@pytest.mark.parametrize("jobs, code", [("1", 1), pytest.param("0", 0, marks=pytest.mark.slow)])  # (slow tier:
# the contrast in one process; CI keeps the worker's case)
def test_a_candidate_that_breaks_the_oracle_in_its_worker_fails_its_forms(tmp_path, jobs, code):
    """An SGD stepping with twice its lr, whose module makes the float64 reference do the same at import: judged in
    the parent every form fails; in one process (jobs=0) the broken oracle agrees with it."""
    (tmp_path / "hostile.py").write_text("import torch\n" + HOSTILE["breaks the oracle"][0] + DOUBLES_LR)
    done = warm_command.run(*RUN, "candidate=hostile.SGD", f"jobs={jobs}", f"out_dir={tmp_path / 'out'}",
                            cwd=tmp_path, timeout=300)
    assert done.returncode == code, done.stdout + done.stderr
    verdicts = {r["hparams"]: r["status"] for r in form_rows(tmp_path / "out")
                if r["metric"] == "parity.max_err_eps" and not r["fqn"]}
    assert {"float", "tensor_lr", "step_lr", "warmup_cosine_tensor_lr"} <= set(verdicts), verdicts
    assert set(verdicts.values()) == ({"fail"} if code else {"pass"}), verdicts


@pytest.mark.slow  # (slow tier; CI keeps a candidate breaking the oracle of forms)
def test_the_judges_forms_are_the_workers_for_an_honest_candidate(tmp_path):
    """Every form row, its comparison with the float twin among them, is the same judged in the parent (jobs=2: the
    forms of two dtypes judged as they come) as run in one process (jobs=0)."""
    seen = {}
    for jobs in ("2", "0"):
        out = tmp_path / jobs
        done = warm_command.run(*[a for a in RUN if a != "dtype=float32"], "dtype=[float32,float64]",
                                "candidate=torch.optim.SGD", "options={momentum: 0.9}", f"jobs={jobs}",
                                f"out_dir={out}", cwd=tmp_path, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        seen[jobs] = sorted((r["dtype"], r["hparams"], r["metric"], r["fqn"], r["tensor"], r["status"], r["value"],
                             r["detail"]) for r in form_rows(out))
    assert seen["2"] == seen["0"]
    twins = [row for row in seen["2"] if row[2] == "forms.vs_float_max_err_eps"]
    assert len(twins) >= 8 and {row[5] for row in twins} == {"pass"}, twins


SLOW_WITH_A_TENSOR_LR = """
import os
import time
import torch

class SGD(torch.optim.SGD):  # waits, while the test's file is there, once its lr is a Tensor
    def step(self, closure=None):
        while os.path.exists("wait") and torch.is_tensor(self.param_groups[0]["lr"]):
            time.sleep(0.1)
        return super().step(closure)
"""


@pytest.mark.slow  # (a resumed run's judge taking its twin from the killed run: tests/test_judge.py's cross, in CI)
def test_a_resumed_run_judges_a_form_against_the_twin_the_killed_run_finished(tmp_path):
    """Killed after the float form: the resumed run's worker records the float form again as it rebuilds the group,
    and the judge compares each Tensor form with it (else their vs-float rows would be missing)."""
    (tmp_path / "slow.py").write_text(SLOW_WITH_A_TENSOR_LR)
    args = [*RUN, "candidate=slow.SGD", "jobs=1"]
    whole = warm_command.run(*args, f"out_dir={tmp_path / 'whole'}", cwd=tmp_path, timeout=300)
    assert whole.returncode == 0, whole.stdout + whole.stderr
    out = killed_after(tmp_path, args, 1)  # the float form is in; the Tensor lr form waits
    assert [json.loads(line)["case"] for line in (out / JOURNAL).read_text().splitlines()[1:]] == [0]
    resumed = warm_command.run("resume", str(out), cwd=tmp_path, timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    again = form_rows(out)
    assert len([r for r in again if r["metric"] == "forms.vs_float_max_err_eps"]) >= 2
    assert sorted(map(json.dumps, again)) == sorted(map(json.dumps, form_rows(tmp_path / "whole")))
