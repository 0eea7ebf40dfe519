"""Interleaved rounds: the steps being compared are timed round by round in a random order, so that drift on the
machine (another process, a frequency change, a warming cache) lands on every side alike, and every ratio is
taken within a round (paired), with a bootstrap interval.

Each contender (an implementation's step on a workload, or the bandwidth probe's stream) is first warmed up and
sized with torch.utils.benchmark's ``Timer.blocked_autorange`` on a short run (``round_s``): a round of it is
then ``number`` calls, about ``round_s`` long. Each round times every live contender once, in an order drawn
from a seeded generator (Google Benchmark's random interleaving), each block with the same Timer
(``Timer._timeit``: the block primitive ``blocked_autorange`` itself loops over; it synchronises the
accelerator). Rounds go on until ``min_rounds`` rounds and ``min_run_time`` of samples per contender, or until
the set has run ``max_run_time``. A contender that raises is dropped from later rounds; its exception is its
result.

A paired ratio is the median over rounds of (a's round time / b's round time in the same round); its interval a
percentile bootstrap of that median (``scipy.stats.bootstrap``, a fixed seed).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

import numpy as np
import torch
import torch.utils.benchmark as benchmark

from optbench.perf.timing import Timing

METHOD = "interleaved rounds (torch.utils.benchmark.Timer), random order per round"
BOOTSTRAP_RESAMPLES = 2000


@dataclass
class Contender:
    key: Hashable
    step: Callable[[], object]


@dataclass(frozen=True)
class Rounds:
    """Each contender's round times (mean seconds per call), index r of each taken in the same round r."""

    timings: dict  # key -> Timing (its rounds in round order; a contender that raised has none)
    failed: dict  # key -> the exception it raised
    order_seed: int

    def paired(self, a: Hashable, b: Hashable, scale: float = 1.0, confidence: float = 0.95) -> Ratio | None:
        """``scale`` x a / b over the rounds both ran: their median and its bootstrap interval (None without
        three rounds in common)."""
        if a not in self.timings or b not in self.timings:
            return None
        return paired_ratio(np.asarray(self.timings[a].rounds) * scale, np.asarray(self.timings[b].rounds),
                            confidence)


@dataclass(frozen=True)
class Ratio:
    median: float
    low: float
    high: float
    rounds: int

    def describe(self, confidence: float = 0.95) -> str:
        return (f"{self.median:.3g} [{self.low:.3g}, {self.high:.3g}] "
                f"({confidence:.0%} CI over {self.rounds} paired rounds)")


def paired_ratio(a: np.ndarray, b: np.ndarray, confidence: float = 0.95) -> Ratio | None:
    """Median over rounds of a[r] / b[r] (rounds where both are finite) with a percentile-bootstrap interval."""
    from scipy import stats  # (imported here: 0.75 s a process that never tests)

    ratios = a / b
    ratios = ratios[np.isfinite(ratios) & (ratios > 0)]
    if len(ratios) < 3:
        return None
    median = float(np.median(ratios))
    if np.ptp(ratios) == 0:
        return Ratio(median, median, median, len(ratios))
    found = stats.bootstrap((ratios,), np.median, confidence_level=confidence, n_resamples=BOOTSTRAP_RESAMPLES,
                            method="percentile", vectorized=True, rng=np.random.default_rng(0))
    return Ratio(median, float(found.confidence_interval.low), float(found.confidence_interval.high), len(ratios))


def interleaved(contenders: list[Contender], *, min_run_time: float = 0.5, min_rounds: int = 10,
                max_run_time: float = 60.0, seed: int = 0) -> Rounds:
    """Time ``contenders`` (each already stepped once: state created, compiled) in interleaved rounds."""
    threads = torch.get_num_threads()
    round_s = min_run_time / max(1, min_rounds)
    timers, numbers, failed = {}, {}, {}
    for c in contenders:
        timer = benchmark.Timer(stmt="step()", globals={"step": c.step}, num_threads=threads)
        try:
            first = timer.blocked_autorange(min_run_time=round_s)  # the warm-up; sizes the round
        except Exception as exc:
            failed[c.key] = exc
            continue
        timers[c.key] = timer
        numbers[c.key] = max(first.number_per_run, math.ceil(round_s / max(first.median, 1e-9)))
    samples: dict = {k: [] for k in timers}
    rng = np.random.default_rng(seed)
    started, rounds = time.perf_counter(), 0
    while timers:
        keys = list(timers)
        for i in rng.permutation(len(keys)):
            key = keys[i]
            try:
                samples[key].append(timers[key]._timeit(numbers[key]) / numbers[key])
            except Exception as exc:
                failed[key] = exc
                del timers[key]
        rounds += 1
        enough = all(sum(samples[k]) * numbers[k] >= min_run_time for k in timers)  # seconds timed so far
        if (rounds >= min_rounds and enough) or time.perf_counter() - started >= max_run_time:
            break
    timings = {k: Timing(tuple(v), numbers[k], threads, METHOD) for k, v in samples.items() if k not in failed}
    return Rounds(timings, failed, seed)
