"""Differentiable: autograd through k steps of an optimizer built with ``differentiable=True`` agrees, at
float64, with finite differences of the float64 reference on the same inputs.

A case is one implementation x hparam set, on a few of the workload's parameters. For each k in
``differentiable.steps`` it differentiates the update ``p_k - p_0`` with respect to three inputs:
``grad`` (the step-1 gradients), ``lr`` (the constructor's lr as a 0-dim float64 Tensor that requires grad)
and ``param`` (the initial parameters). A seeded direction ``d`` moves each element by a standard normal
multiple of itself (relative: no sign flips); torch's ``J d`` comes from ``torch.autograd.functional.jvp``,
the reference's from Richardson-extrapolated central differences at ``x + t d``, t in +-H, +-2H. Elements
whose differences show a kink (a max or clamp switching within 2H) are left out and counted. Per (input,
k, FQN) the error is ``max|J d - fd| / max|fd|``, held to ``TOLERANCE`` plus the differences' own rounding
(docs/tolerances.md).

A variant torch refuses with the flag (foreach, fused), a Tensor lr torch cannot differentiate, and the
compiled step (no double backward) are ``unsupported`` with the reason. Suites declare deviations with
``check: differentiable``: ``tensor`` globs the input, ``gate`` is ``single`` (k = 1) or ``multi`` (k > 1),
``raises`` says autograd raises, ``max_err_eps`` bounds the relative error.
"""

from __future__ import annotations

import fnmatch
import warnings

import numpy as np
import torch

from optbench.cases import Case, Outcome, RunContext
from optbench.checks.base import awaiting_judge, reference_defaults
from optbench.checks.derivatives import DTYPE, TOLERANCE, WRT, Derivatives, H, compare, side_in, side_out
from optbench.checks.registry import register_check
from optbench.checks.tape import Tape
from optbench.hyperparameters import takes
from optbench.implementations.torch_variants import BASELINE
from optbench.metrics import CASE_SKIPPED, DEVIATION_OBSERVED, DIFFERENTIABLE_MAX_REL_ERR
from optbench.numerics.recording_file import save_answers
from optbench.reference.contract import kind_of
from optbench.report.tables import CASE, num
from optbench.results import FAILING, row
from optbench.rows import first_words
from optbench.suite.spec import Suite
from optbench.usage import UsageError

NON_LEAF = "The .grad attribute of a Tensor that is not a leaf"  # torch reads .grad of the (non-leaf) parameters


def settings(ctx: RunContext) -> tuple[tuple[int, ...], str, int]:
    """(steps, hparams, max_params) from the run's ``differentiable:`` block, validated."""
    block = ctx.settings.differentiable
    steps, hparams, limit = block.get("steps", [1, 3]), str(block.get("hparams", "all")), block.get("max_params", 6)
    try:
        steps = tuple(sorted({int(s) for s in (steps if hasattr(steps, "__iter__") else [steps])}))
        limit = int(limit)
    except (TypeError, ValueError):
        raise UsageError(f"differentiable.steps={steps}, max_params={limit}: need whole numbers") from None
    if not steps or steps[0] < 1 or limit < 1 or hparams not in ("all", "first"):
        raise UsageError("differentiable: need steps >= 1, max_params >= 1 and hparams all or first")
    return steps, hparams, limit


def refuses(impl, device: torch.device) -> str:
    """Why torch's variant refuses ``differentiable=True`` ("" if it steps): probed on one small parameter."""
    if impl.compiled:  # measured: "torch.compile with aot_autograd does not currently support double backward"
        return "unsupported: the check's jvp is a double backward, which torch.compile (aot_autograd) does not support"
    if impl.is_candidate or impl.name == BASELINE:
        return ""
    p = torch.zeros(2, dtype=torch.float64, device=device, requires_grad=True).clone()
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=NON_LEAF)
            stepper = impl.build([p], {"differentiable": True})
            p.grad = torch.ones_like(p, requires_grad=True)
            stepper.step()
    except Exception as exc:
        return f"unsupported: torch refuses differentiable=True here: {type(exc).__name__}: {_first(exc)}"
    return ""


def _table(rows):
    """One line per case: its worst relative error over every input and k, its verdict and what it measured."""
    sel = rows[(rows["check"] == "differentiable") & (rows["fqn"] == "") & (rows["tensor"] == "")]
    return sel[CASE].assign(**{"max rel err": sel["value"].map(num), "verdict": sel["status"],
                               "detail": sel["detail"]})


@register_check(
    counted="differentiable", judged="answers",
    # opt-in: autograd through k steps with differentiable=True against finite differences of the float64
    # reference, at float64. steps: each k, the update after k steps differentiated w.r.t. step-1 grads, lr and
    # initial params; hparams: all, or first; max_params: parameters per case, the first of each (param group,
    # ndim, kind)
    config={"steps": [1, 3], "hparams": "all", "max_params": 6},
    sections=lambda rows: [("Differentiable (autograd through the step against finite differences of the "
                            "reference)", _table(rows))])
class DifferentiableCheck:
    name = "differentiable"
    requires = ()

    def cases(self, suite: Suite, ctx: RunContext) -> list[Case]:
        _, which, _ = settings(ctx)
        out = []
        closure = kind_of(suite.reference) == "closure"
        for impl in sorted(ctx.impls[suite.name], key=lambda i: i.name != BASELINE):
            only64 = "" if DTYPE in ctx.dtypes[suite.name] else "runs at float64 only (dtype=float64)"
            skip = ctx.unavailable(impl, DTYPE) or only64
            if not skip and not takes(impl.optimizer_class, "differentiable"):
                skip = f"unsupported: {impl.optimizer_class.__name__}'s constructor takes no differentiable"
            skip = skip or ("closure-driven: a step is not a function of one gradient" if closure else "")
            skip = skip or refuses(impl, ctx.device)
            if skip:
                out.append(Case(suite, impl, DTYPE, None, ctx.device, skip=skip))
                continue
            for hset in suite.hparams[:1] if which == "first" else suite.hparams:
                why = ("" if hset.dtypes is None or DTYPE in hset.dtypes
                       else f"set runs at {', '.join(hset.dtypes)}: {hset.note}")
                why = why or ("sparse gradients are not differentiated" if "sparse" in suite.workload_of(hset) else "")
                why = why or ("an lr schedule is not differentiated" if hset.schedule else "")
                if not why and not impl.is_candidate and hset.impls is not None and impl.name not in hset.impls:
                    why = f"set runs on {', '.join(hset.impls)} only"
                out.append(Case(suite, impl, DTYPE, hset, ctx.device, skip=why))
        return out

    def group(self, case: Case) -> tuple:
        return (case.suite.name, self.name, case.impl_name)

    def run(self, case: Case, ctx: RunContext) -> Outcome:
        if case.skip:
            status = "unsupported" if case.skip.startswith("unsupported") else "skip"
            shown = case.skip.removeprefix("unsupported: ")
            line = f"  {status.upper()[:5]:5} {self.name} {case.impl_name:>10} {shown}" if case.hset is None else ""
            return Outcome([row(case.labels, check=self.name, metric=CASE_SKIPPED, value=1, status=status,
                                detail=case.skip)], line)
        judging = ctx.judging  # judged here from what the case's worker recorded (engine.judge)
        tape = Tape(judging.recording.entries if judging is not None else None, record=ctx.recording_to is not None)
        defaults = reference_defaults(case, judging)
        steps, _, limit = settings(ctx)
        run = Derivatives(case, ctx, steps, limit, defaults)
        if not run.names:
            return Outcome([row(case.labels, check=self.name, metric=CASE_SKIPPED, value=1, status="skip",
                                detail="no parameter with a step-1 gradient free of exact zeros")])
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=NON_LEAF)
                measured = {(w, k): self.measure(run, w, k, tape)
                            for w in WRT if w != "lr" or "lr" in run.defaults for k in steps}
        finally:
            if ctx.recording_to is not None:  # for the judge, which replays it (what ran, then what was raised)
                save_answers(tape.entries, ctx.recording_to)
        if ctx.recording_to is not None:
            return awaiting_judge(case.labels, self.name)
        if tape.replaying:
            tape.finished()
        declared = case.suite.deviations_for(case.impl or case.impl_name, DTYPE, case.hset.name, check=self.name)
        claims: list[list] = [[] for _ in declared]  # what each declared deviation covers
        verdicts, rows, cells = [], [], {}
        for (wrt, k), (kind, found) in measured.items():
            gate = "single" if k == 1 else "multi"
            matching = [i for i, d in enumerate(declared)
                        if fnmatch.fnmatchcase(wrt, d.tensor) and fnmatch.fnmatchcase(gate, d.gate)]
            finding = ""
            if kind == "raised":
                i = next((i for i in matching if declared[i].raised_by(found)), None)
                seen = f"{type(found).__name__}: {_first(found)}"
                if i is not None:
                    claims[i].append((wrt, k, seen))
                status, value, detail = (("xfail", np.nan, f"{declared[i].finding}: raises {seen}") if i is not None
                                         else ("error", np.nan, f"autograd raises {seen}"))
                finding = declared[i].finding if i is not None else ""
            elif kind == "unsupported":
                status, value, detail = "unsupported", np.nan, found
            else:
                status, value, detail = self._judge(case, wrt, k, found, [(i, declared[i]) for i in matching],
                                                    claims, rows)
            verdicts.append(row(case.labels, check=self.name, metric=DIFFERENTIABLE_MAX_REL_ERR, value=value,
                                status=status, tensor=wrt, step=k, detail=detail, finding=finding))
            cells.setdefault(wrt, []).append(f"{value:.2g}" if np.isfinite(value) else status[:5])
        deviations = [self._deviation(case, declared[i], claimed) for i, claimed in enumerate(claims) if claimed]
        statuses = {r["status"] for r in verdicts + deviations}
        status = next((s for s in ("error", "fail", "xpass", "xfail", "pass") if s in statuses), "unsupported")
        worst = max((r["value"] for r in verdicts if r["status"] in ("pass", "fail")), default=np.nan)
        shown, ks = ", ".join(f"{w} {'/'.join(c)}" for w, c in cells.items()), "/".join(map(str, steps))
        detail = f"{len(run.names)} parameters ({', '.join(run.names)}), steps {ks}: {shown}"
        rows.insert(0, row(case.labels, check=self.name, metric=DIFFERENTIABLE_MAX_REL_ERR, value=worst,
                           status="fail" if status == "error" else status, detail=detail))
        line = (f"  {status.upper()[:5]:5} {self.name} {case.impl_name:>10} {case.hset.name:<34} {shown} "
                f"(steps {ks}, tol {TOLERANCE:g})")
        line += "".join(f"\n        {r['tensor']} (k={r['step']}) {r['status']}: {r['detail']}" for r in verdicts
                        if r["status"] in FAILING)
        line += "".join(f"\n        {r['status'].upper()} {r['detail']}" for r in deviations if r["status"] != "xfail")
        return Outcome([*rows[:1], *verdicts, *deviations, *rows[1:]], line)

    def measure(self, run: Derivatives, wrt: str, k: int, tape: Tape) -> tuple[str, object]:
        """("unsupported", why) | ("raised", exception) | ("measured", [(fqn, error, tol, kinks, resolved)]):
        the derivative of the k-step update with respect to ``wrt``; what the implementation gives goes through
        ``tape`` (``checks.tape``), the reference's finite differences are taken here."""
        def implementation() -> tuple[str, object]:
            impl, inputs = run.case.impl, run.inputs(wrt)
            try:  # the forward alone first: torch refusing the flag or a Tensor lr is not a wrong derivative
                run.torch_updates(wrt, k, [x.detach().requires_grad_() for x in inputs])
            except Exception as exc:
                if wrt != "lr" and (impl.name == BASELINE or impl.is_candidate):
                    raise
                what = "a Tensor lr that requires grad" if wrt == "lr" else "differentiable=True"
                return "unsupported", f"torch refuses {what} here: {type(exc).__name__}: {_first(exc)}"
            try:
                _, jd = torch.autograd.functional.jvp(lambda *xs: run.torch_updates(wrt, k, list(xs)),
                                                      tuple(inputs), tuple(run.tensors(run.d[wrt])))
            except Exception as exc:
                return "raised", exc
            return "jvp", [j.detach().cpu().numpy() for j in jd]
        kind, found = tape.take(f"{wrt}, {k} steps", implementation, side_out, lambda data: side_in(data, run))
        if kind != "jvp":
            return kind, found
        at = {t: run.reference_updates(wrt, k, t) for t in (-2 * H, -H, 0.0, H, 2 * H)}
        return "measured", [(n, *r) for n, r in zip(run.names, compare(found, at, run.x["param"]))]

    def _judge(self, case: Case, wrt: str, k: int, found: list, matching: list, claims: list, rows: list):
        """(status, value, detail) of one input and k; each FQN goes to the first matching declared deviation
        that does not raise (a raising one learns that it no longer raises here), the rest is judged."""
        for i, d in matching:
            if d.raises:
                claims[i].append((wrt, k, None))
        free, excused, worst = [], False, 0.0
        for fqn, e, t, kinks, ok in found:
            i, d = next(((i, d) for i, d in matching if not d.raises and fnmatch.fnmatchcase(fqn, d.fqn)), (None, None))
            if d:
                claims[i].append((wrt, k, (e, t, ok)))
            else:
                free.append((e / t, fqn, e, t))
            excused |= bool(d) and e > t
            worst = max(worst, e) if ok or e > t else worst  # over what the differences resolve, and anything past tol
            note = f"{'' if ok else ' (the rounding of the differences)'}{f', {kinks} kinks left out' if kinks else ''}"
            rows.append(row(case.labels, check=self.name, metric=DIFFERENTIABLE_MAX_REL_ERR, value=e, fqn=fqn,
                            tensor=wrt, step=k, detail=f"tol {t:.3g}{note}{f', under {d.finding}' if d else ''}"))
        over = max((x for x in free if x[2] > x[3]), default=None)
        status = "fail" if over else "xfail" if excused else "pass"
        detail = (f"{over[1]}: {over[2]:.3g} > tol {over[3]:.3g}" if over
                  else f"deviates as declared (worst {worst:.3g})" if excused
                  else f"within tolerance (worst {worst:.3g})")
        loose, kinks, covered = sum(not r[4] for r in found), sum(r[3] for r in found), len(found) - len(free)
        detail += f"; {covered} FQNs under declared deviations" if covered else ""
        detail += f"; {loose} of {len(found)} FQNs judged within the differences' rounding" if loose else ""
        detail += f"; {kinks} elements at kinks left out" if kinks else ""
        return status, worst, detail

    def _deviation(self, case: Case, d, claimed: list) -> dict:
        """A declared deviation's row: xfail while what it covers still deviates (or raises), xpass once not;
        ``fail`` past its bound (``max_err_eps``, on top of the differences' rounding)."""
        where = ", ".join(sorted({f"{w} k={k}" for w, k, _ in claimed}))
        fixed = ": remove the declaration once the fix is released"
        if d.raises:
            raised = [seen for _, _, seen in claimed if seen]
            status, seen, value = (("xfail", f"still raises {raised[0]} ({where})", 1.0) if raised
                                   else ("xpass", f"no longer raises ({where}){fixed}", 0.0))
        else:
            judged = [r for _, _, r in claimed]
            value = max((e for e, t, ok in judged if ok or e > t), default=0.0)
            if d.max_err_eps is not None and any(e > t + d.max_err_eps - TOLERANCE for e, t, _ in judged):
                status, seen = "fail", (f"{value:.3g} is beyond the declared bound of {d.max_err_eps:g}: "
                                        "not the known deviation")
            elif any(e > t for e, t, _ in judged):
                status, seen = "xfail", f"still deviates, worst {value:.3g} ({where})"
            elif d.intermittent:  # it shows on some inputs only
                status, seen = "pass", f"within tolerance on these inputs, worst {value:.3g} ({where})"
            else:
                status, seen = "xpass", f"within tolerance now, worst {value:.3g} ({where}){fixed}"
        return row(case.labels, check="deviation", metric=DEVIATION_OBSERVED, value=value, status=status, fqn=d.fqn,
                   tensor=d.tensor, detail=f"{d.finding}: {d.reason} Observed: {seen}", finding=d.finding)


def _first(exc: Exception) -> str:
    """The exception's first line, without autograd's hint."""
    return first_words(str(exc)).split(" Hint:")[0]
