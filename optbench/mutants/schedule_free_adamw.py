"""Schedule-Free AdamW mutants (suite=schedule_free_adamw, a candidate-only suite): the method written from the
paper and the schedulefree package's documented form as the control, and two bugs ports of it are written with."""

from __future__ import annotations

import torch

from optbench.mutants.handwritten import FromScratchStep

MUTANTS = {"ScheduleFreeUniformAverage": "schedule_free_adamw", "ScheduleFreeDecayAtZ": "schedule_free_adamw"}
CONTROLS = {"CorrectScheduleFreeAdamW": "schedule_free_adamw"}


class CorrectScheduleFreeAdamW(FromScratchStep):
    """Control: Schedule-Free AdamW in train mode (the parameter holds y = (1 - beta1) z + beta1 x), the average's
    weights t^r lr_max^power, linear warmup, the second moment bias-corrected in the denominator, decay at y."""

    def __init__(self, params, lr=0.0025, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, warmup_steps=0, r=0.0,
                 weight_lr_power=2.0):
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
                                  "warmup_steps": warmup_steps, "r": r, "weight_lr_power": weight_lr_power})

    def _step_groups(self):
        for group in self.param_groups:
            k = group["k"] = group.get("k", 0) + 1
            beta1, beta2 = group["betas"]
            lr = group["lr"] * (k / group["warmup_steps"] if k <= group["warmup_steps"] else 1.0)
            group["lr_max"] = max(group.get("lr_max", -1.0), lr)
            c = self.average_weight(group, k)
            for y in group["params"]:
                if y.grad is None:
                    continue
                state = self.state[y]
                if not state:
                    state.update(z=y.detach().clone(), exp_avg_sq=torch.zeros_like(y))
                z, v = state["z"], state["exp_avg_sq"]
                v.mul_(beta2).addcmul_(y.grad, y.grad, value=1 - beta2)
                u = y.grad / ((v / (1 - beta2**k)).sqrt() + group["eps"]) + group["weight_decay"] * self.decay_at(y, z)
                y.lerp_(z, c).add_(u, alpha=-lr * (1 - beta1 * (1 - c)))
                z.sub_(u, alpha=lr)
                # the group's counters as this tensor last saw them, kept as the reference keeps them
                state.update(step=torch.tensor(float(k), dtype=torch.float64), weight_sum=group["weight_sum"],
                             lr_max=group["lr_max"])

    @staticmethod
    def average_weight(group, k):
        weight = k ** group["r"] * group["lr_max"] ** group["weight_lr_power"]
        group["weight_sum"] = group.get("weight_sum", 0.0) + weight
        return weight / group["weight_sum"] if group["weight_sum"] else 0.0

    @staticmethod
    def decay_at(y, z):
        return y


class ScheduleFreeUniformAverage(CorrectScheduleFreeAdamW):
    """Bug: x is the uniform average of the z iterates (c = 1/t), ignoring the lr_max-weighted (warmup) weights."""

    @staticmethod
    def average_weight(group, k):
        CorrectScheduleFreeAdamW.average_weight(group, k)
        return 1.0 / k


class ScheduleFreeDecayAtZ(CorrectScheduleFreeAdamW):
    """Bug: weight decay taken at z (the base iterate) instead of at y, where the gradient is evaluated."""

    @staticmethod
    def decay_at(y, z):
        return z
