"""Hyperparameter forms: every form torch documents (Tensor lr 0-dim and 1-element, Tensor betas, Tensor
weight_decay, where the constructor's signature admits a Tensor; an lr scheduler mid-run on a float and
on a Tensor lr), checked like parity.

Each form is the suite's first hparam set with one thing changed. It runs through the parity check
(reference, one-step and trajectory gates, declared deviations), at each selected dtype and on every
implementation. A form torch rejects at construction is an ``unsupported`` row carrying torch's
message; one that torch accepts and then crashes on is an ``error`` row. A Tensor form is also compared
with its float twin (the same values as Python floats), reported as ``forms.vs_float_max_err_eps`` in eps of the dtype
but never finer than float32's (the Tensor's own dtype; failing past the cross-implementation bound)
and ``forms.vs_float_bitwise``.
"""

from __future__ import annotations

import inspect
from dataclasses import replace

import numpy as np
import torch

from optbench.cases import Case, Outcome, RunContext
from optbench.checks.parity import BASELINE, ParityCheck
from optbench.checks.registry import register_check
from optbench.hyperparameters import as_data, from_data, takes
from optbench.metrics import FORMS_VS_FLOAT_BITWISE, FORMS_VS_FLOAT_MAX_ERR_EPS
from optbench.numerics.accuracy import cross_error, cross_tolerance_eps
from optbench.report.forms import table as forms_table
from optbench.results import row
from optbench.suite.spec import DTYPES, HparamSet, Suite

STEP_LR = {"kind": "step", "step_size": 10, "gamma": 0.5}


def _float32(value):
    """``value`` (a float or a pair) rounded to float32, as a torch.tensor of it holds it."""
    if isinstance(value, (list, tuple)):
        return [_float32(v) for v in value]
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return value  # already a Tensor form
    return float(torch.tensor(float(value), dtype=torch.float32))


def _warmup_cosine(steps: int) -> dict:
    return {"kind": "warmup_cosine", "warmup": 5, "total": steps}


def takes_tensor(optimizer_class: type, name: str) -> bool:
    """Whether the constructor's signature documents a Tensor for ``name`` (``lr: float | Tensor``;
    Adam's ``betas: tuple[float | Tensor, float | Tensor]``); an unannotated argument is tried."""
    parameter = inspect.signature(optimizer_class.__init__).parameters.get(name)  # None: taken by **kwargs
    return parameter is None or parameter.annotation is inspect.Parameter.empty or "Tensor" in str(parameter.annotation)


FORMED = ("lr", "betas", "weight_decay")  # the hyperparameters a form changes


def form_facts(suite: Suite, optimizer_class: type) -> dict:
    """What ``forms`` reads of a class, as JSON data (the judge of a candidate's forms never imports it): the
    suite's defaults for the formed hyperparameters, and whether its constructor takes each, and as a Tensor."""
    defaults = suite.defaults(optimizer_class)
    return {"defaults": {k: as_data(defaults[k]) for k in FORMED if k in defaults},
            "takes": {k: takes(optimizer_class, k) for k in FORMED},
            "tensor": {k: takes(optimizer_class, k) and takes_tensor(optimizer_class, k) for k in FORMED}}


def forms(suite: Suite, facts: dict, steps: int) -> list[tuple[HparamSet, str | None]]:
    """(form, name of its float twin or None) for the suite's first hparam set, as far as the
    optimizer's constructor has the hyperparameter at all (``facts``: ``form_facts`` of its class)."""
    base = suite.hparams[0]
    options = {**{k: from_data(v) for k, v in facts["defaults"].items()}, **base.options}
    # a hyperparameter the constructor takes, given as numbers (not already as a Tensor form)
    has = lambda name: (bool(facts["takes"].get(name)) and name in options  # noqa: E731
                        and "tensor" not in str(options[name]))
    tensor = lambda name: has(name) and bool(facts["tensor"].get(name))  # noqa: E731
    # Values a float32 Tensor holds exactly, so that a Tensor form and its float twin mean the same numbers.
    held = {k: _float32(options[k]) for k in ("lr", "betas", "weight_decay") if has(k)}
    base = replace(base, options={**base.options, **held})
    options = {**options, **held}
    out: list[tuple[HparamSet, str | None]] = [(replace(base, name="float"), None)]

    def form(name: str, twin: str | None = "float", schedule=None, **changed):
        out.append((replace(base, name=name, options={**base.options, **changed}, schedule=schedule), twin))

    lr = options.get("lr")
    if tensor("lr"):
        form("tensor_lr", lr={"tensor": lr})
        form("tensor_lr_1elem", lr={"tensor": [lr]})
    if tensor("betas"):
        form("tensor_betas", betas=[{"tensor": b} for b in options["betas"]])
    if tensor("weight_decay"):
        decay = options["weight_decay"] or _float32(0.01)
        if decay != options["weight_decay"]:
            form("weight_decay", twin=None, weight_decay=decay)
        form("tensor_weight_decay", twin="weight_decay" if decay != options["weight_decay"] else "float",
             weight_decay={"tensor": decay})
    if has("lr"):
        form("step_lr", twin=None, schedule=STEP_LR)
        form("warmup_cosine", twin=None, schedule=_warmup_cosine(steps))
    if tensor("lr"):
        form("step_lr_tensor_lr", twin="step_lr", schedule=STEP_LR, lr={"tensor": lr})
        form("warmup_cosine_tensor_lr", twin="warmup_cosine", schedule=_warmup_cosine(steps), lr={"tensor": lr})
    return out


def against_twin(case: Case, mine: list[dict], twin: list[dict], declared=frozenset()) -> list[dict]:
    """``forms.vs_float_max_err_eps`` (failing past the cross-implementation bound) and
    ``forms.vs_float_bitwise`` of a Tensor form's snapshots against its float twin's, leaving out the
    (fqn, tensor) keys a declared deviation covers. A Tensor hyperparameter is float32 (as
    ``torch.tensor(0.01)`` makes it) and torch computes with it, and a scheduler updates it, in float32:
    against its twin it is as exact as float32 at most, so the distance is in eps never finer than that."""
    eps = max(torch.finfo(DTYPES[case.dtype]).eps, torch.finfo(torch.float32).eps)
    x = cross_error(mine, twin, eps, skip=frozenset(declared))
    bitwise = all(a.keys() == b.keys() and all(np.array_equal(a[k], b[k], equal_nan=True) for k in a)
                  for a, b in zip(mine, twin))
    bound = cross_tolerance_eps(len(twin))
    detail = (f"against the {case.label} run: max {x:.3g} eps (bound {bound:.3g}), "
              f"{'bit-exact' if bitwise else 'not bit-exact'}")
    return [row(case.labels, check="forms", metric=FORMS_VS_FLOAT_MAX_ERR_EPS, value=x, unit="eps",
                status="pass" if x <= bound else "fail", detail=detail),
            row(case.labels, check="forms", metric=FORMS_VS_FLOAT_BITWISE, value=float(bitwise), detail=detail)]


@register_check(
    counted="forms", judged="trajectory",
    # opt-in: Tensor lr/betas/weight_decay and lr schedulers on the first hparam set. dtypes: null, every dtype of
    # the suite; compiled: the forms the compiled variant runs (null: all)
    config={"dtypes": ["float64", "float32"], "compiled": ["float", "tensor_lr", "warmup_cosine_tensor_lr"]},
    sections=lambda rows: [("Hyperparameter forms (`=`: bit-exact with the float form; `rejected`: torch refuses it)",
                            forms_table(rows))])
class FormsCheck:
    name = "forms"
    requires = ()

    def cases(self, suite: Suite, ctx: RunContext) -> list[Case]:
        settings = ctx.settings.forms
        wanted, compiled = settings.get("dtypes"), settings.get("compiled")
        dtypes = [d for d in ctx.dtypes[suite.name] if not wanted or d in wanted]
        out = []
        for impl in sorted(ctx.impls[suite.name], key=lambda i: i.name != BASELINE):
            for dtype in dtypes:
                if ctx.unavailable(impl, dtype):
                    continue
                for hset, twin in forms(suite, form_facts(suite, impl.optimizer_class), ctx.steps):
                    if impl.compiled and compiled and hset.name not in compiled:
                        continue
                    out.append(Case(suite, impl, dtype, hset, ctx.device, label=twin or ""))
        return out

    def group(self, case: Case) -> tuple:
        return (case.suite.name, self.name, case.dtype, case.impl_name)

    def run(self, case: Case, ctx: RunContext) -> Outcome:
        ctx.scratch.pop(("snapshots", case.impl_name), None)
        outcome = ParityCheck().run(case, ctx)
        rows = [{**r, "check": "forms"} for r in outcome.rows]
        line = outcome.line.replace(" parity ", " forms  ", 1)
        mine = ctx.scratch.pop(("snapshots", case.impl_name), None)
        ctx.scratch[("form", case.hset.name)] = mine
        twin = ctx.scratch.get(("form", case.label)) if case.label else None
        if mine is not None and twin is not None:
            twin_rows = against_twin(case, mine, twin, ctx.scratch.get(("declared", case.impl_name), set()))
            rows += twin_rows
            if twin_rows[0]["status"] == "fail":
                line = ((line + "\n" if line else "")
                        + f"  FAIL  forms  {case.impl_name:>10} {case.dtype:>8} {case.hset.name:<34} "
                          f"{twin_rows[0]['detail']}")
        return Outcome(rows, line)
