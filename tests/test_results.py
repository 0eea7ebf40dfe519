"""Result rows: the machine-readable columns code reads (``gate``, ``finding``), and older schemas read back."""

from __future__ import annotations

import json

from optbench.engine.mutants import detecting
from optbench.metrics import PARITY_MAX_ERR_EPS, PARITY_ONE_STEP_MAX_ERR_EPS, PARITY_TOL_EPS
from optbench.results import COLUMNS, SCHEMA_VERSION, Results, load_results, row

LABELS = {"suite": "adamw", "optimizer": "AdamW", "impl": "candidate:X", "dtype": "float32", "hparams": "default",
          "device": "cpu", "workload": ""}


def test_rows_carry_gate_and_finding_and_round_trip_through_the_file(tmp_path):
    results = Results(tmp_path, {"machine": {}})
    results.extend([row(LABELS, check="parity", metric=PARITY_MAX_ERR_EPS, value=9.0, status="xfail", finding="F07"),
                    row(LABELS, check="parity", metric=PARITY_MAX_ERR_EPS, value=99.0, status="fail", gate="one-step")])
    results.finish()
    meta, rows = load_results(tmp_path / "results.json")
    assert meta["schema_version"] == SCHEMA_VERSION == 4
    assert list(rows["finding"]) == ["F07", ""] and list(rows["gate"]) == ["", "one-step"]


def test_an_older_schema_reads_back_with_its_findings_lifted_from_the_detail(tmp_path):
    """Schema 3 wrote a declared finding only into the detail text; the reader fills the column once."""
    old = [{c: "" for c in COLUMNS if c not in ("gate", "finding")} | LABELS | r for r in (
        {"check": "deviation", "metric": "deviation.observed", "value": 1.0, "status": "xfail",
         "detail": "F07: NAdam keeps mu_product in float32. Observed: still deviates (see F07)"},
        {"check": "parity", "metric": "parity.max_err_eps", "value": 1.0, "status": "pass", "detail": "mentions F99"})]
    (tmp_path / "results.json").write_text(json.dumps({"schema_version": 3, "rows": old}))
    _, rows = load_results(tmp_path / "results.json")
    assert list(rows["finding"]) == ["F07", ""] and list(rows["gate"]) == ["", ""]


def test_the_gate_that_caught_a_mutant_is_read_from_the_gate_column_not_the_detail():
    def verdict(gate, detail):
        return [row(LABELS, check="parity", metric=PARITY_MAX_ERR_EPS, value=50.0, status="fail", gate=gate,
                    detail=detail),
                row(LABELS, check="parity", metric=PARITY_TOL_EPS, value=52.0)]

    assert detecting(verdict("trajectory", "first past tolerance")) == ["parity/trajectory"]
    assert detecting(verdict("one-step", "(trajectory) in the text misleads nobody")) == ["parity/one-step"]
    one_step = [row(LABELS, check="parity", metric=PARITY_ONE_STEP_MAX_ERR_EPS, value=40.0, status="fail",
                    gate="one-step")]
    assert detecting(one_step) == ["parity/one-step"]
