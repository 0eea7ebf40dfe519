"""The noise guard (optbench.perf.noise): timing while every core is busy is flagged unstable, saying why."""

import os
import subprocess
import sys
import time

import pytest
import torch

from optbench.perf.noise import Noise
from optbench.perf.timing import measure


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
    why = noise.why_unstable(timing.cv, on_cpu=True)
    assert "oversubscribed" in why or "of a core" in why, (noise, timing.cv)
    assert noise.busy_tasks is not None and noise.busy_tasks >= cores


def test_the_reasons_name_their_measure_and_threshold():
    noise = Noise(cores=2, cpu_share=0.4, busy_tasks=3)
    why = noise.why_unstable(cv=0.6, on_cpu=True)
    assert "0.40 of a core" in why and "3 other runnable tasks on 2 cores" in why and "rounds spread 60%" in why
    assert Noise(cores=2, cpu_share=1.0, busy_tasks=0).why_unstable(cv=0.02, on_cpu=True) == ""
