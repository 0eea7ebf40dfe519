"""Muon mutants: deliberately wrong Muon optimizers optbench must catch, and a correct control.

The mutants share ``CorrectMuon``'s step: ``HandWrittenStep``'s single-tensor loop in the parameter's dtype that
follows torch's ``_single_tensor_muon`` op for op, Newton-Schulz in bfloat16 included (``foreach`` is
not a Muon argument). Each mutant overrides one small hook of that step, so the rest of the
arithmetic is, bit for bit, torch's.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.optim.optimizer import _to_scalar

from optbench.mutants.handwritten import HandWrittenStep


class CorrectMuon(HandWrittenStep, torch.optim.Muon):
    """Control: a correct hand-written single-tensor Muon step (no bug)."""

    def _check(self, param: Tensor) -> None:
        if torch.is_complex(param):
            raise RuntimeError("Muon does not support complex parameters")
        super()._check(param)

    def _prepare(self, param: Tensor, state: dict, group: dict) -> None:
        """As torch: a momentum buffer is made whenever the state lacks one (not only when empty)."""
        if "momentum_buffer" not in state:
            state["momentum_buffer"] = torch.zeros_like(param.grad, memory_format=torch.preserve_format)

    def _update(self, param: Tensor, grad: Tensor, state: dict, group: dict) -> None:
        """One Muon step of one parameter, as torch's ``_single_tensor_muon``."""
        if grad.ndim != 2:
            raise ValueError("Param gradient must be a 2D matrix")
        # torch keeps a Tensor lr as a 0-dim tensor (so 1 - lr * weight_decay is computed in its dtype)
        lr, momentum, weight_decay = _to_scalar(group["lr"]), group["momentum"], group["weight_decay"]
        buf = state["momentum_buffer"]
        self._momentum(buf, grad, momentum)
        update = self._nesterov(grad, buf, momentum, group["nesterov"])
        update = self._zeropower(update, group["ns_coefficients"], group["ns_steps"], group["eps"])
        adjusted_lr = self._adjust_lr(lr, group["adjust_lr_fn"], param.shape)
        self._weight_decay(param, lr, adjusted_lr, weight_decay)
        param.add_(update, alpha=-adjusted_lr)

    def _zeropower(self, grad: Tensor, coefficients, ns_steps: int, eps: float) -> Tensor:
        """torch's ``_zeropower_via_newtonschulz``: quintic Newton-Schulz, in bfloat16."""
        a, b, c = coefficients
        ortho = grad.bfloat16()
        if grad.size(0) > grad.size(1):
            ortho = ortho.T
        ortho.div_(ortho.norm().clamp(min=eps))
        for _ in range(ns_steps):
            gram = ortho @ ortho.T
            gram_update = torch.addmm(gram, gram, gram, beta=b, alpha=c)
            ortho = torch.addmm(ortho, gram_update, ortho, beta=a)
        if grad.size(0) > grad.size(1):
            ortho = ortho.T
        return ortho

    # The hooks below are correct here; each mutant overrides exactly one of them.

    def _momentum(self, buf: Tensor, grad: Tensor, momentum: float) -> None:
        """torch's momentum buffer (an EMA of the gradients), updated in place."""
        buf.lerp_(grad, 1 - momentum)

    def _nesterov(self, grad: Tensor, buf: Tensor, momentum: float, nesterov: bool) -> Tensor:
        return grad.lerp(buf, momentum) if nesterov else buf

    def _adjust_lr(self, lr, adjust_lr_fn, shape: torch.Size):
        rows, cols = shape[:2]
        if adjust_lr_fn is None or adjust_lr_fn == "original":
            ratio = math.sqrt(max(1, rows / cols))
        elif adjust_lr_fn == "match_rms_adamw":
            ratio = 0.2 * math.sqrt(max(rows, cols))
        else:
            ratio = 1.0
        return lr * ratio

    def _weight_decay(self, param: Tensor, lr, adjusted_lr, weight_decay: float) -> None:
        """Decoupled weight decay with the group's lr (not the shape-adjusted one)."""
        param.mul_(1 - lr * weight_decay)


class NesterovIgnoredMuon(CorrectMuon):
    """Bug: ignores nesterov=True: orthogonalizes the momentum buffer instead of g + mu * B."""

    def _nesterov(self, grad: Tensor, buf: Tensor, momentum: float, nesterov: bool) -> Tensor:
        return buf


class AdjustedLrWeightDecayMuon(CorrectMuon):
    """Bug: weight decay uses the shape-adjusted lr instead of the group's lr."""

    def _weight_decay(self, param: Tensor, lr, adjusted_lr, weight_decay: float) -> None:
        param.mul_(1 - adjusted_lr * weight_decay)


class InvertedAdjustLrMuon(CorrectMuon):
    """Bug: the "original" lr adjustment uses sqrt(max(1, cols / rows)), boosting wide matrices, not tall."""

    def _adjust_lr(self, lr, adjust_lr_fn, shape: torch.Size):
        rows, cols = shape[:2]
        if adjust_lr_fn is None or adjust_lr_fn == "original":
            return lr * (math.sqrt(max(1, cols / rows)) if rows else 1.0)
        return super()._adjust_lr(lr, adjust_lr_fn, shape)


class MatchRmsUsesMinMuon(CorrectMuon):
    """Bug: adjust_lr_fn="match_rms_adamw" scales lr by 0.2 * sqrt(min(rows, cols)) instead of max."""

    def _adjust_lr(self, lr, adjust_lr_fn, shape: torch.Size):
        if adjust_lr_fn == "match_rms_adamw":
            return lr * 0.2 * math.sqrt(min(shape[0], shape[1]))
        return super()._adjust_lr(lr, adjust_lr_fn, shape)


MUTANTS: dict[str, str] = {
    "NesterovIgnoredMuon": "muon",
    "AdjustedLrWeightDecayMuon": "muon",
    "InvertedAdjustLrMuon": "muon",
    "MatchRmsUsesMinMuon": "muon",
}
CONTROLS: dict[str, str] = {"CorrectMuon": "muon"}
