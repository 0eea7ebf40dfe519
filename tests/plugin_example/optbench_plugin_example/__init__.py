"""Signum (Bernstein et al. 2018, signSGD with momentum), an optimizer torch.optim lacks:
m <- beta m + (1 - beta) g, p <- p - lr sign(m), with decoupled weight decay p <- p (1 - lr wd) first."""

import torch


class Signum(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, momentum=0.9, weight_decay=0.0):
        if lr < 0 or not 0.0 <= momentum < 1.0 or weight_decay < 0:
            raise ValueError(f"invalid lr, momentum or weight_decay: {lr}, {momentum}, {weight_decay}")
        super().__init__(params, {"lr": lr, "momentum": momentum, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = torch.tensor(0.0)
                    state["momentum_buffer"] = torch.zeros_like(p)
                state["step"] += 1
                buf = state["momentum_buffer"]
                buf.lerp_(p.grad, self._mix(group))
                p.mul_(1 - group["lr"] * group["weight_decay"])
                p.add_(buf.sign(), alpha=-group["lr"])
        return loss

    def _mix(self, group):
        return 1 - group["momentum"]


class BrokenSignum(Signum):
    """A deliberately wrong Signum: its momentum mixes in the gradient with beta instead of 1 - beta."""

    def _mix(self, group):
        return group["momentum"]
