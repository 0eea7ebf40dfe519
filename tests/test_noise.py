"""The noise guard (optbench.perf.noise): timing while every core is busy is flagged unstable, saying why."""

import os
import subprocess
import sys
import time

import pytest
import torch

from optbench.perf.noise import Noise
from optbench.perf.timing import Timing, measure


@pytest.mark.skipif(not os.path.exists("/proc/loadavg"), reason="reads the runnable-task count of /proc/loadavg")
def test_timing_under_a_busy_process_on_every_core_is_flagged_unstable():
    cores = len(os.sched_getaffinity(0))
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(cores)]
    try:
        time.sleep(0.5)
        x = torch.zeros(1 << 16)
        noise = Noise()
        noise.start()
        timing = measure(lambda: x.add_(1.0), torch.device("cpu"), min_run_time=0.3, min_rounds=5)
        noise.stop()
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    why = noise.why_unstable(timing.spread, True, timing.stalled, len(timing.rounds), timing.stalled_s)
    assert "oversubscribed" in why or "of a core" in why, (noise, timing.spread)
    assert noise.busy_tasks is not None and noise.busy_tasks >= cores


def test_the_reasons_name_their_measure_and_threshold():
    noise = Noise(cores=2, cpu_share=0.4, busy_tasks=3)
    why = noise.why_unstable(spread=0.6, on_cpu=True, stalled=4, rounds=10)
    assert "0.40 of a core" in why and "3 other runnable tasks on 2 cores" in why and "rounds spread 60%" in why
    assert "4 of 10 rounds stalled (more than 25%)" in why
    assert Noise(cores=2, cpu_share=1.0, busy_tasks=0).why_unstable(spread=0.02, on_cpu=True) == ""


def test_a_stalled_round_or_two_are_set_aside_and_counted_not_a_busy_machine():
    """One 70x round in ten (another process took the core for a moment): the coefficient of variation calls that
    a spread of over 200 %, the IQR over the median sees the step's own few percent; the stalled rounds' wall time
    is set aside from the CPU share too. Most rounds stalled is a busy machine."""
    quiet = [3.79, 3.74, 3.84, 3.86, 3.81, 3.77, 3.80, 3.83, 3.76, 3.78, 3.82, 3.75]
    rounds = [r * 1e-3 for r in [3.79, 69.17, *quiet, 274.71]]
    timing = Timing(tuple(rounds), 10, 1, "test")
    assert timing.cv > 2.0 and timing.spread < 0.05 and timing.stalled == 2
    assert timing.stalled_s == pytest.approx(10 * (69.17 + 274.71 - 2 * timing.median * 1e3) * 1e-3)
    assert Timing(tuple(quiet), 10, 1, "test").stalled == 0  # a quiet step's rounds never reach the fence
    steady = Timing((1.704, 1.704, 1.7041, 1.7039, 1.704, 1.7043, 1.7047), 1, 2, "test")
    assert steady.stalled == 0  # far out of a tiny IQR, but 0.04 % over the median: no stall
    wall = sum(rounds) * 10  # a core to itself but for the stalls: CPU time is the quiet rounds' wall time
    noise = Noise(cores=2, busy_tasks=0, wall_s=wall, cpu_s=wall - timing.stalled_s, cpu_share=0.0)
    noise.cpu_share = noise.cpu_s / noise.wall_s
    assert noise.cpu_share < 0.7  # what the share said before the stalls were set aside
    assert noise.why_unstable(timing.spread, True, timing.stalled, len(rounds), timing.stalled_s) == ""
    busy = Timing(tuple(r * 1e-3 for r in [*quiet[:6], *[70.0] * 6]), 10, 1, "test")
    assert "rounds spread" in noise.why_unstable(busy.spread, True, busy.stalled, 12, busy.stalled_s)


def test_a_step_on_more_threads_than_the_cores_left_free_is_oversubscribed():
    """One of two cores held by another job: a two-thread step waits on it (1,704 ms instead of about 20 ms, with
    rounds steady to 0.1 %), a one-thread step has the free core."""
    noise = Noise(cores=2, cpu_share=1.0, busy_tasks=1)
    why = noise.why_unstable(spread=0.001, on_cpu=True, threads=2)
    assert "1 other runnable tasks on 2 cores, for a step on 2 thread(s) (oversubscribed" in why
    assert noise.why_unstable(spread=0.001, on_cpu=True, threads=1) == ""
