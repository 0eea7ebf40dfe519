"""The precision gates: the one-step check, hyperparameter forms and lr schedules (docs/tolerances.md)."""

import json
import sys

import numpy as np
import pytest
import torch

from optbench.cli import main
from optbench.numerics.one_step import ONE_STEP_TOL, PARAM_ROUNDINGS, ulp, update_error
from optbench.suite.schedules import factor, torch_scheduler
from tests.conftest import QUICK_TIMING, run_inline


def run(tmp_path, *args):
    return run_inline([*args, *QUICK_TIMING, f"out_dir={tmp_path}"])


def rows(tmp_path):
    return json.loads((tmp_path / "results.json").read_text())["rows"]


def test_ulp_is_the_dtypes_spacing():
    x = np.array([1.0, 1.5, 3.0, 1e-3, 300.0])
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        x_held = torch.tensor(x, dtype=dtype).double().numpy()
        u = ulp(x_held, dtype)
        assert np.array_equal(torch.tensor(x_held + u, dtype=dtype).double().numpy(), x_held + u)  # the next float
        assert np.array_equal(torch.tensor(x_held + 0.4 * u, dtype=dtype).double().numpy(), x_held)  # nothing between


def test_update_error_ignores_rounding_and_measures_the_update():
    dtype, eps = torch.bfloat16, torch.finfo(torch.bfloat16).eps
    p_old = torch.tensor([1.0, 0.001, -0.5], dtype=dtype).double().numpy()
    ref_new = p_old + np.array([1e-4, 1e-3, -1e-3])
    exact = torch.tensor(ref_new, dtype=dtype).double().numpy()  # a correct step: the reference, rounded
    assert update_error(p_old, exact, ref_new, dtype, eps, 0.0) == 0.0
    # an update 30% too large (38 bfloat16 eps of the update): visible where the update is larger than
    # the parameter's rounding (element 1), not where it is rounded away (element 0)
    wrong = torch.tensor(p_old + 1.3 * (ref_new - p_old), dtype=dtype).double().numpy()
    err = update_error(p_old, wrong, ref_new, dtype, eps, 0.0)
    assert err > ONE_STEP_TOL
    assert err < 0.3 / eps + 1
    assert PARAM_ROUNDINGS >= 1.5  # decay factor, multiply, update: three half-ulp roundings
    assert update_error(p_old, np.full(3, np.nan), ref_new, dtype, eps, 0.0) == float("inf")


@pytest.mark.parametrize("schedule", [{"kind": "step", "step_size": 4, "gamma": 0.5},
                                      {"kind": "warmup_cosine", "warmup": 3, "total": 12}])
def test_documented_schedule_matches_torch_scheduler(schedule):
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    scheduler = torch_scheduler(schedule, opt)
    for epoch in range(15):
        assert opt.param_groups[0]["lr"] == pytest.approx(0.1 * factor(schedule, epoch), rel=1e-15, abs=1e-18)
        opt.step()
        scheduler.step()


def test_one_step_gate_catches_a_bf16_bias_correction_bug_the_trajectory_misses(tmp_path):
    """Off-by-one bias correction at bfloat16 alone: within the free-running tolerance, caught step by step."""
    args = ["suite=adamw", "candidate=optbench.mutants.adamw.BiasCorrectionOffByOneAdamW", "impl=[candidate]",
            "dtype=bfloat16", "checks=[parity]", "steps=10"]
    assert run(tmp_path / "drift", *args, "parity.one_step=false") == 0
    assert run(tmp_path / "both", *args) == 1
    failed = [r for r in rows(tmp_path / "both") if r["status"] == "fail"]
    assert any(r["metric"] == "parity.one_step_max_err_eps" for r in failed)
    assert run(tmp_path / "control", "suite=adamw", "candidate=optbench.mutants.adamw.CorrectAdamW", "impl=[candidate]",
               "dtype=bfloat16", "checks=[parity]", "steps=10") == 0


@pytest.mark.slow  # (slow tier; CI keeps the one-step gate's bf16 mutant and a missed mutant's report)
def test_forms_record_rejections_and_compare_with_the_float_run(tmp_path):
    code = run(tmp_path, "suite=sgd", "impl=[for-loop,foreach]", "dtype=float32", "checks=[forms]", "steps=12")
    out = rows(tmp_path)
    assert code == 0, [r["detail"] for r in out if r["status"] in ("fail", "error")]
    verdict = {(r["impl"], r["hparams"]): r for r in out if r["metric"] == "parity.max_err_eps" and r["fqn"] == ""}
    unsupported = {(r["impl"], r["hparams"]): r for r in out if r["status"] == "unsupported"}
    assert verdict[("for-loop", "tensor_lr")]["status"] == "pass"
    assert verdict[("for-loop", "warmup_cosine_tensor_lr")]["status"] == "pass"
    assert not unsupported  # SGD takes every form on both variants
    twins = {(r["impl"], r["hparams"]) for r in out if r["metric"] == "forms.vs_float_bitwise"}
    assert {("for-loop", "tensor_lr"), ("for-loop", "tensor_weight_decay"), ("for-loop", "step_lr_tensor_lr")} <= twins


def test_forms_torch_rejects_are_unsupported_rows_with_its_message(tmp_path):
    assert run(tmp_path, "suite=adam", "impl=[foreach]", "dtype=float32", "checks=[forms]", "steps=3") == 0
    unsupported = {r["hparams"]: r["detail"] for r in rows(tmp_path) if r["status"] == "unsupported"}
    assert "lr as a Tensor is not supported for capturable=False and foreach=True" in unsupported["tensor_lr"]
    assert {"tensor_lr_1elem", "tensor_betas", "step_lr_tensor_lr", "warmup_cosine_tensor_lr"} <= set(unsupported)
    assert "step_lr" not in unsupported


def test_an_optimizer_that_ignores_its_scheduler_fails_the_schedule_forms(tmp_path):
    code = run(tmp_path, "suite=sgd", "candidate=tests.candidates.CachedLrSGD", "impl=[candidate]", "dtype=float32",
               "checks=[forms]", "steps=12")
    assert code == 1
    failed = {r["hparams"] for r in rows(tmp_path) if r["status"] == "fail"}
    assert {"step_lr", "warmup_cosine"} <= failed and "float" not in failed


@pytest.mark.slow  # (slow tier; CI keeps the one-step gate's bf16 mutant and a missed mutant's report)
def test_mutants_command_reports_per_dtype(tmp_path, capsys):
    code = main(["mutants", "--suite", "sgd", "--dtype", "float16", "--jobs", "1", "--out", str(tmp_path), "steps=10"])
    out = capsys.readouterr().out
    assert code == 0, out
    # caught / mutants, controls passing / controls, read cell by cell from the per-dtype table
    cells = [[c.strip() for c in line.strip().strip("|").split("|")]
             for line in out.splitlines() if line.startswith("|")]
    assert next(c for c in cells if c[0] == "float16")[:5] == ["float16", "6", "6", "1", "1"], out
    assert (tmp_path / "mutants.csv").is_file() and "parity/one-step" in (tmp_path / "mutants.md").read_text()


def test_a_missed_mutant_is_reported_with_its_size_in_the_missed_dtypes_eps():
    import pandas as pd

    from optbench.report.mutants import render

    # per hparam set: (parameter one-step in eps of the update, state one-step, drift); "f32only" runs at float32 only
    table = pd.DataFrame([
        {"mutant": "m.Small", "suite": "adamw", "dtype": "float32", "control": False, "failed": True,
         "detected_by": "parity/trajectory", "sizes": {"a": (512.0, 65536.0, 65536.0), "f32only": (1e9, 1e9, 1e9)}},
        {"mutant": "m.Small", "suite": "adamw", "dtype": "bfloat16", "control": False, "failed": False,
         "detected_by": "", "sizes": {"a": (1.0, 1.0, 2.0)}}])
    text = render(table)
    # 512 units of 2**-16 = 1 bfloat16 eps of the update; 65536 float32 eps = 1 bfloat16 eps of a state or drift
    assert "MISSED (size at float32, in bfloat16 eps: one-step 1 (tol 16), drift 1)" in text, text


@pytest.mark.slow  # (slow tier; CI keeps the one-step gate's bf16 mutant and a missed mutant's report)
def test_mutants_command_mistakes_are_one_line(capsys, tmp_path, monkeypatch):
    assert main(["mutants", "--catalogue", "no.such.package"]) == 2
    assert main(["mutants", "--dtype", "float8"]) == 2
    # a catalogue of one's own whose SPECS entry is not a spec (a set, not a mapping of plain values)
    (tmp_path / "my_catalogue").mkdir()
    (tmp_path / "my_catalogue" / "__init__.py").write_text(
        "MUTANTS = {'m.Bad': 'adamw'}\nSPECS = {'m.Bad': {'dtypes': {'float32'}}}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [*sys.path])  # the catalogue is imported from the working directory
    assert main(["mutants", "--catalogue", "my_catalogue"]) == 2
    sys.modules.pop("my_catalogue", None)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and "SPECS['m.Bad'] is not a candidate spec" in err[2], err


def test_a_tensor_form_far_from_its_float_twin_fails_and_a_copy_is_bit_exact():
    from optbench.cases import Case
    from optbench.checks.forms import against_twin
    from optbench.suite.catalog import suite_by_name

    case = Case(suite_by_name("sgd"), None, "float32", None, label="float")
    twin = [{("w", "param"): np.array([1.0, -2.0]), ("w", "momentum_buffer"): np.array([0.5, 0.25])}] * 3
    same = against_twin(case, [dict(s) for s in twin], twin)
    assert same[0]["status"] == "pass" and same[1]["value"] == 1.0
    eps32 = float(np.finfo(np.float32).eps)
    off = [{**s, ("w", "param"): s[("w", "param")] * (1 + 200 * eps32)} for s in twin]  # 400 eps32 of the max 2.0
    far = against_twin(case, off, twin)
    assert far[0]["status"] == "fail" and far[1]["value"] == 0.0, far[0]["detail"]
    # a declared deviation's keys
    assert against_twin(case, off, twin, declared={("w", "param")})[0]["status"] == "pass"


def test_a_declared_deviation_does_not_hide_a_bug_on_top_of_it(tmp_path):
    """Rprop's F10 (float16 sign underflow) is bounded: a mutant under it fails the bound."""
    code = run(tmp_path, "suite=rprop", "candidate=optbench.mutants.rprop.SwappedEtasRprop", "impl=[candidate]",
               "dtype=float16", "checks=[parity]", "steps=10", "options={}")
    failed = [r for r in rows(tmp_path) if r["status"] == "fail"]
    assert code == 1 and any(r["check"] == "deviation" and "F10" in r["detail"] for r in failed), failed
