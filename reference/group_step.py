"""``group_step`` for every reference that keeps a step: t is the param group's count of step() calls.

torch keeps one step counter per tensor, advanced when the tensor has a gradient; libraries on their own base class
(pytorch-optimizer, heavyball, transformers) keep one per param group, advanced by every step() call. A reference
keeps torch's ``state["step"]`` (the count before this update, advanced by one in ``update``). With ``group_step``
in its options (a candidate spec's ``conventions``) and the harness's ``hp["iteration"]`` (step() calls so far, this
one included), ``with_group_step`` hands it the group's count before this call instead, so its bias corrections and
schedules run on the group's count. A reference without a step is unchanged; one that reads ``group_step`` itself
(adam, hf_adafactor) computes the same t either way.
"""

from __future__ import annotations

import numpy as np

from .contract import decisions_of, eager_state, kind_of


class GroupStepReference:
    """``reference`` whose per-tensor step is the group's count where ``hp["group_step"]`` says so."""

    def __init__(self, reference):
        self.reference = reference
        self.KIND = kind_of(reference)
        self.EAGER_STATE = eager_state(reference)
        if decisions_of(reference) is not None:
            self.decisions = lambda param, grad, state, hp: reference.decisions(param, grad, _counted(state, hp), hp)

    def init(self, param: np.ndarray, hp: dict) -> dict:
        return self.reference.init(param, hp)

    def update(self, param: np.ndarray, grad, state: dict, hp: dict):
        return self.reference.update(param, grad, _counted(state, hp), hp)


def _counted(state: dict, hp: dict) -> dict:
    if hp.get("group_step", False) and "iteration" in hp and "step" in state:
        return {**state, "step": np.float64(hp["iteration"] - 1.0)}
    return state


def with_group_step(reference, hps) -> object:
    """``reference`` wrapped where any of the param groups' options ``hps`` asks for ``group_step`` (a gradient
    reference: a closure or group-coupled one keeps its own counting)."""
    if kind_of(reference) == "gradient" and any(h.get("group_step", False) for h in hps):
        return GroupStepReference(reference)
    return reference
