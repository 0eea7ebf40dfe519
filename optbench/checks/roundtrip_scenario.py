"""One state_dict round-trip scenario, run: save after ``save_at`` steps, reload (by name, and through torch's
positional loader for contrast) into the layout the scenario says, continue, and compare with the
uninterrupted run (bit for bit, within tolerance, or a refusal naming the problem). The roundtrip check
(``optbench.checks.roundtrip``) runs every scenario of ``optbench.state.scenarios`` through this.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import torch

from optbench.adapters.stochastic_rounding import rounds_stochastically
from optbench.checks.roundtrip_session import Session, ran_in, ran_out
from optbench.checks.tape import text_in
from optbench.implementations.torch_variants import BASELINE
from optbench.numerics.accuracy import cross_error, cross_tolerance_eps, moved_err_eps, tolerance_eps
from optbench.numerics.one_step import update_eps
from optbench.numerics.recording import as_array, kinds, snapshot
from optbench.numerics.recording_file import RecordingError
from optbench.rows import bounded, first_words
from optbench.state.by_name import StateDictNameError, load_state_dict_by_name, name_aware
from optbench.state.positional import POSITIONAL, positional
from optbench.state.scenarios import IMPLEMENTATION_CHAIN, SHAPE_REFUSAL, Layout, Scenario
from optbench.suite.spec import DTYPES

LBFGS_REFUSAL = "LBFGS keeps its state as flat vectors"


def _load_params(params: dict, layout: Layout, names: list[str], dtype: str, device: str) -> dict:
    """The model as the loading side has it: the saved side's weights (cast, moved, one matrix grown)."""
    out = {}
    for n in layout.fqns(names):
        value = params[n].detach().to(device=device, dtype=DTYPES[dtype], copy=True)
        if layout.grown and value.dim() == 2 and not any(v.dim() == 2 for v in out.values()):
            value = torch.cat([value, torch.zeros_like(value[:1])])
        out[n] = torch.nn.Parameter(value, requires_grad=params[n].requires_grad)
    return out


def _rename(scenario: Scenario, names: list[str]):
    return {n: scenario.load.prefix + n for n in names} if scenario.rename == "mapping" else scenario.rename


def compare(final: dict, expected: dict, exact: bool, eps: float, tol: float, start: dict | None = None,
            coarse: float | None = None) -> tuple[bool, str]:
    """Bit for bit (``exact``), or within ``tol`` eps. With ``coarse`` (the eps of the update's precision by
    design, when coarser than the parameters': Muon's bfloat16) a parameter's error is in that eps of its
    displacement from ``start`` where smaller, as in the reshard check: two implementations round such an
    update differently (eager vs inductor), and the parameters carry that difference from the saving side on.
    State tensors keep their dtype's eps."""
    if exact:
        bad = sorted(f"{n}/{k}" for n, k in expected.keys() | final.keys() if not (
            final.get((n, k)) is not None and expected.get((n, k)) is not None
            and final[(n, k)].shape == expected[(n, k)].shape
            and np.array_equal(final[(n, k)], expected[(n, k)], equal_nan=True)))
        return not bad, ("bit for bit the uninterrupted run" if not bad
                         else f"differs at {len(bad)} tensors, e.g. {', '.join(bad[:3])}")
    if not coarse or start is None:
        worst = cross_error([final], [expected], eps)
        return worst <= tol, f"max {worst:.3g} eps (tolerance {tol:g})"
    worst = 0.0
    for key in expected.keys() | final.keys():
        if key not in final or key not in expected:
            return False, f"{'/'.join(key)} only on one side"
        e = cross_error([{key: final[key]}], [{key: expected[key]}], eps)
        if key[1] == "param" and key[0] in start:
            e = min(e, moved_err_eps(final[key], expected[key], start[key[0]], coarse))
        worst = max(worst, e)
    return worst <= tol, f"max {worst:.3g} eps (tolerance {tol:g})"


def scenario_part(scenario: Scenario) -> str:
    """The part of a round-trip case one scenario is (``RunContext.part``): a worker that dies there names it."""
    return f"in round-trip scenario {scenario.name!r}"


def run_scenario(session: Session, scenario: Scenario) -> tuple[str, str, str, str]:
    """(by-name status, detail, torch's positional verdict, its detail) of one scenario; what the code under test
    does goes through ``session.tape``, and the verdict is drawn from what it gives back."""
    case, ctx, tape = session.case, session.ctx, session.tape
    impl, dtype, device = case.impl, case.dtype, case.device.type
    save_impl, save_dtype, load_impl = impl, dtype, impl
    if scenario.counterpart:  # the library's other class saves, or loads (what it runs goes through the tape)
        why = tape.take(f"full-precision class, {scenario.name}", session.counterpart_why_not, decode=text_in)
        if why:
            return "skip", why, "", ""
        other = session.counterpart()
        save_impl, load_impl = (impl, other) if scenario.counterpart == "into" else (other, impl)
    if scenario.save_impl:
        described = case.suite.optimizer or case.suite.describes
        if session.foreign and not described:
            return "skip", "no other implementation of this algorithm ran to save a state_dict", "", ""
        if session.foreign:
            return "skip", (f"{impl.name} is not {described} nor a subclass of it: "
                            "another class's state_dict is not its to load"), "", ""
        save_impl = previous_implementation(session)
        if save_impl is None:
            return "skip", "no other implementation of this optimizer runs here", "", ""
    if scenario.devices:
        if not torch.cuda.is_available():
            return "skip", "needs CUDA (saved on one device, loaded on the other)", "", ""
        if impl.needs_cuda:
            return "skip", f"{impl.name} steps only on CUDA: the scenario's CPU side cannot be built", "", ""
        save_device, device = scenario.devices
    else:
        save_device = device
    if scenario.load_dtype:
        save_dtype, dtype = "float32", scenario.load_dtype
        why = ctx.unavailable(impl, dtype) or ctx.unavailable(impl, save_dtype)
        if why:
            return "skip", why, "", ""
    order, shaped = session.saved_facts(save_impl, save_dtype, save_device, scenario.save)
    if scenario.refuses == SHAPE_REFUSAL and not shaped:
        return "skip", "no state tensor of a parameter's shape at these hparams: no shape to refuse", "", ""

    def saved_params() -> dict:
        return session.saved(save_impl, save_dtype, save_device, scenario.save)[0]

    def state_dict() -> dict:  # a fresh read of the file for every load
        loaded = session.saved(save_impl, save_dtype, save_device, scenario.save)[1]
        return scenario.transform(loaded) if scenario.transform is not None else loaded
    load_names = scenario.load.fqns(session.names)
    rename = _rename(scenario, session.names)
    refuses, recovery, recovery_refuses = scenario.refuses, scenario.recovery, ""
    if session.closure and scenario.load.grouping != "suite":
        return "skip", "LBFGS takes a single param group", "", ""
    regroups = scenario.load.grouping != "suite" or scenario.load.partial or scenario.save.partial
    if session.coupled and regroups:
        return "skip", ("the step couples a group's tensors (its clipping norm spans them): on other groups or "
                        "another set of parameters it is another computation than the uninterrupted run"), "", ""
    if scenario.load.grouping != "suite" and getattr(impl.spec, "group_schedule", False):
        return "skip", ("its schedule is per param group and advances only with the group's gradients (its spec's "
                        "group_schedule): on other groups it is another computation than the uninterrupted run"), "", ""
    if session.closure and scenario.reorders:  # flat vectors in parameter order: by name it can only refuse
        refuses, recovery_refuses = scenario.refuses or LBFGS_REFUSAL, LBFGS_REFUSAL if recovery else ""
    elif session.closure and scenario.load.grown:
        refuses = "flat state has"

    named_layout = replace(scenario.load, named=True)

    def load(strict: bool, how_rename, sd, layout: Layout = named_layout):
        mine = _load_params(saved_params(), layout, session.names, dtype, device)
        stepper = session.build(load_impl, layout, mine)
        if scenario.through_hook:
            handle = name_aware(stepper.optimizer, strict=strict, rename=how_rename)
            stepper.optimizer.load_state_dict(sd)
            handle.remove()
        else:
            load_state_dict_by_name(stepper.optimizer, sd, strict=strict, rename=how_rename)
        return stepper, mine

    def refusal(strict: bool, how_rename, sd: Callable[[], dict], layout: Layout = named_layout, keep=None):
        """A by-name load, through the tape: what it refused with (None: it loaded, into ``keep`` if given)."""
        def run() -> str | None:
            try:
                loaded = load(strict, how_rename, sd(), layout)
            except StateDictNameError as exc:
                return str(exc)
            except Exception as exc:  # the other class's own refusal (its load_state_dict raised)
                if not scenario.counterpart:
                    raise
                return f"{type(exc).__name__}: {first_words(str(exc))}"
            if keep is not None:
                keep.extend(loaded)
            return None
        return run

    # The by-name load (after the recovery, into a named optimizer): the run that continues, and the yardstick
    # for torch's positional load.
    live: list = []  # (stepper, its parameters) where it runs
    refused = tape.take(f"by-name load, {scenario.name}", refusal(
        recovery.strict if recovery else True, (recovery.rename if recovery else None) or rename,
        (lambda: recovery.apply(state_dict(), order)) if recovery else state_dict, keep=live), decode=text_in)

    def torch_load() -> tuple[str, str]:
        crashed = ctx.part(f"in torch's positional load_state_dict, round-trip scenario {scenario.name!r}")
        if crashed:
            return "crashes", f"{crashed} in torch's positional load (run again without it)"
        return positional(session, scenario, impl, state_dict(),
                          _load_params(saved_params(), scenario.load, session.names, dtype, device),
                          (live[0].optimizer, live[1]) if live else None)
    if scenario.counterpart and refused is not None:  # a refusal in one line is what it owes where it cannot load
        return "pass", f"{load_impl.name} refused the load: {refused[:160]}", "", ""
    verdict, verdict_detail = "", ""  # the compiled variant's load is the eager one's: its verdict is that row's
    if not impl.compiled and not scenario.counterpart:  # (each build compiles the step anew: a second per load)
        verdict, verdict_detail = tape.take(f"positional load, {scenario.name}", torch_load, list, _verdict_in)
        ctx.part(scenario_part(scenario))  # back in the scenario's own part

    detail = ""
    if refuses:
        said = tape.take(f"load that must refuse, {scenario.name}", refusal(True, rename, state_dict, scenario.load),
                         decode=text_in)
        if said is None:
            return "fail", f"by name it loaded where it must refuse ({refuses!r})", verdict, verdict_detail
        if refuses not in said:
            return "fail", f"refused, but without naming the problem: {said}", verdict, verdict_detail
        detail = f"refused: {said[:140]}"
        if recovery is None:
            return "pass", detail, verdict, verdict_detail
        if recovery_refuses:
            said = tape.take(f"recovery that must refuse, {scenario.name}", refusal(
                recovery.strict, recovery.rename or rename, lambda: recovery.apply(state_dict(), order)),
                decode=text_in)
            if said is not None and recovery_refuses in said:
                return "pass", f"{detail}; with {recovery.how} too: {said[:100]}", verdict, verdict_detail
            return ("fail", f"{detail}; with {recovery.how} it did not refuse ({recovery_refuses!r})", verdict,
                    verdict_detail)
        detail += f"; then with {recovery.how}: "
    if refused is not None:
        return "fail", f"{detail}it refused the load it must accept: {refused[:160]}", verdict, verdict_detail

    def continued() -> tuple[dict, dict]:
        stepper, mine = live
        session.advance(stepper, mine, range(session.save_at, session.workload.steps))
        return snapshot(stepper.optimizer, mine), kinds(stepper.optimizer, mine)
    try:
        final, held = tape.take(f"continued, {scenario.name}", continued, ran_out, ran_in)
    except Exception as exc:
        if not scenario.counterpart or isinstance(exc, RecordingError):
            raise
        return "fail", (f"{load_impl.name} took {save_impl.name}'s state, then its step raised {type(exc).__name__}: "
                        f"{first_words(str(exc))[:160]} (a state it cannot step is one to refuse at load)"), "", ""
    yardstick = save_impl if scenario.counterpart else impl  # loaded into another class: the saving class's run
    drifted = _drifted(held, session.held_as(yardstick, dtype, device), order)
    expected = {k: v for k, v in session.baseline(yardstick, save_dtype,
                                                  save_device if not scenario.save_impl else device).items()
                if k[0] in load_names and k[0] in order}
    new = [n for n in load_names if n not in order]
    if new:
        expected.update(session.fresh(impl, dtype, device, new, lambda: state_dict()["param_groups"]))
    tol = (cross_tolerance_eps(session.workload.steps) if scenario.save_impl or scenario.devices
           or scenario.counterpart else tolerance_eps(session.workload.steps))
    # a rounding that is random draws anew after the load: the resumed run is another draw, held to tolerance
    random = rounds_stochastically(impl.spec, dtype)
    exact = scenario.exact and not random
    coarse = None if exact else update_eps(case.suite, dtype)
    start = {n: as_array(p) for n, p in session.materialize(dtype, device).items()} if coarse else None
    ok, how = compare(final, expected, exact, float(torch.finfo(DTYPES[dtype]).eps), tol, start, coarse)
    if random:
        how += "; its rounding is stochastic at this dtype (the resumed run draws other roundings): at tolerance"
    if coarse:
        precision = case.suite.update_precision
        how += (f"; parameters in {precision} eps of their displacement where smaller: the update is computed in "
                f"{precision} by design")
    dropped = [n for n in order if n not in load_names]
    extra = ((f"; {len(new)} new FQNs started fresh" if new else "")
             + (f"; {len(dropped)} saved FQNs dropped" if dropped else ""))
    if drifted:
        how = (f"{len(drifted)} state values held as another dtype than the uninterrupted run holds them, e.g. "
               f"{', '.join(drifted[:3])}; " + how)
    if scenario.counterpart:  # what the loading class holds now: the saved state's kinds, or its own
        holds = {}
        for (_, key), kind in held.items():
            if key != "param":
                holds.setdefault(key, set()).add(str(kind))
        detail += (f"{load_impl.name} loaded {save_impl.name}'s state, holding it as "
                   + ", ".join(f"{k} {'/'.join(sorted(v))}" for k, v in sorted(holds.items())[:6])
                   + "; against the saving class's uninterrupted run it ")
    return (("pass" if ok and not drifted else "fail"),
            detail + f"continued {session.workload.steps - session.save_at} steps: {how}{extra}",
            verdict, verdict_detail)


def _verdict_in(data: list) -> tuple[str, str]:
    """torch's positional verdict as recorded: one of ``POSITIONAL``'s, and its detail (bounded)."""
    verdict, detail = data
    if verdict not in POSITIONAL or not isinstance(detail, str):
        raise ValueError(f"{bounded(str(verdict), 60)!r} is no positional verdict")
    return verdict, bounded(detail)


def _drifted(held: dict, uninterrupted: dict, saved: list[str]) -> list[str]:
    """The saved FQNs' values the resumed run holds as another dtype (or type) than the uninterrupted run at the
    loading side's dtype: ``fqn/key uninterrupted -> resumed`` (torch's load casts state to the parameter's dtype:
    a library that keeps float32 moments for bfloat16 parameters gets them back rounded)."""
    return sorted(f"{n}/{k} {kind} -> {held[(n, k)]}" for (n, k), kind in uninterrupted.items()
                  if n in saved and (n, k) in held and held[(n, k)] != kind)


def previous_implementation(session: Session):
    """The implementation before the case's in IMPLEMENTATION_CHAIN that runs here (for-loop's: foreach)."""
    here = session.case.impl.name
    chain = [n for n in IMPLEMENTATION_CHAIN if session.impl(n) is not None
             and not session.ctx.unavailable(session.impl(n), session.case.dtype)]
    if here not in chain:
        return session.impl(BASELINE) if here != BASELINE else None
    at = chain.index(here)
    other = chain[at - 1] if at > 0 else (chain[1] if len(chain) > 1 and chain[1] != "compiled" else None)
    return session.impl(other) if other else None
