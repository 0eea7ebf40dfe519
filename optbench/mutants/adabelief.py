"""AdaBelief mutants (suite=adabelief, a candidate-only suite): an AdaBelief written from the paper (Algorithm 2) and
the options of the authors' package (decoupled decay, AMSGrad, RAdam's rectification) as the control, and the bugs
its ports are written with. Each mutant overrides one part of the control's per-tensor update."""

from __future__ import annotations

import math

import torch

from optbench.mutants.handwritten import PyTorchOptimizerStyleStep

MUTANTS = {"AdaBeliefStaleMean": "adabelief", "AdaBeliefWithoutBeliefEps": "adabelief",
           "AdaBeliefWithL2Decay": "adabelief", "AdaBeliefRectifyThreshold4": "adabelief"}
CONTROLS = {"CorrectAdaBelief": "adabelief"}


class CorrectAdaBelief(PyTorchOptimizerStyleStep):
    """Control: AdaBelief as Zhuang et al. 2020 state it (Algorithm 2: s = b2 s + (1 - b2)(g - m_t)^2 + eps, both
    moments bias-corrected, m_hat / (sqrt(s_hat) + eps)), with the authors' package's options: decoupled (or L2,
    or fixed) weight decay, AMSGrad (ams_bound), RAdam's rectification; steps counted per tensor."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-16, weight_decay=0.0, weight_decouple=True,
                 fixed_decay=False, rectify=False, n_sma_threshold=5, degenerated_to_sgd=True, ams_bound=False,
                 maximize=False):
        if lr < 0 or len(betas) != 2 or not all(0.0 <= b < 1.0 for b in betas) or weight_decay < 0 or eps < 0:
            raise ValueError(f"Invalid lr, betas, weight_decay or eps: {lr}, {betas}, {weight_decay}, {eps}")
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
                                  "weight_decouple": weight_decouple, "fixed_decay": fixed_decay, "rectify": rectify,
                                  "n_sma_threshold": n_sma_threshold, "degenerated_to_sgd": degenerated_to_sgd,
                                  "ams_bound": ams_bound, "maximize": maximize})

    def init_state(self, p, group) -> dict:
        keys = ("exp_avg", "exp_avg_var") + (("max_exp_avg_var",) if group["ams_bound"] else ())
        return {k: torch.zeros_like(p) for k in keys}

    def belief(self, grad, exp_avg, old_exp_avg, exp_avg_var, group):
        """s = b2 s + (1 - b2) (g - m_t)^2 + eps, in place."""
        residual = grad - exp_avg
        exp_avg_var.mul_(group["betas"][1]).addcmul_(residual, residual, value=1 - group["betas"][1])
        exp_avg_var.add_(group["eps"])

    def rectified(self, t, group):
        """RAdam's r_t, or None below the threshold rho_t < n_sma_threshold."""
        beta2 = group["betas"][1]
        rho_inf = 2 / (1 - beta2) - 1
        rho = rho_inf - 2 * t * beta2**t / (1 - beta2**t)
        if rho < group["n_sma_threshold"]:
            return None
        return math.sqrt((1 - beta2**t) * (rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho))

    def update(self, p, grad, state, group, t):
        beta1, beta2 = group["betas"]
        exp_avg, exp_avg_var = state["exp_avg"], state["exp_avg_var"]
        old_exp_avg = exp_avg.clone()
        exp_avg.lerp_(grad, 1 - beta1)
        self.belief(grad, exp_avg, old_exp_avg, exp_avg_var, group)
        second = exp_avg_var
        if group["ams_bound"]:
            second = torch.maximum(state["max_exp_avg_var"], exp_avg_var, out=state["max_exp_avg_var"])
        step_size = group["lr"] / (1 - beta1**t)
        if not group["rectify"]:
            denom = second.sqrt().div_(math.sqrt(1 - beta2**t)).add_(group["eps"])
            p.addcdiv_(exp_avg, denom, value=-step_size)
            return
        r = self.rectified(t, group)
        if r is not None:
            p.addcdiv_(exp_avg, second.sqrt().add_(group["eps"]), value=-step_size * r)
        elif group["degenerated_to_sgd"]:
            p.add_(exp_avg, alpha=-step_size)


class AdaBeliefStaleMean(CorrectAdaBelief):
    """Bug: the belief residual g - m is taken with the previous mean m_{t-1}, not the one just updated."""

    def belief(self, grad, exp_avg, old_exp_avg, exp_avg_var, group):
        super().belief(grad, old_exp_avg, old_exp_avg, exp_avg_var, group)


class AdaBeliefWithoutBeliefEps(CorrectAdaBelief):
    """Bug: eps left out of s (only in the denominator, as Adam has it): s = b2 s + (1 - b2) (g - m)^2."""

    def belief(self, grad, exp_avg, old_exp_avg, exp_avg_var, group):
        super().belief(grad, exp_avg, old_exp_avg, exp_avg_var, {**group, "eps": 0.0})


class AdaBeliefWithL2Decay(CorrectAdaBelief):
    """Bug: weight decay added to the gradient (L2, through both moments) even in the decoupled mode."""

    def decayed(self, p, grad, group):
        return grad.add(p, alpha=group["weight_decay"]) if group["weight_decay"] != 0 else grad


class AdaBeliefRectifyThreshold4(CorrectAdaBelief):
    """Bug: the rectified step taken from rho_t >= 4 (RAdam's paper's bound) instead of the threshold given (5)."""

    def rectified(self, t, group):
        return super().rectified(t, {**group, "n_sma_threshold": 4})
