"""Adagrad mutants: deliberately wrong Adagrad optimizers optbench must catch, and a correct control.

The mutants share ``CorrectAdagrad``'s step: ``HandWrittenStep``'s single-tensor loop in the parameter's dtype that
follows torch's ``_single_tensor_adagrad`` op for op, dense and sparse (``foreach``, ``fused`` and
``differentiable`` are accepted and ignored). torch creates Adagrad's state in the constructor; the
control re-creates it there through ``_init_state`` so a mutant can change it. Each mutant overrides
one small hook, so the rest of the arithmetic is, bit for bit, torch's.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.optim.optimizer import _get_scalar_dtype

from optbench.mutants.handwritten import HandWrittenStep
from optbench.mutants.handwritten import scalar as _scalar


class CorrectAdagrad(HandWrittenStep, torch.optim.Adagrad):
    """Control: a correct hand-written single-tensor Adagrad step (no bug)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for group in self.param_groups:  # torch fills state eagerly here; redo it through the hook
            for param in group["params"]:
                self.state[param] = {}
                self._init_state(param, self.state[param], group)

    def _check(self, param: Tensor) -> None:
        """Sparse gradients are fine."""

    def _init_state(self, param: Tensor, state: dict, group: dict) -> None:
        """As torch: the accumulator starts at the constructor's initial_accumulator_value."""
        init_value = self.defaults["initial_accumulator_value"]
        if torch.is_complex(param):
            init_value = complex(init_value, init_value)
        state["step"] = torch.tensor(0.0, dtype=_get_scalar_dtype())
        state["sum"] = torch.full_like(param, init_value, memory_format=torch.preserve_format)

    def _update(self, param: Tensor, grad: Tensor, state: dict, group: dict) -> None:
        """One Adagrad step of one parameter, as torch's ``_single_tensor_adagrad``."""
        lr, lr_decay, eps = _scalar(group["lr"]), group["lr_decay"], group["eps"]
        weight_decay = group["weight_decay"]
        step_t, state_sum = state["step"], state["sum"]
        step_t += 1
        step = step_t.item()
        grad = self._signed_grad(grad, group)
        if weight_decay != 0:
            if grad.is_sparse:
                raise RuntimeError("weight_decay option is not compatible with sparse gradients")
            grad = self._weight_decay(param, grad, weight_decay, group)
        clr = self._clr(lr, lr_decay, step)

        if grad.is_sparse:
            grad = grad.coalesce()  # the update is non-linear so indices must be unique
            indices, values = grad._indices(), grad._values()
            state_sum.add_(torch.sparse_coo_tensor(indices, values.pow(2), grad.size()))
            std_values = self._std(state_sum.sparse_mask(grad)._values(), eps)
            param.add_(torch.sparse_coo_tensor(indices, values / std_values, grad.size()), alpha=-clr)
            return
        if torch.is_complex(param):
            grad, state_sum, param = torch.view_as_real(grad), torch.view_as_real(state_sum), torch.view_as_real(param)
        state_sum.addcmul_(grad, grad, value=1)
        std = self._std(state_sum, eps)
        param.addcdiv_(grad, std, value=-clr)

    # The hooks below are correct here; each mutant overrides exactly one of them.

    def _signed_grad(self, grad: Tensor, group: dict) -> Tensor:
        return -grad if group["maximize"] else grad

    def _weight_decay(self, param: Tensor, grad: Tensor, weight_decay: float, group: dict) -> Tensor:
        """L2 penalty on the (already sign-flipped) gradient."""
        return grad.add(param, alpha=weight_decay)

    def _clr(self, lr: float, lr_decay: float, step: float) -> float:
        return lr / (1 + (step - 1) * lr_decay)

    def _std(self, state_sum: Tensor, eps: float) -> Tensor:
        return state_sum.sqrt().add_(eps)


class LrDecayOffByOneAdagrad(CorrectAdagrad):
    """Bug: clr = lr / (1 + step * lr_decay) instead of lr / (1 + (step - 1) * lr_decay)."""

    def _clr(self, lr: float, lr_decay: float, step: float) -> float:
        return lr / (1 + step * lr_decay)


class EpsInsideSqrtAdagrad(CorrectAdagrad):
    """Bug: std = sqrt(sum + eps) instead of sqrt(sum) + eps."""

    def _std(self, state_sum: Tensor, eps: float) -> Tensor:
        return state_sum.add(eps).sqrt_()


class InitialAccumulatorIgnoredAdagrad(CorrectAdagrad):
    """Bug: the accumulator starts at 0 whatever initial_accumulator_value is."""

    def _init_state(self, param: Tensor, state: dict, group: dict) -> None:
        state["step"] = torch.tensor(0.0, dtype=_get_scalar_dtype())
        state["sum"] = torch.zeros_like(param, memory_format=torch.preserve_format)


class MaximizeFlipsDecayAdagrad(CorrectAdagrad):
    """Bug: with maximize, the gradient is negated after weight decay is added: -(g + wd * p)."""

    def _weight_decay(self, param: Tensor, grad: Tensor, weight_decay: float, group: dict) -> Tensor:
        if group["maximize"]:
            return grad.sub(param, alpha=weight_decay)
        return grad.add(param, alpha=weight_decay)


MUTANTS: dict[str, str] = {
    "LrDecayOffByOneAdagrad": "adagrad",
    "EpsInsideSqrtAdagrad": "adagrad",
    "InitialAccumulatorIgnoredAdagrad": "adagrad",
    "MaximizeFlipsDecayAdagrad": "adagrad",
}
CONTROLS: dict[str, str] = {"CorrectAdagrad": "adagrad"}
