"""Rprop mutants: deliberately wrong Rprop optimizers optbench must catch, and a correct control.

The mutants share ``CorrectRprop``'s step: ``HandWrittenStep``'s single-tensor loop in the parameter's dtype that
follows torch's ``_single_tensor_rprop`` (non-capturable) op for op (``foreach``, ``capturable`` and
``differentiable`` are accepted and ignored). Each mutant overrides one small hook of that step, so the
rest of the arithmetic is, bit for bit, torch's.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.optim.optimizer import _get_scalar_dtype

from optbench.mutants.handwritten import HandWrittenStep
from optbench.mutants.handwritten import scalar as _scalar


class CorrectRprop(HandWrittenStep, torch.optim.Rprop):
    """Control: a correct hand-written single-tensor Rprop step (no bug)."""

    def _init_state(self, param: Tensor, state: dict, group: dict) -> None:
        state["step"] = torch.zeros((), dtype=_get_scalar_dtype())
        state["prev"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        state["step_size"] = torch.full_like(param.grad, _scalar(group["lr"]))

    def _update(self, param: Tensor, grad: Tensor, state: dict, group: dict) -> None:
        """One Rprop step of one parameter, as torch's ``_single_tensor_rprop`` (non-capturable)."""
        etaminus, etaplus = self._etas(group)
        step_size_min, step_size_max = group["step_sizes"]
        grad = -grad if group["maximize"] else grad
        prev, step_size = state["prev"], state["step_size"]
        state["step"] += 1

        sign = grad.mul(prev).sign()
        sign[sign.gt(0)] = etaplus
        sign[sign.lt(0)] = etaminus
        sign[sign.eq(0)] = 1
        self._scale_step_size(step_size, sign, step_size_min, step_size_max)

        update = grad.clone(memory_format=torch.preserve_format)
        update[sign.eq(etaminus)] = 0  # a sign flip: no step now, and no sign memory for the next step
        param.addcmul_(update.sign(), step_size, value=-1)
        self._store_prev(prev, grad, update)

    # The hooks below are correct here; each mutant overrides exactly one of them.

    def _etas(self, group: dict) -> tuple[float, float]:
        etaminus, etaplus = group["etas"]
        return etaminus, etaplus

    def _scale_step_size(self, step_size: Tensor, sign: Tensor, step_size_min: float, step_size_max: float) -> None:
        step_size.mul_(sign).clamp_(step_size_min, step_size_max)

    def _store_prev(self, prev: Tensor, grad: Tensor, update: Tensor) -> None:
        """prev <- the gradient as used this step: zero where its sign flipped."""
        prev.copy_(update)


class PrevNotZeroedRprop(CorrectRprop):
    """Bug: prev keeps the raw gradient where the sign flipped (not zeroed), so the next step sees a flip again."""

    def _store_prev(self, prev: Tensor, grad: Tensor, update: Tensor) -> None:
        prev.copy_(grad)


class SwappedEtasRprop(CorrectRprop):
    """Bug: etas unpacked as (etaplus, etaminus): agreeing signs shrink the step, flips grow it."""

    def _etas(self, group: dict) -> tuple[float, float]:
        etaplus, etaminus = group["etas"]
        return etaminus, etaplus


class NoMaxClampRprop(CorrectRprop):
    """Bug: step sizes are clamped to step_size_min only, never to step_size_max."""

    def _scale_step_size(self, step_size: Tensor, sign: Tensor, step_size_min: float, step_size_max: float) -> None:
        step_size.mul_(sign).clamp_(min=step_size_min)


MUTANTS: dict[str, str] = {
    "PrevNotZeroedRprop": "rprop",
    "SwappedEtasRprop": "rprop",
    "NoMaxClampRprop": "rprop",
}
CONTROLS: dict[str, str] = {"CorrectRprop": "rprop"}
SHOWS_BY = {"NoMaxClampRprop": 10}  # its step sizes need some steps of one sign to grow past step_size_max
