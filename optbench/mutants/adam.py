"""Adam mutants: deliberately wrong Adam optimizers optbench must catch, and a correct control.

The mutants share ``CorrectAdam``'s step: ``HandWrittenStep``'s single-tensor loop in the parameter's dtype that
follows torch's ``_single_tensor_adam`` op for op, L2 and decoupled weight decay both
(``foreach``, ``fused``, ``capturable`` and ``differentiable`` are accepted and ignored). Each mutant
overrides one small hook of that step, so the rest of the arithmetic is, bit for bit, torch's.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.optim.optimizer import _get_scalar_dtype

from optbench.mutants.handwritten import HandWrittenStep
from optbench.mutants.handwritten import scalar as _scalar


class CorrectAdam(HandWrittenStep, torch.optim.Adam):
    """Control: a correct hand-written single-tensor Adam step (no bug)."""

    _set_up_first = True

    def _check(self, param: Tensor) -> None:
        if param.grad.is_sparse:
            raise RuntimeError("Adam does not support sparse gradients, please consider SparseAdam instead")

    def _init_state(self, param: Tensor, state: dict, group: dict) -> None:
        state["step"] = torch.tensor(0.0, dtype=_get_scalar_dtype())
        state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        if group["amsgrad"]:
            state["max_exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)

    def _update(self, param: Tensor, grad: Tensor, state: dict, group: dict) -> None:
        """One Adam step of one parameter, as torch's ``_single_tensor_adam`` (non-capturable)."""
        lr, eps = _scalar(group["lr"]), group["eps"]
        grad = self._signed_grad(grad, group)
        step_t = state["step"]
        step_t += 1

        grad = self._weight_decay(param, grad, lr, group)

        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        max_exp_avg_sq = state.get("max_exp_avg_sq") if group["amsgrad"] else None
        if torch.is_complex(param):  # torch updates a complex tensor as its real view
            grad, exp_avg, exp_avg_sq = (torch.view_as_real(t) for t in (grad, exp_avg, exp_avg_sq))
            if max_exp_avg_sq is not None:
                max_exp_avg_sq = torch.view_as_real(max_exp_avg_sq)
            param = torch.view_as_real(param)

        beta1, beta2 = self._betas(group)
        exp_avg.lerp_(grad, 1 - beta1)
        self._second_moment(exp_avg_sq, grad, beta2)

        step = step_t.item()
        bias_correction1, bias_correction2 = self._bias_corrections(beta1, beta2, step)
        step_size = lr / bias_correction1

        if group["amsgrad"]:
            second_moment = self._amsgrad_max(max_exp_avg_sq, exp_avg, exp_avg_sq)
        else:
            second_moment = exp_avg_sq
        denom = self._denom(second_moment, bias_correction2, eps)
        param.addcdiv_(exp_avg, denom, value=-step_size)

    # The hooks below are correct here; each mutant overrides exactly one of them.

    def _betas(self, group: dict) -> tuple[float, float]:
        beta1, beta2 = group["betas"]
        return _scalar(beta1), _scalar(beta2)

    def _signed_grad(self, grad: Tensor, group: dict) -> Tensor:
        return -grad if group["maximize"] else grad

    def _weight_decay(self, param: Tensor, grad: Tensor, lr: float, group: dict) -> Tensor:
        """L2: grad + weight_decay * param, before the moments; decoupled: param *= 1 - lr * weight_decay."""
        weight_decay = group["weight_decay"]
        if weight_decay != 0:
            if group["decoupled_weight_decay"]:
                param.mul_(1 - lr * weight_decay)
            else:
                grad = grad.add(param, alpha=weight_decay)
        return grad

    def _second_moment(self, exp_avg_sq: Tensor, grad: Tensor, beta2: float) -> None:
        """v <- beta2 * v + (1 - beta2) * g * g, in place."""
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)

    def _bias_corrections(self, beta1: float, beta2: float, step: float) -> tuple[float, float]:
        return 1 - beta1**step, 1 - beta2**step

    def _amsgrad_max(self, max_exp_avg_sq: Tensor, exp_avg: Tensor, exp_avg_sq: Tensor) -> Tensor:
        """max_exp_avg_sq <- max(max_exp_avg_sq, exp_avg_sq), in place; the denominator uses it."""
        torch.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
        return max_exp_avg_sq

    def _denom(self, second_moment: Tensor, bias_correction2: float, eps: float) -> Tensor:
        """sqrt(v_hat) + eps, computed as torch does: sqrt(v) / sqrt(bias_correction2) + eps."""
        return (second_moment.sqrt() / bias_correction2**0.5).add_(eps)


class L2AfterMomentsAdam(CorrectAdam):
    """Bug: L2 decay kept out of the moments: applied to the parameter (param -= lr * weight_decay * param),
    not to grad."""

    def _weight_decay(self, param: Tensor, grad: Tensor, lr: float, group: dict) -> Tensor:
        weight_decay = group["weight_decay"]
        if weight_decay != 0:
            param.add_(param, alpha=-lr * weight_decay)
        return grad


class DecoupledFlagIgnoredAdam(CorrectAdam):
    """Bug: ignores decoupled_weight_decay=True (always adds L2 decay to the gradient)."""

    def _weight_decay(self, param: Tensor, grad: Tensor, lr: float, group: dict) -> Tensor:
        weight_decay = group["weight_decay"]
        if weight_decay != 0:
            grad = grad.add(param, alpha=weight_decay)
        return grad


class AmsgradMaxOfExpAvgAdam(CorrectAdam):
    """Bug: amsgrad keeps the running max of exp_avg instead of exp_avg_sq."""

    def _amsgrad_max(self, max_exp_avg_sq: Tensor, exp_avg: Tensor, exp_avg_sq: Tensor) -> Tensor:
        torch.maximum(max_exp_avg_sq, exp_avg, out=max_exp_avg_sq)
        return max_exp_avg_sq


class UnrootedBiasCorrection2Adam(CorrectAdam):
    """Bug: sqrt(v) is divided by bias_correction2 instead of sqrt(bias_correction2)."""

    def _denom(self, second_moment: Tensor, bias_correction2: float, eps: float) -> Tensor:
        return (second_moment.sqrt() / bias_correction2).add_(eps)


MUTANTS: dict[str, str] = {
    "L2AfterMomentsAdam": "adam",
    "DecoupledFlagIgnoredAdam": "adam",
    "AmsgradMaxOfExpAvgAdam": "adam",
    "UnrootedBiasCorrection2Adam": "adam",
}
CONTROLS: dict[str, str] = {"CorrectAdam": "adam"}
