"""What the author of a suite without a torch optimizer reads (tests/byo's Lion, a reference of their own): a broken
reference named in one line, the match: their candidate is not held to, one line summing up the error inputs, the
round-trip scenario nothing else could save for, and where a state key's rename belongs."""

import json
import sys
import textwrap
from pathlib import Path

import pytest

from optbench.cli import main

REFERENCE = (Path(__file__).parent / "byo" / "lion_reference.py").read_text()
SUITE = textwrap.dedent("""
    name: {name}
    optimizer: null
    reference: {name}_ref
    dtypes: [float64, float32]
    hparams:
      - {{name: default, options: {{}}}}
    error_inputs:
      - {{desc: "a negative learning rate", options: {{lr: -0.01}}, match: "lr must be positive"}}
      - {{desc: "beta2 of 1.0", options: {{betas: [0.9, 1.0]}}, match: "Invalid betas"}}
""")
LION = "candidate:tests.byo.lion.Lion"


@pytest.fixture
def author(tmp_path, monkeypatch):
    """Writes suite ``name`` and its reference ``<name>_ref`` (the byo Lion's, plus ``extra`` source) under tmp_path;
    runs optbench on it with tests.byo.lion.Lion: (exit code, console, results rows, out dir)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    written = []

    def run(name: str, *args, extra: str = "", suite_extra: str = ""):
        (tmp_path / f"{name}_ref.py").write_text(REFERENCE + textwrap.dedent(extra))
        (tmp_path / "conf" / "suite").mkdir(parents=True, exist_ok=True)
        (tmp_path / "conf" / "suite" / f"{name}.yaml").write_text(SUITE.format(name=name) + suite_extra)
        written.append(f"{name}_ref")
        out = tmp_path / name
        code = main(["run", "--config-dir", str(tmp_path / "conf"), f"suite={name}", "candidate=tests.byo.lion.Lion",
                     "history_dir=null", f"out_dir={out}", *args])
        return code, json.loads((out / "results.json").read_text())["rows"], out

    yield run
    for module in written:
        sys.modules.pop(module, None)


def test_a_reference_whose_update_breaks_the_contract_is_one_line_naming_it(author, capsys):
    code, rows, _ = author("broken", "checks=[parity]", "dtype=float64", "steps=2", extra="""
        _update = update

        def update(param, grad, state, hp):
            return _update(param, grad, state, hp)[0], None
    """)
    said = capsys.readouterr().out
    assert code == 1
    why = "parity: reference broken_ref: update() must return (param, state dict), returned (ndarray, None)"
    errors = [r for r in rows if r["status"] == "error" and r["hparams"] == "default"]
    assert [r["detail"] for r in errors] == [why]
    assert f"  ERROR parity {LION} float64 default: {why}\n" in said and "AttributeError" not in said


def test_a_candidate_only_suite_says_what_it_did_not_apply_and_sums_up_its_error_inputs(author, capsys):
    code, rows, out = author("mylion", "checks=[roundtrip,errors]")
    said = capsys.readouterr().out
    assert code == 0, [r["detail"] for r in rows if r["status"] in ("fail", "error")]
    negative_lr = next(r for r in rows if r["check"] == "errors" and r["hparams"] == "a negative learning rate"
                       and r["status"] != "info")
    assert negative_lr["status"] == "pass" and negative_lr["detail"] == (
        "rejected in its own words: ValueError at construction: Invalid learning rate: -0.01; match: 'lr must be "
        "positive' not applied (this candidate is held to rejecting, not to the wording)")
    assert f"  PASS  errors {LION}: 7 rejected\n" in said  # torch's 5 generic inputs and the suite's 2
    table = (out / "report.md").read_text().split("## Error inputs")[1].split("\n## ")[0]
    assert table.count("| pass ") == 7 and "| info " not in table  # no timing row after each input
    saved_by_another = [r["detail"] for r in rows if r["check"] == "roundtrip" and r["status"] == "skip"
                        and r["metric"].endswith("cross_implementation") and r["dtype"] == "float32"]
    assert len(saved_by_another) == 1
    assert saved_by_another[0].endswith(": no other implementation of this algorithm ran to save a state_dict")


def test_the_error_inputs_summary_counts_an_accepted_input_as_a_failure(author, capsys):
    code, _, _ = author("lenient", "checks=[errors]", suite_extra=(
        '  - {desc: "a negative weight_decay", options: {weight_decay: -1.0}, match: "Invalid weight_decay"}\n'))
    said = capsys.readouterr().out
    assert code == 1
    assert f"  FAIL  errors {LION} a negative weight_decay: accepted: expected ValueError" in said
    assert said.index("a negative weight_decay: accepted") < said.index(f"  FAIL  errors {LION}: 7 rejected, 1 fail\n")


def test_a_state_key_only_one_side_keeps_may_be_renamed_in_ones_own_reference(author, capsys):
    code, rows, _ = author("renamed", "checks=[parity]", "dtype=float64", "steps=2", extra="""
        _update = update

        def init(param, hp):
            return {"momentum": np.zeros_like(param)}

        def update(param, grad, state, hp):
            new_param, new_state = _update(param, grad, {"exp_avg": state["momentum"]}, hp)
            return new_param, {"momentum": new_state["exp_avg"]}
    """)
    assert code == 1
    verdict = next(r for r in rows if r["metric"] == "parity.max_err_eps" and r["fqn"] == "")
    assert verdict["detail"].startswith(
        "state key(s) 'exp_avg' kept only by the implementation; state key(s) 'momentum' kept only by the reference "
        "(a candidate spec's state.keys maps them, state.ignore leaves them out; or rename them in the reference "
        "renamed_ref: docs/candidates.md)")
