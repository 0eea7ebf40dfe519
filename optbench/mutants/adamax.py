"""Adamax mutants: deliberately wrong Adamax optimizers optbench must catch, and a correct control.

The mutants share ``CorrectAdamax``'s step: ``HandWrittenStep``'s single-tensor loop in the parameter's dtype that
follows torch's ``_single_tensor_adamax`` op for op (non-capturable; ``foreach``, ``capturable`` and
``differentiable`` are accepted and ignored). Each mutant overrides one small hook of that step, so
the rest of the arithmetic is, bit for bit, torch's.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.optim.optimizer import _get_scalar_dtype

from optbench.mutants.handwritten import HandWrittenStep
from optbench.mutants.handwritten import scalar as _scalar


class CorrectAdamax(HandWrittenStep, torch.optim.Adamax):
    """Control: a correct hand-written single-tensor Adamax step (no bug)."""

    def _init_state(self, param: Tensor, state: dict, group: dict) -> None:
        state["step"] = torch.tensor(0.0, dtype=_get_scalar_dtype())
        state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        state["exp_inf"] = torch.zeros_like(param, memory_format=torch.preserve_format)

    def _update(self, param: Tensor, grad: Tensor, state: dict, group: dict) -> None:
        """One Adamax step of one parameter, as torch's ``_single_tensor_adamax`` (non-capturable)."""
        lr, eps, weight_decay = _scalar(group["lr"]), group["eps"], group["weight_decay"]
        beta1, beta2 = (_scalar(b) for b in group["betas"])
        grad = -grad if group["maximize"] else grad
        exp_avg, exp_inf, step_t = state["exp_avg"], state["exp_inf"], state["step"]
        step_t += 1
        grad = self._weight_decay(param, grad, lr, weight_decay)
        if torch.is_complex(param):
            param, grad = torch.view_as_real(param), torch.view_as_real(grad)
            exp_avg, exp_inf = torch.view_as_real(exp_avg), torch.view_as_real(exp_inf)
        exp_avg.lerp_(grad, 1 - beta1)
        self._inf_norm(exp_inf, grad, beta2, eps)
        clr = self._step_size(lr, beta1, beta2, step_t.item())
        param.addcdiv_(exp_avg, exp_inf, value=-clr)

    # The hooks below are correct here; each mutant overrides exactly one of them.

    def _weight_decay(self, param: Tensor, grad: Tensor, lr: float, weight_decay: float) -> Tensor:
        """L2 penalty added to the gradient."""
        if weight_decay != 0:
            grad = grad.add(param, alpha=weight_decay)
        return grad

    def _inf_norm(self, exp_inf: Tensor, grad: Tensor, beta2: float, eps: float) -> None:
        """exp_inf = max(beta2 * exp_inf, |grad| + eps), in place."""
        torch.maximum(exp_inf.mul_(beta2), grad.abs().add_(eps), out=exp_inf)

    def _step_size(self, lr: float, beta1: float, beta2: float, step: float) -> float:
        return lr / (1 - beta1**step)


class EpsOutsideMaxAdamax(CorrectAdamax):
    """Bug: exp_inf = max(beta2 * exp_inf, |grad|) + eps instead of max(beta2 * exp_inf, |grad| + eps)."""

    def _inf_norm(self, exp_inf: Tensor, grad: Tensor, beta2: float, eps: float) -> None:
        torch.maximum(exp_inf.mul_(beta2), grad.abs(), out=exp_inf)
        exp_inf.add_(eps)


class BiasCorrectedInfNormAdamax(CorrectAdamax):
    """Bug: the infinity norm is bias-corrected too (exp_inf / (1 - beta2^t)), as Adam's second moment."""

    def _step_size(self, lr: float, beta1: float, beta2: float, step: float) -> float:
        return lr * (1 - beta2**step) / (1 - beta1**step)


class DecoupledWeightDecayAdamax(CorrectAdamax):
    """Bug: decoupled weight decay (param *= 1 - lr * weight_decay) instead of L2 on the gradient."""

    def _weight_decay(self, param: Tensor, grad: Tensor, lr: float, weight_decay: float) -> Tensor:
        if weight_decay != 0:
            param.mul_(1 - lr * weight_decay)
        return grad


class UndecayedInfNormAdamax(CorrectAdamax):
    """Bug: exp_inf = max(exp_inf, |grad| + eps): beta2 never decays the running maximum."""

    def _inf_norm(self, exp_inf: Tensor, grad: Tensor, beta2: float, eps: float) -> None:
        torch.maximum(exp_inf, grad.abs().add_(eps), out=exp_inf)


MUTANTS: dict[str, str] = {
    "EpsOutsideMaxAdamax": "adamax",
    "BiasCorrectedInfNormAdamax": "adamax",
    "DecoupledWeightDecayAdamax": "adamax",
    "UndecayedInfNormAdamax": "adamax",
}
CONTROLS: dict[str, str] = {"CorrectAdamax": "adamax"}
