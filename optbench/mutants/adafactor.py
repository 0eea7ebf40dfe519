"""Adafactor mutants: deliberately wrong Adafactor optimizers optbench must catch, and a correct control.

The mutants share ``CorrectAdafactor``'s step: ``HandWrittenStep``'s single-tensor loop in the parameter's dtype
that follows torch's ``_single_tensor_adafactor`` op for op (``foreach`` is accepted and ignored;
eps1 = None becomes the finfo eps of the first parameter with a gradient in the group, as in torch;
a zero-size parameter raises ZeroDivisionError computing its RMS, as torch does: finding F04). Each
mutant overrides one small hook of that step, so the rest of the arithmetic is, bit for bit, torch's.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.optim.optimizer import _get_scalar_dtype

from optbench.mutants.handwritten import HandWrittenStep
from optbench.mutants.handwritten import scalar as _scalar


class CorrectAdafactor(HandWrittenStep, torch.optim.Adafactor):
    """Control: a correct hand-written single-tensor Adafactor step (no bug)."""

    _set_up_first = True

    def _check(self, param: Tensor) -> None:
        if torch.is_complex(param):
            raise RuntimeError("Adafactor does not support complex parameters")
        super()._check(param)

    def _init_state(self, param: Tensor, state: dict, group: dict) -> None:
        grad = param.grad
        state["step"] = torch.tensor(0.0, dtype=_get_scalar_dtype())
        if grad.dim() > 1:  # factored over the last two dimensions
            row_shape = list(grad.shape)
            row_shape[-1] = 1
            state["row_var"] = grad.new_zeros(row_shape)
            col_shape = list(grad.shape)
            col_shape[-2] = 1
            state["col_var"] = grad.new_zeros(col_shape)
        else:
            state["variance"] = torch.zeros_like(grad, memory_format=torch.preserve_format)

    def _update(self, param: Tensor, grad: Tensor, state: dict, group: dict) -> None:
        """One Adafactor step of one parameter, as torch's ``_single_tensor_adafactor``."""
        lr, d, weight_decay = _scalar(group["lr"]), group["d"], group["weight_decay"]
        eps1, eps2 = group["eps"]
        if eps1 is None:  # torch fixes it once per group, from the first parameter with a gradient
            eps1 = torch.finfo(next(p for p in group["params"] if p.grad is not None).dtype).eps
        grad = -grad if group["maximize"] else grad
        step_t = state["step"]
        step_t += 1
        step = step_t.item()

        one_minus_beta2_t = self._one_minus_beta2(step, group["beta2_decay"])
        rho_t = min(lr, 1 / (step**0.5))
        alpha = max(eps2, param.norm(2).item() / (param.numel() ** 0.5)) * rho_t

        self._weight_decay(param, lr, weight_decay)

        if grad.dim() > 1:
            row_var, col_var = state["row_var"], state["col_var"]
            # (g * g).mean(dim=-1) and (g * g).mean(dim=-2), as torch computes them
            row_mean = torch.norm(grad, dim=-1, keepdim=True).square_().div_(grad.size(-1))
            row_var.lerp_(row_mean, one_minus_beta2_t)
            col_mean = torch.norm(grad, dim=-2, keepdim=True).square_().div_(grad.size(-2))
            col_var.lerp_(col_mean, one_minus_beta2_t)
            var_estimate = row_var @ col_var
            var_estimate.div_(row_var.mean(dim=-2, keepdim=True).clamp_(min=eps1))
        else:
            variance = state["variance"]
            variance.lerp_(grad * grad, one_minus_beta2_t)
            var_estimate = variance.clone()

        update = var_estimate.clamp_(min=eps1 * eps1).rsqrt_()
        update.mul_(grad)
        denom = self._clipping_denom(update, d)
        param.add_(update, alpha=-alpha / denom)

    # The hooks below are correct here; each mutant overrides exactly one of them.

    def _one_minus_beta2(self, step: float, beta2_decay: float) -> float:
        """1 - beta2_t = step ** beta2_decay."""
        return step**beta2_decay

    def _weight_decay(self, param: Tensor, lr: float, weight_decay: float) -> None:
        """Decoupled weight decay: param *= 1 - lr * weight_decay."""
        if weight_decay != 0:
            param.mul_(1 - lr * weight_decay)

    def _clipping_denom(self, update: Tensor, d: float) -> float:
        """Update clipping: divide by max(1, RMS(update) / d)."""
        return max(1.0, update.norm(2).item() / ((update.numel() ** 0.5) * d))


class Beta2ScheduleOffByOneAdafactor(CorrectAdafactor):
    """Bug: the beta2 schedule uses (step + 1) ** beta2_decay instead of step ** beta2_decay."""

    def _one_minus_beta2(self, step: float, beta2_decay: float) -> float:
        return (step + 1) ** beta2_decay


class UnscaledWeightDecayAdafactor(CorrectAdafactor):
    """Bug: decoupled weight decay is not scaled by lr: param *= 1 - weight_decay."""

    def _weight_decay(self, param: Tensor, lr: float, weight_decay: float) -> None:
        if weight_decay != 0:
            param.mul_(1 - weight_decay)


class UnflooredClippingAdafactor(CorrectAdafactor):
    """Bug: update clipping divides by RMS(update) / d even below 1 (the max(1, .) is dropped)."""

    def _clipping_denom(self, update: Tensor, d: float) -> float:
        return update.norm(2).item() / ((update.numel() ** 0.5) * d)


MUTANTS: dict[str, str] = {
    "Beta2ScheduleOffByOneAdafactor": "adafactor",
    "UnscaledWeightDecayAdafactor": "adafactor",
    "UnflooredClippingAdafactor": "adafactor",
}
CONTROLS: dict[str, str] = {"CorrectAdafactor": "adafactor"}
