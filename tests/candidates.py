"""Candidates that misbehave as a user's optimizer might: optbench must never report them as passing."""

import torch


class BrokenConstructorSGD(torch.optim.SGD):
    """Raises when built with anything."""

    def __init__(self, params, **kwargs):
        raise RuntimeError("this optimizer refuses to be built")


class BrokenStepSGD(torch.optim.SGD):
    """Builds, then raises on the first step."""

    def step(self, closure=None):
        raise RuntimeError("step exploded")


class NoMaximizeSGD(torch.optim.SGD):
    """A correct SGD whose constructor has no ``maximize`` (it always minimizes)."""

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, foreach=None):
        super().__init__(params, lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                         nesterov=nesterov, foreach=foreach)


class NeedsScaleSGD(torch.optim.SGD):
    """A correct SGD with a required extra constructor argument (``candidate_kwargs='{scale: 1.0}'``)."""

    def __init__(self, params, *, scale, **kwargs):
        if scale != 1.0:
            raise ValueError("scale must be 1.0")
        super().__init__(params, **kwargs)


class CachedLrSGD(torch.optim.SGD):
    """Bug: reads each group's lr once, at construction, so an lr scheduler has no effect."""

    def __init__(self, params, **kwargs):
        super().__init__(params, **kwargs)
        self._lrs = [float(group["lr"]) for group in self.param_groups]

    @torch.no_grad()
    def step(self, closure=None):
        current = [group["lr"] for group in self.param_groups]
        for group, lr in zip(self.param_groups, self._lrs):
            group["lr"] = lr
        try:
            return super().step(closure)
        finally:
            for group, lr in zip(self.param_groups, current):
                group["lr"] = lr
