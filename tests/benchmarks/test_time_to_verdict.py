"""Time to a verdict, as a user on a fresh machine meets it: the README's main job and ``suite=all`` with empty
kernel and inductor caches (``TORCH_EXTENSIONS_DIR``, ``TORCHINDUCTOR_CACHE_DIR``), on 2 cores. Run them on a quiet
machine with ``pytest -m benchmark tests/benchmarks/test_time_to_verdict.py -p no:xdist -s`` (never in CI). Each
prints where the time went: the kernel build alone, the run's wall time, and its cases' time by implementation and
check."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from tests.conftest import users_environment

pytestmark = pytest.mark.benchmark

MAIN_JOB_COLD_S = 60.0  # the README's main job, cold
ALL_COLD_S = 300.0  # suite=all, cold


def cold_env(tmp: Path) -> dict:
    """A user's environment (workers, plots) with empty caches, and no history written."""
    return users_environment(TORCH_EXTENSIONS_DIR=str(tmp / "extensions"),
                             TORCHINDUCTOR_CACHE_DIR=str(tmp / "inductor"), OPTBENCH_HISTORY_DIR="")


def timed_run(args: list[str], out: Path, env: dict) -> float:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "optbench", "run", *args, f"out_dir={out}"], env=env,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - started
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = json.loads((out / "results.json").read_text())["rows"]
    by_impl, by_check = defaultdict(float), defaultdict(float)
    for r in rows:
        if r["metric"] == "run.case_s":
            by_impl[r["impl"]] += r["value"]
            by_check[r["check"]] += r["value"]
    impls, checks = ({k: round(v, 1) for k, v in d.items()} for d in (by_impl, by_check))
    print(f"\n{' '.join(args)}: {seconds:.1f} s; cases by implementation {impls}, by check {checks}")
    return seconds


def test_the_main_job_cold(tmp_path):
    env = cold_env(tmp_path)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "from optbench.kernels.adafactor import build; build()"], env=env,
                   check=True, capture_output=True)
    print(f"\nthe C++ Adafactor kernel's build alone: {time.perf_counter() - started:.1f} s")
    for folder in ("extensions", "inductor"):
        subprocess.run(["rm", "-rf", str(tmp_path / folder)], check=True)
    seconds = timed_run(["suite=adafactor", "device=cpu"], tmp_path / "run", env)
    assert seconds <= MAIN_JOB_COLD_S, f"the main job took {seconds:.1f} s cold (target {MAIN_JOB_COLD_S:g} s)"


def test_suite_all_cold(tmp_path):
    seconds = timed_run(["suite=all", "device=cpu"], tmp_path / "run", cold_env(tmp_path))
    assert seconds <= ALL_COLD_S, f"suite=all took {seconds:.1f} s cold (target {ALL_COLD_S:g} s)"
