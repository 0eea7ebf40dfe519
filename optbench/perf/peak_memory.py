"""The step's peak transient memory: how far allocations rise above what was live before the step.

On CUDA this is the caching allocator's own peak (``torch.cuda.max_memory_allocated`` after a reset,
minus what was allocated before). On CPU there is no allocator statistic, so the step runs under
``torch.profiler`` with ``profile_memory=True`` and the allocation records (every alloc and free, in
order, with its size) are summed into the live-bytes curve; its maximum is the peak. A for-loop step
peaks at a few parameter-sized temporaries; a foreach step holds one temporary per parameter of the
list at once (PyTorch #97712); fused steps allocate next to nothing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from contextlib import contextmanager

import torch
from torch.profiler import ProfilerActivity, profile


@contextmanager
def _quiet_stderr():
    """Kineto prints profiler_start/stop lines on the process's stderr; hide them for the step."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def peak_transient_bytes(step: Callable[[], object], device: torch.device) -> int:
    """Run ``step`` once and return its peak transient allocation in bytes."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        step()
        torch.cuda.synchronize(device)
        return max(0, torch.cuda.max_memory_allocated(device) - before)
    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    records = sorted((e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"),
                     key=lambda e: e.start_ns())
    live = peak = 0
    for record in records:
        live += record.nbytes()
        peak = max(peak, live)
    return peak
