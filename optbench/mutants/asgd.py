"""ASGD mutants: deliberately wrong ASGD optimizers optbench must catch, and a correct control.

The mutants share ``CorrectASGD``'s step: ``HandWrittenStep``'s single-tensor loop in the parameter's dtype that
follows torch's ``_single_tensor_asgd`` (non-capturable) op for op, eta and mu kept as 0-dim tensors of
torch's scalar dtype as torch keeps them (``foreach``, ``capturable`` and ``differentiable`` are accepted
and ignored). Each mutant overrides one small hook of that step, so the rest is, bit for bit, torch's.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.optim.optimizer import _get_scalar_dtype

from optbench.mutants.handwritten import HandWrittenStep
from optbench.mutants.handwritten import scalar as _scalar


class CorrectASGD(HandWrittenStep, torch.optim.ASGD):
    """Control: a correct hand-written single-tensor ASGD step (no bug)."""

    def _init_state(self, param: Tensor, state: dict, group: dict) -> None:
        state["step"] = torch.zeros((), dtype=_get_scalar_dtype())
        state["eta"] = torch.as_tensor(_scalar(group["lr"]), dtype=_get_scalar_dtype()).clone()
        state["mu"] = torch.ones((), dtype=_get_scalar_dtype())
        state["ax"] = torch.zeros_like(param, memory_format=torch.preserve_format)

    def _update(self, param: Tensor, grad: Tensor, state: dict, group: dict) -> None:
        """One ASGD step of one parameter, as torch's ``_single_tensor_asgd`` (non-capturable)."""
        lr, lambd, alpha, t0 = _scalar(group["lr"]), group["lambd"], group["alpha"], group["t0"]
        grad = -grad if group["maximize"] else grad
        step_t, eta, mu = state["step"], state["eta"], state["mu"]
        step_t += 1
        if group["weight_decay"] != 0:
            grad = grad.add(param, alpha=group["weight_decay"])

        self._descend_and_average(param, grad, state["ax"], eta.item(), mu, lambd)

        step = step_t.item()
        eta.copy_(torch.as_tensor(self._eta(lr, lambd, alpha, step)))
        mu.copy_(torch.as_tensor(self._mu(step, t0)))

    # The hooks below are correct here; each mutant overrides exactly one of them.

    def _descend_and_average(self, param: Tensor, grad: Tensor, ax: Tensor, eta: float, mu: Tensor,
                             lambd: float) -> None:
        """Decay and step the parameter, then average the NEW parameter into ``ax``."""
        param.mul_(1 - lambd * eta)
        param.add_(grad, alpha=-eta)
        if mu.item() != 1:
            ax.add_(param.sub(ax).mul_(mu))
        else:
            ax.copy_(param)

    def _eta(self, lr: float, lambd: float, alpha: float, step: float) -> float:
        return lr / ((1 + lambd * lr * step) ** alpha)

    def _mu(self, step: float, t0: float) -> float:
        return 1 / max(1, step - t0)


class MuIgnoresT0ASGD(CorrectASGD):
    """Bug: mu = 1 / max(1, step) instead of 1 / max(1, step - t0): averaging starts at once."""

    def _mu(self, step: float, t0: float) -> float:
        return 1 / max(1, step)


class EtaStepBeforeIncrementASGD(CorrectASGD):
    """Bug: eta is decayed with the step count before its increment (step - 1)."""

    def _eta(self, lr: float, lambd: float, alpha: float, step: float) -> float:
        return lr / ((1 + lambd * lr * (step - 1)) ** alpha)


class AverageOldParamASGD(CorrectASGD):
    """Bug: ax averages the parameter from before this step's update instead of the updated one."""

    def _descend_and_average(self, param: Tensor, grad: Tensor, ax: Tensor, eta: float, mu: Tensor,
                             lambd: float) -> None:
        if mu.item() != 1:
            ax.add_(param.sub(ax).mul_(mu))
        else:
            ax.copy_(param)
        param.mul_(1 - lambd * eta)
        param.add_(grad, alpha=-eta)


MUTANTS: dict[str, str] = {
    "MuIgnoresT0ASGD": "asgd",
    "EtaStepBeforeIncrementASGD": "asgd",
    "AverageOldParamASGD": "asgd",
}
CONTROLS: dict[str, str] = {"CorrectASGD": "asgd"}
