"""SparseAdam mutants: deliberately wrong SparseAdam optimizers optbench must catch, and a correct control.

The mutants share ``CorrectSparseAdam``'s step: ``HandWrittenStep``'s single-tensor loop in the parameter's dtype
that follows torch's ``SparseAdam.step`` and ``_functional.sparse_adam`` op for op (every parameter
with a gradient counts a step before any is updated; the gradient is coalesced, its stored entries,
explicit zeros among them, are updated; one with no entries leaves everything but the step alone;
a Tensor lr stays a Tensor, as torch keeps it). Each mutant overrides one small hook of that step,
so the rest of the arithmetic is, bit for bit, torch's.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.optim.optimizer import _to_scalar

from optbench.mutants.handwritten import HandWrittenStep


class CorrectSparseAdam(HandWrittenStep, torch.optim.SparseAdam):
    """Control: a correct hand-written single-tensor SparseAdam step (no bug)."""

    _set_up_first = True  # every parameter with a gradient counts its step before any is updated

    def _check(self, param: Tensor) -> None:
        if not param.grad.is_sparse:
            raise RuntimeError("SparseAdam does not support dense gradients, please consider Adam instead")

    def _init_state(self, param: Tensor, state: dict, group: dict) -> None:
        state["step"] = 0  # a Python int, as torch keeps it
        state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)

    def _update(self, param: Tensor, grad: Tensor, state: dict, group: dict) -> None:
        """One SparseAdam step of one parameter, as torch's ``_functional.sparse_adam``."""
        lr, eps = _to_scalar(group["lr"]), group["eps"]
        beta1, beta2 = group["betas"]
        grad = self._signed_grad(grad, group)
        grad = self._coalesce(grad)
        grad_indices = grad._indices()
        grad_values = grad._values()
        if grad_values.numel() == 0:
            return  # no entries: nothing but the step changes
        size = grad.size()
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]

        def make_sparse(values: Tensor) -> Tensor:
            constructor = grad.new
            if grad_indices.dim() == 0 or values.dim() == 0:
                return constructor().resize_as_(grad)
            return constructor(grad_indices, values, size)

        # m <- m + (1 - beta1) * (g - m) and v <- v + (1 - beta2) * (g * g - v), on the stored entries only
        old_exp_avg_values = exp_avg.sparse_mask(grad)._values()
        exp_avg_update_values = grad_values.sub(old_exp_avg_values).mul_(1 - beta1)
        exp_avg.add_(make_sparse(exp_avg_update_values))
        old_exp_avg_sq_values = exp_avg_sq.sparse_mask(grad)._values()
        exp_avg_sq_update_values = grad_values.pow(2).sub_(old_exp_avg_sq_values).mul_(1 - beta2)
        exp_avg_sq.add_(make_sparse(exp_avg_sq_update_values))

        numer = exp_avg_update_values.add_(old_exp_avg_values)
        exp_avg_sq_update_values.add_(old_exp_avg_sq_values)
        denom = exp_avg_sq_update_values.sqrt_().add_(eps)
        del exp_avg_update_values, exp_avg_sq_update_values

        step = self._bias_step(state)
        bias_correction1 = 1 - beta1**step
        bias_correction2 = 1 - beta2**step
        step_size = lr * math.sqrt(bias_correction2) / bias_correction1
        param.add_(make_sparse(-step_size * numer.div_(denom)))

    # The hooks below are correct here; each mutant overrides exactly one of them.

    def _prepare(self, param: Tensor, state: dict, group: dict) -> None:
        """Every gradient counts a step, also one with no entries."""
        state["step"] += 1

    def _signed_grad(self, grad: Tensor, group: dict) -> Tensor:
        return -grad if group.get("maximize", False) else grad

    def _coalesce(self, grad: Tensor) -> Tensor:
        """Sum duplicate indices: the update is non-linear, so each index must appear once."""
        return grad.coalesce()

    def _bias_step(self, state: dict) -> int:
        """The step the bias corrections use: this parameter's own."""
        return state["step"]


class UncoalescedSparseAdam(CorrectSparseAdam):
    """Bug: duplicate indices are not summed first (coalesce skipped): each entry's update is applied on its own."""

    def _coalesce(self, grad: Tensor) -> Tensor:
        return grad


class StoredZerosSkippedSparseAdam(CorrectSparseAdam):
    """Bug: explicitly stored zeros are dropped from the gradient, so their moments and parameters never move."""

    def _coalesce(self, grad: Tensor) -> Tensor:
        grad = grad.coalesce()
        values = grad._values()
        keep = values.ne(0).flatten(1).any(dim=1) if values.dim() > 1 else values.ne(0)
        return torch.sparse_coo_tensor(grad._indices()[:, keep], values[keep], grad.size()).coalesce()


class StepOnlyWithEntriesSparseAdam(CorrectSparseAdam):
    """Bug: the step is counted only when the gradient has entries (an empty sparse gradient skips it)."""

    def _prepare(self, param: Tensor, state: dict, group: dict) -> None:
        if param.grad._nnz() > 0:
            state["step"] += 1


class GlobalStepSparseAdam(CorrectSparseAdam):
    """Bug: bias corrections use a global step (the most any parameter has counted), not the parameter's own."""

    def _bias_step(self, state: dict) -> int:
        return max(s["step"] for s in self.state.values() if "step" in s)


MUTANTS: dict[str, str] = {
    "UncoalescedSparseAdam": "sparseadam",
    "StoredZerosSkippedSparseAdam": "sparseadam",
    "StepOnlyWithEntriesSparseAdam": "sparseadam",
    "GlobalStepSparseAdam": "sparseadam",
}
CONTROLS: dict[str, str] = {"CorrectSparseAdam": "sparseadam"}
