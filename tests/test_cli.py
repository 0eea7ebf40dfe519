"""The CLI as a user runs it: configs compose, exit codes, one-line errors, candidates and mutants."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module

from optbench.cli import config_names, main
from optbench.suite import Suite
from tests.mutants import CONTROLS, MUTANTS

REPO = Path(__file__).parents[1]


@pytest.mark.parametrize("name", config_names("suite"))
def test_every_suite_config_composes(name):
    with initialize_config_module(config_module="optbench.suites", version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"suite={name}", "device=cpu"])
    s = Suite.from_config(cfg.suite)
    assert s.name == name and s.hparams and s.dtypes
    assert any(h.groups for h in s.hparams)  # more than one param group somewhere
    assert s.hparam_set(s.roundtrip_hparams)


def test_suites_cover_the_issue():
    assert {"adam", "adamw", "sgd", "adafactor", "sparseadam"} <= set(config_names("suite"))


def run(tmp_path, *args):
    return main(["run", *args, f"out_dir={tmp_path}"])


@pytest.mark.parametrize("args, message", [
    (["run", "suite=adafactr"], "unknown suite 'adafactr': did you mean 'adafactor'?"),
    (["run", "suite=adam", "device=cuda"], "CUDA is not available"),
    (["run", "suite=adam", "dtype=float8"], "unknown dtype 'float8'"),
    (["run", "suite=adam", "impl=[fusd]"], "did you mean 'fused'?"),
    (["run", "suite=adam", "candidate=nope.Missing"], "cannot import candidate module 'nope'"),
    (["run", "suite=adam", "candidate=json.JSONDecoder"], "is not a torch.optim.Optimizer subclass"),
    (["run", "suite=adam", "stepz=3"], "stepz"),
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


@pytest.mark.parametrize("control", sorted(CONTROLS))
def test_correct_candidates_pass(control, tmp_path):
    code = run(tmp_path, f"suite={CONTROLS[control]}", f"candidate=tests.mutants.{control}",
               "dtype=[float64,float32]", "checks=[parity,roundtrip]", "steps=25")
    rows = json.loads((tmp_path / "results.json").read_text())["rows"]
    assert code == 0, [r["detail"] for r in rows if r["status"] in ("fail", "error")]
    assert any(r["impl"].startswith("candidate:") and r["metric"] == "roundtrip.by_name_bitwise" for r in rows)


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_mutants_are_caught_through_candidate(mutant, tmp_path):
    code = run(tmp_path, f"suite={MUTANTS[mutant]}", f"candidate=tests.mutants.{mutant}", "dtype=float64",
               "checks=[parity,roundtrip]", "steps=25")
    assert code == 1
    rows = json.loads((tmp_path / "results.json").read_text())["rows"]
    caught = [r for r in rows if r["impl"].startswith("candidate:") and r["status"] in ("fail", "error")]
    assert caught, f"{mutant} slipped through"
    assert not [r for r in rows if r["impl"] == "for-loop" and r["status"] in ("fail", "error")]


def test_installed_console_script_end_to_end(tmp_path):
    exe = shutil.which("optbench", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    assert exe, "the optbench console script is not installed"
    out = tmp_path / "run"
    proc = subprocess.run(
        [exe, "run", "suite=sgd", "dtype=[float32,bfloat16]", "impl=[for-loop,foreach]", "steps=8",
         "speed.width=32", "speed.vocab=64", "speed.min_run_time=0.01", f"out_dir={out}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = json.loads((out / "results.json").read_text())
    assert record["schema_version"] == 1 and record["machine"]["torch"]
    metrics = {r["metric"] for r in record["rows"]}
    assert {"parity.max_err_eps", "parity.xmax_err_eps_vs_forloop", "roundtrip.by_name_bitwise",
            "roundtrip.positional_misattributed", "time.step_ms", "speed.gb_per_s", "mem.state_bytes"} <= metrics
    assert (out / "results.csv").is_file() and (out / "report.md").is_file() and (out / "step_time.png").is_file()
    assert "verdict: PASS" in proc.stdout
    rerendered = subprocess.run([exe, "report", str(out), "--out", str(tmp_path / "again")], capture_output=True, text=True)
    assert rerendered.returncode == 0 and (tmp_path / "again" / "report.md").is_file()
    listing = subprocess.run([exe, "list"], capture_output=True, text=True)
    assert listing.returncode == 0 and "adafactor" in listing.stdout and "fused" in listing.stdout


def test_cfg_job_prints_config_without_running(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "suite=adam", "--cfg", "job"]) == 0
    assert "optimizer: Adam" in capsys.readouterr().out
    assert not any(tmp_path.iterdir())


@pytest.mark.cuda
def test_cuda_suite_runs(tmp_path):
    assert run(tmp_path, "suite=adamw", "device=cuda", "dtype=float32", "checks=[parity,roundtrip]", "steps=10") == 0
