"""Is this machine quiet enough to time on? What the run sees of the machine while a case is timed, and the
reason its numbers cannot be trusted ("" when they can): pyperf's idea (warn, never print a number from a
busy machine as a fact), measured three ways, each a sign other work competed for the cores:

* **CPU share**: the CPU time this process got over the wall time it was timed (``resource.getrusage``), on a
  CPU device. A step that had a core to itself gets about 1 (more with intra-op threads); under
  ``MIN_CPU_SHARE`` the scheduler gave the core to someone else part of the time.
* **Runnable tasks**: the kernel's count of runnable tasks (``/proc/loadavg``) beyond this process's own threads,
  sampled before and after (the fewer of the two: a task seen once was passing through), against the cores the
  step's threads need: with one of two cores held by another job, a two-thread Adam step took 1,674 ms instead of
  about 20 ms (its threads wait on each other) while its rounds looked steady enough; oversubscribed cores time the
  queue, not the step.
* **Spread**: the rounds' interquartile range over their median past ``MAX_SPREAD``: a quiet step repeats within
  a few percent. A round past Tukey's far-out fence stalled (another process took the core for part of it): the
  stalled rounds are set aside and counted (``time.stalled_rounds``), from the spread and from the CPU share,
  unless more than ``MAX_STALLED`` of the rounds stalled.

Thresholds are documented in docs/performance.md; off Linux the task count is not read.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path

MIN_CPU_SHARE = 0.7  # of one core, over the timed interval (the stalled rounds' excess set aside)
MAX_SPREAD = 0.35  # the rounds' IQR over their median (a normal distribution's IQR is 1.35 sigma: about a CV of 26 %)
MAX_STALLED = 0.25  # of the rounds: past it the machine was busy, not momentarily interrupted
LOADAVG = "/proc/loadavg"


def _running_tasks() -> int | None:
    """Runnable tasks now other than this process's own threads (the 4th field of /proc/loadavg, running/total,
    less this process's threads in state R: torch's intra-op threads may still spin after a step)."""
    try:
        with open(LOADAVG, encoding="ascii") as f:
            running = int(f.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return None
    own = 0
    for task in Path("/proc/self/task").glob("*/stat"):
        try:
            own += task.read_text().rsplit(")", 1)[1].split()[0] == "R"
        except (OSError, IndexError):
            pass
    return max(0, running - max(own, 1))


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass
class Noise:
    """What was seen while one case was timed (``watch`` it around the timing), and the verdict."""

    cores: int = field(default_factory=lambda: len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                       else os.cpu_count() or 1)
    cpu_share: float = float("nan")
    busy_tasks: int | None = None  # runnable tasks beyond this one, the most seen
    load: float = float("nan")  # 1-minute load average at the end

    wall_s: float = float("nan")  # the timed interval
    cpu_s: float = float("nan")  # the CPU time this process got in it

    def start(self) -> None:
        self._wall, self._cpu, self._tasks = time.perf_counter(), _cpu_seconds(), _running_tasks()

    def stop(self) -> None:
        self.wall_s, self.cpu_s = time.perf_counter() - self._wall, _cpu_seconds() - self._cpu
        self.cpu_share = self.cpu_s / self.wall_s if self.wall_s > 0 else float("nan")
        seen = [t for t in (self._tasks, _running_tasks()) if t is not None]
        self.busy_tasks = min(seen) if seen else None  # in both samples: a competitor, not a passing task
        self.load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")

    def share(self, set_aside_s: float = 0.0) -> float:
        """The CPU share over the timed interval less ``set_aside_s`` (the stalled rounds' excess wall time)."""
        wall = self.wall_s - set_aside_s
        return self.cpu_s / wall if wall > 0 and self.cpu_s == self.cpu_s else self.cpu_share

    def why_unstable(self, spread: float, on_cpu: bool, stalled: int = 0, rounds: int = 0,
                     stalled_s: float = 0.0, threads: int = 1) -> str:
        """Why the case's timing is not to be trusted, "" if nothing says so: ``spread`` the rounds' IQR over their
        median, ``stalled`` of ``rounds`` rounds stalled (``Timing.stalled``), taking ``stalled_s`` of the wall
        time beyond median rounds (every case timed in the interval this noise watched: set aside from the share);
        a step on ``threads`` intra-op threads needs that many cores besides the other runnable tasks."""
        reasons = []
        many = rounds > 0 and stalled > MAX_STALLED * rounds
        share = self.share(0.0 if many else stalled_s)
        if on_cpu and share < MIN_CPU_SHARE:
            reasons.append(f"the step got {share:.2f} of a core while timed (other processes competed: "
                           f"under {MIN_CPU_SHARE})")
        if self.busy_tasks is not None and self.busy_tasks + max(1, threads) > self.cores:
            reasons.append(f"{self.busy_tasks} other runnable tasks on {self.cores} cores, for a step on "
                           f"{max(1, threads)} thread(s) (oversubscribed: its threads wait on each other)")
        if spread == spread and spread > MAX_SPREAD:
            reasons.append(f"rounds spread {spread:.0%} (IQR over the median, past {MAX_SPREAD:.0%})")
        if many:
            reasons.append(f"{stalled} of {rounds} rounds stalled (more than {MAX_STALLED:.0%})")
        return "; ".join(reasons)
