"""A timing set: every speed case of a suite at one dtype (each implementation on the model workload, its edge-case
workloads, a candidate-only suite's ``nearest:`` torch baseline) and the bandwidth probe at each working set they
have, timed together in interleaved rounds (optbench.perf.interleave). Its ratios are paired, round by round:

* ``speed.ratio``: a case's step time over its baseline's on the same workload (the for-loop; in a candidate-only
  suite the ``nearest:`` torch optimizer), with a 95 % bootstrap interval;
* ``speed.overhead``: an edge case's time per stepped parameter over the same implementation's on the model;
* ``roofline.pct``: the probe's floor over the step (optbench.perf.case_timing).

A case whose optimizer cannot be built or stepped keeps its exception as its result (re-raised as that case's
error, or its declared ``raises``); the other cases are timed without it.
"""

from __future__ import annotations

from dataclasses import dataclass

from optbench.cases import Case, RunContext
from optbench.implementations.torch_variants import BASELINE
from optbench.metrics import (
    SPEED_OVERHEAD,
    SPEED_OVERHEAD_CI_HIGH,
    SPEED_OVERHEAD_CI_LOW,
    SPEED_RATIO,
    SPEED_RATIO_CI_HIGH,
    SPEED_RATIO_CI_LOW,
)
from optbench.perf import ceilings
from optbench.perf.case_timing import Prepared, case_rows, prepare
from optbench.perf.interleave import Contender, Rounds, interleaved
from optbench.perf.noise import Noise
from optbench.perf.timing import Timing
from optbench.results import row

FORLOOP = BASELINE


def ident(case: Case) -> tuple[str, str]:
    return case.impl_name, case.workload


@dataclass
class TimedSet:
    key: tuple
    prepared: dict  # ident -> Prepared
    failed: dict  # ident -> the exception building, stepping or timing it raised
    rounds: Rounds
    noise: Noise
    probes: dict  # working set -> (bytes one probe call moves, kernel)

    @classmethod
    def measure(cls, key: tuple, members: list[Case], ctx: RunContext) -> TimedSet:
        cfg = ctx.settings.speed
        prepared, failed = {}, {}
        for case in members:
            try:
                prepared[ident(case)] = prepare(case, ctx)
            except Exception as exc:
                failed[ident(case)] = exc
        contenders = [Contender(k, p.step) for k, p in prepared.items()]
        probes = {}
        round_s = float(cfg.min_run_time) / max(1, int(cfg.min_rounds))
        for ws in sorted({p.working_set() for p in prepared.values()} - {None}):
            # the fastest stream, picked on a run one round long (hundreds of calls at these sizes); the bandwidth
            # reported is the rounds' own, so a longer pick would only cost time (5 s of the main job at 0.3 s)
            kernel = ceilings.bandwidth(ctx.device, ws, min_run_time=round_s).kernel
            call, moved = ceilings.probe_stream(ctx.device, ws, kernel)
            probes[ws] = (moved, kernel)
            contenders.append(Contender(("probe", ws), call))
        noise = Noise()
        noise.start()
        rounds = interleaved(contenders, min_run_time=float(cfg.min_run_time), min_rounds=int(cfg.min_rounds),
                             max_run_time=float(cfg.max_run_time) * max(1, len(contenders)), seed=ctx.seed)
        noise.stop()
        return cls(key, prepared, failed | rounds.failed, rounds, noise, probes)

    def timing(self, case: Case) -> Timing:
        k = ident(case)
        if k in self.failed:
            raise self.failed[k]
        return self.rounds.timings[k]

    def rows(self, case: Case, ctx: RunContext) -> tuple[list[dict], Timing, float]:
        """The case's rows (as timed alone, with the probe paired); (rows, timing, roofline %)."""
        timing = self.timing(case)
        p: Prepared = self.prepared[ident(case)]
        stalled_s = sum(t.stalled_s for t in self.rounds.timings.values())  # every case of the set, one interval
        unstable = self.noise.why_unstable(timing.spread, ctx.device.type == "cpu", timing.stalled,
                                           len(timing.rounds), stalled_s, timing.threads)
        ws = p.working_set()
        probe = None
        if ws in self.probes and ("probe", ws) in self.rounds.timings:
            moved, kernel = self.probes[ws]
            probe = (self.rounds.timings[("probe", ws)], moved, kernel)
        rows, pct = case_rows(case, ctx, "speed", p, timing, self.noise, unstable, probe)
        return rows, timing, pct

    def baseline(self, case: Case) -> str | None:
        """The implementation ``case`` is set against on its workload: the for-loop, else a torch.optim baseline."""
        if case.impl_name == FORLOOP or case.impl_name.startswith("torch.optim."):
            return None
        names = [k[0] for k in self.rounds.timings if k[1] == case.workload and k[0] != case.impl_name]
        return next((n for n in names if n == FORLOOP), None) or next(
            (n for n in names if n.startswith("torch.optim.")), None)

    def ratio_rows(self, case: Case) -> list[dict]:
        labels, out = case.labels, []
        base = self.baseline(case)
        if base is not None:
            r = self.rounds.paired(ident(case), (base, case.workload))
            if r is not None:
                detail = f"vs {base}: paired over {r.rounds} interleaved rounds, 95% CI [{r.low:.3g}, {r.high:.3g}]"
                out += [row(labels, check="speed", metric=SPEED_RATIO, value=r.median, detail=detail),
                        row(labels, check="speed", metric=SPEED_RATIO_CI_LOW, value=r.low),
                        row(labels, check="speed", metric=SPEED_RATIO_CI_HIGH, value=r.high)]
        model = (case.impl_name, "model")
        if case.workload not in ("", "model") and model in self.rounds.timings:
            edge_p, model_p = self.prepared[ident(case)], self.prepared[model]
            scale = model_p.stepped / max(1, edge_p.stepped)
            r = self.rounds.paired(ident(case), model, scale=scale)
            if r is not None:
                detail = (f"time per stepped parameter on {case.workload} over the contiguous model: paired over "
                          f"{r.rounds} interleaved rounds, 95% CI [{r.low:.3g}, {r.high:.3g}]")
                out += [row(labels, check="speed", metric=SPEED_OVERHEAD, value=r.median, detail=detail),
                        row(labels, check="speed", metric=SPEED_OVERHEAD_CI_LOW, value=r.low),
                        row(labels, check="speed", metric=SPEED_OVERHEAD_CI_HIGH, value=r.high)]
        return out

