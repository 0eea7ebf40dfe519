"""Adadelta mutants: deliberately wrong Adadelta optimizers optbench must catch, and a correct control.

The mutants share ``CorrectAdadelta``'s step: ``HandWrittenStep``'s single-tensor loop in the parameter's dtype that
follows torch's ``_single_tensor_adadelta`` op for op (``foreach``, ``capturable`` and
``differentiable`` are accepted and ignored). Each mutant overrides one small hook of that step, so
the rest of the arithmetic is, bit for bit, torch's.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.optim.optimizer import _get_scalar_dtype

from optbench.mutants.handwritten import HandWrittenStep
from optbench.mutants.handwritten import scalar as _scalar


class CorrectAdadelta(HandWrittenStep, torch.optim.Adadelta):
    """Control: a correct hand-written single-tensor Adadelta step (no bug)."""

    def _init_state(self, param: Tensor, state: dict, group: dict) -> None:
        state["step"] = torch.zeros((), dtype=_get_scalar_dtype())
        state["square_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        state["acc_delta"] = torch.zeros_like(param, memory_format=torch.preserve_format)

    def _update(self, param: Tensor, grad: Tensor, state: dict, group: dict) -> None:
        """One Adadelta step of one parameter, as torch's ``_single_tensor_adadelta``."""
        lr, rho, eps, weight_decay = _scalar(group["lr"]), group["rho"], group["eps"], group["weight_decay"]
        state["step"] += 1
        grad = -grad if group["maximize"] else grad
        if weight_decay != 0:
            grad = grad.add(param, alpha=weight_decay)
        square_avg, acc_delta = state["square_avg"], state["acc_delta"]
        if torch.is_complex(param):
            square_avg, acc_delta, grad = (torch.view_as_real(square_avg), torch.view_as_real(acc_delta),
                                           torch.view_as_real(grad))
        self._square_avg(square_avg, grad, rho)
        std = square_avg.add(eps).sqrt_()
        delta = self._delta(acc_delta, std, grad, eps)
        acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
        if torch.is_complex(param):
            delta = torch.view_as_complex(delta)
        self._apply(param, delta, lr)

    # The hooks below are correct here; each mutant overrides exactly one of them.

    def _square_avg(self, square_avg: Tensor, grad: Tensor, rho: float) -> None:
        square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)

    def _delta(self, acc_delta: Tensor, std: Tensor, grad: Tensor, eps: float) -> Tensor:
        """sqrt(acc_delta + eps) / sqrt(square_avg + eps) * grad, with the previous acc_delta."""
        return acc_delta.add(eps).sqrt_().div_(std).mul_(grad)

    def _apply(self, param: Tensor, delta: Tensor, lr: float) -> None:
        param.add_(delta, alpha=-lr)


class EpsOnlyInDenominatorAdadelta(CorrectAdadelta):
    """Bug: delta = sqrt(acc_delta) / sqrt(square_avg + eps) * grad (no eps in the numerator)."""

    def _delta(self, acc_delta: Tensor, std: Tensor, grad: Tensor, eps: float) -> Tensor:
        return acc_delta.sqrt().div_(std).mul_(grad)


class LrIgnoredAdadelta(CorrectAdadelta):
    """Bug: the step is applied unscaled (lr ignored; right only for the default lr = 1)."""

    def _apply(self, param: Tensor, delta: Tensor, lr: float) -> None:
        param.sub_(delta)


class SwappedRhoAdadelta(CorrectAdadelta):
    """Bug: square_avg = (1 - rho) * square_avg + rho * grad^2 (the two weights swapped)."""

    def _square_avg(self, square_avg: Tensor, grad: Tensor, rho: float) -> None:
        square_avg.mul_(1 - rho).addcmul_(grad, grad, value=rho)


MUTANTS: dict[str, str] = {
    "EpsOnlyInDenominatorAdadelta": "adadelta",
    "LrIgnoredAdadelta": "adadelta",
    "SwappedRhoAdadelta": "adadelta",
}
CONTROLS: dict[str, str] = {"CorrectAdadelta": "adadelta"}
