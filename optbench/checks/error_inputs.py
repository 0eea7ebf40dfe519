"""Error inputs: invalid uses an optimizer must reject, each a result row.

Generic inputs (below) hold for every ``torch.optim.Optimizer`` subclass (``BASE``) and for torch.optim's
own optimizers (``TORCH_OPTIM``: learning-rate validation); a suite adds its optimizer's own
(``error_inputs:``: bad betas, dense gradients to SparseAdam, 1-D parameters to Muon, ...). Each is
built (and, with ``at: step``, stepped) with the optimizer class as given, no implementation flags
added, and passes when it raises the declared exception (or warns, for a Warning class) with a
message matching ``match``.

A candidate that is or subclasses the suite's class faces the same inputs as torch's class. Any other candidate is
held to rejecting, not to torch's wording: it passes by raising the declared class or one its spec's ``rejects``
names, with any message (a ``match:`` it does not meet is named in the row as not applied); an input whose
options its constructor does not take (renames applied) is ``unsupported``, and torch.optim's own conventions (a
Tensor-valued option, ``fused``/``foreach``/...) are not asked of it unless its spec's ``error_inputs`` names them;
inputs its spec's ``error_inputs`` leaves out are ``skip``. The console prints the failing inputs and, per
implementation, one line summing them up.

A candidate's error inputs are judged in the parent (``engine.judge``), which never imports it: its worker asks it
each input and records what it answered (``Answering``: what it raised or warned, by class names and message, where,
and whether it builds at all), and the judge runs the same judgement on those answers, matching a class that is not
Python's by its name.

An input's parameters carry the attributes its ``meta`` names (the suite's ``error_param_meta`` unless the
input has its own), for optimizers that read metadata from their parameters (u-muP's ``mup_type``). Where
the optimizer is known not to reject an input as torch does, the suite declares it (``check: errors``,
``hparams:`` a glob over the input's description): the row is ``xfail`` while it does so, ``xpass`` after.
"""

from __future__ import annotations

import re

from optbench.adapters import group_hparams
from optbench.cases import Case, Outcome, RunContext
from optbench.checks.deviations import declared_status
from optbench.checks.error_attempts import Answering, exception_class, raised_as
from optbench.checks.registry import register_check
from optbench.hyperparameters import IMPLEMENTATION_FLAGS, is_tensor_form
from optbench.implementations import Implementation
from optbench.metrics import ERRORS_REJECTED
from optbench.numerics.recording_file import save_answers
from optbench.report import tables
from optbench.results import row
from optbench.rows import first_words
from optbench.suite.spec import ErrorInput, Suite

# What torch.optim.Optimizer itself enforces, for any subclass.
BASE = (
    ErrorInput("params given as a single Tensor", params="single_tensor", raises="TypeError",
               match="params argument given to the optimizer should be an iterable of Tensors"),
    ErrorInput("a parameter twice in one param group", params="duplicate_in_group", raises="UserWarning",
               match="a parameter group with duplicate parameters"),
    ErrorInput("a parameter in two param groups", params="duplicate_across_groups", raises="ValueError",
               match="some parameters appear in more than one parameter group"),
    ErrorInput("named and unnamed params in one group", params="mixed_names", raises="ValueError",
               match="all optimizer params should be with/without names"),
    ErrorInput("named and unnamed param groups", params="mixed_named_groups", raises="ValueError",
               match="all optimizer param groups should be with/without names"),
)
# What every torch.optim optimizer validates: asked of suites whose optimizer is a torch.optim class.
TORCH_OPTIM = (
    ErrorInput("a 2-element Tensor lr", options={"lr": {"tensor": [0.001, 0.001]}}, raises="ValueError",
               match="Tensor lr must be 1-element"),
    ErrorInput("a negative learning rate", options={"lr": -0.01}, raises="ValueError", match="(?i)learning rate|lr"),
)
GENERIC = BASE + TORCH_OPTIM


def error_inputs(suite: Suite) -> list[ErrorInput]:
    """The inputs a suite's optimizer (and any candidate run against it) must reject."""
    torch_suite = bool(suite.optimizer) and "." not in suite.optimizer
    return list(BASE) + (list(TORCH_OPTIM) if torch_suite else []) + list(suite.error_inputs)


def torch_convention(e: ErrorInput) -> bool:
    """An input about torch.optim's own conventions: a Tensor-valued option, or an implementation flag."""
    def tensor(value) -> bool:
        return is_tensor_form(value) or isinstance(value, (list, tuple)) and any(map(tensor, value))

    return any(map(tensor, e.options.values())) or any(k in IMPLEMENTATION_FLAGS for k in e.options)


def not_asked(impl: Implementation, e: ErrorInput, suite: Suite) -> tuple[str, str]:
    """(status, why) when a candidate that is not the suite's class is not asked ``e``, ("", "") when it is: its spec
    leaves ``e`` out (skip), a torch.optim convention it need not follow or an option its constructor does not take
    (unsupported)."""
    spec = impl.spec
    if spec is not None and not spec.error_input_applies(e.desc):
        return "skip", f"not asked of this candidate: its spec's error_inputs leaves {e.desc!r} out ({spec.source})"
    if torch_convention(e) and (spec is None or spec.error_inputs is None):
        return "unsupported", (f"unsupported by candidate: a torch.optim convention ({e.desc}) not asked of a class "
                               f"that does not subclass {suite.optimizer or suite.describes}; its spec's error_inputs "
                               "can ask it")
    missing = impl.options_not_taken(e.options)
    if missing:
        return "unsupported", f"unsupported by candidate: {impl.not_taking(missing)}"
    return "", ""


@register_check(default=True, counted="errors", judged="answers",
                sections=lambda rows: [("Error inputs", tables.errors(rows))])
class ErrorsCheck:
    name = "errors"
    requires = ()

    def cases(self, suite: Suite, ctx: RunContext) -> list[Case]:
        owners = []
        if suite.optimizer:
            owners.append(Implementation("torch" if "." not in suite.optimizer else suite.optimizer.rpartition(".")[2],
                                         suite.optimizer_class()))
        if ctx.candidate is not None and suite.name in ctx.impls:
            owners.append(ctx.candidate)
        inputs = error_inputs(suite)
        return [Case(suite, owner, "", None, ctx.device, label=str(i)) for owner in owners for i in range(len(inputs))]

    def group(self, case: Case) -> tuple:
        return (case.suite.name, self.name)

    def run(self, case: Case, ctx: RunContext) -> Outcome:
        inputs = error_inputs(case.suite)
        e = inputs[int(case.label)]
        judging = ctx.judging  # judged here from what the case's worker recorded (engine.judge)
        asking = Answering(judging.recording.entries if judging is not None else None,
                           record=ctx.recording_to is not None)
        status, detail, finding = judge(case, e, asking, judging.foreign if judging is not None else None)
        asking.finished()
        if asking.record and asking.entries:  # (no answer: not asked of it, a row that gives no verdict)
            save_answers(asking.entries, ctx.recording_to)
        rows = [row(case.labels | {"hparams": e.desc}, check="errors", metric=ERRORS_REJECTED,
                    value=float(status == "pass"), status=status, detail=detail, finding=finding)]
        shown = {"fail": "FAIL ", "xfail": "XFAIL", "xpass": "XPASS"}.get(status)
        lines = [f"  {shown} errors {case.impl_name:>10} {e.desc}: {detail}"] if shown else []
        counts = ctx.scratch.setdefault(("errors", case.impl_name), {})  # the group's cases run in one unit
        counts[status] = counts.get(status, 0) + 1
        if int(case.label) == len(inputs) - 1:  # its last input: one line for them all, as the round-trip's
            lines.append(summary(case.impl_name, counts))
        return Outcome(rows, "\n".join(lines))


def _routed(names: tuple[str, ...], options: dict, grouped: dict | None) -> tuple[dict, dict | None]:
    """The constructor's options and the groups' (a spec's ``group_hparams`` go to the groups, as every build does)."""
    options, (into,) = group_hparams.into_groups(names, options, [grouped or {}])
    return options, into or grouped


def judge(case: Case, e: ErrorInput, asking: Answering | None = None, foreign: bool | None = None) -> tuple[
        str, str, str]:
    """(status, detail, finding) of ``case``'s implementation given the invalid input ``e``, asked through
    ``asking`` (default: directly); ``foreign``: what the plan found (the judge never imports the class)."""
    impl, suite, asking = case.impl, case.suite, asking or Answering()
    foreign = suite.foreign(impl) if foreign is None else foreign
    # (replayed: the worker asked it, so the input was asked of it; whether its constructor takes the options is
    # its class's to say, which the judge never imports)
    status, why = not_asked(impl, e, suite) if foreign and not asking.replaying else ("", "")
    if status:
        return status, why, ""
    # a candidate is built as every case builds it (the reference's values of the options it names, its spec's
    # fixed), the invalid input over them: a class whose lr is required is not "rejecting" a missing lr
    base = impl.base_kwargs if impl.is_candidate else {}
    grouped = impl.spec.group_options if impl.is_candidate and impl.spec is not None else None
    names = group_hparams.names_of(impl.spec)
    raised, where = asking.attempt(impl.optimizer_class, e, suite.error_param_meta,
                                   *_routed(names, {**base, **impl.spelled(e.options)}, grouped))
    expected = exception_class(e.raises)
    if foreign and isinstance(raised, NotImplementedError) and not issubclass(expected, NotImplementedError):
        # it implements no such configuration (bitsandbytes' SGD without momentum): on the first set it builds, the
        # input is judged if still invalid there; valid there, it needed a value the class does not implement
        why = f"NotImplementedError at {where}: {first_words(str(raised))}"
        usable = asking.buildable(impl, suite)
        again = asking.attempt(impl.optimizer_class, e, suite.error_param_meta,
                               *_routed(names, {**usable, **impl.spelled(e.options)}, grouped)) \
            if usable is not None else (None, "")
        if again[0] is None or isinstance(again[0], NotImplementedError):
            return "unsupported", f"it does not implement this configuration: {why}", ""
        raised, where = again
    rejecting = (e.raises, *impl.spec.rejects) if foreign and impl.spec else (e.raises,)
    message = first_words(str(raised)) if raised is not None else ""
    if raised is None:
        status, detail = "fail", f"accepted: expected {e.raises} matching {e.match!r} at {e.at}"
    elif raised_as(raised, (e.raises,)) and re.search(e.match, str(raised)):
        status, detail = "pass", f"{type(raised).__name__} at {where}: {message}"
    elif foreign and raised_as(raised, rejecting):  # its own wording: a rejection all the same
        status, detail = "pass", f"rejected in its own words: {type(raised).__name__} at {where}: {message}"
        if e.match:
            detail += f"; match: {e.match!r} not applied (this candidate is held to rejecting, not to the wording)"
    else:
        status, detail = "fail", (f"expected {e.raises} matching {e.match!r}, got {type(raised).__name__} "
                                  f"at {where}: {message}")
    declared = suite.deviations_for(impl or case.impl_name, "", e.desc, check="errors")
    if not declared:
        return status, detail, ""
    finding = declared[0].finding
    return declared_status(status, declared[0]), f"{finding}: {declared[0].reason} Observed: {detail}", finding


def summary(impl_name: str, counts: dict) -> str:
    """The console's line for one implementation's error inputs: how many it rejected, and what else."""
    others = ", ".join(f"{counts[s]} {s}" for s in ("fail", "xfail", "xpass", "unsupported", "skip") if counts.get(s))
    return (f"  {'FAIL' if counts.get('fail') else 'PASS':5} errors {impl_name:>10}: {counts.get('pass', 0)} rejected"
            + (f", {others}" if others else ""))
