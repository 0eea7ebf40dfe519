"""The check registry's verdicts: deviations judged apart, lenient optimizers failing error inputs,
the parity matrix report."""

import json

import pandas as pd
import pytest
import torch

from optbench.checks import REGISTRY
from optbench.checks.deviations import split, verdict
from optbench.checks.error_attempts import attempt
from optbench.checks.error_inputs import BASE
from optbench.cli import main
from optbench.report import load_results, render_report
from optbench.suite.spec import Deviation, ErrorInput
from optbench.workloads import ParamSpec
from tests.conftest import run_inline


def errors_frame(values, fqn="w", tensor="param"):
    return pd.DataFrame({"step": range(1, len(values) + 1), "fqn": fqn, "tensor": tensor, "err_eps": values,
                         "tol": [16.0 + s for s in range(1, len(values) + 1)]})


def test_registry_names_each_check_once():
    assert list(REGISTRY) == ["parity", "cross", "forms", "deviations", "roundtrip", "errors", "quantized",
                              "stochastic", "differentiable", "speed", "memory", "scaling", "reshard"]


def test_a_declared_deviation_is_judged_apart_and_bounded():
    d = Deviation("F99", "test", fqn="w*", max_err_eps=1e6)
    errors = pd.concat([errors_frame([1e3, 2e3], "w1"), errors_frame([1.0, 2.0], "b")], ignore_index=True)
    gated, declared = split(errors, [d], {"w1": ParamSpec("w1", (3,)), "b": ParamSpec("b", (3,))})
    assert set(gated.fqn) == {"b"} and declared[0][0] is d
    assert verdict(d, declared[0][1])[0] == "xfail"
    assert verdict(d, errors_frame([1.0, 2.0], "w1"))[0] == "xpass"  # fixed upstream: time to remove it
    assert verdict(d, errors_frame([1e7], "w1"))[0] == "fail"  # past the bound: not the known deviation


def test_a_deviation_naming_a_kind_of_parameter_covers_those_parameters_only():
    """``kind: noncontiguous`` declares the non-contiguous parameters' errors; a dense parameter's failure stays
    judged (it was covered too, every tensor of the case hidden under the declaration)."""
    d = Deviation("F99", "test", kind="noncontiguous")
    errors = pd.concat([errors_frame([1e6], "t"), errors_frame([1e6], "dense")], ignore_index=True)
    gated, declared = split(errors, [d], {"t": ParamSpec("t", (4, 4), "noncontiguous"), "dense": ParamSpec("dense",
                                                                                                         (4, 4))})
    assert set(gated.fqn) == {"dense"} and set(declared[0][1].fqn) == {"t"}


def test_size_selectors_pick_zero_size_and_scalar_parameters():

    assert Deviation("F", "r", size="zero").matches_spec(ParamSpec("x", (0, 8)))
    assert not Deviation("F", "r", size="zero").matches_spec(ParamSpec("x", (2, 8)))
    assert Deviation("F", "r", size="scalar").matches_shape(())
    assert Deviation("F", "r", kind="noncontiguous").matches_spec(ParamSpec("x", (2, 2), "noncontiguous"))


def test_an_optimizer_that_accepts_invalid_input_fails_the_error_inputs():
    class Lenient(torch.optim.Optimizer):
        def __init__(self, params, lr=0.1):
            super().__init__(params, {"lr": lr})

        def step(self, closure=None):
            return None

    raised, _ = attempt(Lenient, ErrorInput("negative lr", options={"lr": -1.0}, match="lr"))
    assert raised is None  # accepted: the check reports it as a failure
    for e in BASE:  # what torch.optim.Optimizer itself enforces holds for any subclass
        raised, _ = attempt(Lenient, e)
        assert raised is not None, e.desc


@pytest.mark.slow  # (slow tier; CI keeps the parity matrix's table: test_roundtrip's report matrix)
def test_report_renders_the_parity_matrix(tmp_path):
    assert run_inline(["suite=adamax", "impl=[for-loop,foreach]", "dtype=[float64,bfloat16]", "steps=4",
                       "checks=[parity,cross]", "report.plots=true", f"out_dir={tmp_path}"]) == 0
    meta, rows = load_results(tmp_path / "results.json")
    report = render_report(meta, rows, tmp_path / "again").read_text()
    assert "## Parity matrix" in report and "| adamax | default |" in report
    assert (tmp_path / "again" / "parity_matrix.png").stat().st_size > 1000
    record = json.loads((tmp_path / "results.json").read_text())
    assert record["suites"] == ["adamax"] and record["wall_s"] > 0
    record["config"]["report"]["plots"] = False  # tables only: the same matrix, no PNG (a stale one removed)
    report = render_report(record, rows, tmp_path / "again").read_text()
    assert "| adamax | default |" in report and "![" not in report
    assert not list((tmp_path / "again").glob("*.png"))


def test_a_check_registered_from_outside_is_configured_planned_run_reported_and_counted(tmp_path, capsys):
    """A check is one class: registered from here with its config block, its report section and its summary entry,
    a run plans and runs its cases, takes ``toy.limit=`` from the command line, and report.md shows and counts its
    rows; unregistered, it is gone from the config again."""
    from optbench import Case, Outcome, register_check, row
    from optbench.checks.registry import unregister

    def section(rows):
        return [("Toy check", rows[rows["metric"] == "toy.value"][["impl", "status", "value"]])]

    @register_check(config={"limit": 1}, counted="toy", sections=section)
    class ToyCheck:
        name = "toy"
        requires = ()

        def cases(self, suite, ctx):
            return [Case(suite, impl, "float32", suite.hparams[0], ctx.device) for impl in ctx.impls[suite.name]]

        def group(self, case):
            return (case.suite.name, self.name)

        def run(self, case, ctx):
            value = {"for-loop": 0, "foreach": 2}[case.impl_name]
            status = "pass" if value <= ctx.settings.toy.limit else "fail"
            return Outcome([row(case.labels, check="toy", metric="toy.value", value=value, status=status)],
                           f"  toy {case.impl_name} {status}")

    try:
        args = ["run", "suite=adam", "impl=[for-loop,foreach]", "dtype=float32", "checks=[toy]", "jobs=0"]
        assert main([*args, f"out_dir={tmp_path / 'a'}"]) == 1  # foreach's 2 is past the default limit
        report = (tmp_path / "a" / "report.md").read_text()
        assert "toy: 1 fail, 1 pass" in report and "## Toy check" in report, report[:2000]
        assert main([*args, "toy.limit=5", f"out_dir={tmp_path / 'b'}"]) == 0
        assert "toy: 2 pass" in (tmp_path / "b" / "report.md").read_text()
    finally:
        unregister("toy")
    capsys.readouterr()
    assert run_inline(["suite=adam", "checks=[toy]", f"out_dir={tmp_path / 'c'}"]) == 2
    assert "unknown check(s) toy" in capsys.readouterr().err


def test_every_check_has_a_report_section_and_every_verdict_giving_check_is_counted():
    """The report shows every check's rows under its own heading; the summary counts every check that gives
    verdicts (the timing and memory checks measure)."""
    from optbench.checks.registry import REGISTRATIONS, counted_checks

    assert all(r.sections is not None for r in REGISTRATIONS.values()), \
        [n for n, r in REGISTRATIONS.items() if r.sections is None]
    assert set(counted_checks()) == {"parity", "cross", "deviation", "roundtrip", "errors", "differentiable",
                                     "reshard", "forms", "quantized", "stochastic"}


def test_who_judges_a_candidates_cases_is_in_each_checks_registration():
    """A candidate's verdicts that its worker could forge are the parent's (from a trajectory or recorded answers);
    only the measuring checks and those judging what they built themselves are the worker's. A registration
    naming another judge is refused."""
    from optbench.checks.registry import REGISTRATIONS, register_check

    judged = {n: r.judged for n, r in REGISTRATIONS.items()}
    assert judged == {"parity": "trajectory", "cross": "from_parity", "deviations": "trajectory",
                      "roundtrip": "answers", "errors": "answers", "forms": "trajectory", "differentiable": "answers",
                      "quantized": "answers", "stochastic": "answers", "speed": None, "memory": None, "scaling": None,
                      "reshard": None}
    with pytest.raises(ValueError, match="judged='worker' is not one of"):
        @register_check(judged="worker")
        class Forged:
            name = "forged"
            requires = ()
    assert "forged" not in REGISTRATIONS


def test_declared_status_is_one_rule_for_every_check():
    """A declared deviation turns a fail into xfail and a pass into xpass (a plain pass where it is intermittent);
    an error stays an error unless the check's declarations describe a raise; no declaration changes nothing."""
    from optbench.checks.deviations import declared_status

    d, sometimes = Deviation("F99", "test"), Deviation("F99", "test", intermittent=True)
    assert [declared_status(s, d) for s in ("pass", "fail", "error", "skip")] == ["xpass", "xfail", "error", "skip"]
    assert declared_status("pass", sometimes) == "pass" and declared_status("fail", sometimes) == "xfail"
    assert declared_status("error", d, errors=True) == "xfail"
    assert [declared_status(s, None) for s in ("pass", "fail", "error")] == ["pass", "fail", "error"]


def test_a_registration_cannot_replace_the_run_config_and_a_broken_section_costs_only_itself():
    """A check whose config block would replace one of the run config's own (``workload``) is refused; a check
    whose report section raises gets one line saying so, and every other section still renders."""
    from optbench.checks.registry import register_check, report_sections, unregister

    with pytest.raises(ValueError, match="would replace the run config's own 'workload'"):
        @register_check(config={"width": 1})
        class Clobbering:
            name = "workload"
            requires = ()

    @register_check(sections=lambda rows: [("Broken", rows["no such column"])])
    class Broken:
        name = "broken_section"
        requires = ()

    from optbench.rows import COLUMNS, row

    labels = {"suite": "adam", "impl": "foreach", "dtype": "float32", "hparams": "default", "device": "cpu"}
    rows = pd.DataFrame([row(labels, check="parity", metric="parity.max_err_eps", value=1.0, status="pass")],
                        columns=COLUMNS)
    try:
        titles = [title for title, _ in report_sections(rows)]
        assert "broken_section (its section could not be rendered)" in titles and "Parity cases" in titles, titles
    finally:
        unregister("broken_section")
