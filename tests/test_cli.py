"""The CLI as a user runs it: exit codes, one-line errors, candidates, mutants, options, own suites."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from optbench.cli import main
from optbench.engine.mutants import detecting, spec_file, trial_checks
from optbench.mutants import CAUGHT_BY, CONTROLS, EXISTS_AT, MUTANTS, SHOWS_BY, SPECS, STEPS
from optbench.suite.catalog import optimizer_suite_names
from tests.conftest import QUICK_TIMING, run_inline, users_environment

REPO = Path(__file__).parents[1]


def run(tmp_path, *args):
    """A run of ``args`` through ``optbench.run`` (``run_inline``): the exit code ``optbench run`` gives."""
    return run_inline([*args, *QUICK_TIMING, f"out_dir={tmp_path}"])


def candidate(tmp_path, name: str) -> str:
    """``candidate=`` for the catalogue's ``name``: its class, or a spec file naming it where it has a spec."""
    if name not in SPECS:
        return f"candidate=optbench.mutants.{name}"
    folder = tmp_path.with_name(tmp_path.name + "-spec")  # beside the run's out_dir, which must be empty
    folder.mkdir()
    return f"candidate={spec_file(folder, f'optbench.mutants.{name}', SPECS[name])}"


def rows(tmp_path):
    return json.loads((tmp_path / "results.json").read_text())["rows"]


def failing(tmp_path):
    return [(r["impl"], r["hparams"], r["dtype"], r["detail"]) for r in rows(tmp_path)
            if r["status"] in ("fail", "error")]


@pytest.mark.parametrize("args, message", [
    (["run", "suite=adafactr"], "unknown suite 'adafactr': did you mean 'adafactor'?"),
    (["run", "suite=sophia"], " (a suite of your own: --config-dir DIR with DIR/suite/<name>.yaml; "
                                 "docs/candidates.md)"),
    (["run", "suite=adam", "device=cuda"], "CUDA is not available"),
    (["run", "suite=adam", "dtype=float8"], "unknown dtype 'float8'"),
    (["run", "suite=adam", "impl=[fusd]"], "did you mean 'fused'?"),
    (["run", "suite=adam", "candidate=nope.Missing"], "cannot import candidate module 'nope'"),
    (["run", "suite=adam", "candidate=torch.optim.Adam", "candidate_kwargs={foo: 1}"],
     "candidate_kwargs: Adam takes no foo"),
    (["run", "suite=adam", "candidate=json.JSONDecoder"], "is not a torch.optim.Optimizer subclass"),
    (["run", "suite=adam", "stepz=3"], "stepz"),
    (["run", "suite=adam", "steps=abc"], "steps=abc: need a whole number"),
    (["run", "suite=adam", "steps=0"], "steps=0: need at least 1"),
    (["run", "suite=adam", "speed.params=abc"], "speed.params=abc: need a number"),
    (["run", "suite=adam", "speed.edge_cases=[noncontig]"], "did you mean 'noncontiguous'?"),
    (["run", "suite=adam", "speed.dtypes=[flaot32]"], "unknown speed.dtypes entry 'flaot32': did you mean 'float32'?"),
    (["run", "suite=adam", "memory.dtypes=bf16"], "unknown memory.dtypes entry 'bf16': did you mean 'bfloat16'?"),
    (["run", "suite=adam", "compile_hparams=nonee"], "unknown compile_hparams entry 'nonee': did you mean 'none'?"),
    (["run", "suite=adam", "speed.edge_dtypes=bfloat"], "unknown speed.edge_dtypes entry 'bfloat'"),
    (["run", "suite=adam", "scaling.tensor_counts=[0]"], "scaling.tensor_counts entry 0: need a whole number"),
    (["run", "suite=adam", "scaling.memory_fraction=2"], "scaling.memory_fraction=2: need a number in [1e-06, 1]"),
    (["run", "suite=adam", "checks=[parity,speling]"], "unknown check(s) speling"),
    (["run", "suite=adam", "options={lr: 0.1, amsgrd: true}"], "Adam takes no amsgrd"),
    (["run", "suite=adam", "hparams=[defualt]"], "suite 'adam' has no hparam set 'defualt': did you mean 'default'?"),
    (["run", "suite=adam", "hparams=first", "options={lr: 0.1}"], "hparams= and options= both choose"),
    (["run", "suite=smoke", "hparams=[defualt]"], "no suite of this run has an hparam set 'defualt'"),
    (["run", "suite=adam", "options=3"], "options= must be a mapping"),
    (["run", "suite=adam", "report.plots=maybe"], "report.plots=maybe: need true or false"),
    (["run", "suite=all", "candidate=torch.optim.Adam"], "need a single-optimizer suite"),
    (["run", "--config-dir", "/nonexistent", "suite=lion"], "no such directory"),
    (["frobnicate"], "unknown command 'frobnicate'"),
    (["report", "/nonexistent/results.json"], "no results file"),
])
def test_user_mistakes_are_one_line_exit_2(args, message, capsys, monkeypatch, tmp_path):
    if "CUDA" in message:
        pytest.importorskip("torch").cuda.is_available() and pytest.skip("CUDA present")
    monkeypatch.chdir(tmp_path)
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert not any(tmp_path.iterdir())  # nothing written into the current directory


def controls_per_commit(controls) -> list:
    """Each control a parameter; in CI those of the suites with no optimizer of their own (the control is the one
    correct implementation their reference meets there) and adam's (the same path for the others), the rest with
    ``-m slow``: their suite's own optimizer meets the reference at every hparam set in tests/test_parity.py (the
    8-bit ones, judged through a spec, pass in CI in tests/test_quantized_pipeline.py)."""
    torch_backed = set(optimizer_suite_names())
    return [name if name not in SPECS and (controls[name] not in torch_backed or controls[name] == "adam")
            else pytest.param(name, marks=pytest.mark.slow) for name in sorted(controls)]


@pytest.mark.parametrize("hparams, dtypes", [("default", "float64"),
                                             pytest.param("all", "[float64,float32]", marks=pytest.mark.slow)])
@pytest.mark.parametrize("control", controls_per_commit(CONTROLS))
def test_correct_candidates_pass(control, hparams, dtypes, tmp_path):
    """Every correct reimplementation passes its suite, on the first and the round-trip hparam sets at float64, where
    the reference and a correct step agree to a few eps (every set at float64 and float32 with ``-m slow``); in CI
    the controls of ``controls_per_commit``."""
    checks = ",".join(("parity", *trial_checks(SPECS.get(control))))
    declared = (SPECS.get(control) or {}).get("dtypes")  # a spec's dtypes (the 8-bit ones: float32 only)
    code = run(tmp_path, f"suite={CONTROLS[control]}", candidate(tmp_path, control), "impl=[candidate]",
               f"dtype=[{','.join(declared)}]" if declared else f"dtype={dtypes}", f"checks=[{checks}]", "steps=8",
               f"hparams={hparams}")
    assert code == 0, failing(tmp_path)
    verdicts = [r for r in rows(tmp_path) if r["metric"] == "parity.max_err_eps" and r["fqn"] == ""]
    assert verdicts and all(r["impl"].startswith("candidate:") for r in verdicts)




def per_commit(mutants) -> list:
    """Each mutant a parameter; in CI the first of each suite and every one caught by another check than parity,
    the rest with ``-m slow`` (each takes the path its suite's first takes, on another bug; those judged through a
    spec, the 8-bit ones, are run in CI by tests/test_quantized_pipeline.py)."""
    first = {}
    for name in sorted(set(mutants) - set(SPECS)):
        first.setdefault(mutants[name], name)
    return [name if name not in SPECS and (name in first.values() or name in CAUGHT_BY)
            else pytest.param(name, marks=pytest.mark.slow) for name in sorted(mutants)]


@pytest.mark.parametrize("mutant", per_commit(MUTANTS))
def test_mutants_are_caught_through_candidate(mutant, tmp_path):
    """Every deliberately wrong optimizer fails its suite at float32 (or the one dtype its bug exists at) and
    exits 1, caught by the one check that must catch it (parity unless the catalogue says otherwise), run alone and
    stopped at its first failing case (max_failures=1), over as many steps as its bug needs to show (SHOWS_BY); in CI
    one per suite and those another check catches, every one with ``-m slow``. (Detection at every dtype, bfloat16
    and float16 included, is ``optbench mutants``.)"""
    suite, check = MUTANTS[mutant], CAUGHT_BY.get(mutant, "parity")
    dtype = "float32" if "float32" in EXISTS_AT.get(mutant, ("float32",)) else EXISTS_AT[mutant][0]
    code = run(tmp_path, f"suite={suite}", candidate(tmp_path, mutant), "impl=[candidate]",
               f"dtype={dtype}", f"checks=[{check}]", f"steps={SHOWS_BY.get(mutant, STEPS.get(suite, 8))}",
               "max_failures=1")
    assert code == 1, f"{mutant} slipped through"
    caught = detecting(rows(tmp_path))
    assert any(c == check or c.startswith(check + "/") for c in caught), f"{mutant}: caught by {caught}, not {check}"


def test_at_least_two_mutants_per_optimizer():
    per_suite = {}
    for suite in MUTANTS.values():
        per_suite[suite] = per_suite.get(suite, 0) + 1
    from optbench.suite.catalog import candidate_suite_names, optimizer_suite_names

    suites = optimizer_suite_names() + candidate_suite_names()  # the algorithms torch lacks too (lion, adan, ...)
    assert {s: per_suite.get(s, 0) for s in suites if per_suite.get(s, 0) < 2} == {}


def test_candidate_that_cannot_be_built_is_an_error_exit_1(tmp_path):
    code = run(tmp_path, "suite=sgd", "candidate=tests.candidates.BrokenConstructorSGD", "impl=[candidate]",
               "dtype=float32", "checks=[parity]", "steps=3")
    assert code == 1
    errors = [r for r in rows(tmp_path) if r["status"] == "error"]
    assert errors and any("refuses to be built" in r["detail"] for r in errors)
    assert not any(r["status"] == "skip" and r["impl"].startswith("candidate:") for r in rows(tmp_path))


def test_candidate_that_raises_in_step_is_an_error_exit_1(tmp_path):
    code = run(tmp_path, "suite=sgd", "candidate=tests.candidates.BrokenStepSGD", "impl=[candidate]",
               "dtype=float32", "checks=[parity]", "steps=3")
    assert code == 1 and any("step exploded" in r["detail"] for r in rows(tmp_path) if r["status"] == "error")


def test_candidate_without_an_option_gets_those_sets_unsupported_and_the_rest_checked(tmp_path):
    code = run(tmp_path, "suite=sgd", "candidate=tests.candidates.NoMaximizeSGD", "impl=[candidate]",
               "dtype=float64", "checks=[parity]", "steps=5")
    assert code == 0, failing(tmp_path)
    by_set = {r["hparams"]: r["status"] for r in rows(tmp_path) if r["check"] == "parity" and r["fqn"] == ""
              and r["metric"] in ("parity.max_err_eps", "case.unsupported")}
    assert by_set["maximize_weight_decay"] == "unsupported" and by_set["default"] == "pass"
    detail = next(r["detail"] for r in rows(tmp_path) if r["status"] == "unsupported")
    assert "unsupported by candidate" in detail and "maximize" in detail


def test_candidate_rejecting_an_option_in_its_own_words_gets_that_set_unsupported_with_its_message(tmp_path):
    code = run(tmp_path, "suite=sgd", "candidate=tests.candidates.RejectsNesterovSGD", "impl=[candidate]",
               "dtype=float64", "checks=[parity]", "steps=3")
    assert code == 0, failing(tmp_path)
    unsupported = {r["hparams"]: r["detail"] for r in rows(tmp_path) if r["status"] == "unsupported"}
    assert set(unsupported) == {"nesterov"}, unsupported
    assert unsupported["nesterov"].startswith("unsupported by candidate: it rejects momentum, nesterov, weight_decay "
                                              "at construction: NotImplementedError: nesterov momentum is not "
                                              "implemented in this SGD")
    assert not any(r["status"] in ("error", "fail") for r in rows(tmp_path))


def test_candidate_taking_no_hparam_set_at_all_is_never_a_pass(tmp_path):
    code = run(tmp_path, "suite=sgd", "candidate=tests.candidates.NoMaximizeSGD", "impl=[candidate]",
               "options={maximize: true}", "dtype=float64", "checks=[parity]", "steps=3")
    assert code == 1
    assert any("was not checked by any hparam set" in r["detail"] for r in rows(tmp_path) if r["status"] == "error")


def test_candidate_kwargs_reach_the_constructor(tmp_path):
    code = run(tmp_path, "suite=sgd", "candidate=tests.candidates.NeedsScaleSGD", "candidate_kwargs={scale: 1.0}",
               "impl=[candidate]", "dtype=float64", "checks=[parity]", "steps=3")
    assert code == 0, failing(tmp_path)


def test_options_run_exactly_one_adhoc_hparam_set(tmp_path):
    code = run(tmp_path, "suite=adam", "options={lr: 0.05, amsgrad: true}", "impl=[for-loop]", "dtype=float64",
               "checks=[parity,roundtrip]", "steps=5")
    assert code == 0, failing(tmp_path)
    assert {r["hparams"] for r in rows(tmp_path) if r["check"] in ("parity", "roundtrip")} == {"options"}
    states = {r["tensor"] for r in rows(tmp_path) if r["metric"] == "parity.max_err_eps" and r["fqn"]}
    assert "max_exp_avg_sq" in states  # amsgrad really ran


def test_bring_your_own_optimizer_and_reference(tmp_path, monkeypatch):
    """A third-party optimizer with its suite in its own config dir and its reference in its own package."""
    monkeypatch.chdir(REPO)
    conf = str(REPO / "tests" / "byo" / "conf")
    code = main(["run", "--config-dir", conf, "suite=lion", "candidate=tests.byo.lion.Lion", "steps=10",
                 "checks=[parity,roundtrip,errors]", f"out_dir={tmp_path}"])
    assert code == 0, failing(tmp_path)
    wrong = tmp_path / "wrong"
    code = main(["run", "--config-dir", conf, "suite=lion", "candidate=tests.byo.lion.LionWithoutDecoupledDecay",
                 "dtype=float64", "steps=10", "checks=[parity]", f"out_dir={wrong}"])
    assert code == 1


def test_declared_upstream_deviation_is_xfail_not_failure(tmp_path):
    """Fused SGD at bfloat16 (PyTorch #191763) is recorded as xfail: the run passes and says so."""
    code = run(tmp_path, "suite=sgd", "impl=[for-loop,fused]", "dtype=bfloat16", "checks=[parity,cross]", "steps=5")
    assert code == 0, failing(tmp_path)
    xfails = [r for r in rows(tmp_path) if r["status"] == "xfail"]
    assert xfails and all(r["impl"] == "fused" for r in xfails) and "F01" in xfails[0]["detail"]


def test_installed_console_script_end_to_end(tmp_path):
    exe = shutil.which("optbench", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    assert exe, "the optbench console script is not installed"
    out = tmp_path / "run"
    proc = subprocess.run(
        [exe, "run", "suite=sgd", "dtype=float32", "impl=[for-loop,foreach]", "steps=8", "options={momentum: 0.9}",
         "speed.params=1e5", "speed.min_run_time=0.01", "speed.min_rounds=3", "speed.edge_cases=[]", f"out_dir={out}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
        env=users_environment(OPTBENCH_HISTORY_DIR=""),  # as a user runs it: with plots and workers
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = json.loads((out / "results.json").read_text())
    assert record["schema_version"] == 5 and record["machine"]["torch"] and record["digest"].startswith("sha256:")
    assert {"gate", "finding"} <= set(record["rows"][0])
    metrics = {r["metric"] for r in record["rows"]}
    assert {"parity.max_err_eps", "parity.xmax_err_eps_vs_forloop", "roundtrip.reversed", "errors.rejected",
            "roundtrip.positional.same_shapes_reordered", "time.step_ms", "speed.gb_per_s",
            "mem.state_bytes"} <= metrics
    for name in ("results.csv", "report.md", "step_time.png", "parity_matrix.png"):
        assert (out / name).is_file(), name
    assert not (out / "results.partial.jsonl").exists()
    assert "verdict: PASS" in proc.stdout
    assert "; in this process" not in proc.stdout.splitlines()[0]  # in workers, as a user's run is
    rerendered = subprocess.run([exe, "report", str(out), "--out", str(tmp_path / "again")],
                                capture_output=True, text=True)
    assert rerendered.returncode == 0 and (tmp_path / "again" / "report.md").is_file()


def test_list_names_the_suites_and_the_variants(capsys):
    """``optbench list`` (a new interpreter's listing, plugins and all: tests/test_plugins.py)."""
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "lbfgs" in out and "fused" in out and "adafactor" in out


def test_cfg_job_prints_config_without_running(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "suite=adam", "--cfg", "job"]) == 0
    assert "optimizer: Adam" in capsys.readouterr().out
    assert not any(tmp_path.iterdir())


@pytest.mark.cuda
def test_cuda_suite_runs(tmp_path):
    assert run(tmp_path, "suite=adamw", "device=cuda", "dtype=float32", "checks=[parity,roundtrip]", "steps=10") == 0


def test_hparams_runs_only_the_named_sets(tmp_path):
    assert run(tmp_path, "suite=sgd", "hparams=[lr,weight_decay]", "impl=[for-loop]", "dtype=float32",
               "checks=[parity]", "steps=2") == 0
    verdicts = {r["hparams"] for r in rows(tmp_path) if r["metric"] == "parity.max_err_eps" and r["fqn"] == ""}
    assert verdicts == {"lr", "weight_decay"}


def test_the_check_before_the_run_leaves_no_folder_behind(tmp_path, monkeypatch):
    """``optbench run`` checks out_dir is writable before Hydra composes the run again; the default out_dir names
    the time, so the run may write a second later into another folder: the check's own folder must not stay behind
    (an empty one beside every such run). Here the run itself does nothing."""
    import optbench.cli.run as run_command

    monkeypatch.setattr(run_command, "run_app", lambda: None)
    out = tmp_path / "reports" / "new"
    assert main(["run", "suite=sgd", "impl=[for-loop]", "dtype=float32", "checks=[parity]", f"out_dir={out}"]) == 0
    assert not out.exists() and (tmp_path / "reports").is_dir()
    out.mkdir()  # a folder that was there stays
    assert main(["run", "suite=sgd", "impl=[for-loop]", "dtype=float32", "checks=[parity]", f"out_dir={out}"]) == 0
    assert out.is_dir()
