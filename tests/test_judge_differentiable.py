"""A candidate's derivatives through its step (the differentiable check) are judged in the parent: its worker
records the Jacobian-vector products autograd gave (``checks.tape``), the judge takes the reference's finite
differences itself. A candidate that breaks the oracle in its worker fails; an honest one reads the same judged as
run in one process."""

from __future__ import annotations

import json

import pytest

from tests import warm_command
from tests.test_judge import DOUBLES_LR, HOSTILE

RUN = ["run", "suite=sgd", "dtype=float64", "checks=[differentiable]", "impl=[candidate]", "history_dir=null",
       "hparams=[default]"]


def verdicts(out) -> list[tuple]:
    rows = json.loads((out / "results.json").read_text())["rows"]
    return sorted((r["hparams"], r["metric"], r["tensor"], str(r["step"]), r["fqn"], r["status"], str(r["value"]),
                   r["detail"]) for r in rows if r["check"] == "differentiable" and r["metric"] != "run.case_s")


@pytest.mark.parametrize("jobs, code", [("1", 1), ("0", 0)])
def test_a_candidate_that_breaks_the_oracle_in_its_worker_fails_its_derivatives(tmp_path, jobs, code):
    """An SGD stepping with twice its lr, whose module makes the float64 reference do the same at import: judged in
    the parent its derivative with respect to the gradients is twice the reference's (k = 1 and 3); in one process
    (jobs=0) the broken oracle agrees with it."""
    (tmp_path / "hostile.py").write_text("import torch\n" + HOSTILE["breaks the oracle"][0] + DOUBLES_LR)
    done = warm_command.run(*RUN, "candidate=hostile.SGD", f"jobs={jobs}", f"out_dir={tmp_path / 'out'}",
                            cwd=tmp_path, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr  # (its Tensor lr's derivative is wrong either way)
    grad = [v for v in verdicts(tmp_path / "out") if v[2] == "grad" and not v[4]]
    assert [v[5] for v in grad] == ["fail" if code else "pass"] * 2, grad


@pytest.mark.slow  # (slow tier; CI keeps a candidate breaking the oracle of derivatives)
def test_the_judges_derivatives_are_the_workers_for_an_honest_candidate(tmp_path):
    seen = {}
    for jobs in ("1", "0"):
        out = tmp_path / jobs
        done = warm_command.run(*RUN, "candidate=torch.optim.SGD", f"jobs={jobs}", f"out_dir={out}", cwd=tmp_path,
                                timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        seen[jobs] = verdicts(out)
    assert seen["1"] == seen["0"]
    assert sum(v[5] == "pass" and v[2] in ("grad", "lr", "param") for v in seen["1"]) == 6, seen["1"]
