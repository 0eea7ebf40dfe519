"""Lion mutants (suite=lion, a candidate-only suite): a Lion written from the paper as the control, and the bugs
sign-based optimizers are written with. Each mutant overrides one line of the control's per-tensor update."""

from __future__ import annotations

import torch

from optbench.mutants.handwritten import FromScratchStep

MUTANTS = {"LionWithL2Decay": "lion", "LionMomentumFirst": "lion", "LionInterpolatingWithBeta2": "lion"}
CONTROLS = {"CorrectLion": "lion", "CorrectLionMulAdd": "lion"}


class CorrectLion(FromScratchStep):
    """Control: Lion as Chen et al. 2023 (Algorithm 2) state it, with maximize."""

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0, maximize=False):
        if lr < 0 or not all(0.0 <= b <= 1.0 for b in betas):
            raise ValueError(f"Invalid lr or betas: {lr}, {betas}")
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "weight_decay": weight_decay, "maximize": maximize})

    def _step_groups(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    grad = -p.grad if group["maximize"] else p.grad
                    self.update(p, grad, self.state[p].setdefault("exp_avg", torch.zeros_like(p)), group)

    def update(self, p, grad, exp_avg, group):
        beta1, beta2 = group["betas"]
        p.mul_(1 - group["lr"] * group["weight_decay"])
        p.add_(exp_avg.lerp(grad, 1 - beta1).sign_(), alpha=-group["lr"])
        exp_avg.lerp_(grad, 1 - beta2)


class CorrectLionMulAdd(CorrectLion):
    """Control: the interpolation rounded as beta1 * m, then + (1 - beta1) * g (lion-pytorch's arithmetic), whose
    signs near 0 rounding decides otherwise than a lerp's."""

    def update(self, p, grad, exp_avg, group):
        beta1, beta2 = group["betas"]
        p.mul_(1 - group["lr"] * group["weight_decay"])
        p.add_(exp_avg.mul(beta1).add_(grad, alpha=1 - beta1).sign_(), alpha=-group["lr"])
        exp_avg.mul_(beta2).add_(grad, alpha=1 - beta2)


class LionWithL2Decay(CorrectLion):
    """Bug: weight decay added to the gradient (L2, inside the sign) instead of shrinking the parameter."""

    def update(self, p, grad, exp_avg, group):
        super().update(p, grad + group["weight_decay"] * p, exp_avg, {**group, "weight_decay": 0.0})


class LionMomentumFirst(CorrectLion):
    """Bug: the momentum is updated before the step and its sign taken (Adam's order), not the interpolation's."""

    def update(self, p, grad, exp_avg, group):
        beta1, beta2 = group["betas"]
        p.mul_(1 - group["lr"] * group["weight_decay"])
        exp_avg.lerp_(grad, 1 - beta2)
        p.add_(exp_avg.sign(), alpha=-group["lr"])


class LionInterpolatingWithBeta2(CorrectLion):
    """Bug: the sign is taken of the interpolation with beta2 (the momentum's own rate) instead of beta1."""

    def update(self, p, grad, exp_avg, group):
        beta1, beta2 = group["betas"]
        super().update(p, grad, exp_avg, {**group, "betas": (beta2, beta2)})
