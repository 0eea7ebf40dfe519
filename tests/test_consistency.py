"""A pass its own figures deny is no pass: a worker's forged verdict is an error row, an edited file is refused."""

from __future__ import annotations

import json

import pytest

from optbench.consistency import contradicted
from optbench.results import content_digest, load_results
from tests.conftest import run_inline

CASE = {"suite": "sgd", "impl": "candidate:x.SGD", "dtype": "float32", "hparams": "default", "device": "cpu",
        "workload": "transformer", "check": "parity"}


def parity_rows(status="pass", worst=3.0, tol=40.0, tensor_err=2.0, with_tol=True) -> list[dict]:
    rows = [{**CASE, "metric": "parity.max_err_eps", "value": worst, "status": status, "fqn": "", "tensor": ""},
            {**CASE, "metric": "parity.max_err_eps", "value": tensor_err, "status": "info", "fqn": "w",
             "tensor": "param"}]
    return rows + ([{**CASE, "metric": "parity.tol_eps", "value": tol, "status": "info", "fqn": "", "tensor": ""}]
                   if with_tol else [])


@pytest.mark.parametrize("rows, says", [
    (parity_rows(worst=9.87e6), "the case measured 9.87e+06 eps over its tolerance 40 eps"),
    (parity_rows(tensor_err=1e3), "w/param measured 1000 eps over its tolerance 40 eps"),
    (parity_rows(worst=float("nan")), "the case measured nan eps"),
    (parity_rows(with_tol=False), "a pass without a finite tolerance"),
    (parity_rows(tol=float("inf")), "a pass without a finite tolerance"),
])
def test_a_pass_its_figures_deny_is_named(rows, says):
    assert says in contradicted(rows)


def test_agreeing_rows_and_other_verdicts_are_left_alone():
    assert contradicted(parity_rows()) == ""
    assert contradicted(parity_rows(status="fail", worst=9.87e6)) == ""  # a fail over its tolerance is what it says
    assert contradicted(parity_rows(status="xfail", worst=9.87e6)) == ""  # a declared deviation's


def test_a_worker_that_forges_its_verdict_gets_an_error_row_and_the_run_fails(tmp_path, monkeypatch):
    """A case whose rows say pass at 9.87e6 eps (as a candidate that patched the parity check in its worker would
    send them) is recorded with an error row naming the contradiction: the run fails."""
    from optbench.checks import parity

    real = parity.ParityCheck._rows

    def forged(self, *args, **kwargs):
        rows, line = real(self, *args, **kwargs)
        rows[0] = {**rows[0], "value": 9.87e6, "status": "pass"}
        return rows, line

    monkeypatch.setattr(parity.ParityCheck, "_rows", forged)
    out = tmp_path / "run"
    code = run_inline(["suite=sgd", "impl=[for-loop]", "dtype=float32", "hparams=[default]", "checks=[parity]",
                       "steps=3", "history_dir=null", f"out_dir={out}"])
    assert code == 1
    rows = json.loads((out / "results.json").read_text())["rows"]
    errors = [r for r in rows if r["status"] == "error"]
    assert errors and "its rows contradict themselves: parity" in errors[0]["detail"]


def test_a_results_file_holding_a_forged_pass_is_refused_unless_trusted(tmp_path):
    data = {"schema_version": 5, "rows": parity_rows(worst=9.87e6), "run": {"status": "finished"}}
    data["digest"] = content_digest(data)  # whoever edits the file can recompute the digest
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="its rows contradict themselves"):
        load_results(path)
    meta, frame = load_results(path, trust_edited=True)
    assert len(frame) == 3
