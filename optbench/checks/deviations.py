"""Known deviations: upstream departures a suite declares, judged apart from everything else.

A parity error row that matches a declared deviation does not decide the case's verdict; the
deviation gets its own row: ``xfail`` while it still deviates, ``xpass`` once torch is fixed (time
to remove the declaration), ``fail`` past its declared bound (then it is not the known deviation).
A deviation that says the step ``raises`` on some FQN is checked here alone, on that FQN only. A candidate's such
case is judged in the parent (``engine.judge``) from what its worker recorded: the trajectory, or what it raised.
"""

from __future__ import annotations

import fnmatch

import pandas as pd

from optbench.cases import Case, Outcome, RunContext
from optbench.checks.base import awaiting_judge, reference_defaults
from optbench.checks.registry import register_check
from optbench.metrics import DEVIATION_MAX_ERR_EPS, DEVIATION_OBSERVED
from optbench.numerics.recording_file import Raised, save_raised
from optbench.numerics.trajectory import run_trajectory
from optbench.report import tables
from optbench.results import row
from optbench.rows import first_words
from optbench.suite.spec import DTYPES, PARAM_FILTERS, Deviation, Suite
from optbench.workloads import build
from optbench.workloads.complex import complexify


def split(errors: pd.DataFrame, deviations: list[Deviation], specs: dict) -> tuple[
        pd.DataFrame, list[tuple[Deviation, pd.DataFrame]]]:
    """Errors no deviation covers, and each deviation's own errors (a row goes to the first match); ``specs``: the
    workload's ParamSpecs by FQN, whose name, shape and kind a deviation's ``fqn``, ``size`` and ``kind`` select."""
    left = pd.Series(True, index=errors.index)
    declared = []
    for d in deviations:
        mine = left & errors.fqn.map(lambda f: d.matches_spec(specs[f]) if f in specs else (
            fnmatch.fnmatchcase(f, d.fqn) and d.matches_shape((1,)) and d.kind == "*")) \
            & errors.tensor.map(lambda t: fnmatch.fnmatchcase(t, d.tensor))
        if "kind" in errors:  # which parity gate a row comes from
            mine &= errors.kind.map(lambda k: fnmatch.fnmatchcase(k, d.gate))
        if mine.any():
            declared.append((d, errors[mine]))
            left &= ~mine
    return errors[left], declared


def declared_status(status: str, declared: Deviation | None, errors: bool = False) -> str:
    """What a check's own ``status`` becomes under a ``declared`` deviation, for every check that honours one: a
    fail is the known departure (xfail), a pass means it is fixed (xpass: remove the declaration), or, for an
    ``intermittent`` one that shows on some runs only, a plain pass. An error stays an error (a crash is never
    hidden under a declaration) unless ``errors``: the check's declarations describe a raise (a round-trip scenario
    torch's load refuses). Anything else (skip, unsupported, info), or no declaration: unchanged."""
    if declared is None:
        return status
    if status == "pass":
        return "pass" if declared.intermittent else "xpass"
    if status == "fail" or (status == "error" and errors):
        return "xfail"
    return status


def verdict(d: Deviation, errors: pd.DataFrame) -> tuple[str, str]:
    """(status, what was observed) for one deviation's errors."""
    worst = errors.loc[errors.err_eps.idxmax()]
    where = f"{worst.fqn}/{worst.tensor} at step {worst.step}: {worst.err_eps:.3g} eps"
    if d.max_err_eps is not None and worst.err_eps > d.max_err_eps:
        return "fail", f"beyond the declared bound of {d.max_err_eps:.3g} eps, so not the known deviation: {where}"
    if (errors.err_eps > errors.tol).any():
        return declared_status("fail", d), f"still deviates; worst {where}"
    if d.intermittent:
        return declared_status("pass", d), f"within tolerance on this run (the deviation shows on some runs only; " \
                                           f"worst {where})"
    return declared_status("pass", d), f"within tolerance now (worst {where}): remove the declaration once the fix " \
                                       "is released"


def deviation_rows(case: Case, declared) -> list[dict]:
    out = []
    for d, errors in declared:
        status, seen = verdict(d, errors)
        out.append(row(case.labels, check="deviation", metric=DEVIATION_MAX_ERR_EPS, value=errors.err_eps.max(),
                       unit="eps", status=status, fqn=d.fqn, tensor=d.tensor,
                       detail=f"{d.finding}: {d.reason} Observed: {seen}", finding=d.finding))
    return out


@register_check(default=True, counted="deviation", judged="trajectory",
                sections=lambda rows: [("Declared deviations", tables.deviations(rows))])
class DeviationsCheck:
    """Deviations that make the step raise, each run alone on the FQNs it names."""

    name = "deviations"
    requires = ()

    def cases(self, suite: Suite, ctx: RunContext) -> list[Case]:
        out = []
        for index, d in enumerate(suite.deviations):
            if not d.stops or d.whole_case or d.check != "parity":  # a whole case that raises: the parity check
                continue
            if not suite.met_in_run(d, ctx.run_candidate):  # another library's: these parameters stay in the workload
                continue
            dtypes = [t for t in ctx.dtypes[suite.name] if d.matches_dtype(t)]
            hsets = [h for h in suite.hparams
                     if fnmatch.fnmatchcase(h.name, d.hparams) and self._alone(suite, h, d, ctx).specs]
            if not dtypes or not hsets:
                continue
            dtype = "float32" if "float32" in dtypes else dtypes[0]
            for impl in ctx.impls[suite.name]:  # every one: each leaves the parameters out of its parity workload
                if not ctx.unavailable(impl, dtype):
                    out.append(Case(suite, impl, dtype, hsets[0], ctx.device, label=str(index)))
        return out

    def group(self, case: Case) -> tuple:
        return (case.suite.name, self.name)

    @staticmethod
    def _alone(suite: Suite, hset, d: Deviation, ctx: RunContext):
        """The hparam set's workload (2 steps) with only the parameters the deviation names."""
        sizes = {**ctx.settings.workload, **suite.workload_sizes}
        full = build(suite.workload_of(hset), seed=ctx.seed, steps=2, width=int(sizes["width"]),
                     layers=int(sizes["layers"]), vocab=int(sizes["vocab"]),
                     grad_log10_range=tuple(ctx.settings.workload.grad_log10_range))
        return full.restricted(lambda spec: d.matches_spec(spec) and PARAM_FILTERS[suite.params](spec))

    def workload(self, case: Case, ctx: RunContext):
        """The case's workload: its hparam set's, with only the parameters its deviation names."""
        alone = self._alone(case.suite, case.hset, case.suite.deviations[int(case.label)], ctx)
        return complexify(alone, ctx.seed) if DTYPES[case.dtype].is_complex else alone

    def run(self, case: Case, ctx: RunContext) -> Outcome:
        suite, d = case.suite, case.suite.deviations[int(case.label)]
        # an implementation the declaration does not describe (another class, or a variant its impl glob leaves out)
        # is judged on those parameters as on any others
        covered = d.covers(case.impl) and fnmatch.fnmatchcase(case.impl_name, d.impl)
        alone = self.workload(case, ctx)
        judging = ctx.judging  # judged here from what the case's worker recorded (engine.judge)
        try:
            if judging is not None and isinstance(judging.recording, Raised):  # what the worker's run raised
                raise judging.recording.exception()
            defaults = reference_defaults(case, judging)
            traj = run_trajectory(case.impl, case.hset, suite.reference, defaults,
                                  alone, DTYPES[case.dtype], ctx.device,
                                  reference_options=case.impl.reference_options(suite.reference_options),
                                  recorded=judging.recording if judging is not None else None,
                                  save_to=ctx.recording_to)
            if traj is None:  # recorded for the judge, whose verdict replaces this row
                return awaiting_judge(case.labels, "deviation")
            ok, raised = bool((traj.errors.err_eps <= traj.errors.tol).all()), False
            if not covered:
                status, seen = ("pass", "does not raise, and passes parity") if ok else (
                    "fail", f"does not raise, but fails parity ({traj.errors.err_eps.max():.3g} eps)")
            else:
                status = "xpass" if ok else "fail"
                stops, how = (("ends the process", f"ends the process with exit {d.exits}") if d.exits is not None
                              else ("raises", f"raises {d.raises}"))
                seen = (f"no longer {stops} and passes parity: remove the declaration once the fix is released" if ok
                        else f"no longer {how} but fails parity ({traj.errors.err_eps.max():.3g} eps)")
        except Exception as exc:
            if ctx.recording_to is not None:  # for the judge, which matches it against the declaration
                save_raised(exc, ctx.recording_to)
                return awaiting_judge(case.labels, "deviation")
            raised = True
            status = "xfail" if d.raised_by(exc) and covered else "fail"
            message = first_words(str(exc))
            seen = f"{'still raises' if status == 'xfail' else 'raises'} {type(exc).__name__}: {message}"
        labels = case.labels | {"hparams": case.hset.name}
        whose = (f"declared for {d.impl} only" if d.covers(case.impl)
                 else "declared of that class, which this candidate neither is nor subclasses")
        detail = (f"{d.finding}: {d.reason} Observed: {seen}" if covered else
                  f"the parameters {d.fqn} alone, on which {case.suite.optimizer or 'the suite'}'s class raises "
                  f"{d.raises} ({d.finding}, {whose}): {seen}")
        rows = [row(labels, check="deviation", metric=DEVIATION_OBSERVED, value=float(raised),
                    fqn=d.fqn, status=status, detail=detail, finding=d.finding if covered else "")]
        return Outcome(rows, f"  {status.upper():5} deviation {case.impl_name:>10} {case.dtype:>8} "
                             f"{d.finding if covered else '(' + d.finding + ' is not its)'} {d.fqn}: {seen}")
