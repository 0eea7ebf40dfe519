"""How step time and % of roofline scale: a sweep over model size and over tensor count.

Opt-in (``checks=[scaling]``). Each implementation is timed (as the speed check times, with the same
roofline) on the model-shaped workload at each of ``scaling.params`` (about 1e5 to 1e8 parameters) and
on ``scaling.tensors_params`` parameters split into each of ``scaling.tensor_counts`` equal tensors
(many small vs few large; the compiled variant up to 64 tensors, as inductor takes minutes over
thousands). A size whose parameters, gradients, state and a foreach temporary per
parameter would pass ``scaling.memory_fraction`` of the device's available memory is a skip row,
never an out-of-memory crash. The report draws log-log lines per implementation.
"""

from __future__ import annotations

from pathlib import Path

import torch

from optbench.cases import Case, Outcome, RunContext
from optbench.checks.registry import register_check
from optbench.metrics import CASE_SKIP, SCALING_PARAMS, SCALING_TENSORS
from optbench.perf.case_timing import timing_rows
from optbench.perf.roofline import STREAMS
from optbench.report import performance
from optbench.results import row
from optbench.suite.spec import DTYPES, Suite

MAX_COMPILED_TENSORS = 64


def available_bytes(device: torch.device) -> int:
    """Free memory on ``device``: CUDA's free bytes, or the kernel's MemAvailable."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 1 << 62


def needed_bytes(optimizer: str, params: int, dtype: torch.dtype) -> int:
    """Parameters, gradients, state (the roofline's state passes / 2) and one temporary per parameter."""
    state_arrays = (STREAMS.get(optimizer, 7) - 3) // 2
    return (3 + state_arrays) * params * torch.empty((), dtype=dtype).element_size()


def workload_names(cfg) -> list[str]:
    return ([f"params-{float(n):.0e}" for n in cfg.params or ()]
            + [f"tensors-{int(k)}" for k in cfg.tensor_counts or ()])


@register_check(
    alone=True, timed=True,
    # opt-in: step time and % of roofline against size. params: model-shaped sizes (one whose step would not fit
    # in memory skips); tensor_counts: the same total (tensors_params) split into this many equal tensors;
    # memory_fraction: skip a size whose parameters, gradients, state and foreach temporaries exceed this fraction
    # of the available memory
    config={"params": [1.0e+5, 1.0e+6, 1.0e+7, 1.0e+8], "tensor_counts": [8, 64, 512, 4096],
            "tensors_params": 1.0e+6, "dtypes": ["float32"], "memory_fraction": 0.5},
    sections=lambda rows: [("Scaling", performance.scaling(rows))])
class ScalingCheck:
    name = "scaling"
    requires = ()

    def cases(self, suite: Suite, ctx: RunContext) -> list[Case]:
        cfg = ctx.settings.scaling
        hset = suite.hparams[0]
        dtypes = [d for d in ctx.dtypes[suite.name] if cfg.dtypes is None or d in cfg.dtypes]
        skip = "" if suite.workload_of(hset) == "transformer" else \
            f"the {suite.workload_of(hset)} workload has no model-shaped sizes (sparse gradients or a closure)"
        return [Case(suite, impl, dtype, hset, ctx.device, workload=name, skip=skip or self._too_long(impl, name))
                for dtype in dtypes for impl in ctx.impls[suite.name] if not ctx.unavailable(impl, dtype)
                for name in workload_names(cfg)]

    @staticmethod
    def _too_long(impl, workload: str) -> str:
        count = int(workload.split("-")[1]) if workload.startswith("tensors-") else 0
        if impl.compiled and count > MAX_COMPILED_TENSORS:
            return (f"compiling a step over {count} tensors takes minutes "
                    f"(the compiled variant runs up to {MAX_COMPILED_TENSORS})")
        return ""

    def group(self, case: Case) -> tuple:
        return (case.suite.name, self.name)

    def run(self, case: Case, ctx: RunContext) -> Outcome:
        labels = case.labels
        if case.skip:
            return Outcome([row(labels, check=self.name, metric=CASE_SKIP, value=0, status="skip", detail=case.skip)])
        workload = ctx.timing_workload(case.suite, case.hset, case.dtype, case.workload)
        need = needed_bytes(case.suite.optimizer or "", workload.numel, DTYPES[case.dtype])
        budget = float(ctx.settings.scaling.memory_fraction) * available_bytes(ctx.device)
        size_rows = [row(labels, check=self.name, metric=SCALING_PARAMS, value=workload.numel),
                     row(labels, check=self.name, metric=SCALING_TENSORS, value=len(workload.specs))]
        if need > budget:
            why = (f"needs about {need / 1e9:.1f} GB, more than {budget / 1e9:.1f} GB "
                   "(scaling.memory_fraction of free memory)")
            return Outcome(size_rows + [row(labels, check=self.name, metric=CASE_SKIP, value=0, status="skip",
                                            detail=why)],
                           f"  scaling {case.impl_name:>10} {case.workload}: skip, {why}")
        rows, timing, pct, _ = timing_rows(case, ctx, self.name)
        return Outcome(size_rows + rows, f"  scaling {case.impl_name:>10} {case.dtype:>8} {case.workload:>14} "
                                         f"({workload.numel:.2e} params, {len(workload.specs)} tensors): "
                                         f"{timing.median * 1e3:9.3f} ms/step, {pct:.0f}% of roofline")
