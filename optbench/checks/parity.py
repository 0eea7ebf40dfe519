"""Parity: every implementation against the float64 reference, every step, every FQN and tensor.

A case is one implementation x dtype x hyperparameter set. Its verdict is ``fail`` when any tensor
no declared deviation covers is past ``tolerance_eps`` at any step; declared deviations get their
own rows (``checks.deviations``). An implementation that does not take the hparam set is
``unsupported``: a candidate lacking an option (its constructor has no such argument), or torch
refusing a combination at construction with a ValueError. Anything else raised is an ``error``.
"""

from __future__ import annotations

from optbench.adapters.quantized import full_precision
from optbench.adapters.sparse import refused as sparse_refused
from optbench.cases import Case, Outcome, RunContext
from optbench.checks.base import awaiting_judge, reference_defaults
from optbench.checks.deviations import deviation_rows, split
from optbench.checks.registry import register_check
from optbench.hyperparameters import describe
from optbench.implementations.candidate import rejected_at_construction
from optbench.implementations.torch_variants import BASELINE
from optbench.metrics import (
    CASE_SKIPPED,
    CASE_UNSUPPORTED,
    DEVIATION_OBSERVED,
    PARITY_CALLER_CONTRACT,
    PARITY_DECISIONS_ADOPTED,
    PARITY_MAX_ERR_EPS,
    PARITY_ONE_STEP_DECISIONS_LEFT_OUT,
    PARITY_ONE_STEP_MAX_ERR_EPS,
    PARITY_QUANTIZED_UNJUDGED,
    PARITY_STEP_MAX_ERR_EPS,
    PARITY_TOL_EPS,
)
from optbench.numerics.accuracy import tolerance_eps
from optbench.numerics.never_moved import diagnosis, never_moved
from optbench.numerics.one_step import update_eps
from optbench.numerics.precision import precision_rows
from optbench.numerics.recording import as_array
from optbench.numerics.recording_file import Raised, save_raised
from optbench.numerics.trajectory import run_trajectory
from optbench.report import tables
from optbench.results import DECLARED, row
from optbench.rows import first_words
from optbench.suite.spec import DTYPES, Suite


def one_step(ctx: RunContext, suite: Suite, dtype: str) -> bool:
    """Whether the one-step check runs: on unless ``parity.one_step=false`` or the suite says the dtype
    defeats it (``one_step: {skip_dtypes: [...], note: ...}``), and always where the update has a
    precision floor (there it is what gates the update)."""
    if dtype in suite.one_step_skip:
        return False
    return bool(ctx.settings.parity.one_step) or update_eps(suite, dtype) is not None


def unsupported(case: Case, ctx: RunContext) -> str:
    """Why the implementation does not take this hparam set ("" if it does)."""
    impl, hset = case.impl, case.hset
    if impl.is_candidate:
        missing = impl.options_not_taken(hset.option_names())
        if missing:
            return f"unsupported by candidate: {impl.not_taking(missing)}"
    workload = ctx.workload(case.suite, hset, case.dtype)
    if impl.is_candidate and (why := sparse_refused(impl.spec, workload)):
        return f"unsupported by candidate: {why}"
    params = workload.materialize(DTYPES[case.dtype], ctx.device)
    try:
        hset.build(impl, params)
    except Exception as exc:
        if not impl.is_candidate:
            if isinstance(exc, ValueError):
                return f"torch rejects this combination at construction: {str(exc).splitlines()[0]}"
            raise
        if isinstance(exc, TypeError) and "unexpected keyword" in str(exc):
            return f"unsupported by candidate: {exc}"
        why = rejected_at_construction(impl, hset, params, exc)
        if not why:
            raise
        return why
    return ""


def complex_rejection(case: Case, ctx: RunContext) -> str:
    """torch's one-line message where it rejects complex parameters for this implementation while taking
    real ones of the same precision, "" otherwise. Every such rejection in torch is a deliberate check
    (Adafactor, Muon: "does not support complex parameters"; SparseAdam at construction; fused kernels:
    floating-point parameters only), so the case is ``unsupported``, not skipped (README, complex)."""
    dtype = DTYPES[case.dtype]
    if not dtype.is_complex or case.impl is None or case.impl.is_candidate:
        return ""
    why = case.impl.available(ctx.device, dtype)
    return why if why and not case.impl.available(ctx.device, dtype.to_real()) else ""


def one_sided_detail(one_sided: dict, suite: Suite) -> str:
    """State keys only one side keeps, per side: what a candidate spec's state map is for (or, in a suite of one's
    own, without a torch optimizer, a rename in the reference)."""
    sides: dict[str, list[str]] = {}
    for key, side in sorted(one_sided.items()):
        sides.setdefault(side, []).append(repr(key))
    own = f"; or rename them in the reference {suite.reference_name}" if suite.optimizer is None else ""
    return ("; ".join(f"state key(s) {', '.join(keys)} kept only by {side}" for side, keys in sides.items())
            + f" (a candidate spec's state.keys maps them, state.ignore leaves them out{own}: docs/candidates.md)")


def parity_workload(case: Case, ctx: RunContext):
    """The workload a parity case runs on: its hparam set's, less the parameters whose state a candidate keeps
    quantized (``adapters.quantized``: the quantized check judges those, in the quantizer's units)."""
    workload = ctx.workload(case.suite, case.hset, case.dtype)
    return full_precision(case.impl.spec, workload) if case.impl is not None and case.impl.is_candidate else workload


@register_check(
    default=True, counted="parity", judged="trajectory",
    # one_step: also check each step from the implementation's own state, a tight gate at every dtype
    # (docs/tolerances.md); false leaves the free-running trajectory alone (Muon keeps its update check, which its
    # bfloat16 update needs)
    # keep_recordings: keep what a candidate's worker recorded for the judge (recordings/case-N.npz, engine.judge)
    config={"one_step": True, "keep_recordings": False},
    sections=lambda rows: [("Parity cases", tables.parity(rows)),
                           ("State precision (the dtype each tensor was kept in)", tables.precision(rows)),
                           ("Worst tensors (failing cases, top 5)", tables.worst(rows))])
class ParityCheck:
    name = "parity"
    requires = ()

    def cases(self, suite: Suite, ctx: RunContext) -> list[Case]:
        out, skipped = [], set()
        impls = sorted(ctx.impls[suite.name], key=lambda i: i.name != BASELINE)  # the baseline first
        compiled = ctx.compiled_hparams(suite)
        for dtype in ctx.dtypes[suite.name]:
            for hset in suite.hparams:
                if hset.dtypes is not None and dtype not in hset.dtypes:
                    continue
                for impl in impls:
                    why = ctx.unavailable(impl, dtype)
                    if not why and impl.compiled and compiled is not None and hset.name not in compiled:
                        why = (f"the compiled variant runs on {', '.join(compiled)} by default "
                               "(compile_hparams=all runs every set)" if compiled else
                               "the compiled variant runs on no hparam set here (compile_hparams=none: a cold "
                               "TorchInductor compile per suite; compile_hparams=[first] runs it on the first)")
                    if why and (impl.name, dtype, why) not in skipped:
                        skipped.add((impl.name, dtype, why))
                        out.append(Case(suite, impl, dtype, None, ctx.device, skip=why))
                    elif not why and hset.impls is not None and not impl.is_candidate and impl.name not in hset.impls:
                        out.append(Case(suite, impl, dtype, hset, ctx.device,
                                        skip=f"set runs on {', '.join(hset.impls)} only: {hset.note}"))
                    elif not why:
                        out.append(Case(suite, impl, dtype, hset, ctx.device))
        return out

    def group(self, case: Case) -> tuple:
        return case.trajectory_group

    def run(self, case: Case, ctx: RunContext) -> Outcome:
        labels = case.labels
        if case.skip and case.hset is not None:  # the hparam set itself excludes this implementation
            return Outcome([row(labels, check="parity", metric=CASE_UNSUPPORTED, value=1, status="unsupported",
                                detail=case.skip)])
        rejected = complex_rejection(case, ctx) if case.skip else ""
        if rejected:
            why = f"torch rejects complex parameters: {rejected}"
            return Outcome([row(labels, check="parity", metric=CASE_UNSUPPORTED, value=1, status="unsupported",
                                detail=why)],
                           f"  UNSUP parity {case.impl_name:>10} {case.dtype:>8} {'':<34} {why}")
        if case.skip:
            return Outcome([row(labels, check="parity", metric=CASE_SKIPPED, value=1, status="skip",
                                detail=f"not available on {case.device.type}/{case.dtype}: {case.skip}")])
        judging = ctx.judging  # judged here from what the case's worker recorded (engine.judge)
        why = unsupported(case, ctx) if judging is None else ""
        if why:
            return Outcome([row(labels, check="parity", metric=CASE_UNSUPPORTED, value=1, status="unsupported",
                                detail=f"{why} (options: {describe(case.hset.options)})")],
                           f"  UNSUP parity {case.impl_name:>10} {case.dtype:>8} {case.hset.name:<34} {why}")
        suite = case.suite
        workload = parity_workload(case, ctx)
        declared = suite.deviations_for(case.impl or case.impl_name, case.dtype, case.hset.name)
        raising = [d for d in declared if d.whole_case]
        try:
            if judging is not None and isinstance(judging.recording, Raised):  # the worker's run raised: this
                raise judging.recording.exception()
            defaults = reference_defaults(case, judging)
            traj = run_trajectory(case.impl, case.hset, suite.reference, defaults,
                                  workload, DTYPES[case.dtype], ctx.device,
                                  reference_options=case.impl.reference_options(suite.reference_options),
                                  keep_snapshots=True, one_step=one_step(ctx, suite, case.dtype),
                                  update_eps=update_eps(suite, case.dtype),
                                  foreign=judging.foreign if judging is not None else suite.foreign(case.impl),
                                  recorded=judging.recording if judging is not None else None,
                                  save_to=ctx.recording_to)
        except Exception as exc:
            declared = next((d for d in raising if d.raised_by(exc)), None)
            if declared is None:
                raise
            if ctx.recording_to is not None:  # for the judge, which matches it against the declaration again
                save_raised(exc, ctx.recording_to)
            seen = f"still raises {type(exc).__name__}: {first_words(str(exc))}"
            return Outcome([row(labels, check="deviation", metric=DEVIATION_OBSERVED, value=1, status="xfail",
                                detail=f"{declared.finding}: {declared.reason} Observed: {seen}",
                                finding=declared.finding),
                            row(labels, check="parity", metric=PARITY_MAX_ERR_EPS, value=float("nan"), status="xfail",
                                detail=f"the case raises, as declared ({declared.finding})", finding=declared.finding)],
                           f"  XFAIL parity {case.impl_name:>10} {case.dtype:>8} {case.hset.name:<34} "
                           f"{declared.finding}: {seen}")
        if traj is None:  # recorded for the judge (engine.judge), whose verdict replaces this row
            return awaiting_judge(labels, "parity")
        ctx.scratch[("snapshots", case.impl_name)] = traj.snapshots
        fixed = [row(labels, check="deviation", metric=DEVIATION_OBSERVED, value=0, status="xpass",
                     detail=f"{d.finding}: {d.reason} Observed: no longer raises: "
                            "remove the declaration once the fix is released")
                 for d in raising]
        deviations = [d for d in declared if not d.stops]
        gated, declared = split(traj.errors, deviations, {spec.name: spec for spec in workload.specs})
        ctx.scratch[("declared", case.impl_name)] = {(e.fqn, e.tensor)
                                                     for _, errs in declared for e in errs.itertuples()}
        still = set()
        if (gated.err_eps > gated.tol).any():  # failing: which of its tensors the implementation never moved
            initial = workload.materialize(DTYPES[case.dtype], ctx.device)
            still = never_moved(traj.snapshots, {n: as_array(p) for n, p in initial.items()})
        rows, line = self._rows(case, gated, declared, traj.one_sided, traj.decisions_left_out, traj.breaches,
                                still)
        if traj.decisions_adopted:
            rows.append(row(labels, check="parity", metric=PARITY_DECISIONS_ADOPTED, value=traj.decisions_adopted,
                            unit="element-steps", gate="trajectory",
                            detail="a sign or clamp decided within rounding: the reference went on from the "
                                   "implementation's outcome there (either is a correct step)"))
        quantized = len(ctx.workload(suite, case.hset, case.dtype).specs) - len(workload.specs)
        if quantized and rows:  # (parameters judged elsewhere are named, never silently left out)
            rows[0] = {**rows[0], "detail": f"{rows[0]['detail']}; {quantized} parameters keep quantized state, "
                                            "judged by the quantized check instead"}
            if "quantized" not in ctx.checks:  # ... and where no check of the run judges them, the verdict says so
                rows.append(row(labels, check="parity", metric=PARITY_QUANTIZED_UNJUDGED, value=quantized,
                                status="skip", detail=f"{quantized} parameters keep quantized state: the quantized "
                                                      "check judges them, and this run does not select it"))
                line += f"; {quantized} parameters of quantized state UNJUDGED (checks=[...,quantized])"
        return Outcome(rows + precision_rows(case.labels, traj.dtypes) + fixed, line)

    def _rows(self, case: Case, gated, declared, one_sided: dict, left_out: int = 0,
              breaches: dict | None = None, still: set | None = None) -> tuple[list[dict], str]:
        labels, breaches = case.labels, breaches or {}
        over = gated[gated.err_eps > gated.tol]
        broken = gated[gated.kind == "contract"]
        drift, local = gated[gated.kind == "trajectory"], gated[gated.kind == "one-step"]
        dev_rows = deviation_rows(case, declared)
        dev_status = {r["status"] for r in dev_rows}
        if len(over):
            first = over.sort_values(["step", "kind"], kind="stable").iloc[0]
            status = "fail"
            detail = (f"first past tolerance: step {first.step} {first.fqn}/{first.tensor} ({first.kind}): "
                      f"{first.err_eps:.3g} eps > {first.tol:.3g} eps")
            if first.kind == "contract":  # numerics.caller_contract: the caller's gradient or parameter changed
                detail = f"{first.fqn}: {breaches.get((first.fqn, first.tensor), first.tensor)}"
            numeric = over[over.kind != "contract"]
            if len(numeric):  # the largest departure too, where it is not the first: the bug, not a rounding
                worst = numeric.loc[(numeric.err_eps / numeric.tol).idxmax()]
                if (worst.step, worst.fqn, worst.tensor, worst.kind) != (first.step, first.fqn, first.tensor,
                                                                          first.kind):
                    detail += (f"; worst: {worst.err_eps:.3g} eps > {worst.tol:.3g} eps at step {worst.step} "
                               f"{worst.fqn}/{worst.tensor} ({worst.kind})")
            if one_sided:
                detail = f"{one_sided_detail(one_sided, case.suite)}; {detail}"
            stuck = diagnosis({(r.fqn, r.tensor) for r in numeric.itertuples() if r.tensor not in one_sided}
                              & (still or set()), int(gated.step.max()))
            if stuck:  # the likely bug, where a large error table would only imply it
                detail = f"{stuck}; {detail}"
        else:
            status = ("fail" if "fail" in dev_status else "xfail" if "xfail" in dev_status
                      else "xpass" if "xpass" in dev_status else "pass")
            detail = ("within tolerance" if len(gated) else
                      "no tensor outside a declared deviation: nothing here was judged at tolerance")
            if len(drift):
                worst = drift.loc[drift.err_eps.idxmax()]
                detail += f"; worst {worst.fqn}/{worst.tensor} at step {worst.step}"
        measured = float("nan")
        if declared:  # what the declared tensors measured, so an xfail/xpass says how far off (or how close) they are
            measured = max((float(errs.err_eps.max()) for _, errs in declared if len(errs)), default=float("nan"))
            detail += (f"; declared deviations: {', '.join(sorted({d.finding for d, _ in declared}))} "
                       f"(their tensors measured up to {measured:.3g} eps)")
        # every tensor under a declaration: the case's figure is what they measured (an XPASS states its error)
        only_declared = not len(drift) and measured == measured
        worst_err = float(drift.err_eps.max()) if len(drift) else measured if only_declared else 0.0
        steps = int(drift.step.max()) if len(drift) else 0
        tol = float(drift.tol.max()) if len(drift) else tolerance_eps(steps)  # each row's own (master copies: tighter)
        gate = str(first.kind) if len(over) else ""
        findings = ",".join(sorted({d.finding for d, _ in declared}))
        rows = [row(labels, check="parity", metric=PARITY_MAX_ERR_EPS, value=worst_err, unit="eps", status=status,
                    detail=detail, gate=gate, finding=findings if status in DECLARED else ""),
                row(labels, check="parity", metric=PARITY_TOL_EPS, value=tol, unit="eps")]
        rows += [row(labels, check="parity", metric=PARITY_MAX_ERR_EPS, value=err, unit="eps", fqn=fqn, tensor=tensor,
                     gate="trajectory")
                 for (fqn, tensor), err in drift.groupby(["fqn", "tensor"]).err_eps.max().items()]
        rows += [row(labels, check="parity", metric=PARITY_STEP_MAX_ERR_EPS, value=err, unit="eps", step=int(step))
                 for step, err in drift.groupby("step").err_eps.max().items()]
        rows += [row(labels, check="parity", metric=PARITY_CALLER_CONTRACT, value=1, status="fail", fqn=b.fqn,
                     tensor=b.tensor, step=int(b.step), gate="contract",
                     detail=breaches.get((b.fqn, b.tensor), ""))
                 for b in broken.itertuples()]
        if len(local):
            local_over = local[local.err_eps > local.tol]
            rows.append(row(labels, check="parity", metric=PARITY_ONE_STEP_MAX_ERR_EPS,
                            value=float(local.err_eps.max()), unit="eps", status="fail" if len(local_over) else "pass",
                            gate="one-step",
                            detail=("each step from the implementation's own state; the parameter's update in eps of "
                                    f"the update (tolerance {float(local.tol.max()):g})"
                                    + (f"; {left_out} element-steps left out: a sign or clamp the reference's "
                                       "decisions() shows decided within rounding" if left_out else ""))))
            if left_out:
                rows.append(row(labels, check="parity", metric=PARITY_ONE_STEP_DECISIONS_LEFT_OUT, value=left_out,
                                unit="element-steps", gate="one-step",
                                detail="a sign or clamp decided within rounding: either outcome is a correct step"))
            rows += [row(labels, check="parity", metric=PARITY_ONE_STEP_MAX_ERR_EPS, value=err, unit="eps", fqn=fqn,
                         tensor=tensor, gate="one-step")
                     for (fqn, tensor), err in local.groupby(["fqn", "tensor"]).err_eps.max().items()]
        rows += dev_rows
        shown = {"pass": "PASS", "fail": "FAIL", "xfail": "XFAIL", "xpass": "XPASS"}[status]
        one = f" one-step {float(local.err_eps.max()):7.3g}" if len(local) else ""
        line = (f"  {shown:5} parity {case.impl_name:>10} {case.dtype:>8} {case.hset.name:<34} "
                f"max {worst_err:9.3g} eps{' (the declared tensors)' if only_declared else ''}{one}"
                + ("" if status == "pass" else f"  ({detail})"))
        return rows, line
