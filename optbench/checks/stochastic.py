"""Stochastic rounding judged in a run: a candidate whose spec says it rounds parameters of a dtype stochastically
(``stochastic_rounding: [bfloat16]``, ``optbench.adapters.stochastic_rounding``; torchao's
``_AdamW(bf16_stochastic_round=True)``).

A rounding that is random cannot be compared value by value, so per hparam set its first step is drawn
``stochastic.draws`` times, each from the same start (the workload's parameters, fresh state, its first gradients;
torch's generator seeded once per case), and what up to ``stochastic.elements`` of its elements (spread evenly over
the parameters) were rounded to is recorded: per element, each value drawn and how often. The parent judges that in
distribution (``optbench.numerics.stochastic_rounding``) against the reference's first step in float64, the value
before rounding: every draw one of its two bfloat16 neighbours, each element's count of away-from-zero draws
Binomial(draws, p), and no bias overall. A rounding to nearest, a biased probability or a neighbour two steps away
fails; parity still judges the trajectory (within its tolerance a stochastic rounding stays).
"""

from __future__ import annotations

import numpy as np
import torch

from optbench.adapters.stochastic_rounding import rounds_stochastically
from optbench.cases import Case, Outcome, RunContext
from optbench.checks.base import handed_over, not_taken_reason, reference_defaults
from optbench.checks.deviations import declared_status
from optbench.checks.registry import register_check
from optbench.checks.tape import Tape
from optbench.metrics import CASE_SKIPPED, STOCHASTIC_BIAS_Z, STOCHASTIC_ELEMENTS, STOCHASTIC_STRAYS
from optbench.numerics.recording import as_array, set_gradients
from optbench.numerics.recording_file import save_answers
from optbench.numerics.stochastic_rounding import Z_LIMIT, away_counts, judge_counts
from optbench.report.tables import CASE, num
from optbench.results import row
from optbench.suite.spec import DTYPES, Suite
from optbench.workloads import reference_gradient

HELD = "(held as)"  # the draws' key for the dtypes the parameters came back as (no parameter's name)


def _table(rows):
    sel = rows[(rows["check"] == "stochastic") & rows["metric"].str.startswith("stochastic.")]
    return sel[CASE].assign(metric=sel["metric"], value=sel["value"].map(num), verdict=sel["status"],
                            detail=sel["detail"])


@register_check(
    default=True, counted="stochastic", judged="answers",
    # a candidate whose spec declares stochastic_rounding: its first step drawn `draws` times from one start, and
    # up to `elements` of its elements judged in distribution (only such a candidate has cases)
    config={"draws": 300, "elements": 4096},
    sections=lambda rows: [("Stochastic rounding, in distribution", _table(rows))])
class StochasticRoundingCheck:
    name = "stochastic"
    requires = ()

    def cases(self, suite: Suite, ctx: RunContext) -> list[Case]:
        out = []
        for impl in ctx.impls[suite.name]:
            spec = impl.spec if impl.is_candidate else None
            for dtype in ctx.dtypes[suite.name]:
                if not rounds_stochastically(spec, dtype):
                    continue
                why = ctx.unavailable(impl, dtype)
                out += [Case(suite, impl, dtype, hset, ctx.device, skip=why or not_taken_reason(impl, hset))
                        for hset in suite.hparams if hset.dtypes is None or dtype in hset.dtypes]
        return out

    def group(self, case: Case) -> tuple:
        return (case.suite.name, self.name, case.impl_name)

    def workload(self, case: Case, ctx: RunContext):
        """The case's workload without its frozen parameters (a step leaves them as they are)."""
        return ctx.workload(case.suite, case.hset, case.dtype).restricted(lambda s: s.kind != "frozen")

    def run(self, case: Case, ctx: RunContext) -> Outcome:
        if case.skip:
            return Outcome([row(case.labels, check=self.name, metric=CASE_SKIPPED, value=1, status="unsupported",
                                detail=case.skip)])
        workload, settings = self.workload(case, ctx), ctx.settings.stochastic
        draws, chosen = int(settings.draws), _elements(workload, int(settings.elements))
        judging = ctx.judging
        tape = Tape(judging.recording.entries if judging is not None else None, record=ctx.recording_to is not None)

        def drawn() -> dict:
            torch.manual_seed(ctx.seed)
            seen: dict[str, list] = {n: [] for n in chosen}
            held: set[str] = set()  # the dtypes its parameters came back as (a step may not change them)
            for _ in range(draws):
                params = workload.materialize(DTYPES[case.dtype], ctx.device)
                stepper = case.hset.build(case.impl, params)
                set_gradients(params, workload, 0)
                stepper.step()
                for n, at in chosen.items():
                    seen[n].append(as_array(params[n]).ravel()[at])
                    held.add(str(params[n].dtype).removeprefix("torch."))
            return {HELD: sorted(held), **{n: _histogram(np.stack(values)) for n, values in seen.items()}}
        try:
            taken = tape.take("draws", drawn, decode=lambda d: _drawn_in(d, chosen, draws))
        finally:
            if ctx.recording_to is not None:
                save_answers(tape.entries, ctx.recording_to)
        return handed_over(tape, ctx, case.labels, self.name) or self._judged(
            case, ctx, workload, chosen, draws, taken, reference_defaults(case, judging))

    def _judged(self, case: Case, ctx: RunContext, workload, chosen: dict, draws: int, taken: dict,
                defaults: dict) -> Outcome:
        ref = case.suite.reference
        hp = case.hset.reference_hp(list(chosen), defaults, case.impl.reference_options(case.suite.reference_options))
        params = workload.materialize(DTYPES[case.dtype], ctx.device)
        eps = float(torch.finfo(DTYPES[case.dtype]).eps)
        values, k, strays = [], [], 0
        changed = [h for h in taken[HELD] if h != case.dtype]  # roundings to the dtype, in a parameter of another
        for n, at in chosen.items():
            start, full = as_array(params[n]), {**hp[n], "dtype_eps": eps}
            state = ref.init(start, full)  # (before its first step: eager or not, the state it starts from)
            grad = reference_gradient(workload.gradient(0, n, params[n]))
            new = start if grad is None else ref.update(start, grad, state, full)[0]  # (no gradient: not stepped)
            v = np.asarray(new, dtype=np.float64).ravel()[at]
            away, off = away_counts(v, taken[n]["seen"], taken[n]["counts"])
            values.append(v)
            k.append(away)
            strays += off
        verdict = judge_counts(np.concatenate(values), draws, np.concatenate(k), strays)
        declared = case.suite.deviations_for(case.impl, case.dtype, case.hset.name, check=self.name)
        dev = declared[0] if declared else None
        rows = [row(case.labels, check=self.name, metric=metric, value=value, detail=detail,
                    status=declared_status("pass" if ok else "fail", dev))
                for metric, value, ok, detail in (
                    (STOCHASTIC_STRAYS, verdict.not_neighbours, verdict.not_neighbours == 0 and not changed,
                     f"draws neither bfloat16 neighbour of the reference's value: {verdict.detail}"
                     + (f"; the step turned {case.dtype} parameters into {', '.join(changed)}" if changed else "")),
                    (STOCHASTIC_ELEMENTS, verdict.failing_elements, verdict.failing_elements == 0,
                     "elements whose away-from-zero count is not Binomial(draws, p)"),
                    (STOCHASTIC_BIAS_Z, verdict.bias_z, abs(verdict.bias_z) <= Z_LIMIT,
                     f"the draws' overall excess of away-from-zero picks, in standard deviations (limit {Z_LIMIT:g})"))]
        for r in rows:  # the finding on the rows it covers (an intermittent one's passes are plain passes)
            r["finding"] = dev.finding if r["status"] in ("xfail", "xpass") else ""
        finding = next((r["finding"] for r in rows if r["finding"]), "")
        shown = next((s for s in ("fail", "xpass", "xfail") if s in {r["status"] for r in rows}), "pass").upper()
        line = (f"  {shown:5} stochastic {case.impl_name:>10} {case.dtype:>8} {case.hset.name:<20} {verdict.detail}"
                + (f" ({finding})" if finding else ""))
        return Outcome(rows, line)


def _elements(workload, limit: int) -> dict[str, np.ndarray]:
    """Up to ``limit`` element indices (flat), spread evenly over each parameter in proportion to its size."""
    total = sum(s.numel for s in workload.specs) or 1
    return {s.name: np.unique(np.linspace(0, s.numel - 1, max(1, round(limit * s.numel / total))).astype(np.int64))
            for s in workload.specs if s.numel}


def _histogram(drawn: np.ndarray) -> dict:
    """Per column of ``drawn`` (draws x elements): the distinct values (elements x k, NaN padding) and their counts."""
    per = [np.unique(col, return_counts=True) for col in drawn.T]
    width = max((len(v) for v, _ in per), default=1)
    seen = np.full((len(per), width), np.nan)
    counts = np.zeros((len(per), width), dtype=np.int64)
    for i, (v, c) in enumerate(per):
        seen[i, :len(v)], counts[i, :len(c)] = v, c
    return {"seen": seen, "counts": counts}


def _drawn_in(data: dict, chosen: dict, draws: int) -> dict:
    """The recorded draws, checked: per chosen parameter, values and counts for each chosen element, every element's
    counts summing to the draws; and the dtypes the parameters came back as."""
    data = dict(data) if isinstance(data, dict) else {}
    held = data.pop(HELD, None)
    if not isinstance(held, list) or not all(isinstance(h, str) for h in held):
        raise ValueError("the draws do not say what dtypes the parameters came back as")
    if set(data) != set(chosen):
        raise ValueError(f"draws of parameters {sorted(data)[:3]}... where the case chose {sorted(chosen)[:3]}...")
    out = {}
    for n, at in chosen.items():
        seen, counts = np.asarray(data[n]["seen"], dtype=np.float64), np.asarray(data[n]["counts"])
        if seen.ndim != 2 or seen.shape != counts.shape or seen.shape[0] != at.size:
            raise ValueError(f"{n}: draws of another shape than its {at.size} chosen elements")
        if np.any(counts < 0) or np.any(counts != np.round(counts)) or np.any(counts.sum(axis=1) != draws):
            raise ValueError(f"{n}: counts that are not {draws} draws per element")
        out[n] = {"seen": seen, "counts": counts.astype(np.int64)}
    out[HELD] = held
    return out
