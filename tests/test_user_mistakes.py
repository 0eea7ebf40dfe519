"""Every mistake a user can make that once answered with a traceback or a misleading line: each is
one line on stderr, exit 2, naming the file (and line) or the key to fix. Nothing runs, nothing is written."""

import json
import shutil
import sys

import pytest

from optbench.cli import main

SGD = ["suite=sgd", "dtype=float32", "checks=[parity]"]


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A working directory with a candidate module that raises at import and three bad suite files."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "raises_at_import.py").write_text("import torch\n\nraise RuntimeError('no GPU driver here')\n")
    suites = tmp_path / "cfg" / "suite"
    suites.mkdir(parents=True)
    (suites / "broken.yaml").write_text("name: broken\noptimizer: SGD\nhparams: [\n")
    (tmp_path / "misnamed").mkdir()
    shutil.copytree(tmp_path / "cfg", tmp_path / "misnamed", dirs_exist_ok=True)
    (tmp_path / "misnamed" / "suite" / "broken.yaml").unlink()
    (tmp_path / "misnamed" / "suite" / "mine.yaml").write_text("name: sgd\noptimizer: Adam\nreference: adam\n")
    (tmp_path / "a_file").write_text("")
    yield tmp_path
    sys.modules.pop("raises_at_import", None)


@pytest.mark.parametrize("args, message", [
    (["candidate=raises_at_import.Opt"], "candidate module 'raises_at_import' raised at import: RuntimeError: "
                                         "no GPU driver here ({cwd}/raises_at_import.py:3)"),
    (["out_dir=a_file"], "out_dir a_file: exists and is not a directory"),
    (["out_dir=a_file/run"], "out_dir a_file/run: cannot write there (Not a directory)"),
    (["--config-dir", "cfg", "suite=smoke"], "{cwd}/cfg/suite/broken.yaml:4:1: not valid YAML: expected the node "
                                             "content, but found '<stream end>'"),
    (["--config-dir", "cfg", "suite=all"], "{cwd}/cfg/suite/broken.yaml:4:1: not valid YAML"),
    (["--config-dir", "cfg", "suite=broken"], "{cwd}/cfg/suite/broken.yaml:4:1: not valid YAML"),
    (["--config-dir", "misnamed", "suite=mine"], "{cwd}/misnamed/suite/mine.yaml: says name: 'sgd', but a suite is "
                                                 "named by its file: name: mine"),
    (["options={lr: x}"], "options: SGD refuses them: TypeError: '<' not supported between instances of 'str' and "
                          "'float'"),
    (["options={lr: -1}"], "options: SGD refuses them: ValueError: Invalid learning rate: -1"),
    (["workload.width=-5"], "workload.width=-5: need at least 1"),
    (["workload.layers=1.5"], "workload.layers=1.5: need a whole number"),
    (["workload.grad_log10_range=[2,1]"], "workload.grad_log10_range=[2, 1]: need [low, high]"),
    (["checks=parity,cross"], "checks=parity,cross: a list needs brackets: checks=[parity,cross] (a comma-separated "
                              "value without brackets is a sweep, which needs -m)"),
    (["jobs=two"], "jobs=two: need auto, 0 (in this process) or a number of worker processes"),
    (["case_timeout_s=-1"], "case_timeout_s=-1: need a number of seconds > 0"),
])
def test_a_mistake_is_one_line_and_exit_2(workdir, capsys, args, message):
    config_dir = args[:2] if args[0] == "--config-dir" else []
    rest = args[2:] if config_dir else args
    assert main(["run", *config_dir, *SGD, *rest]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("optbench: error: "), err
    assert message.format(cwd=workdir) in err, err
    assert not any(workdir.glob("reports")), "a mistake must write nothing"


def test_checks_without_brackets_is_the_one_check_it_names(workdir, capsys):
    from optbench.config import compose_config
    from optbench.engine.selection import resolve_checks

    assert resolve_checks(compose_config(["checks=parity"])) == ["parity"]


def test_report_and_merge_refuse_damaged_files_in_one_line(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    header = {"journal": 1, "plan": [{"check": "parity"}], "meta": {}}
    case = {"case": 0, "rows": []}
    (run / "journal.jsonl").write_text(json.dumps(header) + "\n" + json.dumps(case)[:-3] + "}\n"
                                       + json.dumps(case) + "\n")
    assert main(["report", str(run)]) == 2
    assert capsys.readouterr().err == (f"optbench: error: {run}/journal.jsonl:2: not a journal line (damaged); the "
                                       "lines after it cannot be trusted\n")
    (run / "journal.jsonl").unlink()
    (run / "results.json").write_text(json.dumps({"schema_version": 4, "rows": [{"status": "passed", "value": "x"}]}))
    assert main(["report", str(run)]) == 2
    assert "row status 'passed' is none of pass, fail" in capsys.readouterr().err
    assert main(["merge", str(tmp_path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("finished") / "run"
    assert main(["run", *SGD, "impl=[for-loop]", "hparams=first", "steps=2", f"out_dir={out}"]) == 0
    return out


@pytest.mark.parametrize("args, message", [
    (["compare", "{run}", "{run}", "--out", "/proc/nope/x.md"], "/proc/nope: No such file or directory"),
    (["report", "{run}", "--out", "{tmp}/a_file"], "{tmp}/a_file: File exists"),
    (["report", "{tmp}/config_a_string.json"], "{tmp}/config_a_string.json: not an optbench results file (its "
                                               "'config' is a JSON str, not an object)"),
    (["report", "{tmp}/machine_a_string.json"], "(its 'machine' is a JSON str, not an object)"),
    (["resume"], "optbench resume: the following arguments are required: run_dir ('optbench resume --help' shows "
                 "its arguments)"),
    (["compare", "{run}"], "optbench compare: the following arguments are required: new"),
    (["report", "--frobnicate"], "optbench report: unrecognized arguments: --frobnicate"),
])
def test_a_subcommands_mistake_is_one_line_and_exit_2(finished_run, tmp_path, capsys, args, message):
    (tmp_path / "a_file").write_text("")
    data = json.loads((finished_run / "results.json").read_text())
    for key in ("config", "machine"):
        (tmp_path / f"{key}_a_string.json").write_text(json.dumps(data | {key: "a string"}))
    capsys.readouterr()
    assert main([a.format(run=finished_run, tmp=tmp_path) for a in args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("optbench: error: "), err
    assert message.format(tmp=tmp_path) in err, err
