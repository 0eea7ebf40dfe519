"""A declared deviation is torch's: it covers torch's variants and a candidate that is or
subclasses the class it describes; any other candidate carrying a bug of the declared size fails."""

import json

import pytest

from tests.conftest import QUICK_TIMING, assert_only_declared_findings, run_inline

RUN = ["suite=nadam", "dtype=float64", "impl=[candidate]", "checks=[parity]", "history_dir=null",
       "options={lr: 0.01}", *QUICK_TIMING]


def parity_rows(out):
    rows = json.loads((out / "results.json").read_text())["rows"]
    return [r for r in rows if r["check"] in ("parity", "deviation") and r["fqn"] in ("", "*")]


def test_a_from_scratch_optimizer_with_torchs_bug_fails_at_plain_tolerance(tmp_path, capsys):
    out = tmp_path / "lookalike"
    assert run_inline([*RUN, "candidate=tests.candidates.NAdamLookalike", f"out_dir={out}"]) == 1
    verdict = [r for r in parity_rows(out) if r["metric"] == "parity.max_err_eps"]
    assert [r["status"] for r in verdict] == ["fail"] and verdict[0]["value"] > 1e6  # F07's size, now a FAIL
    assert not any(r["finding"] for r in parity_rows(out))
    assert "verdict: FAIL" in capsys.readouterr().out


def test_a_subclass_inherits_torchs_declarations(tmp_path):
    out = tmp_path / "subclass"
    assert run_inline([*RUN, "candidate=tests.candidates.NAdamSubclass", f"out_dir={out}"]) == 0
    assert {r["finding"] for r in parity_rows(out) if r["status"] == "xfail"} == {"F07"}


@pytest.mark.parametrize("rule, code", [("all", 0), ("none", 1)])
def test_candidate_deviations_opts_in_or_out(tmp_path, rule, code):
    lookalike = "tests.candidates.NAdamLookalike" if rule == "all" else "tests.candidates.NAdamSubclass"
    assert run_inline([*RUN, f"candidate={lookalike}", f"candidate_deviations={rule}", f"out_dir={tmp_path}"]) == code


def test_a_bad_rule_is_a_usage_error(tmp_path, capsys):
    assert run_inline([*RUN, "candidate=tests.candidates.NAdamSubclass", "candidate_deviations=some",
                       f"out_dir={tmp_path}"]) == 2
    assert "candidate_deviations=some: available: auto, all, none" in capsys.readouterr().err



def test_a_deviation_naming_candidates_covers_that_library_only():
    """A third-party library's own findings are declared with ``impl: candidate:<its path>`` (suite=adan: F39, F48)."""
    from types import SimpleNamespace

    from optbench.suite.catalog import _load, resolve, suite_files

    adan = resolve(_load(suite_files()["adan"]))[0]

    def covered(name, hparams="maximize"):
        impl = SimpleNamespace(name=name, inherits_deviations=False)
        return {d.finding for d in adan.deviations_for(impl, "float32", hparams)}
    assert covered("candidate:pytorch_optimizer.Adan") == {"F39", "F48"}  # F48: maximize writes the gradient
    assert covered("candidate:pytorch_optimizer.Adan", "default") == set()
    assert covered("candidate:my_adan.Adan") == set()  # any other Adan is judged at plain tolerance


def test_pytorch_optimizers_schedule_free_adamw_fails_the_caller_contract_only_as_declared(tmp_path):
    """Its port of AdamWScheduleFree leaves the normalized step in the caller's p.grad (F49, as schedulefree's class);
    parameters and state are judged at full tolerance (the library x algorithm matrix met it)."""
    pytest.importorskip("pytorch_optimizer")
    assert_only_declared_findings(tmp_path, "schedule_free_adamw", "pytorch_optimizer.ScheduleFreeAdamW", "default",
                                  {"F49"})


def test_parameters_a_declared_raise_leaves_out_are_checked_for_every_implementation(tmp_path):
    """F04 (Adafactor's zero-size parameters) is declared for torch's variants and candidates (``impl: "[!o]*"``);
    every implementation leaves those parameters out of its parity workload, so optbench's own kernel, which the
    declaration does not name, is checked on them alone as on any others: a plain pass, no finding."""
    out = tmp_path / "out"
    assert run_inline(["suite=adafactor", "dtype=float32", "impl=[for-loop,optbench]", "checks=[deviations]",
                       "history_dir=null", f"out_dir={out}"]) == 0
    rows = json.loads((out / "results.json").read_text())["rows"]
    seen = {r["impl"]: (r["status"], r["finding"]) for r in rows if r["check"] == "deviation"}
    assert seen == {"for-loop": ("xfail", "F04"), "optbench": ("pass", "")}, seen
