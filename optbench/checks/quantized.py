"""Quantized optimizer state judged in the quantizer's units (a candidate whose spec declares ``quantized:``,
``optbench.adapters.quantized``): bitsandbytes' 8-bit optimizers, say.

A float parity gate can only fail such an optimizer (8-bit moments put it 1e-2 of the update away from torch's
AdamW by design), so each of its quantized parameters (at least ``min_size`` elements) is judged one step at a time
from its own quantized state, with the float64 step of the documented scheme (``reference/_blockwise_8bit_step.py``,
Dettmers et al. 2022, Algorithm 1): its codes dequantized, one step of the suite's algorithm (AdamW, Adam, or Lion
with its one moment), the moments quantized again. Per case, over every step and parameter: the new parameter within
``PARAM_EPS`` of the reference's (in its dtype's eps of the larger of the parameter and the update; Lion's elements
whose sign rounding decides left out and counted), each block's new absmax within ``ABSMAX_EPS`` float32 eps,
every new code the reference's but where the value lies within rounding of a boundary between the two codes
(counted, and those no rounding explains fail), and the maps the documented ones (``scheme_map``: 8-bit, 4-bit
packed two a byte, or FP8 codes read as the index of their value). The other
parameters keep 32-bit state and are judged by the parity check. What the candidate did is recorded on a tape
(``checks.tape``) and judged by the parent, which never imports it (``engine.judge``).
"""

from __future__ import annotations

import numpy as np
import torch

from optbench.adapters.quantized import as_arrays, blocks, declared, quantizes, read
from optbench.cases import Case, Outcome, RunContext
from optbench.checks.base import handed_over, not_taken_reason, reference_defaults
from optbench.checks.quantized_price import FreeRuns
from optbench.checks.quantized_verdict import SIGN_ROUNDING, Tally, verdict_rows
from optbench.checks.registry import register_check
from optbench.checks.tape import Tape
from optbench.metrics import (
    CASE_SKIPPED,
    QUANTIZED_PRICE_STEP,
    QUANTIZED_RAISES,
)
from optbench.numerics.recording import as_array, set_gradients
from optbench.numerics.recording_file import save_answers
from optbench.reference._blockwise_8bit_step import STEPS, code_disagreements
from optbench.report.tables import CASE, num
from optbench.results import row
from optbench.rows import first_words
from optbench.suite.spec import DTYPES, Suite
from optbench.workloads import reference_gradient

ROUNDING = 2.0 ** -20  # a code's value this close to a boundary (normalized units): float32 arithmetic's rounding


def _why_not(suite: Suite, hset) -> str:
    """Why the quantized step cannot judge this set ("" if it can)."""
    name = _reference_name(suite)
    if name not in STEPS:
        return f"no quantized step of the {name} reference yet (one of: {', '.join(sorted(STEPS))})"
    other = sorted(set(hset.option_names()) - STEPS[name].options)
    if other or hset.schedule:
        what = ", ".join(other) or "a schedule"
        return (f"the quantized {name} step takes {', '.join(sorted(STEPS[name].options))} (this set also has "
                f"{what})")
    for option in STEPS[name].nonzero:  # every group's value (a group's own, else the set's; unset: 0)
        if not all(g.options.get(option, hset.options.get(option)) for g in (hset, *hset.groups)):
            return f"the quantized {name} step keeps state only with {option} (this set has none to quantize)"
    return ""


def _moments_why_not(suite: Suite, q: dict) -> str:
    """Why the candidate's declared moments cannot be judged by the suite's quantized step ("" if they can)."""
    kept = tuple(name for name, _ in STEPS[_reference_name(suite)].moments)
    if tuple(q["moments"]) != kept:
        return (f"its spec declares quantized {', '.join(q['moments'])}; the quantized {_reference_name(suite)} "
                f"step keeps {', '.join(kept)}, in that order")
    return ""


def _reference_name(suite: Suite) -> str:
    return suite.reference.__name__.rsplit(".", 1)[-1]


def _table(rows):
    sel = rows[(rows["check"] == "quantized") & rows["metric"].str.startswith("quantized.")
               & (rows["metric"] != QUANTIZED_PRICE_STEP)]  # the price per step: its plot
    return sel[CASE].assign(metric=sel["metric"], value=sel["value"].map(num), verdict=sel["status"],
                            detail=sel["detail"])


@register_check(
    default=True, counted="quantized", judged="answers",
    # a candidate whose spec declares quantized state: each quantized parameter judged one step at a time from its
    # own codes (only such a candidate has cases)
    sections=lambda rows: [("Quantized state, in the quantizer's units", _table(rows))])
class QuantizedCheck:
    name = "quantized"
    requires = ()

    def cases(self, suite: Suite, ctx: RunContext) -> list[Case]:
        out = []
        for impl in ctx.impls[suite.name]:
            if not (impl.is_candidate and declared(impl.spec)):
                continue
            for dtype in ctx.dtypes[suite.name]:
                why = ctx.unavailable(impl, dtype)
                out += [Case(suite, impl, dtype, hset, ctx.device, skip=why or not_taken_reason(impl, hset)
                             or _why_not(suite, hset) or _moments_why_not(suite, declared(impl.spec)))
                        for hset in suite.hparams if hset.dtypes is None or dtype in hset.dtypes]
        return out

    def group(self, case: Case) -> tuple:
        return (case.suite.name, self.name, case.impl_name)

    def workload(self, case: Case, ctx: RunContext):
        """The case's workload with only the parameters the candidate keeps quantized state for."""
        full = ctx.workload(case.suite, case.hset, case.dtype)
        return full.restricted(lambda s: s.kind != "frozen" and quantizes(case.impl.spec, s.numel))

    def run(self, case: Case, ctx: RunContext) -> Outcome:
        workload = self.workload(case, ctx)
        if case.skip:  # said on its own line: its parameters are parity's to leave out, and nothing judges them
            return Outcome([row(case.labels, check=self.name, metric=CASE_SKIPPED, value=1, status="unsupported",
                                detail=case.skip)],
                           f"  UNSUP quantized {case.impl_name:>10} {case.dtype:>8} {case.hset.name:<20} "
                           + (f"{len(workload.specs)} parameters of quantized state UNJUDGED: " if workload.specs
                              else "") + case.skip)
        if not workload.specs:
            return Outcome([row(case.labels, check=self.name, metric=CASE_SKIPPED, value=1, status="skip",
                                detail=f"no parameter of at least {declared(case.impl.spec)['min_size']} elements "
                                       "(every state is 32-bit: the parity check judges them)")])
        judging = ctx.judging  # judged here from what the case's worker recorded (engine.judge)
        tape = Tape(judging.recording.entries if judging is not None else None, record=ctx.recording_to is not None)
        live: dict = {}

        def step(i: int) -> dict:
            if not live:
                live["params"] = workload.materialize(DTYPES[case.dtype], ctx.device)
                live["stepper"] = case.hset.build(case.impl, live["params"])
            params, stepper = live["params"], live["stepper"]
            set_gradients(params, workload, i)
            stepper.step()
            return {n: {"param": as_array(p), "state": as_arrays(read(case.impl.spec, stepper.optimizer.state.get(
                p, {}), tuple(p.shape)) or {})} for n, p in params.items()}
        raising = [d for d in case.suite.deviations_for(case.impl, case.dtype, case.hset.name, check=self.name)
                   if d.whole_case]
        try:
            taken = [tape.take(f"step {i + 1}", lambda i=i: step(i), decode=lambda d: _taken_in(d, workload))
                     for i in range(workload.steps)]
        except Exception as exc:
            known = next((d for d in raising if d.raised_by(exc)), None)
            if ctx.recording_to is None and known is None:
                raise
            if ctx.recording_to is None:  # the declared raise (the worker recorded it: the judge replays it here)
                return Outcome([row(case.labels, check=self.name, metric=QUANTIZED_RAISES, value=1, status="xfail",
                                    finding=known.finding, detail=f"raises {type(exc).__name__}, as declared: "
                                                                  f"{first_words(str(exc))}")],
                               f"  XFAIL quantized {case.impl_name:>10} {case.dtype:>8} {case.hset.name:<20} raises "
                               f"{type(exc).__name__} ({known.finding})")
        finally:
            if ctx.recording_to is not None:
                save_answers(tape.entries, ctx.recording_to)
        if (waiting := handed_over(tape, ctx, case.labels, self.name)) is not None:
            return waiting
        outcome = self._judged(case, ctx, workload, taken, reference_defaults(case, judging))
        if raising:  # declared to raise and did not: the departure is gone (or not this case's)
            outcome.rows.append(row(case.labels, check=self.name, metric=QUANTIZED_RAISES, value=0, status="xpass",
                                    finding=raising[0].finding, detail=f"declared to raise {raising[0].raises}; "
                                                                       "stepped every step"))
        return outcome

    def _judged(self, case: Case, ctx: RunContext, workload, taken: list[dict], defaults: dict) -> Outcome:
        q = declared(case.impl.spec)
        names = [s.name for s in workload.specs]
        hp = case.hset.reference_hp(names, defaults, case.impl.reference_options(case.suite.reference_options))
        params = workload.materialize(DTYPES[case.dtype], ctx.device)
        before = {n: as_array(p) for n, p in params.items()}
        quantized = STEPS[_reference_name(case.suite)]
        state = {n: quantized.zero_state(tuple(p.shape), blocks(q)) for n, p in params.items()}
        maps = quantized.maps(q["scheme"])
        eps = float(torch.finfo(DTYPES[case.dtype]).eps)
        eps32 = float(np.finfo(np.float32).eps)
        free = FreeRuns(case.suite.reference, quantized, eps, before, hp, q)
        tallies = {n: Tally() for n in params}
        for i, after in enumerate(taken):
            for n, p in params.items():
                theirs, t = after[n]["state"], tallies[n]
                if not theirs or any(f"codes{k}" not in theirs for k in range(1, len(maps) + 1)):
                    raise ValueError(f"{n} holds no quantized state of {', '.join(q['moments'])} after step "
                                     f"{i + 1}")
                _check_layout(theirs, maps, p.numel(), q["blocksize"], f"{n} after step {i + 1}")
                grad = reference_gradient(workload.gradient(i, n, p))
                free.step(n, grad)
                ours_p, ours = quantized.step(before[n], grad, {**state[n], **maps}, hp[n], blocks(q))
                err, left_out = param_error(after[n]["param"], ours_p, before[n], eps, ours.get("decisions", ()),
                                            ours.get("update_scale", 0.0))
                t.decided += left_out
                t.param = max(t.param, (err, f"{n} at step {i + 1}"))
                for k, (moment, _) in enumerate(quantized.moments, start=1):
                    t.wrong_maps += int(np.count_nonzero(theirs[f"map{k}"] != maps[f"map{k}"])) if theirs[
                        f"map{k}"].shape == maps[f"map{k}"].shape else maps[f"map{k}"].size
                    absmax = np.abs(theirs[f"absmax{k}"] - ours[f"absmax{k}"]) / (
                        eps32 * np.where(ours[f"absmax{k}"] > 0, np.abs(ours[f"absmax{k}"]), 1.0))
                    t.absmax = max(t.absmax, (float(absmax.max()), f"{n}/{moment} at step {i + 1}"))
                    d, u, _ = code_disagreements(ours[moment], theirs[f"codes{k}"], ours[f"codes{k}"],
                                                 ours[f"map{k}"], ours[f"absmax{k}"], ROUNDING + _grid(q),
                                                 q["blocksize"])
                    t.differ, t.unexplained, t.codes = t.differ + d, t.unexplained + u, t.codes + ours[moment].size
                    if u and not t.where_unexplained:
                        t.where_unexplained = f"first {n}/{moment} at step {i + 1}"
                before[n] = after[n]["param"]
                # its codes and absmax go on; the step count is this check's own (a candidate's counter may lie)
                state[n] = {**{k: v for k, v in theirs.items() if not k.startswith("map")}, "step": i + 1}
            free.stepped({n: after[n]["param"] for n in params})
        declared_ = case.suite.deviations_for(case.impl, case.dtype, case.hset.name, check=self.name)
        rows = verdict_rows(case.labels, self.name, len(taken), tallies, {s.name: s for s in workload.specs},
                            declared_, ROUNDING + _grid(q), tuple(q["moments"]))
        total = sum(tallies.values(), Tally())
        price = free.price({n: taken[-1][n]["param"] for n in params}, len(taken))
        rows += [row(case.labels, check=self.name, metric=metric, value=value, status="info", detail=detail,
                     step=len(taken)) for metric, value, detail in price]
        rows += [row(case.labels, check=self.name, metric=QUANTIZED_PRICE_STEP, value=value, status="info",
                     detail="", step=step) for step, value in free.per_step()]
        statuses = {r["status"] for r in rows}
        shown = next((s for s in ("fail", "xpass", "xfail") if s in statuses), "pass").upper()
        finding = next((f" ({r['finding']})" for r in rows if r["finding"]), "")
        line = (f"  {shown:5} quantized {case.impl_name:>10} {case.dtype:>8} {case.hset.name:<20} "
                f"{len(params)} parameters x {len(taken)} steps: param {total.param[0]:.3g} eps, absmax "
                f"{total.absmax[0]:.3g} eps, {total.differ:,} codes differ, {total.unexplained:,} beyond rounding; "
                f"the price of quantization {price[0][1]:.3g} of the updates{finding}")
        return Outcome(rows, line)


def _check_layout(theirs: dict, maps: dict, numel: int, blocksize: int, where: str) -> None:
    """Raise ValueError where a moment's codes index past its documented map or its scales are not one per block (the
    reference's step could not take them)."""
    blocks = -(-numel // blocksize)
    for k in range(1, len(maps) + 1):
        codes, absmax = theirs[f"codes{k}"], theirs[f"absmax{k}"]
        if codes.size and int(codes.max()) >= maps[f"map{k}"].size:
            raise ValueError(f"{where}: moment {k} holds code {int(codes.max())}, past its map's "
                             f"{maps[f'map{k}'].size} entries")
        if absmax.size != blocks:
            raise ValueError(f"{where}: moment {k} holds {absmax.size} scales, where blocks of {blocksize} make "
                             f"{blocks}")


def _grid(q: dict) -> float:
    """The quantizer's own grid (``quantized.grid`` points on [-1, 1]), as a rounding in normalized units."""
    return 1.0 / (q["grid"] - 1) if q.get("grid") else 0.0


def param_error(theirs: np.ndarray, ours: np.ndarray, before: np.ndarray, eps: float, decisions=(),
                update_scale=0.0) -> tuple[float, int]:
    """(the largest error of the new parameter ``theirs`` from the reference's ``ours``, in ``eps`` of the largest of
    the parameter, its update and ``update_scale`` (the magnitude of the update's terms, where they can cancel); the
    elements left out): an element whose step a sign decides (``decisions``: the quantized step's [(c, the magnitude
    of its terms)]) with ``|c|`` within ``SIGN_ROUNDING`` float32 eps of that magnitude takes the sign the
    implementation's arithmetic gives it, and is left out."""
    move = np.maximum(np.maximum(np.abs(ours), np.abs(ours - before)), update_scale)
    errors = np.abs(theirs - ours) / (eps * np.where(move > 0, move, 1.0))
    left_out = 0
    for c, magnitude in decisions:
        by_rounding = np.abs(c) <= SIGN_ROUNDING * float(np.finfo(np.float32).eps) * magnitude
        left_out += int(np.count_nonzero(by_rounding))
        errors = np.where(by_rounding, 0.0, errors)
    return (float(errors.max()) if errors.size else 0.0), left_out


def _taken_in(data: dict, workload) -> dict:
    """One step as recorded, checked: per parameter of the case, its value (of its shape) and its quantized state
    (codes: whole numbers 0 to 255 of its shape; absmax, map, step)."""
    shapes = {s.name: tuple(s.shape) for s in workload.specs}
    if set(data) != set(shapes):
        raise ValueError(f"parameters {sorted(data)[:3]}... where the case has {sorted(shapes)[:3]}...")
    out = {}
    for n, shape in shapes.items():
        param, state = data[n]["param"], dict(data[n]["state"])
        if not isinstance(param, np.ndarray) or param.shape != shape:
            raise ValueError(f"{n}: a parameter of another shape than {shape}")
        for k in sorted(int(key[5:]) for key in state if key.startswith("codes") and key[5:].isdigit()):
            codes = np.asarray(state[f"codes{k}"])
            if codes.shape != shape or not np.all((codes >= 0) & (codes <= 255) & (codes == np.round(codes))):
                raise ValueError(f"{n}: codes{k} are not uint8 codes of its shape")
            state[f"codes{k}"] = codes.astype(np.uint8)
            state[f"absmax{k}"] = np.asarray(state[f"absmax{k}"], dtype=np.float64).reshape(-1)
            state[f"map{k}"] = np.asarray(state[f"map{k}"], dtype=np.float64).reshape(-1)
        if state:
            state["step"] = int(np.asarray(state["step"]))
        out[n] = {"param": param, "state": state}
    return out
