"""Timing one case on its timing workload: the optimizer built and stepped once (state created, compiled),
then timed with ``optbench.perf.timing.measure`` and set against the roofline. The speed, memory and scaling
checks all time cases this way."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from optbench.adapters.quantized import CODE_BYTES, declared, quantizes
from optbench.cases import Case, RunContext
from optbench.implementations.candidate import first_buildable
from optbench.metrics import (
    ROOFLINE_BYTES_PER_PARAM,
    ROOFLINE_FLOOR_ROUND_MS,
    ROOFLINE_MATMUL_GFLOPS,
    ROOFLINE_PCT,
    ROOFLINE_PCT_CI_HIGH,
    ROOFLINE_PCT_CI_LOW,
    ROOFLINE_PROBE_GB_PER_S,
    SPEED_GB_PER_S,
    SPEED_PARAMS_PER_S,
    SPEED_THREADS,
    TIME_COMPILE_S,
    TIME_CPU_SHARE,
    TIME_ROUND_MS,
    TIME_ROUNDS,
    TIME_STALLED_ROUNDS,
    TIME_STEP_MS,
    TIME_STEP_MS_CV,
    TIME_STEP_MS_IQR,
    TIME_STEPS_PER_ROUND,
    TIME_UNSTABLE,
)
from optbench.numerics.recording import objective_closure, set_gradients
from optbench.perf import ceilings
from optbench.perf.interleave import paired_ratio
from optbench.perf.noise import Noise
from optbench.perf.roofline import step_cost
from optbench.perf.timing import STALL_IQRS, Timing, measure
from optbench.results import row
from optbench.state.batched import per_parameter_state
from optbench.state.subclasses import plain_state
from optbench.suite.spec import DTYPES, Suite
from optbench.workloads import speed as speed_workloads


def state_bytes(optimizer: torch.optim.Optimizer, params: dict[str, torch.Tensor]) -> dict[str, int]:
    """Bytes of optimizer state per FQN (tensors only; Python scalars count as nothing; a tensor subclass that wraps
    others, torchao's quantized state, as the bytes of its inner tensors: codes, scales and map)."""
    states = per_parameter_state(optimizer)  # a batched optimizer's stacks, row by row
    return {
        name: sum(v.numel() * v.element_size() for v in plain_state(states.get(p, {})).values()
                  if isinstance(v, torch.Tensor))
        for name, p in params.items()
    }


def stepped_once(case: Case, ctx: RunContext):
    """Build the case's optimizer on its timing workload and step once (state created, compiled);
    (stepper, params, step callable, seconds the first step took)."""
    workload = ctx.timing_workload(case.suite, case.hset, case.dtype, case.workload or "model")
    params = workload.materialize(DTYPES[case.dtype], ctx.device)
    stepper = case.hset.build(case.impl, params)
    if workload.objective is not None:
        closure = objective_closure(stepper.optimizer, params, workload)
        step = lambda: stepper.step(closure)  # noqa: E731
    else:
        if not isinstance(workload, speed_workloads.SpeedWorkload):
            set_gradients(params, workload, 0)
        step = stepper.step
    had = [n for n, p in params.items() if p.grad is not None]
    started = time.perf_counter()
    step()
    if ctx.device.type == "cuda":
        torch.cuda.synchronize(ctx.device)
    first_s = time.perf_counter() - started
    if lost := [n for n in had if params[n].grad is None]:  # every later timed step would step nothing
        raise RuntimeError(f"the step set .grad to None on {len(lost)} of {len(had)} parameters (e.g. {lost[0]}): "
                           "a timed step would step nothing; keep the gradients (a candidate spec's fixed: can pass "
                           "the library's option, e.g. heavyball's consume_grad: false)")
    return stepper, params, step, first_s


@dataclass
class Prepared:
    """A case ready to time: its optimizer stepped once on the timing workload, and the step's cost."""

    stepper: object
    params: dict
    step: object
    first_s: float
    cost: object  # optbench.perf.roofline's StepCost, or None without a roofline model
    stepped: int  # parameter elements stepped

    def working_set(self) -> int | None:
        return self.cost.working_set if self.cost is not None and self.cost.params else None


def quantized_state_bytes(case: Case):
    """For a candidate whose spec declares quantized state, the bytes per element of a parameter's state arrays the
    roofline counts (a code, a byte or 4-bit half of one, and a float32 scale per block where it quantizes, the
    parameter's own size elsewhere); None otherwise."""
    spec = case.impl.spec if case.impl is not None and case.impl.is_candidate else None
    if (q := declared(spec)) is None:
        return None
    per_element = CODE_BYTES[q["scheme"]] + 4 / q["blocksize"]
    return lambda p: per_element if quantizes(spec, p.numel()) else p.element_size()


def prepare(case: Case, ctx: RunContext) -> Prepared:
    stepper, params, step, first_s = stepped_once(case, ctx)
    optimizer = case.suite.optimizer or type(stepper.optimizer).__name__
    cost = step_cost(optimizer, stepper.optimizer.param_groups, case.suite.roofline, quantized_state_bytes(case))
    stepped = sum(p.numel() for p in params.values() if p.grad is not None)
    return Prepared(stepper, params, step, first_s, cost, stepped)


def timing_rows(case: Case, ctx: RunContext, check: str) -> tuple[list[dict], Timing, float, int]:
    """Time the case alone; rows for its statistics, samples, compile time and roofline (the probe timed after
    it); (rows, timing, roofline %, parameters stepped)."""
    prepared = prepare(case, ctx)
    cfg = ctx.settings.speed
    noise = Noise()
    noise.start()
    timing = measure(prepared.step, ctx.device, min_run_time=float(cfg.min_run_time),
                     min_rounds=int(cfg.min_rounds), max_run_time=float(cfg.max_run_time),
                     flush_l2=bool(cfg.get("flush_l2")))
    noise.stop()
    unstable = noise.why_unstable(timing.spread, ctx.device.type == "cpu", timing.stalled, len(timing.rounds),
                                  timing.stalled_s, timing.threads)
    rows, pct = case_rows(case, ctx, check, prepared, timing, noise, unstable)
    return rows, timing, pct, prepared.stepped


def case_rows(case: Case, ctx: RunContext, check: str, prepared: Prepared, timing: Timing, noise: Noise,
              unstable: str, probe: tuple[Timing, int, str] | None = None) -> tuple[list[dict], float]:
    """A timed case's rows: statistics, round samples, compile time, roofline; (rows, roofline %). ``probe``: the
    bandwidth probe's rounds timed beside the step's (interleaved: round r of each in the same round), the bytes
    one probe call moves and its kernel; without it the probe is measured now, apart."""
    labels, t = case.labels, timing.median
    rows = [row(labels, check=check, metric=TIME_STEP_MS, value=t * 1e3, unit="ms", detail=timing.method),
            row(labels, check=check, metric=TIME_STEP_MS_IQR, value=timing.iqr * 1e3, unit="ms"),
            row(labels, check=check, metric=TIME_STEP_MS_CV, value=timing.cv),
            row(labels, check=check, metric=TIME_STALLED_ROUNDS, value=timing.stalled,
                detail=(f"rounds past the third quartile plus {STALL_IQRS:g} IQRs ({timing.stall_fence * 1e3:.3g} ms): "
                        "set aside from the spread and the CPU share" if timing.stalled else "")),
            row(labels, check=check, metric=TIME_ROUNDS, value=len(timing.rounds)),
            row(labels, check=check, metric=TIME_STEPS_PER_ROUND, value=timing.steps_per_round),
            row(labels, check=check, metric=SPEED_THREADS, value=timing.threads),
            row(labels, check=check, metric=TIME_CPU_SHARE, value=noise.cpu_share,
                detail=f"load average {noise.load:.2f} on {noise.cores} cores"
                       + (f"; {noise.busy_tasks} other runnable task(s) while timed" if noise.busy_tasks else "")),
            row(labels, check=check, metric=TIME_UNSTABLE, value=int(bool(unstable)),
                detail=f"timed on a busy machine: {unstable}" if unstable else "")]
    rows += [row(labels, check=check, metric=TIME_ROUND_MS, value=s * 1e3, unit="ms", step=i)
             for i, s in enumerate(timing.rounds)]
    if case.impl.compiled:
        rows.append(row(labels, check=check, metric=TIME_COMPILE_S, value=prepared.first_s, unit="s",
                        detail="the first step: dynamo trace + inductor compile, apart from the step time"))
    rows.append(row(labels, check=check, metric=SPEED_PARAMS_PER_S, value=prepared.stepped / t, unit="params/s"))
    cost, cfg, pct = prepared.cost, ctx.settings.speed, float("nan")
    if cost is None or not cost.params:
        return rows, pct
    if probe is None:
        bw = ceilings.bandwidth(ctx.device, cost.working_set, min_run_time=float(cfg.probe_run_time))
        gb_per_s, kernel, how = bw.gb_per_s, bw.kernel, "timed after the step"
        floors = np.full(len(timing.rounds), cost.bytes / (gb_per_s * 1e9))
    else:
        probe_timing, probe_bytes, kernel = probe
        gb_per_s, how = probe_bytes / probe_timing.median / 1e9, "interleaved with the step, round by round"
        floors = np.asarray(probe_timing.rounds) * (cost.bytes / probe_bytes)
    what = f"bandwidth probe {kernel} at a {cost.working_set / 1e6:.3g} MB working set ({how})"
    if cost.flops:
        largest = max((p for p in prepared.params.values() if p.grad is not None and p.dim() == 2),
                      key=torch.Tensor.numel)
        rate = ceilings.matmul_flops(ctx.device, tuple(largest.shape), torch.bfloat16,
                                     min_run_time=float(cfg.probe_run_time))
        floors = np.maximum(floors, cost.flops / rate)
        rows.append(row(labels, check=check, metric=ROOFLINE_MATMUL_GFLOPS, value=rate / 1e9, unit="GFLOP/s",
                        detail=f"bfloat16 x @ x.T at {tuple(largest.shape)}"))
        what += f" and {rate / 1e9:.0f} GFLOP/s bfloat16 matmul ({cost.flops / cost.params:.0f} FLOP/param)"
    paired = paired_ratio(100 * floors, np.asarray(timing.rounds)) if probe is not None else None
    pct = paired.median if paired is not None else float(100 * np.median(floors) / t)
    if paired is not None:
        rows += [row(labels, check=check, metric=ROOFLINE_FLOOR_ROUND_MS, value=f * 1e3, unit="ms", step=i)
                 for i, f in enumerate(floors)]
        rows += [row(labels, check=check, metric=ROOFLINE_PCT_CI_LOW, value=paired.low, unit="%"),
                 row(labels, check=check, metric=ROOFLINE_PCT_CI_HIGH, value=paired.high, unit="%")]
        what += f"; paired over {paired.rounds} rounds, 95% CI [{paired.low:.0f}, {paired.high:.0f}] %"
    if unstable:
        what += f"; UNSTABLE, not the step's own: {unstable}"
    rows += [row(labels, check=check, metric=SPEED_GB_PER_S, value=cost.bytes / t / 1e9, unit="GB/s"),
             row(labels, check=check, metric=ROOFLINE_BYTES_PER_PARAM, value=cost.bytes_per_param, unit="B"),
             row(labels, check=check, metric=ROOFLINE_PROBE_GB_PER_S, value=gb_per_s, unit="GB/s", detail=what),
             row(labels, check=check, metric=ROOFLINE_PCT, value=pct, unit="%", detail=what)]
    return rows, pct


def runnable_cases(suite: Suite, ctx: RunContext, dtypes: list[str] | None = None) -> list[Case]:
    """One timing case per implementation and dtype that runs here, on the suite's first hparam set (a candidate's:
    the first it takes and builds, ``first_buildable``; where there is none, the first, whose case then errs);
    ``dtypes``: those measured (speed.dtypes, memory.dtypes; None: every one), ``measured_dtypes``."""
    cases = _runnable(suite, ctx)
    if dtypes is None:
        return cases
    measured = measured_dtypes(cases, dtypes)
    return [c for c in cases if c.dtype in measured]


def _runnable(suite: Suite, ctx: RunContext) -> list[Case]:
    out = []
    for dtype in ctx.dtypes[suite.name]:
        for impl in ctx.impls[suite.name]:
            if ctx.unavailable(impl, dtype):
                continue
            hset = suite.hparams[0]
            if impl.is_candidate:
                probe = {"weight": torch.nn.Parameter(torch.zeros(2, 2, dtype=DTYPES[dtype], device=ctx.device))}
                hset = first_buildable(impl, suite.hparams, probe) or hset
            out.append(Case(suite, impl, dtype, hset, ctx.device, workload="model"))
    return out


def setting_names(value, every: tuple | None) -> list[str] | None:
    """A setting of names (speed.edge_cases, speed.dtypes, speed.edge_dtypes, memory.dtypes) as a list: one name,
    a list, or all (``every``; None for a dtype setting: every dtype the run has). Null: None."""
    if value is None or value == "all":
        return None if value is None or every is None else list(every)
    return [str(value)] if isinstance(value, str) else [str(v) for v in value]


def measured_dtypes(cases: list[Case], preferred: list[str]) -> set[str]:
    """The dtypes measured: the run's among ``preferred`` (speed.dtypes, memory.dtypes), and for an implementation
    that runs none of them (a float64-only candidate, a run at one other dtype) the first it runs, so that every
    implementation is measured, beside its baseline."""
    chosen = {c.dtype for c in cases if c.dtype in preferred}
    for impl in dict.fromkeys(c.impl_name for c in cases):
        own = [c.dtype for c in cases if c.impl_name == impl]
        if not chosen & set(own):
            chosen.add(own[0])
    return chosen
