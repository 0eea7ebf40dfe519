"""Step the float64 reference beside an implementation's recorded steps and measure them after every step.

The implementation's run is recorded first (``numerics.recording``): its parameters, state and the gradients it
was given, as data. The reference starts from the same dtype-rounded parameters and receives the same dtype-rounded
gradients (captured before the implementation stepped, so an optimizer that writes into ``.grad`` cannot hide it).
A closure-driven optimizer (LBFGS) got a closure over the workload's objective; the reference runs its own
iterations and line search on the float64 objective, and a second, perturbed reference run sets the yardstick its
tolerance scales with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from optbench.adapters.held_as import held as held_precision
from optbench.implementations import Implementation
from optbench.numerics.accuracy import err_eps, measured, tolerance_eps
from optbench.numerics.master_copy import RoundingYardstick, model_rows
from optbench.numerics.one_step import OneStep, held_state, within_rounding
from optbench.numerics.recording import Recording, as_array, record_trajectory
from optbench.numerics.recording_file import save_recording
from optbench.reference import updated
from optbench.reference.complex import as_complex
from optbench.reference.contract import decisions_of, eager_state, kind_of
from optbench.reference.group_step import with_group_step
from optbench.suite.schedules import factor as schedule_factor
from optbench.suite.spec import HparamSet
from optbench.workloads import Workload

# A closure-driven trajectory is held to max(tolerance_eps, YARDSTICK_FACTOR x the distance between the
# exact reference and the reference fed objective values perturbed by the dtype's eps): an iterative
# method with line searches amplifies rounding by its own conditioning (docs/tolerances.md).
YARDSTICK_FACTOR = 10.0


@dataclass
class Trajectory:
    """Per-step errors against the reference, of kind ``trajectory`` (free-running: drift) and, when
    asked, ``one-step`` (each step from the implementation's own state); optionally its snapshots."""

    errors: pd.DataFrame  # columns: step, fqn, tensor, err_eps, tol (the tolerance that row is held to), kind
    snapshots: list[dict] = field(default_factory=list)
    # (fqn, tensor) -> dtype name it was kept in (optbench.numerics.precision)
    dtypes: dict = field(default_factory=dict)
    # state tensor name -> the one side that keeps it ("the implementation" or "the reference")
    one_sided: dict = field(default_factory=dict)
    decisions_left_out: int = 0  # one-step element-steps at a sign/clamp decided within rounding (not judged)
    decisions_adopted: int = 0  # trajectory element-steps where the reference took the implementation's outcome
    # (fqn, "grad" | "param kind") -> what the step changed that the caller gave it (numerics.caller_contract); each
    # also an ``errors`` row of kind "contract" (err inf, tol 0) at the first step it happened
    breaches: dict = field(default_factory=dict)


class _GradientReference:
    """The reference stepped per tensor on the gradients the implementation received."""

    def __init__(self, reference, params: dict[str, np.ndarray], hp: dict[str, dict]):
        self.reference, self.params, self.hp, self.state = reference, params, hp, {}
        if eager_state(reference):  # state exists from construction on (Adagrad)
            self.state = {n: reference.init(p, hp[n]) for n, p in params.items()}

    def step(self, grads: dict[str, object]) -> None:
        for name, grad in grads.items():
            if grad is None:
                continue
            if name not in self.state:
                self.state[name] = self.reference.init(self.params[name], self.hp[name])
            self.params[name], self.state[name] = updated(self.reference, self.reference.update(
                self.params[name], grad, self.state[name], self.hp[name]))

    def decided_by_rounding(self, grads: dict, eps: float, theirs: dict) -> dict[str, np.ndarray]:
        """Per FQN (only those with any), the elements whose next update hangs on a decision that rounding
        decides: within rounding of its boundary from the reference's state (``one_step.within_rounding``), or
        decided the other way from the implementation's own pre-step state ``theirs`` (a snapshot), whose drift
        from the reference's (rounding accumulated in its state) the trajectory judges on its own."""
        out, held = {}, held_state(theirs)
        for name, grad in grads.items():
            if grad is None or isinstance(grad, tuple):
                continue
            hp, param = self.hp[name], self.params[name]
            state = self.state.get(name) or self.reference.init(param, hp)
            mine = self.reference.decisions(param, grad, state, hp)
            mask = within_rounding(mine, eps, param.shape)
            own = held.get(name, {})
            if (name, "param") in theirs and all(np.shape(v) == np.shape(state.get(k)) for k, v in own.items()):
                other = self.reference.decisions(theirs[(name, "param")], grad, {**state, **own}, hp)
                for (a, _), (b, _) in zip(mine, other):
                    mask = mask | np.broadcast_to(np.sign(a) != np.sign(b), param.shape)
            if np.any(mask):
                out[name] = mask
        return out

    def adopt(self, decided: dict[str, np.ndarray], actual: dict) -> int:
        """Where a decision was the rounding's, go on from the implementation's parameter (either outcome is a
        correct step; a free-running trajectory would carry one flip as drift for good); how many elements."""
        count = 0
        for name, mask in decided.items():
            theirs = actual.get((name, "param"))
            if theirs is not None and theirs.shape == mask.shape:
                self.params[name] = np.where(mask, theirs, self.params[name])
                count += int(mask.sum())
        return count

    def expected(self) -> dict[tuple[str, str], np.ndarray]:
        out = {(n, "param"): v for n, v in self.params.items()}
        for name, state in self.state.items():
            out.update({(name, k): a for k, v in state.items() if (a := as_array(v)) is not None})
        return out

    def error_scales(self) -> dict[tuple[str, str], float]:
        """What a state tensor's rounding scales with where that is not its own magnitude, as the reference
        declares it (``error_scale`` in its state): for a sum of terms that cancel, their magnitudes' sum."""
        return {(n, k): float(v) for n, state in self.state.items()
                for k, v in state.get("error_scale", {}).items() if k in state}


class _GroupReference(_GradientReference):
    """A reference whose step couples the tensors of a param group (``KIND = "group"``: ScaledAdam clips
    against the whole group's gradient norm), stepped a group at a time with every name of it; a name
    whose gradient is None is passed as None (the reference says what that means)."""

    def __init__(self, reference, params: dict[str, np.ndarray], hp: dict[str, dict], groups: list[list[str]]):
        super().__init__(reference, params, hp)
        self.groups = [names for names in groups if names]

    def step(self, grads: dict[str, object]) -> None:
        for names in self.groups:
            for name in names:
                if name not in self.state:
                    self.state[name] = self.reference.init(self.params[name], self.hp[name])
            params, states = self.reference.update_group({n: self.params[n] for n in names},
                                                         {n: grads.get(n) for n in names},
                                                         {n: self.state[n] for n in names}, self.hp[names[0]])
            self.params.update(params)
            self.state.update(states)


class _ClosureReference:
    """The reference of a closure-driven optimizer on the flat vector of its (single) group. With
    ``noise`` every objective evaluation is perturbed by that relative amount (seeded): the same
    algorithm fed values only as exact as the dtype under test, whose distance from the exact run
    measures how much rounding alone moves this trajectory (the yardstick of ``run_trajectory``)."""

    def __init__(self, reference, params: dict[str, np.ndarray], hp: dict[str, dict], workload: Workload,
                 frozen: set[str], noise: float = 0.0):
        self.reference, self.params, self.workload, self.frozen = reference, params, workload, frozen
        self.noise, self.rng = noise, np.random.default_rng(12345)
        self.names = list(params)
        self.hp = hp[self.names[0]]
        self.x = np.concatenate([params[n].reshape(-1) for n in self.names]) if self.names else np.zeros(0)
        self.state = reference.init(self.x, self.hp)

    def _unflat(self, x: np.ndarray) -> dict[str, np.ndarray]:
        out, offset = {}, 0
        for n in self.names:
            size = self.params[n].size
            out[n] = x[offset:offset + size].reshape(self.params[n].shape)
            offset += size
        return out

    def objective(self, x: np.ndarray):
        loss, grads = self.workload.objective.value_and_grad(self._unflat(x))
        flat = [np.zeros(self.params[n].size) if n in self.frozen else grads[n].reshape(-1) for n in self.names]
        grad = np.concatenate(flat) if flat else np.zeros(0)
        if self.noise:  # a sum over n terms is about sqrt(n) roundings off; each gradient element a few
            loss *= 1.0 + self.noise * np.sqrt(max(grad.size, 1)) * self.rng.uniform(-1.0, 1.0)
            grad = grad * (1.0 + 4 * self.noise * self.rng.uniform(-1.0, 1.0, grad.shape))
        return loss, grad

    def step(self, grads) -> None:
        self.x, self.state, _ = self.reference.step(self.x, self.objective, self.state, self.hp)
        self.params = self._unflat(self.x)

    def expected(self) -> dict[tuple[str, str], np.ndarray]:
        out = {(n, "param"): v for n, v in self.params.items()}
        if self.names:
            out.update({(self.names[0], k): a for k, v in self.state.items() if (a := as_array(v)) is not None})
        return out


def scheduled_lr(documented: float, held) -> float:
    """The lr the reference uses for a step: the documented schedule's value; where the optimizer holds
    its lr in a Tensor, the value that Tensor holds if it is that value rounded (within 2 ulps of its
    dtype: the scheduler computes ``base_lr * factor`` in the Tensor's dtype), so rounding is not an error
    and a wrong schedule still is."""
    if isinstance(held, torch.Tensor):
        have = float(held.reshape(-1)[0])
        if abs(have - documented) <= 2 * torch.finfo(held.dtype).eps * abs(documented):
            return have
    return documented


def run_trajectory(impl: Implementation, hset: HparamSet, reference, defaults: dict, workload: Workload,
                   dtype: torch.dtype, device: torch.device, *, recorded: Recording | None = None,
                   save_to: Path | None = None, **judging) -> Trajectory | None:
    """Run ``workload.steps`` steps of ``impl`` (``recording.record_trajectory``) and judge them against the
    reference (``judge_trajectory``, which takes the keywords ``judging``); ``recorded``: judge that recording
    instead, made by another process; ``save_to``: write the recording there (``numerics.recording_file``) for
    another process to judge, and judge nothing here (None)."""
    if recorded is None:
        wide = as_complex(reference) if dtype.is_complex else reference  # real and imaginary parts apart
        kind = kind_of(wide)
        before = kind == "gradient" and (judging.get("one_step", False) or decisions_of(wide) is not None)
        recorded = record_trajectory(impl, hset, workload, dtype, device, closure_driven=kind == "closure",
                                     before=before)
        if save_to is not None:
            save_recording(recorded, save_to)
            return None
    return judge_trajectory(recorded, impl, hset, reference, defaults, workload, dtype, **judging)


def judge_trajectory(
    recording: Recording,
    impl: Implementation,
    hset: HparamSet,
    reference,
    defaults: dict,
    workload: Workload,
    dtype: torch.dtype,
    *,
    reference_options: dict | None = None,
    keep_snapshots: bool = False,
    one_step: bool = False,
    update_eps: float | None = None,
    foreign: bool = False,
) -> Trajectory:
    """Step the float64 reference beside ``recording`` and compare after each step. With ``one_step``
    (gradient-driven optimizers) also check each step from the implementation's own state
    (``optbench.numerics.one_step``), the update measured in ``update_eps`` where that is coarser than
    the dtype's eps. A ``foreign`` implementation (another class than the one the reference's torch optimizer
    is) may keep state for a parameter that has had no gradient yet or not (torch's Adagrad creates it at
    construction, other libraries at the first step): until then, such state on one side only is not judged.
    ``impl`` is read for its candidate spec (data) only: the implementation is never stepped here."""
    judged, start = recording.judged, recording.start
    eps = torch.finfo(dtype).eps
    tighter = torch.finfo(judged).eps / eps  # rows stay in eps of ``dtype``; masters are held to float32's tolerance
    hp = hset.reference_hp(recording.names, defaults,
                           {**(reference_options or {}), "dtype_eps": torch.finfo(judged).eps})
    hp = {name: held_precision(h, impl.spec) for name, h in hp.items()}  # options the library holds at lower precision
    for name, meta in workload.meta.items():  # what the parameter carries besides its values (u-muP's mup_type)
        if name in hp:
            hp[name]["param_meta"] = dict(meta)
    reference = as_complex(reference) if dtype.is_complex else reference  # real and imaginary parts apart
    reference = with_group_step(reference, hp.values())  # a library's step counter per param group
    kind = kind_of(reference)
    closure_driven = kind == "closure"
    yardstick = None
    if closure_driven:
        frozen = set(recording.frozen)
        ref = _ClosureReference(reference, start, hp, workload, frozen)
        yardstick = _ClosureReference(reference, {n: v.copy() for n, v in start.items()}, hp, workload, frozen,
                                      noise=eps)
    elif kind == "group":
        ref = _GroupReference(reference, start, hp, hset.assign(recording.names))
    else:
        ref = _GradientReference(reference, start, hp)
        if recording.masters:  # how far float32 rounding alone moves them (optbench.numerics.master_copy)
            yardstick = RoundingYardstick(lambda moved: _GradientReference(reference, moved, hp), start, eps * tighter)
    base_lr = {n: h["lr"] for n, h in hp.items()} if hset.schedule else {}
    rows, snapshots, scales, noise, one_sided, adopted = [], [], {}, {}, {}, 0
    had_grad: set[str] = set()  # FQNs that have had a gradient so far
    skipped = impl.skipped_state  # a candidate spec's ignore (and step: none): compared on neither side
    # The one-step gate feeds one tensor's own state to a per-tensor reference: not for a group-coupled step.
    local = OneStep(reference, hp, judged, update_eps) if one_step and kind == "gradient" else None
    for step, taken in enumerate(recording.steps):
        for h in hp.values():  # step() calls so far, this one included: a per-group step counter's value
            h["iteration"] = float(step + 1)
        for name, lr in base_lr.items():  # the documented schedule, in place (the references hold these dicts)
            hp[name]["lr"] = scheduled_lr(lr * schedule_factor(hset.schedule, step), taken.lrs[name])
        decided = {}
        if closure_driven:
            ref.step(None)
            yardstick.step(None)
        else:
            grads, before = taken.grads, taken.before
            had_grad.update(n for n, g in grads.items() if g is not None)
            decides = kind == "gradient" and decisions_of(reference) is not None
            private = dict(ref.state)  # the reference's own state before the step (update never mutates it)
            decided = ref.decided_by_rounding(grads, torch.finfo(judged).eps, before) if decides else {}
            ref.step(grads)
            if yardstick is not None:
                yardstick.step(grads)
        actual = taken.after
        if decided:  # a sign decided by rounding: the reference goes on from the impl's side
            adopted += ref.adopt(decided, actual)
        expected = ref.expected()
        if skipped:
            actual = {k: v for k, v in actual.items() if k[1] not in skipped}
            expected = {k: v for k, v in expected.items() if k[1] not in skipped}
        declared = ref.error_scales() if hasattr(ref, "error_scales") else {}
        noisy = yardstick.expected() if yardstick is not None else {}
        if local:
            local.record(step + 1, before, actual, grads, private)
        keys = [key for key in sorted(expected.keys() | actual.keys()) if not (
            foreign and not closure_driven and key[0] not in had_grad and (key in expected) != (key in actual))]
        # (skipped: state for a parameter not stepped yet, on one side: when it is created is the class's own)
        both = [key for key in keys if key in expected and key in actual]
        largest, measured_errors = measured([actual[k] for k in both], [expected[k] for k in both], eps,
                                            [max(scales.get(k, 0.0), declared.get(k, 0.0)) for k in both])
        errors_now = dict(zip(both, measured_errors))
        for key, size in zip(both, largest):
            scales[key] = max(scales.get(key, 0.0), float(size), declared.get(key, 0.0))
        for key in keys:
            tol = tolerance_eps(step + 1) * tighter
            if key in errors_now:
                e = float(errors_now[key])
                if key in noisy:  # what rounding at this dtype alone does to the trajectory (so far), times ten
                    noise[key] = max(noise.get(key, 0.0), err_eps(noisy[key], expected[key], eps, scales[key]))
                    tol = max(tol, YARDSTICK_FACTOR * noise[key])
            else:
                e = float("inf")  # a state tensor only one side keeps
                one_sided[key[1]] = "the implementation" if key in actual else "the reference"
            rows.append((step + 1, key[0], key[1], e, tol))
        if recording.masters:  # the model's own parameters: its masters, rounded (optbench.numerics.master_copy)
            held = {n: max(tolerance_eps(step + 1) * tighter, YARDSTICK_FACTOR * noise.get((n, "param"), 0.0))
                    for n in taken.model}
            rows += model_rows(step + 1, taken.model, expected, scales, held)
        if keep_snapshots:
            snapshots.append(actual)
    columns = ["step", "fqn", "tensor", "err_eps", "tol"]
    errors = pd.DataFrame(rows, columns=columns).assign(kind="trajectory")
    if local:
        errors = pd.concat([errors, pd.DataFrame(local.rows, columns=columns).assign(kind="one-step")],
                           ignore_index=True)
    if recording.contract:
        errors = pd.concat([errors, pd.DataFrame(recording.contract, columns=columns).assign(kind="contract")],
                           ignore_index=True)
    return Trajectory(errors, snapshots, recording.kept, one_sided, local.left_out if local else 0, adopted,
                      recording.breaches)
