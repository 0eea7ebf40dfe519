"""How a step is timed: torch.utils.benchmark rounds, their median, IQR and coefficient of variation.

``measure`` runs ``Timer.blocked_autorange``: its block-size estimate runs the step a few times first
(the warm-up), then it times blocks of steps (each block long enough that the timer's own cost is
negligible) until ``min_run_time`` has passed. A block is a *round*; its mean step time is a sample.
When fewer than ``min_rounds`` rounds fit, it measures again with a longer run time (up to
``max_run_time``; the earlier measurement then only warmed up), so the significance test of
``optbench compare`` has samples to work with. The Timer synchronises the accelerator around each
block. On CUDA, ``flush_l2`` times each step alone with CUDA events and a flushed L2 cache
(``triton.testing.do_bench``, which ships with CUDA builds of torch), so a small step cannot run from a
warm cache. Threads are those torch uses, set by the caller and recorded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.utils.benchmark as benchmark

STALL_IQRS = 3.0  # Tukey's "far out": a round beyond the third quartile plus this many IQRs stalled ...
STALL_OVER_MEDIAN = 0.1  # ... and this much over the median (rounds within a fraction of a percent are no stall)


@dataclass(frozen=True)
class Timing:
    """Per-round mean step times in seconds, and the statistics users know."""

    rounds: tuple[float, ...]
    steps_per_round: int
    threads: int
    method: str

    @property
    def median(self) -> float:
        return float(np.median(self.rounds))

    @property
    def iqr(self) -> float:
        q1, q3 = np.percentile(self.rounds, [25, 75])
        return float(q3 - q1)

    @property
    def cv(self) -> float:
        """Coefficient of variation of the rounds (sample standard deviation over the mean)."""
        return float(np.std(self.rounds, ddof=1) / np.mean(self.rounds)) if len(self.rounds) > 1 else float("nan")

    @property
    def stall_fence(self) -> float:
        """A round longer than this stalled: Tukey's far-out fence, the third quartile plus three IQRs, and at least
        ``STALL_OVER_MEDIAN`` over the median (another process took the core for part of it; a quiet step's rounds
        never reach it)."""
        q1, q3 = np.percentile(self.rounds, [25, 75])
        fence = max(q3 + STALL_IQRS * (q3 - q1), (1 + STALL_OVER_MEDIAN) * self.median)
        return float(fence) if len(self.rounds) >= 4 else float("inf")

    @property
    def stalled(self) -> int:
        """Rounds past ``stall_fence``: set aside from the spread and the CPU share (the median, which the run
        reports, and compare's rank and repeat tests are not moved by a few)."""
        return int(sum(r > self.stall_fence for r in self.rounds))

    @property
    def stalled_s(self) -> float:
        """Wall time the stalled rounds took beyond a median round (seconds)."""
        fence, median = self.stall_fence, self.median
        return float(sum((r - median) * self.steps_per_round for r in self.rounds if r > fence))

    @property
    def spread(self) -> float:
        """The rounds' interquartile range over their median: their spread, a stalled round or two aside (the
        coefficient of variation ``cv`` is moved by one: one 70x round in ten reads as 239 %)."""
        return self.iqr / self.median if len(self.rounds) > 1 and self.median > 0 else float("nan")


def measure(step: Callable[[], object], device: torch.device, *, min_run_time: float = 0.2, min_rounds: int = 10,
            max_run_time: float = 30.0, flush_l2: bool = False) -> Timing:
    """Time ``step`` (already run once: state created, compiled)."""
    threads = torch.get_num_threads()
    if flush_l2 and device.type == "cuda":
        return _events_flushed(step, min_rounds, threads)
    timer = benchmark.Timer(stmt="step()", globals={"step": step}, num_threads=threads)
    m, run_time = timer.blocked_autorange(min_run_time=min_run_time), min_run_time
    for _ in range(3):  # the block size grows with the run time: re-aim at most three times
        if len(m.times) >= min_rounds or run_time >= max_run_time:
            break
        block = sum(m.raw_times) / len(m.raw_times)
        run_time = min(max_run_time, max(2 * run_time, 1.1 * min_rounds * block))
        m = timer.blocked_autorange(min_run_time=run_time)
    return Timing(tuple(m.times), m.number_per_run, threads, "torch.utils.benchmark.Timer.blocked_autorange")


def _events_flushed(step: Callable[[], object], rounds: int, threads: int) -> Timing:
    try:
        from triton.testing import do_bench
    except ImportError as exc:
        raise RuntimeError(f"speed.flush_l2 needs triton (it ships with CUDA builds of torch): {exc}") from None
    times_ms = do_bench(step, warmup=25, rep=max(100, 10 * rounds), return_mode="all")
    return Timing(tuple(t / 1e3 for t in times_ms), 1, threads, "triton.testing.do_bench (CUDA events, L2 flushed)")
