"""NAdam mutants: deliberately wrong NAdam optimizers optbench must catch, and a correct control.

The mutants share ``CorrectNAdam``'s step: ``HandWrittenStep``'s single-tensor loop in the parameter's dtype that
follows torch's ``_single_tensor_nadam`` op for op (``foreach``, ``capturable`` and ``differentiable``
are accepted and ignored), ``mu_product`` included: a scalar tensor of torch's scalar dtype (float32
unless the default dtype is float64), as torch keeps it. Each mutant overrides one small hook.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.optim.optimizer import _get_scalar_dtype

from optbench.mutants.handwritten import HandWrittenStep
from optbench.mutants.handwritten import scalar as _scalar


class CorrectNAdam(HandWrittenStep, torch.optim.NAdam):
    """Control: a correct hand-written single-tensor NAdam step (no bug)."""

    def _init_state(self, param: Tensor, state: dict, group: dict) -> None:
        state["step"] = torch.tensor(0.0, dtype=_get_scalar_dtype())
        state["mu_product"] = torch.tensor(1.0, dtype=_get_scalar_dtype())
        state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)

    def _update(self, param: Tensor, grad: Tensor, state: dict, group: dict) -> None:
        """One NAdam step of one parameter, as torch's ``_single_tensor_nadam`` (non-capturable)."""
        lr, eps, weight_decay = _scalar(group["lr"]), group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        grad = -grad if group["maximize"] else grad
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]

        step_t = state["step"]
        step_t += 1
        step = step_t.item()
        bias_correction2 = 1 - beta2**step

        grad = self._weight_decay(param, grad, lr, weight_decay, group["decoupled_weight_decay"])
        mu, mu_next = self._mus(beta1, group["momentum_decay"], step)
        mu_product = self._advance_mu_product(state, mu)

        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        denom = exp_avg_sq.div(bias_correction2).sqrt()

        mu_product_next = self._mu_product_next(mu_product, mu_next)
        denom.add_(eps)
        param.addcdiv_(grad, denom, value=(-lr * (1.0 - mu) / (1.0 - mu_product)))
        param.addcdiv_(exp_avg, denom, value=(-lr * mu_next) / (1.0 - mu_product_next))

    # The hooks below are correct here; each mutant overrides exactly one of them.

    def _weight_decay(self, param: Tensor, grad: Tensor, lr: float, weight_decay: float, decoupled: bool) -> Tensor:
        if weight_decay != 0:
            if decoupled:
                param.mul_(1 - lr * weight_decay)
            else:
                grad = grad.add(param, alpha=weight_decay)
        return grad

    def _mus(self, beta1: float, momentum_decay: float, step: float) -> tuple[float, float]:
        """The momentum cache mu_t and mu_{t+1}."""
        mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
        mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
        return mu, mu_next

    def _advance_mu_product(self, state: dict, mu: float) -> float:
        """mu_product *= mu (in the state tensor's dtype); returns the product this step uses."""
        mu_product = state["mu_product"]
        mu_product *= mu
        return mu_product.item()

    def _mu_product_next(self, mu_product: float, mu_next: float) -> float:
        """prod_{i<=t+1} mu_i, the bias correction of the exp_avg (Nesterov) term."""
        return mu_product * mu_next


class StaleMuProductNAdam(CorrectNAdam):
    """Bug: the exp_avg term is corrected by 1 - prod_{i<=t} mu_i instead of 1 - prod_{i<=t+1} mu_i."""

    def _mu_product_next(self, mu_product: float, mu_next: float) -> float:
        return mu_product


class MuNextOffByOneNAdam(CorrectNAdam):
    """Bug: mu_{t+1} is computed with step t instead of t + 1 (so mu_next == mu_t)."""

    def _mus(self, beta1: float, momentum_decay: float, step: float) -> tuple[float, float]:
        mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
        return mu, mu


class CoupledDecoupledWeightDecayNAdam(CorrectNAdam):
    """Bug: decoupled_weight_decay=True is ignored: L2 decay (grad += weight_decay * param) is always used."""

    def _weight_decay(self, param: Tensor, grad: Tensor, lr: float, weight_decay: float, decoupled: bool) -> Tensor:
        if weight_decay != 0:
            grad = grad.add(param, alpha=weight_decay)
        return grad


MUTANTS: dict[str, str] = {
    "StaleMuProductNAdam": "nadam",
    "MuNextOffByOneNAdam": "nadam",
    "CoupledDecoupledWeightDecayNAdam": "nadam",
}
CONTROLS: dict[str, str] = {"CorrectNAdam": "nadam"}
