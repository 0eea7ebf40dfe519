"""Plugins (optbench.plugins): a package ships its suite, reference, check and adapter key through entry points.

The example plugin under tests/plugin_example (Signum, an optimizer torch lacks) and a broken one are pip-installed
into a folder put on PYTHONPATH, and optbench runs with them as a user would."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from filelock import FileLock

from tests import warm_command

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    """The two plugins pip-installed into one folder, once per test session whichever pytest-xdist worker asks first
    (a lock in the temporary folder the workers share, as tests/test_isolation.py's ``uninterrupted``)."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    target = shared / "plugin-site"
    offline = ["--no-build-isolation"] if importlib.util.find_spec("setuptools") else []  # else pip fetches it
    with FileLock(shared / "plugin-site.lock"):
        if not (shared / "plugin-site.done").is_file():
            shutil.rmtree(target, ignore_errors=True)
            for package in ("plugin_example", "plugin_broken"):
                source = shutil.copytree(HERE / package, shared / f"plugin-source-{package}",  # built out of the tree
                                         ignore=shutil.ignore_patterns("build", "*.egg-info"), dirs_exist_ok=True)
                subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", *offline, "--target",
                                str(target), str(source)], check=True, capture_output=True, timeout=300)
            (shared / "plugin-site.done").write_text("")
    return target


def optbench(site: Path, *args: str, cwd: Path, fresh: bool = False) -> subprocess.CompletedProcess:
    """``python -m optbench ARGS`` with the plugins on PYTHONPATH: a new interpreter where ``fresh`` (what it finds
    as it starts is the subject), else forked from the tests' command server started with that environment."""
    env = {**os.environ, "PYTHONPATH": str(site), "OPTBENCH_PLOTS": "false", "OPTBENCH_HISTORY_DIR": ""}
    if not fresh:
        return warm_command.run(*args, cwd=cwd, env=env)
    return subprocess.run([sys.executable, "-m", "optbench", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.slow  # (slow tier; CI keeps a plugin's suite and adapter key through the command)
def test_optbench_list_shows_each_plugin_and_where_it_came_from(site, tmp_path):
    proc = optbench(site, "list", cwd=tmp_path, fresh=True)
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())
    assert "optbench.suites example = optbench_plugin_example (from optbench-plugin-example 0.1.0)" in out, out
    assert "optbench.references signum = optbench_plugin_example.reference (from optbench-plugin-example" in out
    assert "optbench.checks example = optbench_plugin_example.checks (from optbench-plugin-example" in out
    assert "signum" in out.split("plugins:")[0]  # the plugin's suite among the suites
    # the broken plugin: one line naming it, on stderr and in the list; everything else loaded
    broken = [ln for ln in proc.stderr.splitlines() if "optbench_plugin_broken" in ln]
    assert len(broken) == 1 and "did not load: ImportError: this plugin needs a package" in broken[0], proc.stderr
    assert "broken = optbench_plugin_broken.checks (from optbench-plugin-broken 0.1.0): did not load" in out


@pytest.mark.slow  # (slow tier; CI keeps a plugin's suite and adapter key through the command)
def test_a_plugins_suite_reference_and_check_run_and_a_wrong_optimizer_fails(site, tmp_path):
    """The plugin's suite runs against the plugin's reference, with the plugin's own check planned, run, reported
    and counted; a deliberately wrong Signum fails the same suite's parity."""
    run = ["run", "suite=signum", "checks=[parity,roundtrip,errors,step_size]", "jobs=1", "dtype=float32",
           "impl=[for-loop]", "steps=5", "roundtrip.scenarios=[same_order,reversed]"]  # (the plugin's parts, on
    # its own class at one dtype, a few steps and scenarios: torch's variants of it (compiled: an inductor compile
    # of 30 s), the dtypes, steps and scenarios are the core's, tested elsewhere)
    proc = optbench(site, *run, f"out_dir={tmp_path / 'ok'}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "verdict: PASS" in proc.stdout
    report = (tmp_path / "ok" / "report.md").read_text()
    assert "## Step size after one step (plugin check)" in report and "step_size: " in report
    proc = optbench(site, *run[:2], "dtype=float32", "checks=[parity]", "impl=[candidate]",
                    "candidate=optbench_plugin_example.BrokenSignum", f"out_dir={tmp_path / 'broken'}", cwd=tmp_path)
    assert proc.returncode == 1 and "verdict: FAIL" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_a_plugins_adapter_key_reads_in_a_candidate_spec(site, tmp_path):
    """The plugin's own candidate spec key (example_version) parses like a built-in one, and refuses in one line."""
    run = ["run", "suite=signum", "checks=[parity]", "impl=[candidate]", "dtype=float32", "hparams=first", "jobs=0"]
    for wanted, code in ((">=0.1", 0), (">=9", 2)):
        spec = tmp_path / f"signum{code}.yaml"
        spec.write_text(f"class: optbench_plugin_example.Signum\nexample_version: '{wanted}'\n")
        proc = optbench(site, *run, f"candidate={spec}", f"out_dir={tmp_path / str(code)}", cwd=tmp_path)
        assert proc.returncode == code, proc.stdout[-2000:] + proc.stderr[-2000:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("optbench: error")]
    assert len(errors) == 1 and "example_version: written for optbench-plugin-example >=9, 0.1.0 is installed" \
        in errors[0], proc.stderr
