"""Step time of each implementation on a model-shaped workload, next to the roofline; edge cases beside it.

The speed cases of a suite at one dtype are a timing set (optbench.perf.timed_set): each implementation on the
contiguous ``model`` workload of ``speed.params`` parameters (optbench.workloads.speed), a candidate-only
suite's ``nearest:`` torch baseline, at ``speed.edge_dtypes`` each edge case of the model (column-major weights,
many tiny tensors, zero-size tensors, missing grads; eager variants: a compiled one would compile anew for each)
and the bandwidth probe, timed together in interleaved rounds (optbench.perf.interleave). Every ratio is paired
round by round: ``speed.ratio`` (over the for-loop, or the nearest torch optimizer), ``speed.overhead`` (an edge
case's time per stepped parameter over the model's) and ``roofline.pct`` (the probe's floor over the step, the
step's bytes and Muon's FLOPs from ``optbench.perf.roofline``). A compiled variant's first step (the compile) is
timed apart as ``time.compile_s``. With ``speed.flush_l2`` on CUDA each case is timed alone
(``optbench.perf.timing.measure``, CUDA events).
"""

from __future__ import annotations

from dataclasses import replace

import torch

from optbench.cases import Case, Outcome, RunContext
from optbench.checks.registry import register_check
from optbench.implementations.adapter import Implementation
from optbench.metrics import SPEED_GB_PER_S, SPEED_OVERHEAD, SPEED_RAISES, SPEED_RATIO, TIME_UNSTABLE
from optbench.perf.case_timing import runnable_cases, setting_names, timing_rows
from optbench.perf.timed_set import TimedSet
from optbench.report import performance
from optbench.results import row
from optbench.rows import first_words
from optbench.suite.spec import HparamSet, Suite
from optbench.workloads.speed import EDGE_CASES


def nearest_torch_cases(suite: Suite, ctx: RunContext) -> list[Case]:
    """A candidate-only suite's ``nearest:`` torch optimizer (Lion's AdamW), at its defaults on the same model
    workload and dtypes, timed beside the candidate: the baseline its speed is reported against."""
    if suite.nearest is None or suite.optimizer is not None:
        return []
    impl = Implementation(f"torch.optim.{suite.nearest}", getattr(torch.optim, suite.nearest))
    hset = HparamSet("default", {})
    own = replace(suite, optimizer=suite.nearest, roofline={}, hparams=(hset,))  # its own roofline, not the suite's
    return [Case(own, impl, dtype, hset, ctx.device, workload="model") for dtype in ctx.dtypes[suite.name]
            if not ctx.unavailable(impl, dtype)]


def by_dtype(cases: list[Case]) -> list[Case]:
    """The cases with each dtype's together (a timing set, timed at once), in the order the dtypes first come."""
    order = {d: i for i, d in enumerate(dict.fromkeys(c.dtype for c in cases))}
    return sorted(cases, key=lambda c: order[c.dtype])  # stable: the order within a dtype is kept


def declared_raise(case: Case, ctx: RunContext, exc: Exception):
    """The suite's deviation that declares ``exc`` for a parameter of the case's timing workload, if any."""
    if case.workload in ("", "model"):
        return None
    specs = ctx.timing_workload(case.suite, case.hset, case.dtype, case.workload).specs
    return next((d for d in case.suite.deviations if d.raised_by(exc)
                 and d in case.suite.deviations_for(case.impl or case.impl_name, case.dtype, case.hset.name, d.check)
                 and any(d.matches_spec(s) for s in specs)),
                None)


def declared_exit_on(case: Case, ctx: RunContext):
    """The suite's deviation that says stepping a parameter of the case's timing workload ends the process
    (``exits``), if any: such an edge case is not stepped (its timing set would die with it); the deviations
    check steps those parameters alone."""
    if case.workload in ("", "model"):
        return None
    covering = case.suite.deviations_for(case.impl or case.impl_name, case.dtype, case.hset.name)
    exiting = [d for d in covering if d.exits is not None]
    if not exiting:
        return None
    specs = ctx.timing_workload(case.suite, case.hset, case.dtype, case.workload).specs
    return next((d for d in exiting if any(d.matches_spec(s) for s in specs)), None)


@register_check(
    default=True, alone=True, timed=True,
    # step time next to the roofline (docs/performance.md). params: the model-shaped timing workload's size
    # (optbench/workloads/speed.py), contiguous; dtypes: those timed, of the run's (what
    # models train in; null or all: every one; an implementation that runs none of them is timed at its first);
    # edge_cases: each timed apart (speed.overhead rows) at edge_dtypes (null: every dtype); min_run_time seconds
    # of timed rounds (torch.utils.benchmark blocked_autorange) and at least min_rounds rounds (optbench
    # compare's significance test needs samples), max_run_time the cap on one case's; repeats: process-level
    # repeats, each in a fresh worker process, merged per case (optbench/engine/repeats.py; 3+ lets optbench
    # compare test between processes); probe_run_time: per bandwidth/matmul probe kernel timed apart (a timing
    # set's probe is timed in its rounds); flush_l2 (CUDA): time each step alone with CUDA events and a flushed
    # L2 (triton.testing.do_bench); threads: torch threads while timing (null: torch's default), recorded as
    # speed.threads; width/layers/vocab: the sizes sparse-gradient and closure suites (SparseAdam, LBFGS) time
    config={"params": 4.0e+6, "dtypes": ["float32", "bfloat16"],
            "edge_cases": ["noncontiguous", "tiny_tensors", "zero_size", "none_grads"], "edge_dtypes": ["float32"],
            "min_run_time": 0.5, "min_rounds": 10, "max_run_time": 30, "repeats": 1,
            "probe_run_time": 0.3, "flush_l2": False, "threads": None, "width": 256, "layers": 2, "vocab": 1024},
    sections=lambda rows: [
        ("Speed (contiguous model workload; roofline: docs/performance.md)",
         performance.speed(performance.speed_frame(rows))),
        ("Edge-case overheads (time per stepped parameter over the contiguous model's)",
         performance.overheads(rows))])
class SpeedCheck:
    name = "speed"
    requires = ()

    def cases(self, suite: Suite, ctx: RunContext) -> list[Case]:
        dtypes, edge_dtypes = (setting_names(ctx.settings.speed.dtypes, None),
                               setting_names(ctx.settings.speed.edge_dtypes, None))
        cases = runnable_cases(suite, ctx, dtypes)
        if cases:  # the baseline where the candidate is timed (a spec's dtypes: may leave some out)
            timed = {c.dtype for c in cases}
            cases += [c for c in nearest_torch_cases(suite, ctx) if c.dtype in timed]
        if suite.workload_of(suite.hparams[0]) != "transformer":
            return by_dtype(cases)  # sparse gradients or a closure: no model-shaped edge cases
        edges = setting_names(ctx.settings.speed.edge_cases, EDGE_CASES) or []
        # not compiled: each edge workload would compile anew (1000+ tensors: minutes of inductor)
        cases += [Case(c.suite, c.impl, c.dtype, c.hset, c.device, workload=edge) for edge in edges
                  for c in cases if (edge_dtypes is None or c.dtype in edge_dtypes) and not c.impl.compiled
                  and c.suite is suite]
        return by_dtype(cases)

    def group(self, case: Case) -> tuple:
        return (case.suite.name, self.name)

    def run(self, case: Case, ctx: RunContext) -> Outcome:
        ends = declared_exit_on(case, ctx)
        if ends is not None:
            detail = (f"{ends.finding}: not stepped: stepping its parameters ends the process (exit {ends.exits}), "
                      "as declared; the deviations check steps them alone")
            return Outcome([row(case.labels, check="speed", metric=SPEED_RAISES, value=1, status="xfail",
                                detail=detail, finding=ends.finding)],
                           f"  XFAIL speed {case.impl_name} {case.dtype} {case.workload}: {detail}")
        try:
            if ctx.settings.speed.get("flush_l2") and ctx.device.type == "cuda":  # each step alone, with CUDA events
                rows, timing, pct, stepped = timing_rows(case, ctx, "speed")
                timed = None
            else:
                timed = self._timed_set(case, ctx)
                rows, timing, pct = timed.rows(case, ctx)
        except Exception as exc:  # an edge case a declared deviation says raises (Adafactor's zero-size, F04)
            known = declared_raise(case, ctx, exc)
            if known is None:
                raise
            detail = (f"{known.finding}: still raises {type(exc).__name__} on {case.workload}: "
                      f"{first_words(str(exc))}")
            return Outcome([row(case.labels, check="speed", metric=SPEED_RAISES, value=1, status="xfail", detail=detail,
                                finding=known.finding)],
                           f"  XFAIL speed {case.impl_name} {case.dtype} {case.workload}: {detail}")
        line = (f"  speed {case.impl_name:>10} {case.dtype:>8} {case.workload:>13}: {timing.median * 1e3:8.3f} ms/step "
                f"(IQR {timing.iqr * 1e3:.3f}, CV {timing.cv:.1%}, {len(timing.rounds)} rounds"
                + (f", {timing.stalled} stalled, set aside" if timing.stalled else "") + ")")
        if case.workload == "model":
            gbs = next((r["value"] for r in rows if r["metric"] == SPEED_GB_PER_S), None)
            line += f", {gbs:.1f} GB/s, {pct:.0f}% of roofline" if gbs is not None else ", no roofline model"
        if timed is not None:
            rows += timed.ratio_rows(case)
        ratio = next((r for r in rows if r["metric"] == SPEED_RATIO), None)
        if ratio is not None:
            line += f", {ratio['value']:.2f}x vs {timed.baseline(case)}"  # a ratio row exists only in a set
        overhead = next((r for r in rows if r["metric"] == SPEED_OVERHEAD), None)
        if overhead is not None:
            line += f", {overhead['value']:.2f}x the model's time per parameter"
        unstable = next((r["detail"] for r in rows if r["metric"] == TIME_UNSTABLE and r["value"]), "")
        if unstable:
            line += f"\n    UNSTABLE: {unstable}"
        return Outcome(rows, line)

    def _timed_set(self, case: Case, ctx: RunContext) -> TimedSet:
        """The case's timing set (every speed case of its suite at its dtype), timed in interleaved rounds the
        first time one of them runs; one set is kept at a time (its optimizers hold the workload's memory)."""
        key = (case.suite.name, case.dtype)
        held = ctx.scratch.get("speed.set")
        if held is None or held.key != key:
            ctx.scratch.pop("speed.set", None)  # the previous set's optimizers freed before the next is built
            members = [c for c in self.cases(case.suite, ctx) if c.dtype == case.dtype
                       and ctx.takes_part(c.impl, self.name)  # as planned: no compiled one where it is not
                       and declared_exit_on(c, ctx) is None]
            ctx.scratch["speed.set"] = held = TimedSet.measure(key, members, ctx)
        return held
