"""A PASS is the product: a run that verified nothing is not PASS, and a check's ``requires`` holds.

Through the CLI as a user runs it, and through the pytest gate. The rule itself (``optbench.results.verdict``)
is imported inside its tests, so the CLI tests say what they check even where it is missing.
"""

import json
from pathlib import Path

import pandas as pd
import pytest
import torch

from optbench.cli import main
from optbench.results import Results, row
from tests import warm_command
from tests.conftest import run_inline

REPO = Path(__file__).parents[1]
SMALL = ["dtype=float32", "steps=3", "history_dir=null"]
LABELS = {"suite": "sgd", "optimizer": "SGD", "impl": "graphed", "dtype": "float32", "hparams": "default",
          "device": "cpu"}


def run(tmp_path, *args):
    return run_inline(["suite=sgd", *SMALL, *args, f"out_dir={tmp_path}"])


def verdict_line(out: str) -> str:
    """The last verdict line (a sweep's jobs, run in turn in this process, print theirs before it)."""
    return [line for line in out.splitlines() if line.startswith("verdict:")][-1]


def test_no_checks_is_a_usage_error(tmp_path, capsys):
    assert run(tmp_path, "checks=[]") == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("optbench: error: checks=[] selects nothing") and "\n" not in err, err
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def test_cross_without_parity_is_a_usage_error_naming_it(tmp_path, capsys):
    assert run(tmp_path / "out", "checks=[cross]") == 2
    err = capsys.readouterr().err.strip()
    assert err == ("optbench: error: check 'cross' needs 'parity' (it reads what parity computes for the same cases): "
                   "use checks=[parity,cross]"), err
    assert not (tmp_path / "out").exists()  # refused before anything is written


def test_cross_with_parity_runs_and_verifies(tmp_path, capsys):
    assert run(tmp_path, "checks=[cross,parity]", "impl=[for-loop,foreach]", "options={momentum: 0.9}") == 0
    statuses = {(r["check"], r["status"]) for r in json.loads((tmp_path / "results.json").read_text())["rows"]}
    assert {("parity", "pass"), ("cross", "pass")} <= statuses, statuses
    assert verdict_line(capsys.readouterr().out).startswith("verdict: PASS")


def test_cross_skips_a_candidate_judged_by_its_own_conventions(tmp_path):
    """pytorch-optimizer's Muon (AdamW side) counts its step per param group (adapter ``conventions: {group_step}``):
    where a parameter misses a gradient its bias correction rightly differs from torch's per-parameter one, so both
    pass parity against their own references while differing from each other by 7.8e4 eps. Cross says it compared
    nothing (a skip naming the convention), never a failure of a correct candidate nor a pass."""
    pytest.importorskip("pytorch_optimizer")
    code = run_inline(["+matrix=pytorch_optimizer_muon_adamw", "checks=[parity,cross]", "dtype=float32",
                       "hparams=[default]", "history_dir=null", f"out_dir={tmp_path}"])
    rows = [r for r in json.loads((tmp_path / "results.json").read_text())["rows"] if r["status"] != "info"]
    assert code == 0
    assert [(r["status"], "group_step=True" in r["detail"]) for r in rows if r["check"] == "cross"] == [("skip", True)]
    assert {r["status"] for r in rows if r["check"] == "parity" and r["fqn"] == ""} == {"pass"}


@pytest.mark.skipif(torch.cuda.is_available(), reason="graphed runs on CUDA")
def test_every_case_skipped_is_nothing_verified_exit_3(tmp_path, capsys):
    assert run(tmp_path, "impl=[graphed]", "checks=[parity,cross]") == 3
    line = verdict_line(capsys.readouterr().out)
    assert line.startswith("verdict: NOTHING VERIFIED: every case was skipped") and "needs CUDA" in line, line
    assert "**Overall: NOTHING VERIFIED" in (tmp_path / "report.md").read_text()


def test_a_run_with_no_case_is_nothing_verified_exit_3(tmp_path, capsys):
    """SGD declares no deviation that raises: the deviations check has no case."""
    assert run(tmp_path, "checks=[deviations]") == 3
    line = verdict_line(capsys.readouterr().out)
    assert line == "verdict: NOTHING VERIFIED: no check had a case to run (checks: deviations)", line


def test_measurements_alone_are_measured_not_pass(tmp_path, capsys):
    assert run(tmp_path, "impl=[for-loop]", "checks=[memory]") == 0
    line = verdict_line(capsys.readouterr().out)
    assert line == "verdict: MEASURED: 1 case(s) of memory measured; these checks verify nothing", line


def test_report_rerenders_nothing_verified(tmp_path, capsys):
    skipped = [row(LABELS, check="parity", metric="case.skip", value=0, status="skip",
                   detail="needs CUDA: a CUDA graph captures the step (device is cpu)"),
               row(LABELS, check="parity", metric="run.case_s", value=0.01, unit="s")]
    Results(tmp_path, {"config": {"suite": {"name": "sgd"}, "checks": ["parity"]}}, skipped).finish()
    assert main(["report", str(tmp_path)]) == 0  # it rendered; the run's own exit code was 3
    assert verdict_line(capsys.readouterr().out).startswith("verdict: NOTHING VERIFIED: every case was skipped")
    assert "**Overall: NOTHING VERIFIED" in (tmp_path / "report.md").read_text()


def rows(*statuses, check="parity"):
    return [row(LABELS, check=check, metric="m", value=1, status=s, detail=f"{s} detail") for s in statuses]


def test_the_verdict_rule():
    from optbench.results import verdict

    def name(rows):
        return verdict(rows).name

    assert name(rows("pass", "skip")) == "PASS"
    assert name(rows("xfail")) == name(rows("xpass", "unsupported")) == "PASS"  # a declared deviation verified
    assert name(rows("fail", "skip")) == name(rows("error")) == name(rows("pass", "error")) == "FAIL"
    assert name(rows("skip", "unsupported", "info")) == name([]) == "NOTHING VERIFIED"
    assert name(rows("info", check="speed")) == "MEASURED"
    assert name(rows("info", check="speed") + rows("skip")) == "NOTHING VERIFIED"  # parity asked, nothing checked
    assert name(rows("info", "skip", check="scaling")) == "NOTHING VERIFIED"  # a skipped case measured nothing
    codes = [verdict(r).exit_code for r in (rows("pass"), rows("fail"), [], rows("info", check="memory"))]
    assert codes == [0, 1, 3, 0]
    assert name(pd.DataFrame(rows("skip"))) == "NOTHING VERIFIED"  # the report's frame: the same rule


def test_exit_codes_worst_first():
    from optbench.usage import EXIT_NOTHING_VERIFIED, worst

    assert EXIT_NOTHING_VERIFIED == 3
    assert worst([0, 3]) == 3 and worst([3, 1, 0]) == 1 and worst([1, 2, 3]) == 2 and worst([]) == 0


@pytest.mark.slow  # (slow tier; CI keeps each verdict rule)
def test_sweep_with_a_job_that_verified_nothing_exits_3(tmp_path, capsys):
    out = tmp_path / "sweep"
    code = main(["run", "-m", "suite=sgd", "checks=[parity]", "impl=[for-loop],[graphed]", "options={lr: 0.01}",
                 *SMALL, f"hydra.sweep.dir={out}"])
    if torch.cuda.is_available():
        pytest.skip("graphed runs on CUDA")
    assert code == 3
    line = verdict_line(capsys.readouterr().out)
    assert line.startswith("verdict: NOTHING VERIFIED: job 1 exit 3"), line
    jobs = json.loads((out / "results.json").read_text())["sweep"]["jobs"]
    assert [(j["exit_code"], j["problem"]) for j in jobs] == [(0, ""), (3, "")]


# the pytest gate ----------------------------------------------------------------------------------------------

def test_gate_item_without_rows_fails():
    from optbench.gate import CaseFailed, judge

    with pytest.raises(CaseFailed, match="wrote no rows"):
        judge(object(), [])


def test_gate_refuses_cross_without_parity():
    from optbench.gate import GateRun

    with pytest.raises(pytest.UsageError, match="check 'cross' needs 'parity'"):
        GateRun("suite=sgd checks=[cross]", None, [])


def pytest_gate(*args):
    return warm_command.run("-p", "optbench.gate", "-p", "no:cacheprovider", "-q", *args, cwd=REPO, timeout=300,
                            module="pytest")


def test_gate_run_that_collects_no_item_fails():
    proc = pytest_gate("--optbench", "suite=sgd checks=[deviations] dtype=float32 history_dir=null")
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "sgd::nothing-to-verify" in proc.stdout and "no case to run" in proc.stdout, proc.stdout[-2000:]


@pytest.mark.slow  # (slow tier; CI keeps each verdict rule)
def test_gate_unsupported_hparam_set_skips_its_cross_item_not_fails(tmp_path):
    """parity leaves no trajectory for an hparam set the candidate does not take: cross says so, a skip."""
    proc = pytest_gate("--optbench", "suite=sgd candidate=tests.candidates.NoMaximizeSGD impl=[candidate,for-loop] "
                                     "checks=[parity,cross] dtype=float64 steps=3 history_dir=null",
                       "-rs")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "SKIPPED [3] optbench/gate.py" in proc.stdout and "parity left no trajectory of candidate" in proc.stdout, (
        proc.stdout[-3000:])


def test_cross_never_passes_an_empty_comparison_and_xfail_says_what_it_measured(tmp_path):
    """Fused SGD at bfloat16 (F01, declared on every tensor): cross has nothing outside the declaration to compare
    (a skip, not 'pass max 0 eps'), and parity's xfail row states how far off the declared tensors were."""
    assert run(tmp_path, "checks=[parity,cross]", "impl=[for-loop,fused]", "dtype=bfloat16",
               "options={momentum: 0.9}") == 0
    rows = json.loads((tmp_path / "results.json").read_text())["rows"]
    cross = [r for r in rows if r["check"] == "cross" and r["impl"] == "fused" and r["metric"] != "run.case_s"]
    assert [r["status"] for r in cross] == ["skip"] and "nothing to compare" in cross[0]["detail"], cross
    verdict = next(r for r in rows if r["check"] == "parity" and r["impl"] == "fused" and r["fqn"] == ""
                   and r["metric"] == "parity.max_err_eps")
    assert verdict["status"] == "xfail" and verdict["finding"] == "F01"
    assert "nothing here was judged at tolerance" in verdict["detail"]
    assert "(their tensors measured up to " in verdict["detail"]
    # the case's figure is what the declared tensors measured, never "max 0 eps" ("inf" where it overflowed)
    assert float(verdict["value"]) > 100
