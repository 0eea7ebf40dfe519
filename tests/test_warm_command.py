"""The tests' forked ``optbench`` command (tests/warm_command.py) answers as ``python -m optbench`` does."""

import subprocess
import sys

import pytest

from tests import warm_command


@pytest.mark.slow  # (slow tier; CI: every command test runs through it)
def test_a_forked_command_answers_as_a_new_interpreter_does(tmp_path):
    (tmp_path / "here.py").write_text("raise SystemExit('imported from the working directory')\n")
    args = ["run", "suite=sgd", "candidate=here.SGD", "jobs=0"]  # a candidate from the working directory
    new = subprocess.run([sys.executable, "-m", "optbench", *args], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    forked = warm_command.run(*args, cwd=tmp_path, timeout=300)
    assert (forked.returncode, forked.stdout, forked.stderr) == (new.returncode, new.stdout, new.stderr)
    assert forked.returncode == 2 and forked.stderr == (
        f"optbench: error: candidate module 'here' raised at import: SystemExit: imported from the working directory "
        f"({tmp_path / 'here.py'}:1)\n")
