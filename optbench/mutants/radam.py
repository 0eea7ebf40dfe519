"""RAdam mutants: deliberately wrong RAdam optimizers optbench must catch, and a correct control.

The mutants share ``CorrectRAdam``'s step: ``HandWrittenStep``'s single-tensor loop in the parameter's dtype that
follows torch's ``_single_tensor_radam`` op for op (``foreach``, ``capturable`` and ``differentiable``
are accepted and ignored). Each mutant overrides one small hook. With the default betas the first five
steps take the unrectified branch (rho_5 = 4.996) and step 6 on the rectified one (rho_6 = 5.994).
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.optim.optimizer import _get_scalar_dtype

from optbench.mutants.handwritten import HandWrittenStep
from optbench.mutants.handwritten import scalar as _scalar


class CorrectRAdam(HandWrittenStep, torch.optim.RAdam):
    """Control: a correct hand-written single-tensor RAdam step (no bug)."""

    def _init_state(self, param: Tensor, state: dict, group: dict) -> None:
        state["step"] = torch.tensor(0.0, dtype=_get_scalar_dtype())
        state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)

    def _update(self, param: Tensor, grad: Tensor, state: dict, group: dict) -> None:
        """One RAdam step of one parameter, as torch's ``_single_tensor_radam`` (non-capturable)."""
        lr, eps, weight_decay = _scalar(group["lr"]), group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        grad = -grad if group["maximize"] else grad
        exp_avg = state["exp_avg"]

        step_t = state["step"]
        step_t += 1
        step = step_t.item()

        if weight_decay != 0:
            if group["decoupled_weight_decay"]:
                param.mul_(1 - lr * weight_decay)
            else:
                grad = grad.add(param, alpha=weight_decay)

        rho_inf, rho_t = self._rho(beta1, beta2, step)
        rectified = self._rectified(rho_t)
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq = self._second_moment(state, grad, beta2, rectified)

        bias_correction1 = 1 - beta1**step
        bias_correction2 = 1 - beta2**step
        bias_corrected_exp_avg = exp_avg / bias_correction1

        if rectified:
            rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
            adaptive_lr = (bias_correction2**0.5) / exp_avg_sq.sqrt().add_(eps)
            param.add_(bias_corrected_exp_avg * lr * adaptive_lr * rect, alpha=-1.0)
        else:
            param.add_(self._unrectified_step(exp_avg, bias_corrected_exp_avg, lr), alpha=-1.0)

    # The hooks below are correct here; each mutant overrides exactly one of them.

    def _rho(self, beta1: float, beta2: float, step: float) -> tuple[float, float]:
        """rho_inf and rho_t, the (maximum) length of the approximated SMA."""
        rho_inf = 2 / (1 - beta2) - 1
        return rho_inf, rho_inf - 2 * step * (beta2**step) / (1 - beta2**step)

    def _rectified(self, rho_t: float) -> bool:
        return rho_t > 5.0

    def _second_moment(self, state: dict, grad: Tensor, beta2: float, rectified: bool) -> Tensor:
        """Update ``exp_avg_sq`` in place (on every step, whichever branch) and return it."""
        exp_avg_sq = state["exp_avg_sq"]
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        return exp_avg_sq

    def _unrectified_step(self, exp_avg: Tensor, bias_corrected_exp_avg: Tensor, lr: float) -> Tensor:
        """The step while rho_t <= 5: SGD with bias-corrected momentum."""
        return bias_corrected_exp_avg * lr


class RectifyAboveFourRAdam(CorrectRAdam):
    """Bug: the rectified branch is taken when rho_t > 4 instead of rho_t > 5 (step 5 with the default betas)."""

    def _rectified(self, rho_t: float) -> bool:
        return rho_t > 4.0


class UnrectifiedNoBiasCorrectionRAdam(CorrectRAdam):
    """Bug: the unrectified branch steps by lr * m_t, without the bias correction 1 - beta1**t."""

    def _unrectified_step(self, exp_avg: Tensor, bias_corrected_exp_avg: Tensor, lr: float) -> Tensor:
        return exp_avg * lr


class RhoInfWithBeta1RAdam(CorrectRAdam):
    """Bug: rho_inf = 2 / (1 - beta1) - 1 (beta1 instead of beta2), so rho_t stays below 5 for long."""

    def _rho(self, beta1: float, beta2: float, step: float) -> tuple[float, float]:
        rho_inf = 2 / (1 - beta1) - 1
        return rho_inf, rho_inf - 2 * step * (beta2**step) / (1 - beta2**step)


class SecondMomentOnlyWhenRectifiedRAdam(CorrectRAdam):
    """Bug: exp_avg_sq is updated only on rectified steps (skipped while rho_t <= 5)."""

    def _second_moment(self, state: dict, grad: Tensor, beta2: float, rectified: bool) -> Tensor:
        exp_avg_sq = state["exp_avg_sq"]
        if rectified:
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        return exp_avg_sq


MUTANTS: dict[str, str] = {
    "RectifyAboveFourRAdam": "radam",
    "UnrectifiedNoBiasCorrectionRAdam": "radam",
    "RhoInfWithBeta1RAdam": "radam",
    "SecondMomentOnlyWhenRectifiedRAdam": "radam",
}
CONTROLS: dict[str, str] = {"CorrectRAdam": "radam"}
