"""A round-trip case's runs of the code under test: the uninterrupted baselines, the saved state_dicts, a fresh run
of new parameters, each through the case's tape (``checks.tape``), shared by its scenarios
(``checks.roundtrip_scenario``)."""

from __future__ import annotations

import copy
import io
from collections.abc import Callable
from dataclasses import replace
from functools import partial

import torch

from optbench.adapters.dtypes import unsupported
from optbench.adapters.quantized import full_precision_class
from optbench.adapters.spec import CandidateSpec
from optbench.cases import Case, RunContext
from optbench.checks.tape import Tape, kinds_in, kinds_out, snapshot_in, snapshot_out
from optbench.hyperparameters import for_torch
from optbench.implementations.adapter import Implementation
from optbench.implementations.candidate import candidate_implementation, load_optimizer_class
from optbench.numerics.recording import kinds, objective_closure, set_gradients, snapshot
from optbench.reference.contract import kind_of
from optbench.state.by_name import DISAGREE, group_state
from optbench.state.copies import fresh_copy
from optbench.state.formats import optimizer_from_dict
from optbench.state.scenarios import Layout
from optbench.suite.spec import DTYPES
from optbench.workloads import Workload


class Session:
    """One case's runs: the uninterrupted baselines and the saved state_dicts, shared by its scenarios. What the
    code under test returns goes through ``tape`` (``checks.tape``): recorded where it runs, replayed
    where the judge runs the same scenarios without it; ``foreign``: ``Suite.foreign`` of the case's implementation,
    as the plan found it."""

    def __init__(self, case: Case, ctx: RunContext, workload: Workload, save_at: int, tape: Tape, foreign: bool):
        self.case, self.ctx, self.workload, self.save_at = case, ctx, workload, save_at
        self.tape, self.foreign = tape, foreign
        self.names = [s.name for s in workload.specs]
        self.closure = case.suite.closure_driven
        self.coupled = kind_of(case.suite.reference) == "group"
        self._cache: dict = {}

    def impl(self, name: str):
        return next((i for i in self.ctx.impls[self.case.suite.name] if i.name == name), None)

    def counterpart(self) -> Implementation:
        """The candidate's library's full-precision class (its spec's ``quantized.full_precision``), adapted as the
        suite adapts it (``candidates:``); where the judge replays, a stand-in of that name (it is never built)."""
        if "counterpart" not in self._cache:
            cls = full_precision_class(self.case.impl.spec)
            if self.tape.replaying:
                self._cache["counterpart"] = Implementation(f"candidate:{cls}", None, is_candidate=True)
            else:
                spec = self.case.suite.candidate_spec(cls) or CandidateSpec(cls=cls, source="quantized.full_precision")
                self._cache["counterpart"] = candidate_implementation(
                    spec, self.case.suite.defaults(load_optimizer_class(cls, "quantized.full_precision"), spec))
        return self._cache["counterpart"]

    def counterpart_why_not(self) -> str:
        """Why the full-precision class cannot run this case's set and dtype ("" if it can)."""
        other = self.counterpart()
        if missing := other.options_not_taken(self.case.hset.option_names()):
            return f"its full-precision class {other.name.removeprefix('candidate:')}: {other.not_taking(missing)}"
        return unsupported(other.spec, DTYPES[self.case.dtype]) or self.ctx.unavailable(other, self.case.dtype)

    def materialize(self, dtype: str, device: str) -> dict[str, torch.nn.Parameter]:
        return self.workload.materialize(DTYPES[dtype], torch.device(device))

    def build(self, impl, layout: Layout, params: dict):
        if layout.from_dict:
            impl = replace(impl, optimizer_class=partial(optimizer_from_dict, impl.optimizer_class))
        return impl.build(layout.groups(self.case.hset, params, self.ctx.seed), for_torch(self.case.hset.options))

    def advance(self, stepper, params: dict, steps: range, everything: dict | None = None) -> None:
        """Step ``params``; a closure-driven optimizer's objective reads ``everything`` (frozen ones too)."""
        for step in steps:
            if self.closure:
                stepper.step(objective_closure(stepper.optimizer, everything or params, self.workload))
            else:
                set_gradients(params, self.workload, step)
                stepper.step()

    def baseline(self, impl, dtype: str, device: str) -> dict:
        """The uninterrupted run's final parameters and state, keyed (fqn, tensor)."""
        return self._uninterrupted(impl, dtype, device)[0]

    def held_as(self, impl, dtype: str, device: str) -> dict:
        """What the uninterrupted run holds each of them as at the end (``kinds``: dtypes)."""
        return self._uninterrupted(impl, dtype, device)[1]

    def _uninterrupted(self, impl, dtype: str, device: str) -> tuple[dict, dict]:
        key = ("baseline", impl.name, dtype, device)
        if key not in self._cache:
            def run() -> tuple[dict, dict]:
                params = self.materialize(dtype, device)
                stepper = self.build(impl, Layout(), params)
                self.advance(stepper, params, range(self.workload.steps))
                return snapshot(stepper.optimizer, params), kinds(stepper.optimizer, params)
            self._cache[key] = self.tape.take(f"uninterrupted {impl.name} {dtype} {device}", run, ran_out, ran_in)
        return self._cache[key]

    def fresh(self, impl, dtype: str, device: str, names: list[str], saved_groups: Callable[[], list[dict]]) -> dict:
        """``names`` run alone from ``save_at`` with fresh state (what strict=False gives a new parameter), in
        groups that keep the saved groups' own state (a per-group step counter goes on counting for them)."""
        def run() -> dict:
            params = {n: p for n, p in self.materialize(dtype, device).items() if n in names}
            stepper = self.build(impl, Layout(), params)
            carried = {k: v for k, v in group_state(stepper.optimizer, saved_groups()).items() if v is not DISAGREE}
            for group in stepper.optimizer.param_groups:
                group.update(copy.deepcopy(carried))
            self.advance(stepper, params, range(self.save_at, self.workload.steps))
            return snapshot(stepper.optimizer, params)
        return self.tape.take(f"fresh {impl.name} {', '.join(names)}", run, snapshot_out, snapshot_in)

    def saved(self, impl, dtype: str, device: str, layout: Layout):
        """(parameters after ``save_at`` steps, the state_dict read back with weights_only=True, its FQN order).
        Each call returns a fresh copy of what the file read back as (torch's load_state_dict keeps the loaded
        tensors when no cast is due, so two optimizers loaded from one dict would share, and step, the same state):
        a deep copy (``fresh_copy``), which keeps the storage sharing the read gave, in a fraction of a read's time."""
        key = ("saved", impl.name, dtype, device, layout)
        if key not in self._cache:
            params = self.materialize(dtype, device)
            mine = {n: params[n] for n in layout.fqns(self.names)}
            stepper = self.build(impl, layout, mine)
            self.advance(stepper, mine, range(self.save_at), everything=params)
            buffer = io.BytesIO()
            torch.save(stepper.optimizer.state_dict(), buffer)
            order = [n.removeprefix(layout.prefix) for g in stepper.optimizer.param_groups for n in g["param_names"]]
            self._cache[key] = (params, torch.load(io.BytesIO(buffer.getvalue()), weights_only=True), order)
        params, loaded, order = self._cache[key]
        return params, fresh_copy(loaded), order

    def saved_facts(self, impl, dtype: str, device: str, layout: Layout) -> tuple[list[str], bool]:
        """What a scenario reads of ``saved`` itself: its FQN order, and whether it holds a state tensor of a
        parameter's shape (through the tape)."""
        def run() -> tuple[list[str], bool]:
            _, state, order = self.saved(impl, dtype, device, layout)
            return order, any(torch.is_tensor(v) and v.dim() > 0 for st in state["state"].values() for v in st.values())
        return self.tape.take(f"saved by {impl.name} {dtype} {device} {layout}", run, list, _facts_in)


def ran_out(ran: tuple[dict, dict]) -> list:
    return [snapshot_out(ran[0]), kinds_out(ran[1])]


def ran_in(data: list) -> tuple[dict, dict]:
    return snapshot_in(data[0]), kinds_in(data[1])


def _facts_in(data: list) -> tuple[list[str], bool]:
    order, shaped = data
    if not isinstance(shaped, bool) or not all(isinstance(n, str) for n in order):
        raise TypeError("the saved state_dict's facts are not [FQNs, whether state is shaped]")
    return list(order), shaped
