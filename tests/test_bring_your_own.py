"""A third-party author's first run, from their own working directory: a plain reference module (no package), a
suite file declaring the algorithm's traffic for the roofline, and two classes of one name swept side by side."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests import warm_command
from tests.conftest import QUICK_TIMING, run_inline

REPO = Path(__file__).parents[1]
SUITE = textwrap.dedent('''
    name: mylion
    optimizer: null
    reference: lion_ref
    dtypes: [float64, float32]
    roofline: {streams: 5}
    hparams:
      - {name: default, options: {}}
      - {name: weight_decay, options: {lr: 3.0e-4, weight_decay: 0.1}}
''')


def project(tmp_path: Path) -> Path:
    """The author's folder: lion_ref.py (a plain module), my_lion.Lion, their_lion.Lion (named Lion too, and wrong:
    weight decay added to the gradient) and the suite: copies of tests/byo, so nothing is imported from the repo."""
    byo = REPO / "tests" / "byo"
    (tmp_path / "lion_ref.py").write_text((byo / "lion_reference.py").read_text())
    (tmp_path / "my_lion.py").write_text((byo / "lion.py").read_text())
    (tmp_path / "their_lion.py").write_text((byo / "lion.py").read_text() + "\n\nLion = LionWithoutDecoupledDecay\n")
    (tmp_path / "conf" / "suite").mkdir(parents=True)
    (tmp_path / "conf" / "suite" / "mylion.yaml").write_text(SUITE)
    return tmp_path


def optbench(cwd: Path, *args) -> subprocess.CompletedProcess:
    return warm_command.run("run", "--config-dir", "conf", "suite=mylion", "history_dir=null", *args, cwd=cwd)


@pytest.mark.slow  # (slow tier; CI keeps a user's suite file and test_cli's own optimizer and reference)
def test_a_plain_reference_module_and_a_declared_roofline_from_the_working_directory(tmp_path):
    cwd = project(tmp_path)
    done = optbench(cwd, "candidate=my_lion.Lion", "checks=[parity,speed]", "steps=5", "speed.params=1e5",
                    "speed.min_run_time=0.01", "speed.min_rounds=3", "speed.edge_cases=[]", "speed.dtypes=all",
                    "out_dir=out")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads((cwd / "out" / "results.json").read_text())["rows"]
    assert {r["impl"] for r in rows} == {"candidate:my_lion.Lion"}
    per_param = {r["dtype"]: r["value"] for r in rows if r["metric"] == "roofline.bytes_per_param"}
    assert per_param == {"float32": 20.0, "float64": 40.0}  # 5 passes: p r/w, g r, exp_avg r/w
    assert all(r["value"] > 0 for r in rows if r["metric"] == "roofline.pct")
    bad = (cwd / "conf" / "suite" / "mylion.yaml")
    bad.write_text(SUITE.replace("streams: 5", "streams: two"))
    done = optbench(cwd, "candidate=my_lion.Lion", "out_dir=out2")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "roofline" in done.stderr
    bad.write_text(SUITE.replace("reference: lion_ref", "reference: lion_reff"))  # a typo: one line, no error rows
    done = optbench(cwd, "candidate=my_lion.Lion", "out_dir=out3")
    assert done.returncode == 2 and done.stderr.strip() == (
        "optbench: error: suite 'mylion': reference 'lion_reff' cannot be loaded: No module named 'lion_reff' (a "
        "built-in name from 'optbench list', or a module importable from the working directory)")


@pytest.mark.slow  # (a sweep's jobs merged in CI: tests/test_sweep.py; a candidate labelled module.Class: every run)
def test_two_classes_of_one_name_are_told_apart_in_a_sweep(tmp_path):
    cwd = project(tmp_path)
    done = warm_command.run("run", "-m", "--config-dir", "conf", "suite=mylion",
                            "candidate=my_lion.Lion,their_lion.Lion", "checks=[parity]", "steps=3", "dtype=float64",
                            "history_dir=null", "hydra.sweep.dir=sweep", cwd=cwd)
    assert done.returncode == 1, done.stdout + done.stderr  # their_lion decays through the gradient
    rows = json.loads((cwd / "sweep" / "results.json").read_text())["rows"]
    verdicts = {r["impl"]: r["status"] for r in rows if r["metric"] == "parity.max_err_eps" and not r["fqn"]
                and r["hparams"] == "weight_decay"}
    assert verdicts == {"candidate:my_lion.Lion": "pass", "candidate:their_lion.Lion": "fail"}
    assert "candidate:their_lion.Lion" in (cwd / "sweep" / "report.md").read_text()


@pytest.mark.slow  # (slow tier; CI keeps a user's suite file and test_cli's own optimizer and reference)
def test_a_clone_of_optbench_in_the_working_directory_does_not_shadow_it_in_the_workers(tmp_path):
    """An author who cloned optbench into their folder: a worker started with ``python -m`` took that folder for
    (part of) the optbench package, its reference/ before the installed one's."""
    script = Path(sys.executable).parent / "optbench"
    if not script.exists():
        pytest.skip("no optbench console script beside this Python")
    cwd = project(tmp_path)
    (cwd / "optbench" / "reference").mkdir(parents=True)
    (cwd / "optbench" / "reference" / "__init__.py").write_text("raise ImportError('the clone, not optbench')\n")
    done = subprocess.run([str(script), "run", "--config-dir", "conf", "suite=mylion", "candidate=my_lion.Lion",
                           "checks=[parity]", "dtype=float64", "steps=2", "jobs=1", "history_dir=null", "out_dir=out"],
                          cwd=cwd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_users_suite_file_replaces_the_built_in_of_its_name(tmp_path):
    """``--config-dir DIR suite=sgd`` with DIR/suite/sgd.yaml runs the user's file, not the built-in one (Hydra finds
    the built-in first): here it names Adam's reference for SGD, so parity must fail, and results.json records the
    reference the run really used. The docs' example records the user's reference too."""
    from optbench.cli import main

    root = Path(__file__).resolve().parents[1]
    (tmp_path / "conf" / "suite").mkdir(parents=True)
    text = (root / "suites" / "suite" / "sgd.yaml").read_text().replace("\nreference: sgd\n", "\nreference: adam\n")
    (tmp_path / "conf" / "suite" / "sgd.yaml").write_text(text)
    run = ["run", "--config-dir", str(tmp_path / "conf"), "suite=sgd", "checks=[parity]", "impl=[for-loop]",
           "dtype=float32", "hparams=first", "jobs=0", f"out_dir={tmp_path / 'sgd'}"]
    assert main(run) == 1
    assert json.loads((tmp_path / "sgd" / "results.json").read_text())["config"]["suite"]["reference"] == "adam"
    run = ["run", "--config-dir", str(root / "tests" / "byo" / "conf"), "suite=lion", "candidate=tests.byo.lion.Lion",
           "checks=[parity]", "dtype=float32", "hparams=first", "jobs=0", f"out_dir={tmp_path / 'lion'}"]
    assert main(run) == 0
    recorded = json.loads((tmp_path / "lion" / "results.json").read_text())["config"]["suite"]["reference"]
    assert recorded == "tests.byo.lion_reference"


@pytest.mark.slow  # (slow tier; CI keeps a user's suite file and test_cli's own optimizer and reference)
def test_the_nearest_torch_baseline_is_timed_only_where_the_candidate_is(tmp_path):
    """A candidate-only suite times its candidate beside torch's nearest optimizer (Lion: AdamW); where the candidate
    spec's dtypes leave a dtype out, the baseline is not timed alone there (it was, and raised KeyError)."""
    spec = tmp_path / "lion32.yaml"
    spec.write_text("class: tests.byo.lion.Lion\ndtypes: [float32]\n")
    out = tmp_path / "run"
    assert run_inline(["suite=lion", f"candidate={spec}", "checks=[speed]", "dtype=[float32,float64]", "jobs=0",
                       "history_dir=null", *QUICK_TIMING, "speed.edge_cases=[]", f"out_dir={out}"]) == 0
    rows = json.loads((out / "results.json").read_text())["rows"]
    timed = {(r["impl"], r["dtype"]) for r in rows if r["check"] == "speed" and r["metric"] == "time.step_ms"}
    assert timed == {("candidate:tests.byo.lion.Lion", "float32"), ("torch.optim.AdamW", "float32")}, timed
