"""Sweeps (optbench run -m): jobs merged into one results.json and report.md, exit code the worst job's."""

import importlib.util
import json
import logging
import time
from pathlib import Path

import pytest

from optbench.cli import main
from optbench.engine import runner, sweep
from optbench.journal import JOURNAL, Journal
from optbench.results import Results, row

REPO = Path(__file__).parents[1]
TINY = ["checks=[parity]", "steps=3", "history_dir=null"]
MUTANT = "optbench.mutants.sgd.DecayIgnoredUnderMaximizeSGD"  # ignores weight decay under maximize


@pytest.fixture(autouse=True)
def root_logger_restored():
    """Hydra's launchers leave a handler on the root logger, bound to this test's captured stdout: the tests
    that follow in this process must not log into it."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def merged(sweep_dir: Path) -> dict:
    return json.loads((sweep_dir / "results.json").read_text())


def jobs_of(record: dict) -> dict[str, set]:
    """dtype -> the statuses of the parity verdict rows from that dtype's job."""
    out = {}
    for r in record["rows"]:
        if r["metric"] == "parity.max_err_eps" and r["fqn"] == "":
            out.setdefault(r["dtype"], set()).add(r["status"])
    return out


@pytest.mark.slow  # (the worst-exit sweep below merges, reports and records its jobs too, in CI)
@pytest.mark.skipif(importlib.util.find_spec("hydra_plugins.hydra_joblib_launcher") is None,
                    reason="hydra-joblib-launcher is not installed (pip install 'optbench[sweep]')")
def test_joblib_sweep_merges_both_jobs_exit_0(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "sweep"
    code = main(["run", "-m", "suite=sgd", "dtype=float32,float64", "impl=[for-loop]", "options={lr: 0.01}", *TINY,
                 "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", f"hydra.sweep.dir={out}"])
    assert code == 0, capsys.readouterr()
    record = merged(out)
    assert record["schema_version"] >= 3 and record["machine"]["torch"]
    assert jobs_of(record) == {"float32": {"pass"}, "float64": {"pass"}}
    jobs = record["sweep"]["jobs"]
    assert [(j["num"], j["status"], j["exit_code"]) for j in jobs] == [(0, "completed", 0), (1, "completed", 0)]
    assert (record["sweep"]["launcher"].endswith("JoblibLauncher")
            and all(j["config"]["suite"]["name"] == "sgd" for j in jobs))
    assert "## Sweep jobs" in (out / "report.md").read_text() and (out / "results.csv").is_file()
    assert "verdict: PASS" in capsys.readouterr().out


@pytest.mark.slow  # (the submitit_local sweep below takes the same merge, journal and worst-exit path, in CI)
@pytest.mark.skipif(importlib.util.find_spec("hydra_plugins.hydra_joblib_launcher") is None,
                    reason="hydra-joblib-launcher is not installed (pip install 'optbench[sweep]')")
def test_joblib_sweep_exit_code_is_the_worst_jobs(tmp_path, monkeypatch):
    """Jobs run in worker processes: the exit code comes from the merged results, not from this process; the merge
    records each job (its number, status, exit code, config) and the launcher, in results.json, results.csv and the
    report's sweep section."""
    monkeypatch.chdir(REPO)  # the candidates are imported from the current directory
    out = tmp_path / "sweep"
    code = main(["run", "-m", "suite=sgd", f"candidate=optbench.mutants.sgd.CorrectSGD,{MUTANT}", "impl=[candidate]",
                 "dtype=float32", "options={weight_decay: 0.1, maximize: true}", *TINY, "hydra/launcher=joblib",
                 "hydra.launcher.n_jobs=2", f"hydra.sweep.dir={out}"])
    assert code == 1
    record = merged(out)
    assert record["schema_version"] >= 3 and record["machine"]["torch"]
    jobs = record["sweep"]["jobs"]
    assert [(j["num"], j["status"], j["exit_code"]) for j in jobs] == [(0, "completed", 0), (1, "completed", 1)]
    assert (record["sweep"]["launcher"].endswith("JoblibLauncher")
            and all(j["config"]["suite"]["name"] == "sgd" for j in jobs))
    assert "## Sweep jobs" in (out / "report.md").read_text() and (out / "results.csv").is_file()
    verdicts = {r["impl"]: r["status"] for r in record["rows"]
                if r["metric"] == "parity.max_err_eps" and r["fqn"] == ""}
    assert verdicts == {"candidate:optbench.mutants.sgd.CorrectSGD": "pass", f"candidate:{MUTANT}": "fail"}


@pytest.mark.slow  # (slow tier; CI keeps a sweep's worst exit and its merge)
def test_a_job_that_crashes_loses_nothing_of_the_others(tmp_path, monkeypatch, capsys):
    """The basic launcher (jobs in turn, in this process) merges too, also when Hydra stops at a job that raised."""
    original = runner.SuiteRun.run

    def crash_at_float64(self):
        if self.planner.cfg.dtype == "float64":
            raise RuntimeError("boom")
        return original(self)

    monkeypatch.setattr(runner.SuiteRun, "run", crash_at_float64)
    out = tmp_path / "sweep"
    code = main(["run", "-m", "suite=sgd", "dtype=float32,float64", "impl=[for-loop]", "options={lr: 0.01}", *TINY,
                 f"hydra.sweep.dir={out}"])
    assert code == 1
    record = merged(out)
    assert jobs_of(record) == {"float32": {"pass"}}
    errors = [r for r in record["rows"] if r["status"] == "error"]
    assert len(errors) == 1 and errors[0]["check"] == "sweep" and errors[0]["suite"] == "sgd"
    assert (errors[0]["detail"].startswith("job 1 (suite=sgd dtype=float64")
            and "raised RuntimeError: boom" in errors[0]["detail"])
    assert [j["status"] for j in record["sweep"]["jobs"]] == ["completed", "failed"]
    assert record["sweep"]["launcher"].endswith("BasicLauncher")
    assert (out / "0-sgd-cpu" / "results.json").is_file() and (out / "1-sgd-cpu" / "job.json").is_file()
    assert "verdict: FAIL: job 1 exit 1" in capsys.readouterr().out


def test_a_job_that_stops_on_a_usage_error_makes_the_sweep_exit_2(tmp_path, capsys):
    out = tmp_path / "sweep"
    code = main(["run", "-m", "suite=adam,sgd", "options={amsgrad: true}", "dtype=float32", "impl=[for-loop]", *TINY,
                 f"hydra.sweep.dir={out}"])
    assert code == 2 and "SGD takes no amsgrad" in capsys.readouterr().err
    record = merged(out)
    assert jobs_of(record) == {"float32": {"pass"}}  # the adam job's
    assert [r["detail"].split(": ", 1)[1] for r in record["rows"] if r["status"] == "error"] == [
        "stopped on a usage error; its message is in the job's output"]


def test_merge_keeps_a_killed_jobs_journal_and_names_a_job_that_never_started(tmp_path):
    labels = {"suite": "sgd", "optimizer": "SGD", "impl": "for-loop", "dtype": "float32", "hparams": "default",
              "device": "cpu"}
    started = time.time() - 10
    done, killed = tmp_path / "0-sgd-cpu", tmp_path / "1-sgd-cpu"
    Results(done, {"machine": {"torch": "x"}, "suites": ["sgd"]},
            [row(labels, check="parity", metric="parity.max_err_eps", value=1.0, status="pass")]).finish()
    killed.mkdir()  # killed after one case: its journal, no results.json
    journal = Journal(killed / JOURNAL, {"meta": {"machine": {"torch": "x"}}, "plan": [{"check": "parity"}] * 2})
    journal.case(0, [row(labels | {"dtype": "float64"}, check="parity", metric="parity.max_err_eps", value=1.0,
                         status="pass")])
    for folder, num, status in ((done, 0, "completed"), (killed, 1, "started")):
        (folder / "job.json").write_text(json.dumps({"num": num, "overrides": [f"job={num}"], "status": status,
                                                     "exit_code": 0, "started_s": started}))
    result = sweep.merge(tmp_path, expected=[["job=0"], ["job=1"], ["job=2"]])
    # the killed job did not finish its plan: INCOMPLETE (4), worse than the missing job's 1
    assert result.exit_code == 4 and [j.status for j in result.jobs] == ["completed", "started", "missing"]
    rows = merged(tmp_path)["rows"]
    assert [(r["dtype"], r["status"]) for r in rows if r["check"] == "parity"] == [("float32", "pass"),
                                                                                 ("float64", "pass")]
    details = [r["detail"] for r in rows if r["check"] == "sweep"]
    assert details == ["job 1 (job=1): stopped without finishing (killed?); the 1 rows it wrote are kept",
                       "job 2 (job=2): never started (no job folder)"]
    assert "## Sweep jobs" in result.report.read_text()
    assert main(["merge", str(tmp_path)]) == 4  # again from the folder (no multirun.yaml: the jobs found)
    assert [r["detail"] for r in merged(tmp_path)["rows"] if r["check"] == "sweep"] == details[:1]


@pytest.mark.parametrize("args, message", [
    (["suite=sgd", "stepz=1,2"], "Could not override 'stepz'"),
    (["suite=sgd", "steps=1,2", "out_dir=x"], "a sweep writes its jobs and the merged results under hydra.sweep.dir"),
    (["suite=sgd,adamm"], "unknown suite 'adamm'"),
    (["+matrix=glob(nope*)"], "+matrix=glob(nope*): no matrix config matches"),
    (["+nogroup=glob(*)"], "there is no config group 'nogroup'"),
])
def test_sweep_mistakes_are_one_line_exit_2_before_any_job(args, message, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "-m", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert not any(tmp_path.iterdir())


def test_a_glob_sweep_is_the_explicit_list_hydra_would_sweep():
    """``optbench run -m '+matrix=glob(*lion*)'`` (docs/thirdparty.md): validated and numbered like a list."""
    from optbench.config import expand_globs

    assert expand_globs(["+matrix=glob(*lion*)", "steps=3"]) == {
        "+matrix=glob(*lion*)": "+matrix=bitsandbytes_lion,bitsandbytes_lion8bit,deepspeed_lion,lion_pytorch,"
                                "pytorch_optimizer_lion"}
    assert expand_globs(["suite=glob(ada*,exclude=adamax)"])["suite=glob(ada*,exclude=adamax)"].startswith(
        "suite=adabelief,adadelta,adafactor,adagrad,adam,adamw,adan")


def test_combinations_number_jobs_as_hydra_does():
    assert sweep.combinations(["suite=adam,sgd", "dtype=float32,bfloat16", "steps=3"]) == [
        ["suite=adam", "dtype=float32", "steps=3"], ["suite=adam", "dtype=bfloat16", "steps=3"],
        ["suite=sgd", "dtype=float32", "steps=3"], ["suite=sgd", "dtype=bfloat16", "steps=3"]]


@pytest.mark.skipif(importlib.util.find_spec("hydra_plugins.hydra_submitit_launcher") is None,
                    reason="hydra-submitit-launcher is not installed (pip install 'optbench[sweep]')")
@pytest.mark.slow  # (slow tier; CI keeps a sweep's worst exit and its merge)
def test_submitit_local_sweep_merges_jobs_records_a_killed_one_and_exits_with_the_worst(tmp_path, monkeypatch):
    """The cluster path on one machine: hydra-submitit-launcher's submitit_local runs each job as a submitit job
    (the same code path as submitit_slurm but for the executor). The second job's candidate ends its process
    (os._exit, with jobs=0: in the job's own process): the job is killed mid-run, and the merge keeps its
    finished cases, says it did not finish, and the sweep exits INCOMPLETE (4)."""
    monkeypatch.chdir(REPO)  # the candidates are imported from the current directory
    from submitit.core.core import Job

    # submitit waits 15 s for the result file of a job that ended without writing one (the killed job): 2 s here
    monkeypatch.setattr(Job, "_results_timeout_s", 2)
    out = tmp_path / "sweep"
    code = main(["run", "-m", "suite=sgd", "candidate=optbench.mutants.sgd.CorrectSGD,tests.candidates.ExitsSGD",
                 "impl=[for-loop,candidate]", "dtype=float32", "jobs=0", "options={lr: 0.1}", *TINY,
                 "hydra/launcher=submitit_local",
                 "hydra.launcher.timeout_min=10", f"hydra.sweep.dir={out}"])
    assert code == 4
    record = merged(out)
    jobs = record["sweep"]["jobs"]
    assert record["sweep"]["launcher"].endswith("LocalLauncher")
    assert [(j["num"], j["status"], j["exit_code"]) for j in jobs] == [(0, "completed", 0), (1, "started", 4)]
    assert "stopped without finishing (killed?); the" in jobs[1]["problem"]
    kept = {(r["impl"], r["status"]) for r in record["rows"] if r["metric"] == "parity.max_err_eps" and not r["fqn"]}
    assert ("candidate:optbench.mutants.sgd.CorrectSGD", "pass") in kept and ("for-loop", "pass") in kept
    assert (out / ".submitit").is_dir() or any(out.rglob("*_submitted.pkl"))


@pytest.mark.skipif(importlib.util.find_spec("hydra_plugins.hydra_submitit_launcher") is None,
                    reason="hydra-submitit-launcher is not installed (pip install 'optbench[sweep]')")
def test_the_documented_slurm_launcher_config_composes(capsys):
    """docs/examples/hydra/launcher/slurm_gpu.yaml, the one file a SLURM sweep adds to the submitit_local one."""
    assert main(["run", "--config-dir", str(REPO / "docs" / "examples"), "hydra/launcher=slurm_gpu", "suite=sgd",
                 "--cfg", "hydra"]) == 0
    out = capsys.readouterr().out
    assert "_target_: hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher" in out
    assert "partition: gpu" in out and "gpus_per_node: 1" in out


@pytest.mark.slow  # (slow tier; CI keeps a sweep's worst exit and its merge)
def test_sigterm_stops_the_whole_sweep_not_only_its_job(tmp_path):
    """A sweep (basic launcher: jobs in this process) stopped by SIGTERM while its first job runs: that job is
    kept and marked, no later job starts, the sweep merges what there is and exits 143."""
    import signal
    import subprocess
    import sys

    out = tmp_path / "sweep"
    proc = subprocess.Popen([sys.executable, "-m", "optbench", "run", "-m", "suite=sgd",
                             "candidate=tests.candidates.HangsSGD,optbench.mutants.sgd.CorrectSGD",
                             "impl=[candidate]", "dtype=float32", "options={lr: 0.1}", *TINY,
                             f"hydra.sweep.dir={out}"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(out.glob("0-*/" + JOURNAL)):
        time.sleep(0.1)
    time.sleep(1.0)  # the hanging case has started
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stdout[-2000:] + stderr[-2000:]
    record = merged(out)
    assert [(j["num"], j["status"]) for j in record["sweep"]["jobs"]] == [(0, "started"), (1, "missing")]
    assert "interrupted by SIGTERM" in record["sweep"]["jobs"][0]["problem"] and "the sweep stopped here" in (
        record["sweep"]["jobs"][0]["problem"])
    assert not list(out.glob("1-*"))
