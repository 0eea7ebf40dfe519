"""What the device allows, measured in the same run: memory bandwidth and matmul rate.

The bandwidth probe times three in-place streams over float32 buffers whose total size is the step's
working set (so the probe sees the same level of the memory hierarchy as the step), and keeps the best:

* ``scale``:   ``a.mul_(s)``          reads and writes a       (8 B/element)
* ``axpy``:    ``a.add_(b, alpha=s)`` reads a, b; writes a     (12 B/element)
* ``addcmul``: ``a.addcmul_(b, c)``   reads a, b, c; writes a  (16 B/element)

Optimizer steps are in-place updates of this kind. An out-of-place ``copy_`` is not a ceiling: on a
write-allocate cache its destination is read before it is written, so it moves 12 B while counting 8
and shows a third less bandwidth than the hardware gives (measured on the 2-core CI machine: copy_
19-25 GB/s against 35-50 GB/s for in-place streams; docs/performance.md). The matmul probe times
``x @ x.T`` at a given shape and dtype (Muon's Newton-Schulz step). Both use torch.utils.benchmark.
Results are cached per device, thread count and size for the life of the process.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch
import torch.utils.benchmark as benchmark

MIN_BYTES = 1 << 16
STREAM_BYTES = {"scale": 8, "axpy": 12, "addcmul": 16}  # bytes moved per element of ``a``
STREAM_ARRAYS = {"scale": 1, "axpy": 2, "addcmul": 3}


@dataclass(frozen=True)
class Bandwidth:
    gb_per_s: float
    kernel: str
    working_set: int
    by_kernel: tuple[tuple[str, float], ...]


def _median_s(stmt: str, env: dict, threads: int, min_run_time: float) -> float:
    timer = benchmark.Timer(stmt=stmt, globals=env, num_threads=threads)
    return timer.blocked_autorange(min_run_time=min_run_time).median


def probe_stream(device: torch.device, working_set: int, kernel: str):
    """The bandwidth probe's ``kernel`` over ``working_set`` bytes as a step to time beside an optimizer's (the
    interleaved rounds of optbench.perf.interleave): (a callable, the bytes one call moves)."""
    size = max(MIN_BYTES, int(float(f"{working_set:.2g}")))
    n = size // (4 * STREAM_ARRAYS[kernel])
    a, b, c = (torch.rand(n, device=device) + 0.5 for _ in range(3))
    call = {"scale": lambda: a.mul_(1.0000001), "axpy": lambda: a.add_(b, alpha=1e-7),
            "addcmul": lambda: a.addcmul_(b, c, value=1e-7)}[kernel]
    return call, STREAM_BYTES[kernel] * n


def bandwidth(device: torch.device, working_set: int, threads: int | None = None,
              min_run_time: float = 0.1) -> Bandwidth:
    """The best in-place stream bandwidth (GB/s) over ``working_set`` bytes on ``device``."""
    threads = threads or torch.get_num_threads()
    # rounded to two significant digits so nearly equal sizes share one probe
    size = max(MIN_BYTES, int(float(f"{working_set:.2g}")))
    return _bandwidth(str(device), size, threads, min_run_time)


@lru_cache(maxsize=64)
def _bandwidth(device: str, working_set: int, threads: int, min_run_time: float) -> Bandwidth:
    dev = torch.device(device)
    found = []
    for kernel, arrays in STREAM_ARRAYS.items():
        n = working_set // (4 * arrays)
        a, b, c = (torch.rand(n, device=dev) + 0.5 for _ in range(3))
        stmt = {"scale": "a.mul_(1.0000001)", "axpy": "a.add_(b, alpha=1e-7)",
                "addcmul": "a.addcmul_(b, c, value=1e-7)"}
        seconds = _median_s(stmt[kernel], {"a": a, "b": b, "c": c}, threads, min_run_time)
        found.append((kernel, STREAM_BYTES[kernel] * n / seconds / 1e9))
        del a, b, c
    kernel, best = max(found, key=lambda kv: kv[1])
    return Bandwidth(best, kernel, working_set, tuple(found))


@lru_cache(maxsize=64)
def _matmul(device: str, rows: int, cols: int, dtype: torch.dtype, threads: int, min_run_time: float) -> float:
    x = torch.randn(rows, cols, device=device).to(dtype)
    seconds = _median_s("x @ x.T", {"x": x}, threads, min_run_time)
    return 2 * rows * rows * cols / seconds


def matmul_flops(device: torch.device, shape: tuple[int, int], dtype: torch.dtype, threads: int | None = None,
                 min_run_time: float = 0.1) -> float:
    """FLOP/s of ``x @ x.T`` for ``x`` of ``shape`` (short side first) in ``dtype``."""
    rows, cols = sorted(shape)
    return _matmul(str(device), rows, cols, dtype, threads or torch.get_num_threads(), min_run_time)
