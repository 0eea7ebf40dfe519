"""RMSprop mutants: deliberately wrong RMSprop optimizers optbench must catch, and a correct control.

The mutants share ``CorrectRMSprop``'s step: ``HandWrittenStep``'s single-tensor loop in the parameter's dtype that
follows torch's ``_single_tensor_rmsprop`` op for op (``foreach``, ``capturable`` and ``differentiable``
are accepted and ignored). Each mutant overrides one small hook of that step, so the rest of the
arithmetic is, bit for bit, torch's.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.optim.optimizer import _get_scalar_dtype

from optbench.mutants.handwritten import HandWrittenStep
from optbench.mutants.handwritten import scalar as _scalar


class CorrectRMSprop(HandWrittenStep, torch.optim.RMSprop):
    """Control: a correct hand-written single-tensor RMSprop step (no bug)."""

    def _init_state(self, param: Tensor, state: dict, group: dict) -> None:
        state["step"] = torch.zeros((), dtype=_get_scalar_dtype())
        state["square_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        if group["momentum"] > 0:
            state["momentum_buffer"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        if group["centered"]:
            state["grad_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)

    def _update(self, param: Tensor, grad: Tensor, state: dict, group: dict) -> None:
        """One RMSprop step of one parameter, as torch's ``_single_tensor_rmsprop`` (non-capturable)."""
        lr, alpha, eps, momentum = _scalar(group["lr"]), group["alpha"], group["eps"], group["momentum"]
        grad = -grad if group["maximize"] else grad
        state["step"] += 1
        if group["weight_decay"] != 0:
            grad = grad.add(param, alpha=group["weight_decay"])

        square_avg = state["square_avg"]
        square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
        if group["centered"]:
            grad_avg = state["grad_avg"]
            grad_avg.lerp_(grad, 1 - alpha)
            avg = self._centered_denom(square_avg, grad_avg, eps)
        else:
            avg = self._denom(square_avg, eps)

        if momentum > 0:
            buf = self._momentum(state["momentum_buffer"], grad, avg, momentum)
            param.add_(buf, alpha=-lr)
        else:
            param.addcdiv_(grad, avg, value=-lr)

    # The hooks below are correct here; each mutant overrides exactly one of them.

    def _denom(self, square_avg: Tensor, eps: float) -> Tensor:
        """sqrt(v) + eps (eps outside the square root)."""
        return square_avg.sqrt().add_(eps)

    def _centered_denom(self, square_avg: Tensor, grad_avg: Tensor, eps: float) -> Tensor:
        """sqrt(v - g_ave**2) + eps."""
        return square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_().add_(eps)

    def _momentum(self, buf: Tensor, grad: Tensor, avg: Tensor, momentum: float) -> Tensor:
        """b <- momentum * b + g / avg, in place."""
        return buf.mul_(momentum).addcdiv_(grad, avg)


class UncenteredVarianceRMSprop(CorrectRMSprop):
    """Bug: centered=True updates grad_avg but never subtracts grad_avg**2 from the square average."""

    def _centered_denom(self, square_avg: Tensor, grad_avg: Tensor, eps: float) -> Tensor:
        return square_avg.sqrt().add_(eps)


class EpsInsideSqrtRMSprop(CorrectRMSprop):
    """Bug: denominator sqrt(v + eps) instead of sqrt(v) + eps (uncentered)."""

    def _denom(self, square_avg: Tensor, eps: float) -> Tensor:
        return square_avg.add(eps).sqrt_()


class UndecayedMomentumRMSprop(CorrectRMSprop):
    """Bug: the momentum buffer is not multiplied by momentum: b <- b + g / avg."""

    def _momentum(self, buf: Tensor, grad: Tensor, avg: Tensor, momentum: float) -> Tensor:
        return buf.addcdiv_(grad, avg)


MUTANTS: dict[str, str] = {
    "UncenteredVarianceRMSprop": "rmsprop",
    "EpsInsideSqrtRMSprop": "rmsprop",
    "UndecayedMomentumRMSprop": "rmsprop",
}
CONTROLS: dict[str, str] = {"CorrectRMSprop": "rmsprop"}
