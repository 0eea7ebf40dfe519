"""SGD mutants: deliberately wrong SGD optimizers optbench must catch, and a correct control.

The mutants share ``CorrectSGD``'s step: ``HandWrittenStep``'s single-tensor loop in the parameter's dtype that
follows torch's ``_single_tensor_sgd`` op for op, sparse gradients included (``foreach``, ``fused``
and ``differentiable`` are accepted and ignored). Each mutant overrides one small hook of that step,
so the rest of the arithmetic is, bit for bit, torch's.
"""

from __future__ import annotations

import torch
from torch import Tensor

from optbench.mutants.handwritten import HandWrittenStep
from optbench.mutants.handwritten import scalar as _scalar


class CorrectSGD(HandWrittenStep, torch.optim.SGD):
    """Control: a correct hand-written single-tensor SGD step (no bug)."""

    def _check(self, param: Tensor) -> None:
        """Sparse gradients are fine."""

    def _state(self, param: Tensor, group: dict) -> dict:
        """None up front: ``_update`` makes it, and only with momentum (torch keeps none without)."""
        return {}

    def _update(self, param: Tensor, grad: Tensor, state: dict, group: dict) -> None:
        """One SGD step of one parameter, as torch's ``_single_tensor_sgd`` (dense or sparse COO grad)."""
        lr, momentum = _scalar(group["lr"]), group["momentum"]
        grad = self._signed_grad(grad, group)
        grad = self._weight_decay(param, grad, group)
        if momentum != 0:  # torch keeps (and saves) a momentum buffer only with momentum
            grad = self._momentum(self.state[param], grad, momentum, group["dampening"], group["nesterov"])
        param.add_(grad, alpha=-lr)

    # The hooks below are correct here; each mutant overrides exactly one of them.

    def _signed_grad(self, grad: Tensor, group: dict) -> Tensor:
        return -grad if group["maximize"] else grad

    def _weight_decay(self, param: Tensor, grad: Tensor, group: dict) -> Tensor:
        """L2: grad + weight_decay * param (on the already negated gradient under maximize)."""
        weight_decay = group["weight_decay"]
        if weight_decay != 0:
            grad = grad.add(param, alpha=_scalar(weight_decay))
        return grad

    def _first_buffer(self, grad: Tensor, dampening: float) -> Tensor:
        """The momentum buffer on a parameter's first step: the gradient itself, undampened."""
        return grad.detach().clone()

    def _momentum(self, state: dict, grad: Tensor, momentum: float, dampening: float, nesterov: bool) -> Tensor:
        """b <- momentum * b + (1 - dampening) * g (in place); the step direction is b, or g + momentum * b."""
        buf = state.get("momentum_buffer")
        if buf is None:
            buf = self._first_buffer(grad, dampening)
            state["momentum_buffer"] = buf
        else:
            buf.mul_(momentum).add_(grad, alpha=1 - dampening)
        return grad.add(buf, alpha=momentum) if nesterov else buf


class NesterovOldBufferSGD(CorrectSGD):
    """Bug: Nesterov looks ahead with the buffer from before this step's update (g + momentum * b_{t-1})."""

    def _momentum(self, state: dict, grad: Tensor, momentum: float, dampening: float, nesterov: bool) -> Tensor:
        buf = state.get("momentum_buffer")
        if buf is None:
            buf = self._first_buffer(grad, dampening)
            state["momentum_buffer"] = buf
            old = buf
        else:
            old = buf.clone()
            buf.mul_(momentum).add_(grad, alpha=1 - dampening)
        return grad.add(old, alpha=momentum) if nesterov else buf


class DampenedFirstStepSGD(CorrectSGD):
    """Bug: dampening is applied on the first step too (b_1 = (1 - dampening) * g instead of g)."""

    def _first_buffer(self, grad: Tensor, dampening: float) -> Tensor:
        return grad.detach().mul(1 - dampening)


class DecayIgnoredUnderMaximizeSGD(CorrectSGD):
    """Bug: weight decay is skipped when maximize=True."""

    def _weight_decay(self, param: Tensor, grad: Tensor, group: dict) -> Tensor:
        if group["maximize"]:
            return grad
        return super()._weight_decay(param, grad, group)


class WritesGradSGD(CorrectSGD):
    """Bug: adds the L2 term into the caller's gradient in place (the parameters are right; p.grad is not)."""

    def _weight_decay(self, param: Tensor, grad: Tensor, group: dict) -> Tensor:
        weight_decay = group["weight_decay"]
        if weight_decay != 0:
            grad = grad.add_(param, alpha=_scalar(weight_decay))
        return grad


class PromotesParamSGD(CorrectSGD):
    """Bug: turns a parameter into float64 after its step (its values stay right; its dtype does not)."""

    def _update(self, param: Tensor, grad: Tensor, state: dict, group: dict) -> None:
        super()._update(param, grad, state, group)
        param.data = param.data.double()


class FirstGroupOnlySGD(CorrectSGD):
    """Bug: steps the first param group only (a loop over param_groups[0]): the other groups never move."""

    def _update(self, param: Tensor, grad: Tensor, state: dict, group: dict) -> None:
        if group is self.param_groups[0]:
            super()._update(param, grad, state, group)


MUTANTS: dict[str, str] = {
    "NesterovOldBufferSGD": "sgd",
    "DampenedFirstStepSGD": "sgd",
    "DecayIgnoredUnderMaximizeSGD": "sgd",
    "WritesGradSGD": "sgd",
    "PromotesParamSGD": "sgd",
    "FirstGroupOnlySGD": "sgd",
}
CONTROLS: dict[str, str] = {"CorrectSGD": "sgd"}
EXISTS_AT = {"PromotesParamSGD": ("float32", "bfloat16", "float16")}  # a float64 parameter stays float64
