"""docs/candidates.md followed as a new user follows it: its first command on a class of one's own, and its candidate
spec copied out of the page as written, each run as the page says (at a reduced size), each doing what it says."""

import json
import re
from pathlib import Path

import pytest

from optbench.cli import main

DOC = Path(__file__).parents[1] / "docs" / "candidates.md"
SMALL = ["checks=[parity,roundtrip]", "dtype=float32", "hparams=default", "steps=6", "jobs=0"]


def test_the_first_command_on_a_class_of_ones_own(tmp_path, monkeypatch, capsys):
    command = re.search(r"```\n(optbench run suite=adamw candidate=my_pkg\.optim\.MyAdamW)\n```", DOC.read_text())
    assert command, "docs/candidates.md no longer opens with the command this test follows"
    (tmp_path / "my_pkg").mkdir()
    (tmp_path / "my_pkg" / "__init__.py").write_text("")
    (tmp_path / "my_pkg" / "optim.py").write_text(
        "import torch\n\n\nclass MyAdamW(torch.optim.AdamW):\n"
        "    def __init__(self, params, lr=0.01, **kwargs):\n        super().__init__(params, lr=lr, **kwargs)\n")
    monkeypatch.chdir(tmp_path)  # "imported from the current directory"
    monkeypatch.syspath_prepend(str(tmp_path))
    args = command.group(1).split()[1:]
    assert main([*args, *SMALL, f"out_dir={tmp_path / 'run'}"]) == 0
    out = capsys.readouterr().out
    assert "warning: candidate:my_pkg.optim.MyAdamW's own defaults differ from the reference's: lr=0.01" in out
    report = (tmp_path / "run" / "report.md").read_text()
    assert "Candidate" in report and "MyAdamW" in report


@pytest.mark.slow  # (slow tier; CI keeps the page's first command)
def test_the_candidate_spec_copied_from_the_page(tmp_path, monkeypatch):
    block = re.search(r"```yaml\n(# (\S+\.yaml) +optbench run (suite=\w+) candidate=\S+\n.*?)```", DOC.read_text(),
                      re.S)
    assert block, "docs/candidates.md no longer holds the candidate spec this test follows"
    text, _, suite = block.groups()
    spec = tmp_path / "my_spec.yaml"
    spec.write_text(text)
    monkeypatch.chdir(Path(__file__).parents[1])  # the class it names is the repository's tests.thirdparty
    assert main(["run", suite, f"candidate={spec}", *SMALL, f"out_dir={tmp_path / 'run'}"]) == 0
    rows = json.loads((tmp_path / "run" / "results.json").read_text())["rows"]
    statuses = {check: {r["status"] for r in rows if r["impl"].startswith("candidate:") and r["check"] == check}
                for check in ("parity", "roundtrip")}
    assert all("pass" in found and not found & {"fail", "error"} for found in statuses.values()), statuses
