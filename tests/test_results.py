"""Result rows: the machine-readable columns code reads (``gate``, ``finding``), and older schemas read back."""

from __future__ import annotations

import json

import pytest

from optbench.engine.mutants import detecting
from optbench.journal import JOURNAL, Journal, read
from optbench.metrics import PARITY_MAX_ERR_EPS, PARITY_ONE_STEP_MAX_ERR_EPS, PARITY_TOL_EPS
from optbench.results import COLUMNS, SCHEMA_VERSION, Results, load_results, row
from optbench.rows import FAILING, NO_VERDICT, PASSING, STATUSES, VERIFIED, Row, first_words

LABELS = {"suite": "adamw", "optimizer": "AdamW", "impl": "candidate:X", "dtype": "float32", "hparams": "default",
          "device": "cpu", "workload": ""}


def test_rows_carry_gate_and_finding_and_round_trip_through_the_file(tmp_path):
    results = Results(tmp_path, {"machine": {}})
    results.extend([row(LABELS, check="parity", metric=PARITY_MAX_ERR_EPS, value=9.0, status="xfail", finding="F07"),
                    row(LABELS, check="parity", metric=PARITY_MAX_ERR_EPS, value=99.0, status="fail", gate="one-step")])
    results.finish()
    meta, rows = load_results(tmp_path / "results.json")
    assert meta["schema_version"] == SCHEMA_VERSION == 5
    assert list(rows["finding"]) == ["F07", ""] and list(rows["gate"]) == ["", "one-step"]


def test_an_older_schema_reads_back_with_its_findings_lifted_from_the_detail(tmp_path):
    """Schema 3 wrote a declared finding only into the detail text; the reader fills the column once."""
    old = [{c: "" for c in COLUMNS if c not in ("gate", "finding")} | LABELS | r for r in (
        {"check": "deviation", "metric": "deviation.observed", "value": 1.0, "status": "xfail",
         "detail": "F07: NAdam keeps mu_product in float32. Observed: still deviates (see F07)"},
        {"check": "parity", "metric": "parity.max_err_eps", "value": 1.0, "status": "pass", "detail": "mentions F99"},
        {"check": "parity", "metric": "parity.tol_eps", "value": 40.0, "status": "info"})]
    (tmp_path / "results.json").write_text(json.dumps({"schema_version": 3, "rows": old}))
    _, rows = load_results(tmp_path / "results.json")
    assert list(rows["finding"]) == ["F07", "", ""] and list(rows["gate"]) == ["", "", ""]


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


def test_a_well_formed_row_round_trips_through_results_json_unchanged(tmp_path):
    written = [row(LABELS, check="parity", metric=PARITY_MAX_ERR_EPS, value=0.5, status="pass", fqn="w",
                   tensor="exp_avg", step=3, unit="eps", gate="trajectory", detail="within"),
               row(LABELS, check="speed", metric="speed.step_s", value=2, unit="s")]
    results = Results(tmp_path, {"machine": {}})
    results.extend(written)
    results.finish()
    assert json.loads((tmp_path / "results.json").read_text())["rows"] == written == results.rows
    assert Row.from_dict(written[0]).as_dict() == written[0] and list(written[0]) == COLUMNS


@pytest.mark.parametrize(("change", "named"), [
    ({"status": "passed"}, "status 'passed' is none of pass, fail"),
    ({"device": None}, "no 'device' column"),
    ({"value": "0.5"}, "value '0.5' is not a number"),
    ({"value": None}, "value None is not a number"),
    ({"colour": "red"}, "'colour' is no column"),
])
def test_a_malformed_row_is_refused_in_one_line_where_it_enters_the_record(tmp_path, change, named):
    good = row(LABELS, check="parity", metric=PARITY_MAX_ERR_EPS, value=0.5, status="pass")
    bad = {k: v for k, v in (good | change).items() if v is not None or k != "device"}
    results, journal = Results(tmp_path, {"machine": {}}), Journal(tmp_path / JOURNAL, {"plan": []})
    for enter in (results.extend, lambda rows: journal.case(0, rows)):
        with pytest.raises(ValueError) as info:
            enter([good, bad])
        assert named in str(info.value) and "\n" not in str(info.value), info.value
        assert str(info.value).startswith(f"result row (parity {PARITY_MAX_ERR_EPS}): ")
    journal.close()
    assert results.rows == [] and read(tmp_path / JOURNAL).cases == {}  # nothing half-recorded


def test_the_status_groups_are_of_the_statuses():
    assert PASSING | FAILING | VERIFIED | NO_VERDICT | {"info"} == set(STATUSES)
    assert not FAILING & PASSING and not NO_VERDICT & VERIFIED and FAILING - VERIFIED == {"error"}


def test_the_measuring_checks_are_the_ones_registered_to_run_alone():
    """results.verdict's MEASURED needs the checks that measure (it cannot import the registry, which is above it):
    the two lists agree."""
    import optbench.checks  # noqa: F401  (the built-in checks registered)
    from optbench.checks.registry import alone_checks
    from optbench.results import MEASURING_CHECKS

    assert set(alone_checks()) == set(MEASURING_CHECKS)


def test_an_edited_results_file_is_refused_unless_trusted(tmp_path, capsys):
    """results.json carries a digest of its rows and the run: a pass turned into a fail (or the other way) after
    the run is refused by report and compare in one line; --trust-edited reads it."""
    from optbench.cli import main
    from optbench.results import Results, load_results, row

    results = Results(tmp_path / "run", {"config": {"checks": ["parity"]}})
    results.extend([row({"suite": "sgd", "impl": "for-loop", "dtype": "float32"}, check="parity",
                        metric="parity.max_err_eps", value=100.0, status="fail", unit="eps")])
    path = results.finish()
    assert json.loads(path.read_text())["digest"].startswith("sha256:")
    assert load_results(path)[1]["status"].tolist() == ["fail"]
    path.write_text(path.read_text().replace('"status": "fail"', '"status": "pass"'))
    for command in (["report", str(path)], ["compare", str(path), str(path)]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert err == (f"optbench: error: {path}: its content does not match the digest it was written with "
                       "(edited after the run?): --trust-edited reads it anyway\n")
    assert main(["report", str(path), "--trust-edited"]) == 0


def test_a_message_that_only_introduces_its_cause_is_named_with_it():
    """A row names an exception by its first line, and by the next where the first ends in a colon (TorchInductor's
    "backend='inductor' raised:" says nothing of what failed)."""
    inductor = "backend='inductor' raised:\nValueError: Cannot view a tensor\n\nSet TORCH_LOGS=+dynamo"
    assert first_words(inductor) == "backend='inductor' raised: ValueError: Cannot view a tensor"
    assert first_words("Invalid weight_decay value: -1.0\nmore") == "Invalid weight_decay value: -1.0"
    assert first_words("\n  only line  \n") == "only line" and first_words("") == "" and first_words("ends:") == "ends:"
