"""optbench's speed targets, as benchmarks: run them on a quiet machine with
``pytest -m benchmark tests/benchmarks -p no:xdist -s`` (never in CI: they time things).
Each prints what it measured."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
import torch.utils.benchmark as benchmark

from optbench.cli import main
from optbench.workloads import speed

pytestmark = pytest.mark.benchmark


def medians(out) -> dict:
    rows = json.loads((out / "results.json").read_text())["rows"]
    return {(r["impl"], r["dtype"], r["workload"]): r["value"] for r in rows if r["metric"] == "time.step_ms"}


def value(out, impl, name):
    rows = json.loads((out / "results.json").read_text())["rows"]
    return next(r["value"] for r in rows if r["impl"] == impl and r["metric"] == name and r["workload"] == "model")


def test_two_consecutive_runs_agree_within_10_percent(tmp_path):
    """Every median above 1 ms, two runs of the adam suite's speed check one after the other."""
    runs = []
    for name in ("first", "second"):
        subprocess.run([sys.executable, "-m", "optbench", "run", "suite=adam", "checks=[speed]",
                        f"out_dir={tmp_path / name}"],
                       check=True, capture_output=True)
        runs.append(medians(tmp_path / name))
    spread = {k: runs[1][k] / runs[0][k] - 1 for k in runs[0] if runs[0][k] > 1.0}
    for k, v in sorted(spread.items(), key=lambda kv: -abs(kv[1])):
        print(f"{'/'.join(k):40s} {runs[0][k]:9.3f} ms -> {runs[1][k]:9.3f} ms  {v:+.1%}")
    assert spread and max(map(abs, spread.values())) <= 0.10


def test_fused_adam_median_agrees_with_a_plain_torch_benchmark(tmp_path):
    """optbench's median for torch's fused CPU Adam against torch.utils.benchmark on the same step, same process."""
    assert main(["run", "suite=adam", "impl=[fused]", "dtype=float32", "checks=[speed]", "speed.edge_cases=[]",
                 f"out_dir={tmp_path}"]) == 0
    ours = value(tmp_path, "fused", "time.step_ms")
    params = speed.model(4e6).materialize(torch.float32, torch.device("cpu"))
    opt = torch.optim.Adam(list(params.values()), fused=True)
    opt.step()
    plain = benchmark.Timer("opt.step()", globals={"opt": opt},
                            num_threads=torch.get_num_threads()).blocked_autorange(min_run_time=2).median * 1e3
    print(f"optbench {ours:.3f} ms, plain torch.utils.benchmark {plain:.3f} ms, ratio {ours / plain:.3f}")
    assert abs(ours / plain - 1) <= 0.10


def test_fused_adam_at_32m_parameters_is_60_to_110_percent_of_roofline(tmp_path):
    assert main(["run", "suite=adam", "impl=[fused]", "dtype=float32", "checks=[speed]", "speed.edge_cases=[]",
                 "speed.params=3.3e7", f"out_dir={tmp_path}"]) == 0
    pct = value(tmp_path, "fused", "roofline.pct")
    print(f"fused Adam, {speed.model(3.3e7).numel:.3g} params: {pct:.0f}% of roofline "
          f"({value(tmp_path, 'fused', 'speed.gb_per_s'):.1f} of "
          f"{value(tmp_path, 'fused', 'roofline.probe_gb_per_s'):.1f} GB/s)")
    assert 60 <= pct <= 110


def test_watch_overhead_on_a_small_training_loop():
    """What optbench.watch costs per training iteration (forward, backward, AdamW step) at its defaults."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                                torch.nn.ReLU(), torch.nn.Linear(1024, 10))
    opt = torch.optim.AdamW(model.named_parameters(), lr=1e-3)
    x, y = torch.randn(256, 512), torch.randint(0, 10, (256,))

    def iteration():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    iteration()
    timer = benchmark.Timer("iteration()", globals={"iteration": iteration}, num_threads=torch.get_num_threads())
    bare = timer.blocked_autorange(min_run_time=3).mean  # the mean: a check every N steps is in it, not the median
    from optbench import watch

    for options in ({}, {"every": 10}, {"max_numel": None}):
        w = watch(opt, **options)
        watched = timer.blocked_autorange(min_run_time=3).mean
        w.remove()
        print(f"watch({options}): {len(w.watched)} tensors, {sum(p.numel() for p in w.watched.values()):,} of "
              f"{sum(p.numel() for p in model.parameters()):,} parameters: {bare * 1e3:.2f} -> {watched * 1e3:.2f} ms "
              f"per iteration ({watched / bare:.2f}x); {w.summary().split(': ', 1)[1]}")
        assert w.first_divergence is None
