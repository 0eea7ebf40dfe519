"""Step time of each implementation on a model-shaped workload, next to the roofline; edge cases apart.

Each (implementation, dtype) is timed on the contiguous ``model`` workload of ``speed.params``
parameters (optbench.workloads.speed) with ``optbench.timing.measure``. The step's bytes (and Muon's
FLOPs) come from ``optbench.roofline``, the ceilings from ``optbench.ceilings`` measured in this run
at the step's working set, so every row carries achieved GB/s and % of roofline. A compiled
variant's first step (the compile) is timed apart as ``time.compile_s``. At ``speed.edge_dtypes``
each edge case of the model (column-major weights, many tiny tensors, zero-size tensors, missing
grads) is timed as its own workload (eager variants: a compiled one would compile anew for each) and reported as ``speed.overhead``: its time per stepped
parameter over the model's.
"""

from __future__ import annotations

import time

import torch

from optbench import ceilings
from optbench.cases import Case, Outcome, RunContext
from optbench.results import row
from optbench.roofline import step_cost
from optbench.suite import DTYPES, Suite
from optbench.timing import Timing, measure
from optbench.batched_state import per_parameter_state
from optbench.trajectory import objective_closure, set_gradients
from optbench.workloads import speed as speed_workloads


def state_bytes(optimizer: torch.optim.Optimizer, params: dict[str, torch.Tensor]) -> dict[str, int]:
    """Bytes of optimizer state per FQN (tensors only; Python scalars count as nothing)."""
    states = per_parameter_state(optimizer)  # a batched optimizer's stacks, row by row
    return {
        name: sum(v.numel() * v.element_size() for v in states.get(p, {}).values() if isinstance(v, torch.Tensor))
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
    started = time.perf_counter()
    step()
    if ctx.device.type == "cuda":
        torch.cuda.synchronize(ctx.device)
    return stepper, params, step, time.perf_counter() - started


def timing_rows(case: Case, ctx: RunContext, check: str) -> tuple[list[dict], Timing, float, int]:
    """Time the case; rows for its statistics, samples, compile time and roofline; (rows, timing,
    roofline %, parameters stepped)."""
    stepper, params, step, first_s = stepped_once(case, ctx)
    cfg = ctx.cfg.speed
    timing = measure(step, ctx.device, min_run_time=float(cfg.min_run_time), min_rounds=int(cfg.min_rounds),
                     max_run_time=float(cfg.max_run_time), flush_l2=bool(cfg.get("flush_l2")))
    labels, t = case.labels, timing.median
    rows = [row(labels, check=check, metric="time.step_ms", value=t * 1e3, unit="ms", detail=timing.method),
            row(labels, check=check, metric="time.step_ms_iqr", value=timing.iqr * 1e3, unit="ms"),
            row(labels, check=check, metric="time.step_ms_cv", value=timing.cv),
            row(labels, check=check, metric="time.rounds", value=len(timing.rounds)),
            row(labels, check=check, metric="time.steps_per_round", value=timing.steps_per_round),
            row(labels, check=check, metric="speed.threads", value=timing.threads)]
    rows += [row(labels, check=check, metric="time.round_ms", value=s * 1e3, unit="ms", step=i)
             for i, s in enumerate(timing.rounds)]
    if case.impl.compiled:
        rows.append(row(labels, check=check, metric="time.compile_s", value=first_s, unit="s",
                        detail="the first step: dynamo trace + inductor compile, apart from the step time"))
    optimizer = case.suite.optimizer or type(stepper.optimizer).__name__
    cost = step_cost(optimizer, stepper.optimizer.param_groups)
    stepped = sum(p.numel() for p in params.values() if p.grad is not None)
    rows.append(row(labels, check=check, metric="speed.params_per_s", value=stepped / t, unit="params/s"))
    pct = float("nan")
    if cost is not None and cost.params:
        bw = ceilings.bandwidth(ctx.device, cost.working_set, min_run_time=float(cfg.probe_run_time))
        floor_s = cost.bytes / (bw.gb_per_s * 1e9)
        what = f"bandwidth probe {bw.kernel} at a {bw.working_set / 1e6:.3g} MB working set"
        if cost.flops:
            largest = max((p for p in params.values() if p.grad is not None and p.dim() == 2), key=torch.Tensor.numel)
            rate = ceilings.matmul_flops(ctx.device, tuple(largest.shape), torch.bfloat16,
                                         min_run_time=float(cfg.probe_run_time))
            floor_s = max(floor_s, cost.flops / rate)
            rows.append(row(labels, check=check, metric="roofline.matmul_gflops", value=rate / 1e9, unit="GFLOP/s",
                            detail=f"bfloat16 x @ x.T at {tuple(largest.shape)}"))
            what += f" and {rate / 1e9:.0f} GFLOP/s bfloat16 matmul ({cost.flops / cost.params:.0f} FLOP/param)"
        pct = 100 * floor_s / t
        rows += [row(labels, check=check, metric="speed.gb_per_s", value=cost.bytes / t / 1e9, unit="GB/s"),
                 row(labels, check=check, metric="roofline.bytes_per_param", value=cost.bytes_per_param, unit="B"),
                 row(labels, check=check, metric="roofline.probe_gb_per_s", value=bw.gb_per_s, unit="GB/s", detail=what),
                 row(labels, check=check, metric="roofline.pct", value=pct, unit="%", detail=what)]
    return rows, timing, pct, stepped


def declared_raise(case: Case, ctx: RunContext, exc: Exception):
    """The suite's deviation that declares ``exc`` for a parameter of the case's timing workload, if any."""
    if case.workload in ("", "model"):
        return None
    specs = ctx.timing_workload(case.suite, case.hset, case.dtype, case.workload).specs
    return next((d for d in case.suite.deviations if d.raises == type(exc).__name__
                 and d.matches_case(case.impl_name, case.dtype, case.hset.name) and any(d.matches_spec(s) for s in specs)),
                None)


def runnable_cases(suite: Suite, ctx: RunContext) -> list[Case]:
    hset = suite.hparams[0]
    return [Case(suite, impl, dtype, hset, ctx.device, workload="model") for dtype in ctx.dtypes[suite.name]
            for impl in ctx.impls[suite.name] if not ctx.unavailable(impl, dtype)]


class SpeedCheck:
    name = "speed"
    requires = ()

    def cases(self, suite: Suite, ctx: RunContext) -> list[Case]:
        cases = runnable_cases(suite, ctx)
        if suite.workload_of(suite.hparams[0]) != "transformer":
            return cases  # sparse gradients or a closure: no model-shaped edge cases
        edges = [str(e) for e in ctx.cfg.speed.edge_cases or ()]
        edge_dtypes = ctx.cfg.speed.edge_dtypes
        # not compiled: each edge workload would compile anew (1000+ tensors: minutes of inductor)
        return cases + [Case(c.suite, c.impl, c.dtype, c.hset, c.device, workload=edge) for edge in edges
                        for c in cases if (edge_dtypes is None or c.dtype in edge_dtypes) and not c.impl.compiled]

    def group(self, case: Case) -> tuple:
        return (case.suite.name, self.name)

    def run(self, case: Case, ctx: RunContext) -> Outcome:
        try:
            rows, timing, pct, stepped = timing_rows(case, ctx, "speed")
        except Exception as exc:  # an edge case a declared deviation says raises (Adafactor's zero-size, F04)
            known = declared_raise(case, ctx, exc)
            if known is None:
                raise
            detail = f"{known.finding}: still raises {type(exc).__name__} on {case.workload}: {str(exc).splitlines()[0]}"
            return Outcome([row(case.labels, check="speed", metric="speed.raises", value=1, status="xfail", detail=detail)],
                           f"  XFAIL speed {case.impl_name} {case.dtype} {case.workload}: {detail}")
        per_param = timing.median / max(1, stepped)
        key = (case.impl_name, case.dtype)
        line = (f"  speed {case.impl_name:>10} {case.dtype:>8} {case.workload:>13}: {timing.median * 1e3:8.3f} ms/step "
                f"(IQR {timing.iqr * 1e3:.3f}, CV {timing.cv:.1%}, {len(timing.rounds)} rounds)")
        if case.workload == "model":
            ctx.scratch[("speed.per_param", key)] = per_param
            gbs = next((r["value"] for r in rows if r["metric"] == "speed.gb_per_s"), None)
            line += f", {gbs:.1f} GB/s, {pct:.0f}% of roofline" if gbs is not None else ", no roofline model"
        else:
            base = ctx.scratch.get(("speed.per_param", key))
            if base:
                ratio = per_param / base
                rows.append(row(case.labels, check="speed", metric="speed.overhead", value=ratio,
                                detail=f"time per stepped parameter on {case.workload} over the contiguous model"))
                line += f", {ratio:.2f}x the model's time per parameter"
        return Outcome(rows, line)
