"""Lion (Chen et al., 2023, "Symbolic Discovery of Optimization Algorithms"), a small torch optimizer
torch.optim does not have, written the way a third-party author would."""

import torch


class Lion(torch.optim.Optimizer):
    def __init__(self, params, lr: float = 1e-4, betas: tuple[float, float] = (0.9, 0.99), weight_decay: float = 0.0):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"Invalid betas: {betas}")
        super().__init__(params, {"lr": lr, "betas": betas, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p)
                exp_avg = state["exp_avg"]
                p.mul_(1 - group["lr"] * group["weight_decay"])
                p.add_(exp_avg.lerp(p.grad, 1 - beta1).sign_(), alpha=-group["lr"])
                exp_avg.lerp_(p.grad, 1 - beta2)
        return loss


class LionWithoutDecoupledDecay(Lion):
    """A wrong Lion: weight decay added to the gradient (L2) instead of shrinking the parameter."""

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None and group["weight_decay"]:
                    p.grad.add_(p, alpha=group["weight_decay"])
        saved = [g["weight_decay"] for g in self.param_groups]
        for g in self.param_groups:
            g["weight_decay"] = 0.0
        try:
            return super().step(closure)
        finally:
            for g, wd in zip(self.param_groups, saved):
                g["weight_decay"] = wd
