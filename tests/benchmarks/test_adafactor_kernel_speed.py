"""optbench's fused CPU Adafactor (optbench.kernels.adafactor) against torch's own, timed in one process:
run it alone on a quiet machine with ``pytest -m benchmark tests/benchmarks/test_adafactor_kernel_speed.py
-p no:xdist -s`` (never in CI: it times things). It prints what it measured."""

from __future__ import annotations

import pytest
import torch
import torch.utils.benchmark as benchmark

from optbench.kernels.adafactor import Adafactor
from optbench.perf.ceilings import bandwidth
from optbench.perf.roofline import step_cost
from optbench.workloads import speed

pytestmark = pytest.mark.benchmark

PARAMS = 3.3e7  # transformer-shaped float32 parameters (speed.model), 4 B each for p and for g


def median_ms(opt, min_run_time: float) -> float:
    opt.step()  # state created; the timed steps are steady-state ones
    timer = benchmark.Timer("opt.step()", globals={"opt": opt}, num_threads=torch.get_num_threads())
    return timer.blocked_autorange(min_run_time=min_run_time).median * 1e3


def test_fused_adafactor_is_at_least_4x_faster_than_torchs_fastest_at_32m_parameters():
    params = list(speed.model(PARAMS).materialize(torch.float32, torch.device("cpu")).values())
    numel = sum(p.numel() for p in params)
    variants = {"for-loop": lambda: torch.optim.Adafactor(params, foreach=False),
                "foreach": lambda: torch.optim.Adafactor(params, foreach=True),
                "optbench": lambda: Adafactor(params)}
    ms = {}
    for name, make in variants.items():  # one optimizer at a time: torch's temporaries freed in between
        ms[name] = median_ms(make(), min_run_time=3.0 if name == "optbench" else 4.0)
    cost = step_cost("Adafactor", [{"params": params}])
    gb_s = bandwidth(torch.device("cpu"), cost.working_set).gb_per_s
    roofline_ms = cost.bytes / gb_s / 1e6
    fastest = min(("for-loop", "foreach"), key=ms.get)
    print(f"\nAdafactor step, {numel / 1e6:.1f}M float32 parameters in {len(params)} tensors, "
          f"{torch.get_num_threads()} threads; roofline {roofline_ms:.1f} ms ({cost.bytes_per_param:.1f} B/param "
          f"at {gb_s:.1f} GB/s)")
    for name, value in ms.items():
        print(f"  {name:9s} {value:8.1f} ms  {value / ms['optbench']:5.2f}x optbench's  "
              f"{value / roofline_ms:5.2f}x roofline")
    print(f"  optbench is {ms[fastest] / ms['optbench']:.2f}x faster than torch's fastest ({fastest})")
    assert ms[fastest] / ms["optbench"] >= 4.0
    assert ms["optbench"] <= 1.5 * roofline_ms, "more than 1.5x the measured roofline"
