"""Every suite's default run, alone, as a user runs it: ``optbench run suite=<name> device=cpu`` exits 0 on a
correct torch. ``suite=all`` can stay green while one suite alone goes red (its cases then run in another
order, in a fresh process, with a cold inductor cache), so each suite is run by itself, in its own process,
with an empty inductor cache. Marked ``slow`` (about 35 minutes with ``-n 2`` on 2 cores): CI leaves it out; run it with
``pytest -m slow`` before a release, and on every torch upgrade.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from optbench.suite.catalog import optimizer_suite_names

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("suite", [*optimizer_suite_names(), "smoke"])
def test_default_run_of_each_suite_alone_is_green(suite, tmp_path):
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    env.pop("OPTBENCH_JOBS", None)  # as a user runs it: worker processes, one per core
    done = subprocess.run([sys.executable, "-m", "optbench", "run", f"suite={suite}", "device=cpu",
                           f"out_dir={tmp_path / 'run'}", "history_dir=null"],
                          capture_output=True, text=True, env=env, timeout=1800)
    results = tmp_path / "run" / "results.json"
    failing = []
    if results.is_file():
        failing = [(r["check"], r["impl"], r["dtype"], r["hparams"], r["metric"], r["detail"][:200])
                   for r in json.loads(results.read_text())["rows"] if r["status"] in ("fail", "error")]
    assert done.returncode == 0, f"exit {done.returncode}: {failing or done.stderr[-2000:]}"
    assert "verdict: PASS" in done.stdout
