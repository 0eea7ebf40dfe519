"""The differentiable check: torch's for-loop agrees with finite differences of the reference, a wrong
derivative fails, declared findings are xfail, refusals are unsupported rows (docs/tolerances.md)."""

import json

import numpy as np
import pytest

from optbench.checks.derivatives import KINK, TOLERANCE, H, compare
from tests.conftest import run_inline

FAST = ["dtype=float64", "checks=[differentiable]", "differentiable.hparams=first", "differentiable.max_params=3"]
POINTS = (-2 * H, -H, 0.0, H, 2 * H)


def run(tmp_path, *args):
    return run_inline([*args, *FAST, f"out_dir={tmp_path}"])


def rows(tmp_path):
    return json.loads((tmp_path / "results.json").read_text())["rows"]


def verdicts(tmp_path) -> dict:
    """(input, k) -> the verdict row of that derivative (one implementation per run here)."""
    return {(r["tensor"], r["step"]): r for r in rows(tmp_path)
            if r["check"] == "differentiable" and r["metric"] == "differentiable.max_rel_err"
            and r["tensor"] and not r["fqn"]}


@pytest.mark.parametrize("suite", ["sgd", "rmsprop", "radam"])
def test_torch_for_loop_agrees_with_the_reference(tmp_path, suite):
    assert run(tmp_path, f"suite={suite}", "impl=[for-loop]") == 0
    v = verdicts(tmp_path)
    assert {w for w, _ in v} == {"grad", "lr", "param"} and {k for _, k in v} == {1, 3}
    judged = [r for r in v.values() if r["status"] == "pass"]
    assert {r["tensor"] for r in judged} >= {"grad", "param"} and all(r["value"] < TOLERANCE for r in judged)
    for r in v.values():  # RMSprop takes no Tensor lr that requires grad: unsupported, with torch's message
        assert r["status"] == "pass" or (r["status"] == "unsupported" and "Tensor lr" in r["detail"]), r


def test_a_wrong_derivative_fails_where_its_correct_control_passes(tmp_path):
    base = ["suite=adam", "impl=[candidate]", "options={lr: 0.002, weight_decay: 0.1}"]
    assert run(tmp_path / "control", *base, "candidate=tests.candidates.DifferentiableAdam") == 0
    assert all(r["status"] == "pass" for r in verdicts(tmp_path / "control").values())

    assert run(tmp_path / "denominator", *base, "candidate=tests.candidates.DetachedDenominatorAdam") == 1
    v = verdicts(tmp_path / "denominator")
    assert v["grad", 1]["status"] == v["grad", 3]["status"] == v["param", 1]["status"] == "fail"
    assert v["lr", 1]["status"] == "pass"  # the same forward values: only derivatives through the denominator differ

    assert run(tmp_path / "item", *base, "candidate=tests.candidates.ItemLrAdam") == 1
    v = verdicts(tmp_path / "item")
    assert v["lr", 1]["status"] == "fail" and v["lr", 1]["value"] == pytest.approx(1.0)  # a zero derivative
    assert v["grad", 1]["status"] == "pass"


def test_declared_findings_are_recorded_as_xfail(tmp_path):
    assert run(tmp_path / "asgd", "suite=asgd", "impl=[for-loop]") == 0  # F23: ASGD's lr derivative is zero
    deviations = [r for r in rows(tmp_path / "asgd") if r["check"] == "deviation"]
    assert [(r["status"], r["detail"][:3]) for r in deviations] == [("xfail", "F23")]
    assert verdicts(tmp_path / "asgd")["lr", 1]["status"] == "xfail"
    assert run(tmp_path / "rprop", "suite=rprop", "impl=[for-loop]") == 0  # F24: backward through 3 steps raises
    v = verdicts(tmp_path / "rprop")
    assert v["grad", 1]["status"] == "pass" and v["grad", 3]["status"] == "xfail"


def test_refusals_and_optimizers_without_the_flag_are_unsupported(tmp_path):
    assert run(tmp_path / "adam", "suite=adam", "impl=[foreach,fused]") == 3  # all unsupported: nothing verified
    unsupported = {r["impl"]: r["detail"] for r in rows(tmp_path / "adam") if r["status"] == "unsupported"}
    assert "_foreach ops don't support autograd" in unsupported["foreach"]
    assert "`fused` does not support `differentiable`" in unsupported["fused"]
    assert run(tmp_path / "adafactor", "suite=adafactor", "impl=[for-loop]") == 3
    [only] = rows(tmp_path / "adafactor")[:1]
    assert only["status"] == "unsupported" and "takes no differentiable" in only["detail"]


def test_bad_settings_are_a_usage_error(tmp_path, capsys):
    assert run(tmp_path, "suite=sgd", "impl=[for-loop]", "differentiable.steps=[0]") == 2
    assert "differentiable" in capsys.readouterr().err


def _at(f):
    return {t: [f(t)] for t in POINTS}


def test_finite_differences_resolve_a_smooth_step_and_leave_kinks_out():
    rng = np.random.default_rng(0)
    x = np.linspace(0.5, 2.0, 40)
    d = x * rng.standard_normal(x.size)
    zero = [np.zeros_like(x)]
    exact = 0.5 / np.sqrt(x) * d
    [(err, tol, kinks, resolved)] = compare([exact], _at(lambda t: np.sqrt(x + t * d)), zero)
    assert resolved and kinks == 0 and err < 1e-3 * TOLERANCE and tol == pytest.approx(TOLERANCE, rel=1e-3)
    [(err, tol, *_)] = compare([exact * (1 + 10 * TOLERANCE)], _at(lambda t: np.sqrt(x + t * d)), zero)
    assert err > tol  # ten times the tolerance is caught
    # max(x, c) with c inside x +- H|d| for element 7 (and exactly at x for element 9): no derivative there
    c = np.full_like(x, -1.0)
    c[7], c[9] = x[7] + 0.5 * H * abs(d[7]), x[9]
    one_sided = np.where(x > c, d, 0.0)
    [(err, tol, kinks, _)] = compare([one_sided], _at(lambda t: np.maximum(x + t * d, c)), zero)
    assert kinks == 2 and err <= tol and KINK < 1
