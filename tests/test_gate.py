"""The pytest gate (optbench.gate) as CI runs it: pytest in a subprocess, outcomes read from its JUnit XML."""

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from optbench.gate import CaseFailed, GateRun, judge, pytest_configure
from tests import warm_command

REPO = Path(__file__).parents[1]
TINY = "dtype=float32 checks=[parity] steps=3 history_dir=null"
MUTANT, CORRECT = "optbench.mutants.sgd.DecayIgnoredUnderMaximizeSGD", "optbench.mutants.sgd.CorrectSGD"


def pytest_gate(*args, cwd=REPO):
    return warm_command.run("-p", "optbench.gate", "-p", "no:cacheprovider", "-q", *args, cwd=cwd, timeout=300,
                            module="pytest")


def junit(path: Path) -> tuple[dict, dict]:
    """(the suite's counts, {test id: (outcome, message)}) of a JUnit file; the id is classname::name."""
    suite = ET.parse(path).getroot().find("testsuite")
    cases = {}
    for case in suite.iter("testcase"):
        child = next(iter(case), None)
        outcome = ("passed" if child is None or child.tag in ("system-out", "system-err")
                   else child.get("type") or child.tag)
        cases[f"{case.get('classname')}::{case.get('name')}"] = (outcome,
                                                                 "" if child is None else child.get("message", ""))
    return {k: int(suite.get(k)) for k in ("tests", "failures", "errors", "skipped")}, cases


@pytest.fixture(scope="module")
def gate_run(tmp_path_factory):
    """One gate over three runs: a mutant SGD, a correct one, and fused SGD at bfloat16 (declared F01)."""
    tmp = tmp_path_factory.mktemp("gate")
    proc = pytest_gate("--optbench", f"suite=sgd candidate={MUTANT} impl=[candidate] {TINY}",
                       "--optbench", f"suite=sgd candidate={CORRECT} impl=[candidate] {TINY} "
                                     "options='{weight_decay: 0.1, maximize: true}'",  # what the mutant fails
                       "--optbench", "suite=sgd impl=[fused] dtype=bfloat16 checks=[parity] steps=3 "
                                     "options='{momentum: 0.9}' history_dir=null",
                       "--junitxml", str(tmp / "gate.xml"), "--optbench-out", str(tmp / "out"))
    counts, cases = junit(tmp / "gate.xml")
    return proc, counts, cases, tmp


def test_mutant_fails_its_items_and_correct_candidate_passes(gate_run):
    proc, counts, cases, _ = gate_run
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    klass = f"sgd.parity.candidate:{MUTANT}.float32"
    failed = {name for name, (outcome, _) in cases.items() if outcome == "failure"}
    # the mutant ignores weight decay under maximize: exactly the two hparam sets that have both fail
    assert failed == {f"{klass}::maximize_weight_decay", f"{klass}::momentum_dampening_maximize_groups"}, failed
    assert "first past tolerance" in cases[f"{klass}::maximize_weight_decay"][1]
    correct = {name: outcome for name, (outcome, _) in cases.items() if name.startswith("sgd-2.")}
    assert correct == {"sgd-2.parity.candidate:optbench.mutants.sgd.CorrectSGD.float32::options": "passed",
                       "sgd-2.parity.candidate:optbench.mutants.sgd.CorrectSGD::checked": "passed"}, correct
    assert counts["failures"] == 2 and counts["errors"] == 0 and counts["tests"] == len(cases)


def test_declared_deviation_is_xfail_in_junit(gate_run):
    _, counts, cases, _ = gate_run
    outcome, message = cases["sgd-3.parity.fused.bfloat16::options"]
    assert outcome == "pytest.xfail" and "F01" in message, (outcome, message)
    assert counts["skipped"] >= 1


def test_optbench_out_keeps_each_runs_results_and_report(gate_run):
    _, _, _, tmp = gate_run
    for name in ("sgd", "sgd-2", "sgd-3"):
        assert (tmp / "out" / name / "report.md").is_file(), name
    rows = json.loads((tmp / "out" / "sgd" / "results.json").read_text())["rows"]
    assert any(r["status"] == "fail" and r["hparams"] == "maximize_weight_decay" for r in rows)


def test_bad_override_is_a_one_line_pytest_usage_error():
    proc = pytest_gate("--optbench", "suite=sgd stepz=3")
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 4 and lines == ["ERROR: --optbench 'suite=sgd stepz=3': "
                                              "Could not override 'stepz'."], proc.stderr


@pytest.mark.parametrize("spec, message", [("suite=sgdd", "did you mean 'sgd'?"),
                                           ("suite=sgd dtype=float8", "unknown dtype 'float8'"),
                                           ("--config-dir /nonexistent suite=sgd", "no such directory"),
                                           ("suite=sgd checks=[speed] speed.repeats=3", "times each case once")])
def test_bad_runs_are_usage_errors(spec, message):
    with pytest.raises(pytest.UsageError, match=message):
        GateRun(spec, None, [])


def test_xdist_is_refused():
    class Config:
        def getoption(self, name, default=None):
            return {"optbench": ["suite=sgd"], "numprocesses": 2}.get(name, default)

    with pytest.raises(pytest.UsageError, match="drop -n"):
        pytest_configure(Config())


def test_without_optbench_the_plugin_does_nothing():
    class Config:
        args = ["tests"]

        def getoption(self, name, default=None):
            return [] if name == "optbench" else default

        @property
        def pluginmanager(self):
            raise AssertionError("the plugin registered something")

    config = Config()
    pytest_configure(config)
    assert config.args == ["tests"]


class Item:
    def __init__(self):
        self.markers = []

    def add_marker(self, marker):
        self.markers.append(marker)


def rows(*statuses):
    return [{"status": s, "metric": "parity.max_err_eps", "detail": f"{s} detail", "fqn": "", "tensor": "",
             "value": 1.0, "unit": "eps"} for s in statuses]


def test_outcome_rules():
    with pytest.raises(CaseFailed, match="FAIL parity.max_err_eps 1 eps: fail detail"):
        judge(Item(), rows("pass", "xfail", "fail"))
    with pytest.raises(pytest.xfail.Exception, match="xfail detail"):
        judge(Item(), rows("xfail", "info", "unsupported"))
    with pytest.raises(pytest.skip.Exception, match="unsupported detail"):
        judge(Item(), rows("unsupported", "info"))
    item = Item()
    judge(item, rows("pass", "xpass"))  # a deviation torch fixed: XPASS, which passes
    assert item.markers[0].kwargs == {"reason": "xpass detail", "strict": False}
    judge(Item(), rows("pass", "xfail", "info"))
    judge(Item(), [r | {"check": "speed"} for r in rows("info")])  # a measurement passes
    with pytest.raises(pytest.skip.Exception, match="no case produced a verdict"):
        judge(Item(), rows("info"))  # a verdict check's case that gave none: nothing verified
    with pytest.raises(CaseFailed, match="the case wrote no rows"):
        judge(Item(), [])


@pytest.mark.slow  # (slow tier; CI keeps the gate's mutant and control items)
def test_a_candidate_that_ends_its_process_fails_its_item_and_the_gate_goes_on(tmp_path):
    """With a worker process (jobs=1), os._exit in a candidate's step fails that item; pytest does not exit 0."""
    spec = ("suite=sgd candidate=tests.candidates.ExitsSGD impl=[for-loop,candidate] checks=[parity,cross] "
            "dtype=float32 options='{lr: 0.1}' jobs=1 history_dir=null")
    proc = pytest_gate("--optbench", spec, "--junitxml", str(tmp_path / "gate.xml"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    counts, cases = junit(tmp_path / "gate.xml")
    died = sorted(name for name, (outcome, m) in cases.items()
                  if outcome == "failure" and "its worker process exited with code 0 during this case" in m)
    assert died == ["sgd.parity.candidate:tests.candidates.ExitsSGD.float32::options",
                    "sgd.parity.candidate:tests.candidates.ExitsSGD::checked"], cases
    assert cases["sgd.parity.for-loop.float32::options"][0] == "passed"  # its group's case before it
    assert counts["tests"] == 4
