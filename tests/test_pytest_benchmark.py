"""optbench's timings as pytest-benchmark benchmarks, and pytest-benchmark files read by optbench compare."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from optbench.cli import main

pytest.importorskip("pytest_benchmark")
GATE = ("suite=sgd checks=[speed] dtype=float32 impl=[for-loop,foreach] speed.params=2e4 speed.min_rounds=5 "
        "speed.min_run_time=0.05 speed.probe_run_time=0.005 speed.edge_cases=[] jobs=0")


@pytest.mark.slow  # (slow tier; CI keeps compare reading pytest-benchmark files)
def test_gate_hands_each_timed_case_rounds_to_pytest_benchmark(tmp_path):
    out, bench = tmp_path / "out", tmp_path / "bench.json"
    # without PYTEST_XDIST_* (this test may run under xdist): pytest-benchmark disables itself under a worker
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "optbench.gate", "--optbench", GATE,
                           f"--optbench-out={out}", f"--benchmark-json={bench}", "--benchmark-save-data",
                           "-p", "no:cacheprovider", "-q"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    benchmarks = {b["name"]: b for b in json.loads(bench.read_text())["benchmarks"]}
    assert set(benchmarks) == {"speed::for-loop::float32::default::model", "speed::foreach::float32::default::model"}
    rows = json.loads((out / "sgd" / "results.json").read_text())["rows"]
    for name, b in benchmarks.items():
        impl = name.split("::")[1]
        rounds = [r["value"] / 1e3 for r in sorted(rows, key=lambda r: r["step"] or 0)
                  if r["impl"] == impl and r["metric"] == "time.round_ms"]
        per_round = next(r["value"] for r in rows if r["impl"] == impl and r["metric"] == "time.steps_per_round")
        # the very rounds optbench measured (interleaved), not a second timing
        assert b["stats"]["data"] == pytest.approx(rounds) and b["stats"]["iterations"] == per_round
        assert b["extra_info"]["optbench"]["impl"] == impl and b["group"] == "sgd.float32.model"
        # busy as the run said it was, neither more nor less (compare skips a busy case)
        said = next((r["detail"] for r in rows if r["impl"] == impl and r["metric"] == "time.unstable" and r["value"]),
                    "")
        assert b["extra_info"]["optbench"]["unstable"] == said
    # pytest-benchmark's own tools take the file
    cli = Path(sys.executable).parent / "pytest-benchmark"
    listed = subprocess.run([str(cli), "compare", str(bench)],
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0 and "speed::foreach" in listed.stdout, listed.stderr
    # and so does optbench compare, case by case (a case timed on a busy machine, as under pytest-xdist with every
    # core taken, is not compared: if each was, nothing is, exit 3)
    busy = all(b["extra_info"]["optbench"]["unstable"] for b in benchmarks.values())
    assert main(["compare", str(bench), str(bench)]) == (3 if busy else 0)
    assert main(["report", "--dashboard", str(bench), "--out", str(tmp_path / "dash")]) == 0
    assert "foreach" in (tmp_path / "dash" / "dashboard.html").read_text()


def pytest_benchmark_file(path, scale):
    data = {"machine_info": {"node": "ci", "cpu": {"brand_raw": "Test CPU", "count": 2}}, "commit_info": {},
            "datetime": "2026-11-26T00:00:00", "version": "5.3.1",
            "benchmarks": [{"name": "test_step", "fullname": "tests/test_x.py::test_step", "group": None,
                            "extra_info": {}, "stats": {"median": 1e-3 * scale, "rounds": 20, "iterations": 10,
                                                        "data": [1e-3 * scale * (1 + 0.001 * i) for i in range(20)]}}]}
    path.write_text(json.dumps(data))
    return path


def test_optbench_compare_reads_any_pytest_benchmark_file_and_flags_a_slowdown(tmp_path, capsys):
    base, slow = pytest_benchmark_file(tmp_path / "a.json", 1.0), pytest_benchmark_file(tmp_path / "b.json", 1.6)
    assert main(["compare", str(base), str(slow)]) == 1
    out = capsys.readouterr().out
    assert "tests/test_x.py::test_step" in out and "slower" in out
    assert main(["compare", str(base), str(base)]) == 0
