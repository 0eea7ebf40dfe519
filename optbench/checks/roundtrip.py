"""state_dict round-trip by parameter name: every scenario of ``optbench.state.scenarios``, per implementation.

An optimizer built from named parameters runs ``save_at`` steps; its state_dict goes through ``torch.save``
and ``torch.load(weights_only=True)`` and is loaded into a fresh optimizer laid out as the scenario says.
By name (``optbench.load_state_dict_by_name``) the load must continue the run as the uninterrupted one
does (bit for bit when implementation, device and dtype are unchanged; within the cross-implementation
tolerance otherwise), or refuse with an error naming the problem and continue once the user says how.
torch's own positional ``load_state_dict`` is recorded beside it: right, silently wrong, or raises.

An implementation built from plain tensors (a suite's ``candidate_named: false``: the class cannot take named
parameters) records no names, so no scenario can run: each is a ``skip`` saying why (``xfail`` where the suite
declares it), unless the class takes named parameters after all, and then it is checked as any other.
"""

from __future__ import annotations

from dataclasses import replace

from optbench.adapters.quantized import full_precision_class
from optbench.cases import Case, Outcome, RunContext
from optbench.checks.base import awaiting_judge
from optbench.checks.deviations import declared_status
from optbench.checks.registry import register_check
from optbench.checks.roundtrip_scenario import run_scenario, scenario_part
from optbench.checks.roundtrip_session import Session
from optbench.checks.tape import Tape, text_in
from optbench.implementations.candidate import rejected_at_construction
from optbench.metrics import CASE_UNSUPPORTED, positional_metric, roundtrip_metric
from optbench.numerics.recording_file import RecordingError, save_answers
from optbench.report import roundtrip as roundtrip_tables
from optbench.results import DECLARED, row
from optbench.rows import first_words
from optbench.state.positional import POSITIONAL
from optbench.state.scenarios import BY_NAME, SCENARIOS
from optbench.suite.spec import DTYPES, HparamSet, Suite
from optbench.usage import UsageError
from optbench.workloads import Workload


def _chosen(ctx: RunContext, key: str) -> list[str] | None:
    """``roundtrip.<key>`` as scenario names (None: all of them); one name may stand alone."""
    value = ctx.settings.roundtrip.get(key)
    if value is None or (isinstance(value, str) and value == "all"):
        return None
    names = [str(value)] if isinstance(value, str) else [str(n) for n in value]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise UsageError(f"roundtrip.{key}: unknown scenario(s) {', '.join(unknown)}: all, or a list of "
                         f"{', '.join(BY_NAME)}")
    return names


def _named_refusal(case: Case, workload: Workload) -> str:
    """Why the class cannot be built from named parameters ("" if it can)."""
    params = workload.materialize(DTYPES[case.dtype], case.device)
    try:
        case.hset.build(replace(case.impl, named=True), params)
    except Exception as exc:
        return f"{type(exc).__name__}: {first_words(str(exc))}"
    return ""


def applies(scenario, impl) -> bool:
    """Whether ``scenario`` concerns ``impl``: those between a library's quantized and full-precision classes only a
    candidate whose spec names the latter (``quantized.full_precision``)."""
    return not scenario.counterpart or bool(full_precision_class(getattr(impl, "spec", None)))


def _unnamed_outcome(case: Case, ctx: RunContext, why: str) -> Outcome:
    """A row per chosen scenario: none can run on an optimizer that records no parameter names."""
    declared = case.suite.deviations_for(case.impl or case.impl_name, case.dtype, case.hset.name, check="roundtrip")
    chosen, rows, counts = _chosen(ctx, "scenarios") or list(BY_NAME), [], {}
    for scenario in (s for s in SCENARIOS if s.name in chosen and applies(s, case.impl)):
        dev = [d for d in declared if d.matches_scenario(scenario.name)]
        status = "xfail" if dev else "skip"
        detail = (f"{scenario.what}: not run: built from named parameters it raises {why}, so it is built from plain "
                  "tensors (candidate_named: false) and records no param_names to load by")
        if dev:
            detail += f"; declared: {dev[0].finding}: {dev[0].reason}"
        counts[status] = counts.get(status, 0) + 1
        rows.append(row(case.labels, check="roundtrip", metric=roundtrip_metric(scenario.name), value=0.0,
                        status=status, detail=detail, finding=dev[0].finding if dev else ""))
    finding = f" ({declared[0].finding})" if declared else ""
    line = (f"  {'XFAIL' if declared else 'SKIP ':5} round-trip {case.impl_name:>10} {case.dtype}: "
            f"{counts.get('xfail', 0)} xfail, "
            f"{counts.get('skip', 0)} skip: it cannot take named parameters{finding}: {why}")
    return Outcome(rows, line)


def taken_set(impl, suite: Suite, hset: HparamSet) -> tuple[HparamSet | None, str]:
    """The hparam set a round-trip of ``impl`` runs on: the suite's ``roundtrip_hparams`` or, for a candidate whose
    constructor does not take its options, the first set it takes whole; (None, why) where it takes none."""
    missing = impl.options_not_taken(hset.option_names()) if impl.is_candidate else []
    if not missing:
        return hset, ""
    taken = next((h for h in suite.hparams if not impl.options_not_taken(h.option_names())), None)
    if taken is None:
        return None, (f"unsupported by candidate: {impl.not_taking(missing)} (round-trip set {hset.name!r}), "
                      "and it takes no other set whole either")
    return taken, ""


def _rejected(case: Case, ctx: RunContext) -> str:
    """The candidate's own words where its constructor rejects the round-trip set's options ("" if it takes them)."""
    params = ctx.workload(case.suite, case.hset, case.dtype).materialize(DTYPES[case.dtype], ctx.device)
    try:
        case.hset.build(case.impl, params)
    except Exception as exc:
        return rejected_at_construction(case.impl, case.hset, params, exc)
    return ""


@register_check(
    default=True, counted="roundtrip", judged="answers",
    # state_dict round-trips by name (optbench/state/scenarios.py), one row per scenario. dtype: the parameters'
    # and state's; scenarios: all, or a list of names, e.g. [reversed,subset,ddp_prefix]; compiled: the compiled
    # variant's scenarios (a compile per build: it continues a state of its own and an eager variant's; the loader
    # that maps by name is the eager variants' own, which their rows judge in every scenario; all: every one)
    # every_dtype: the scenarios also run at each other dtype the run checks ([]: none), where the state's dtypes
    # after the load are compared with the uninterrupted run's (torch's load casts state to the parameter's dtype)
    config={"dtype": "float32", "steps": 10, "save_at": 5, "scenarios": "all",
            "compiled": ["same_order", "cross_implementation"],
            "every_dtype": ["same_order", "cross_implementation"]},
    sections=lambda rows: [
        ("state_dict round-trip matrix (by name · what torch's positional load_state_dict did)",
         roundtrip_tables.table(rows)),
        ("torch's positional load per scenario (cases)", roundtrip_tables.silently_wrong(rows))])
class RoundTripCheck:
    """One case per implementation, on the suite's ``roundtrip_hparams`` at ``roundtrip.dtype``, and one at each other
    dtype the run checks with the ``roundtrip.every_dtype`` scenarios; a row per scenario."""

    name = "roundtrip"
    requires = ()

    def cases(self, suite: Suite, ctx: RunContext) -> list[Case]:
        for key in ("scenarios", "compiled", "every_dtype"):
            _chosen(ctx, key)  # a misspelt name is a usage error before anything runs
        primary, hset = str(ctx.settings.roundtrip.dtype), suite.hparam_set(suite.roundtrip_hparams)
        others = [d for d in ctx.dtypes[suite.name] if d != primary] if _chosen(ctx, "every_dtype") != [] else []
        out = []
        for dtype in [primary, *others]:
            for impl in (i for i in ctx.impls[suite.name] if not ctx.unavailable(i, dtype)):
                taken, why = taken_set(impl, suite, hset)
                out.append(Case(suite, impl, dtype, taken or hset, ctx.device, skip=why if taken is None else ""))
        return out

    def group(self, case: Case) -> tuple:
        return (case.suite.name, self.name)

    def run(self, case: Case, ctx: RunContext) -> Outcome:
        if case.skip:  # a candidate that takes no hparam set's options
            return Outcome([row(case.labels, check="roundtrip", metric=CASE_UNSUPPORTED, value=1,
                                status="unsupported", detail=case.skip)],
                           f"  UNSUP round-trip {case.impl_name:>10} {case.dtype}: {case.skip}")
        judging = ctx.judging  # judged here from what the case's worker recorded (engine.judge)
        tape = Tape(judging.recording.entries if judging is not None else None, record=ctx.recording_to is not None)
        try:
            outcome = self._run(case, ctx, tape, judging.foreign if judging is not None else case.suite.foreign(
                case.impl))
        finally:
            if ctx.recording_to is not None:  # for the judge, which replays it (what ran, then what was raised)
                save_answers(tape.entries, ctx.recording_to)
        if ctx.recording_to is not None:
            return awaiting_judge(case.labels, "roundtrip")
        if tape.replaying:
            tape.finished()
        return outcome

    def _run(self, case: Case, ctx: RunContext, tape: Tape, foreign: bool) -> Outcome:
        rt = ctx.settings.roundtrip
        workload = ctx.workload(case.suite, case.hset, case.dtype, steps=int(rt.steps))
        fell_back = ""

        def rejected(c: Case) -> str:
            return tape.take(f"built on {c.hset.name}", lambda: _rejected(c, ctx), decode=text_in) or ""
        if case.impl.is_candidate and (why := rejected(case)):
            # its constructor takes **kwargs yet refuses the set: the first set it accepts, as for a set not taken
            accepted = next((h for h in case.suite.hparams
                             if h is not case.hset and not rejected(replace(case, hset=h))), None)
            if accepted is None:
                return Outcome([row(case.labels, check="roundtrip", metric=CASE_UNSUPPORTED, value=1,
                                    status="unsupported", detail=why + "; no other hparam set is accepted either")],
                               f"  UNSUP round-trip {case.impl_name:>10} {case.dtype}: {why}")
            fell_back = f" (on {accepted.name!r}: it refuses {case.hset.name!r}: {why})"
            case = replace(case, hset=accepted)
            workload = ctx.workload(case.suite, case.hset, case.dtype, steps=int(rt.steps))
        if not case.impl.named:
            why = tape.take(f"built from named parameters on {case.hset.name}", lambda: _named_refusal(case, workload),
                            decode=text_in)
            if why:
                return _unnamed_outcome(case, ctx, why)
            case = replace(case, impl=replace(case.impl, named=True))  # it takes names now: check it by name
        session = Session(case, ctx, workload, int(rt.save_at), tape, foreign)
        chosen, compiled_only = _chosen(ctx, "scenarios") or list(BY_NAME), _chosen(ctx, "compiled")
        if case.dtype != str(rt.dtype):  # another dtype of the run: the scenarios chosen for every dtype
            every = _chosen(ctx, "every_dtype")
            chosen = [n for n in chosen if every is None or n in every]
        declared = case.suite.deviations_for(case.impl or case.impl_name, case.dtype, case.hset.name, check="roundtrip")
        rows, counts = [], {}
        for scenario in (s for s in SCENARIOS if s.name in chosen and applies(s, case.impl)):
            if case.impl.compiled and compiled_only is not None and scenario.name not in compiled_only:
                status, detail, verdict, vdetail = "skip", ("the compiled variant runs roundtrip.compiled scenarios "
                                                            "(compiling per load is slow): "
                                                            "roundtrip.compiled=all runs all"), "", ""
            else:
                crashed = tape.take(f"crashed in {scenario.name}", lambda: ctx.part(scenario_part(scenario)),
                                    decode=text_in)
                try:
                    status, detail, verdict, vdetail = (
                        ("error", f"{crashed} in this scenario (the other scenarios ran in a fresh one)", "", "")
                        if crashed else run_scenario(session, scenario))
                except RecordingError:  # a recording the judge cannot replay: the case is an error
                    raise
                except Exception as exc:
                    status, detail, verdict, vdetail = (
                        "error", f"{type(exc).__name__}: {first_words(str(exc))[:200]}", "", "")
            dev = [d for d in declared if d.matches_scenario(scenario.name)]
            if dev and status in ("pass", "fail", "error"):  # a scenario may be declared to raise (torch's load)
                status = declared_status(status, dev[0], errors=True)
                detail += f"; declared: {dev[0].finding}: {dev[0].reason}"
            counts[status] = counts.get(status, 0) + 1
            labels = case.labels
            rows.append(row(labels, check="roundtrip", metric=roundtrip_metric(scenario.name),
                            value=float(status == "pass"), status=status, detail=f"{scenario.what}: {detail}",
                            finding=dev[0].finding if dev and status in DECLARED else ""))
            if verdict:
                counts[verdict] = counts.get(verdict, 0) + 1
                rows.append(row(labels, check="roundtrip", metric=positional_metric(scenario.name),
                                value=POSITIONAL[verdict], unit="0 right, 1 silently wrong, 2 raises, 3 crashes",
                                detail=f"{verdict}: {vdetail}"))
        bad = counts.get("fail", 0) + counts.get("error", 0)
        line = (f"  {'FAIL' if bad else 'PASS':5} round-trip {case.impl_name:>10} {case.dtype}: by name "
                f"{counts.get('pass', 0)} pass, {bad} fail, {counts.get('skip', 0)} skip, "
                f"{counts.get('xfail', 0)} xfail; "
                + ("torch positional: as the eager variant's (the same load_state_dict)" if case.impl.compiled else
                   f"torch positional {counts.get('right', 0)} right, {counts.get('silently wrong', 0)} silently "
                   f"wrong, {counts.get('raises', 0)} raises")
                + (f", {counts['crashes']} crashes" if counts.get("crashes") else "") + fell_back)
        return Outcome(rows, line)
