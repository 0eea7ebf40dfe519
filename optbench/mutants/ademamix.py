"""AdEMAMix mutants (suite=ademamix, a candidate-only suite): an AdEMAMix written from the paper (Algorithm 1 and its
alpha and beta3 schedulers) as the control, and the bugs its ports are written with. Each mutant overrides one
part of the control's per-tensor update."""

from __future__ import annotations

import math

import torch

from optbench.mutants.handwritten import PyTorchOptimizerStyleStep

MUTANTS = {"AdEMAMixSlowBiasCorrected": "ademamix", "AdEMAMixWithL2Decay": "ademamix",
           "AdEMAMixAlphaNotWarmedUp": "ademamix", "AdEMAMixBeta3LinearWarmup": "ademamix"}
CONTROLS = {"CorrectAdEMAMix": "ademamix"}


class CorrectAdEMAMix(PyTorchOptimizerStyleStep):
    """Control: AdEMAMix as Pagliardini et al. 2024 state it (Algorithm 1: a bias-corrected fast EMA plus alpha times
    the slow EMA, which is not bias-corrected, over Adam's denominator; decoupled weight decay; alpha and beta3
    warmed up over t_alpha_beta3 steps), with maximize and the L2 / fixed decay modes; steps counted per tensor."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999, 0.9999), alpha=5.0, t_alpha_beta3=None, eps=1e-8,
                 weight_decay=0.0, weight_decouple=True, fixed_decay=False, maximize=False):
        if lr < 0 or len(betas) != 3 or not all(0.0 <= b < 1.0 for b in betas[:2]) or not 0.0 <= betas[2] <= 1.0:
            raise ValueError(f"Invalid lr or betas: {lr}, {betas}")
        if alpha < 0 or eps < 0 or weight_decay < 0 or (t_alpha_beta3 is not None and t_alpha_beta3 < 0):
            raise ValueError(f"Invalid alpha, eps, weight_decay or t_alpha_beta3: {alpha}, {eps}, {weight_decay}, "
                             f"{t_alpha_beta3}")
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "alpha": alpha, "t_alpha_beta3": t_alpha_beta3,
                                  "eps": eps, "weight_decay": weight_decay, "weight_decouple": weight_decouple,
                                  "fixed_decay": fixed_decay, "maximize": maximize})

    def init_state(self, p, group) -> dict:
        return {k: torch.zeros_like(p) for k in ("exp_avg", "exp_avg_sq", "exp_avg_slow")}

    def alpha(self, t, group):
        warmup = group["t_alpha_beta3"]
        return group["alpha"] if not warmup else min(t * group["alpha"] / warmup, group["alpha"])

    def beta3(self, t, group):
        beta1, _, beta3 = group["betas"]
        warmup = group["t_alpha_beta3"]
        if not warmup:  # None or 0: no warmup
            return beta3
        a, log1, log3 = t / warmup, math.log(beta1), math.log(beta3)
        return min(math.exp(log1 * log3 / ((1 - a) * log3 + a * log1)), beta3)

    def slow_correction(self, beta3, t):
        return 1.0

    def update(self, p, grad, state, group, t):
        beta1, beta2, _ = group["betas"]
        alpha, beta3 = self.alpha(t, group), self.beta3(t, group)
        exp_avg, exp_avg_sq, exp_avg_slow = state["exp_avg"], state["exp_avg_sq"], state["exp_avg_slow"]
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        exp_avg_slow.lerp_(grad, 1 - beta3)
        denom = (exp_avg_sq / (1 - beta2**t)).sqrt_().add_(group["eps"])
        mixed = exp_avg / (1 - beta1**t) + exp_avg_slow * (alpha / self.slow_correction(beta3, t))
        p.addcdiv_(mixed, denom, value=-group["lr"])


class AdEMAMixSlowBiasCorrected(CorrectAdEMAMix):
    """Bug: the slow EMA is bias-corrected like the fast one (m2 / (1 - beta3^t)), which the paper leaves out."""

    def slow_correction(self, beta3, t):
        return 1.0 - beta3**t


class AdEMAMixWithL2Decay(CorrectAdEMAMix):
    """Bug: weight decay added to the gradient (L2, through the moments) even in the decoupled mode."""

    def decayed(self, p, grad, group):
        return grad.add(p, alpha=group["weight_decay"]) if group["weight_decay"] != 0 else grad


class AdEMAMixAlphaNotWarmedUp(CorrectAdEMAMix):
    """Bug: only beta3 is warmed up; alpha is used at its full value from the first step."""

    def alpha(self, t, group):
        return group["alpha"]


class AdEMAMixBeta3LinearWarmup(CorrectAdEMAMix):
    """Bug: beta3 warmed up linearly from beta1 to beta3 instead of linearly in the slow EMA's half-life."""

    def beta3(self, t, group):
        beta1, _, beta3 = group["betas"]
        warmup = group["t_alpha_beta3"]
        return beta3 if not warmup else beta1 + min(t / warmup, 1.0) * (beta3 - beta1)
