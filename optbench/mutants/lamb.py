"""LAMB mutants (suite=lamb, a candidate-only suite): a LAMB written from the paper (Algorithm 2, one trust ratio
per tensor) as the control, and two bugs LAMB ports are written with."""

from __future__ import annotations

import torch

from optbench.mutants.handwritten import FromScratchStep

MUTANTS = {"LambDecayOutsideTrustRatio": "lamb", "LambOneRatioPerGroup": "lamb"}
CONTROLS = {"CorrectLamb": "lamb"}


class CorrectLamb(FromScratchStep):
    """Control: LAMB as You et al. 2020 state it (Algorithm 2: bias-corrected moments, wd x inside the direction,
    phi(z) = z, ratio 1 where a norm is 0), one trust ratio per parameter tensor."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0, weight_decouple=False,
                 grad_averaging=True, adam=False, maximize=False):
        if lr < 0 or not all(0.0 <= b < 1.0 for b in betas) or weight_decay < 0 or eps < 0:
            raise ValueError(f"Invalid lr, betas, weight_decay or eps: {lr}, {betas}, {weight_decay}, {eps}")
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
                                  "weight_decouple": weight_decouple, "grad_averaging": grad_averaging,
                                  "adam": adam, "maximize": maximize})

    def _step_groups(self):
        for group in self.param_groups:
            updates = []
            for p in group["params"]:
                if p.grad is not None:
                    updates.append((p, *self.direction(p, -p.grad if group["maximize"] else p.grad, group)))
            for p, x, u, ratio in self.ratios(updates, group):
                p.copy_(x - group["lr"] * ratio * u)

    def direction(self, p, grad, group):
        """(x after decoupled decay, u_t) of one tensor."""
        state = self.state[p]
        if not state:
            state.update(step=torch.tensor(0.0, dtype=torch.float64), exp_avg=torch.zeros_like(p),
                         exp_avg_sq=torch.zeros_like(p))
        state["step"] += 1
        t, (beta1, beta2), wd = state["step"].item(), group["betas"], group["weight_decay"]
        x = p * (1 - group["lr"] * wd) if group["weight_decouple"] else p.clone()
        state["exp_avg"].mul_(beta1).add_(grad, alpha=1 - beta1 if group["grad_averaging"] else 1.0)
        state["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        u = (state["exp_avg"] / (1 - beta1**t)) / ((state["exp_avg_sq"] / (1 - beta2**t)).sqrt() + group["eps"])
        return x, self.decayed(u, x, group)

    @staticmethod
    def decayed(u, x, group):
        return u if group["weight_decouple"] else u + group["weight_decay"] * x

    def ratios(self, updates, group):
        for p, x, u in updates:
            w, n = x.norm().item(), u.norm().item()
            yield p, x, u, (1.0 if group["adam"] or w == 0 or n == 0 else w / n)


class LambDecayOutsideTrustRatio(CorrectLamb):
    """Bug: the paper's coupled weight decay added after the trust ratio (x - lr (ratio u + wd x)), not inside u."""

    @staticmethod
    def decayed(u, x, group):
        return u

    def ratios(self, updates, group):
        for p, x, u, ratio in super().ratios(updates, group):
            if group["weight_decouple"]:
                yield p, x, u, ratio
            else:
                yield p, x, u + group["weight_decay"] * x / ratio if ratio else u, ratio


class LambOneRatioPerGroup(CorrectLamb):
    """Bug: one trust ratio for the whole param group (norms over all its tensors), not one per layer."""

    def ratios(self, updates, group):
        w = sum(x.norm().item() ** 2 for _, x, _ in updates) ** 0.5
        n = sum(u.norm().item() ** 2 for _, _, u in updates) ** 0.5
        ratio = 1.0 if group["adam"] or w == 0 or n == 0 else w / n
        for p, x, u in updates:
            yield p, x, u, ratio
