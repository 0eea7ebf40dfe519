"""Is this machine quiet enough to time on? What the run sees of the machine while a case is timed, and the
reason its numbers cannot be trusted ("" when they can): pyperf's idea (warn, never print a number from a
busy machine as a fact), measured three ways, each a sign other work competed for the cores:

* **CPU share**: the CPU time this process got over the wall time it was timed (``resource.getrusage``), on a
  CPU device. A step that had a core to itself gets about 1 (more with intra-op threads); under
  ``MIN_CPU_SHARE`` the scheduler gave the core to someone else part of the time.
* **Runnable tasks**: the kernel's count of runnable tasks (``/proc/loadavg``) beyond this process's own threads,
  sampled before and after (the fewer of the two: a task seen once was passing through), against the cores:
  oversubscribed cores time the queue, not the step.
* **Spread**: the rounds' coefficient of variation over ``MAX_CV``: a quiet step repeats within a few percent.

Thresholds are documented in docs/performance.md; off Linux the task count is not read.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path

MIN_CPU_SHARE = 0.7  # of one core, over the timed interval
MAX_CV = 0.25  # of the rounds' step times
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

    def start(self) -> None:
        self._wall, self._cpu, self._tasks = time.perf_counter(), _cpu_seconds(), _running_tasks()

    def stop(self) -> None:
        wall = time.perf_counter() - self._wall
        self.cpu_share = (_cpu_seconds() - self._cpu) / wall if wall > 0 else float("nan")
        seen = [t for t in (self._tasks, _running_tasks()) if t is not None]
        self.busy_tasks = min(seen) if seen else None  # in both samples: a competitor, not a passing task
        self.load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")

    def why_unstable(self, cv: float, on_cpu: bool) -> str:
        """Why the case's timing is not to be trusted, "" if nothing says so."""
        reasons = []
        if on_cpu and self.cpu_share < MIN_CPU_SHARE:
            reasons.append(f"the step got {self.cpu_share:.2f} of a core while timed (other processes competed: "
                           f"under {MIN_CPU_SHARE})")
        if self.busy_tasks is not None and self.busy_tasks >= self.cores:
            reasons.append(f"{self.busy_tasks} other runnable tasks on {self.cores} cores (oversubscribed)")
        if cv == cv and cv > MAX_CV:
            reasons.append(f"rounds spread {cv:.0%} (CV over {MAX_CV:.0%})")
        return "; ".join(reasons)
