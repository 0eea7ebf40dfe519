"""Adan mutants (suite=adan, a candidate-only suite): an Adan written from the official implementation's
conventions as the control, and two bugs Adan ports are written with. Each mutant overrides one part of the
control's per-tensor update."""

from __future__ import annotations

import torch

from optbench.mutants.handwritten import FromScratchStep

MUTANTS = {"AdanWithoutBiasCorrection": "adan", "AdanStalePreviousGradient": "adan"}
CONTROLS = {"CorrectAdan": "adan"}


class CorrectAdan(FromScratchStep):
    """Control: Adan (Xie et al. 2022) as its official code runs it: moments from 0, bias-corrected with the
    group's step count, the first gradient difference 0, Algorithm 1's proximal weight decay (no_prox: decoupled)."""

    def __init__(self, params, lr=1e-3, betas=(0.98, 0.92, 0.99), eps=1e-8, weight_decay=0.0, no_prox=False,
                 maximize=False):
        if lr < 0 or not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"Invalid lr or betas: {lr}, {betas}")
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
                                  "no_prox": no_prox, "maximize": maximize})

    def _step_groups(self):
        for group in self.param_groups:
            group["step"] = group.get("step", 0) + 1
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                grad = -p.grad if group["maximize"] else p.grad
                if not state:
                    state.update({k: torch.zeros_like(p) for k in ("exp_avg", "exp_avg_sq", "exp_avg_diff")})
                    state["neg_pre_grad"] = -grad.clone()  # the first difference is 0
                state["step"] = torch.tensor(float(group["step"]), dtype=torch.float64)
                self.update(p, grad, state, group)

    def corrections(self, group):
        k = group["step"]
        return tuple(1.0 - b**k for b in group["betas"])

    def update(self, p, grad, state, group):
        (beta1, beta2, beta3), lr, wd = group["betas"], group["lr"], group["weight_decay"]
        diff = grad + state["neg_pre_grad"]
        state["exp_avg"].mul_(beta1).add_(grad, alpha=1 - beta1)
        state["exp_avg_diff"].mul_(beta2).add_(diff, alpha=1 - beta2)
        nesterov = grad + beta2 * diff
        state["exp_avg_sq"].mul_(beta3).addcmul_(nesterov, nesterov, value=1 - beta3)
        state["neg_pre_grad"] = -grad.clone()
        bc1, bc2, bc3 = self.corrections(group)
        denom = (state["exp_avg_sq"] / bc3).sqrt_().add_(group["eps"])
        direction = (state["exp_avg"] / bc1 + beta2 * state["exp_avg_diff"] / bc2) / denom
        self.apply(p, direction, lr, wd, group["no_prox"])

    @staticmethod
    def apply(p, direction, lr, wd, no_prox):
        if no_prox:
            p.mul_(1 - lr * wd).sub_(lr * direction)
        else:
            p.sub_(lr * direction).div_(1 + lr * wd)


class AdanWithoutBiasCorrection(CorrectAdan):
    """Bug: Algorithm 1's update as printed (no bias correction) on the official code's zero-initialised moments."""

    def corrections(self, group):
        return (1.0, 1.0, 1.0)


class AdanStalePreviousGradient(CorrectAdan):
    """Bug: the previous gradient is never updated after the first step, so every difference is g_k - g_1."""

    def update(self, p, grad, state, group):
        first = state["neg_pre_grad"].clone()
        super().update(p, grad, state, group)
        state["neg_pre_grad"] = first
