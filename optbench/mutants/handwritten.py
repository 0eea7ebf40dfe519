"""What the hand-written mutant optimizers share: ``scalar`` and ``HandWrittenStep``, their step loop."""

from __future__ import annotations

import torch
from torch import Tensor


def scalar(x):
    """A hyperparameter as a Python number (torch allows 1-element tensors for lr and betas)."""
    return x.item() if isinstance(x, Tensor) else x


def evaluated(closure):
    """The closure's loss, evaluated with gradients on (torch's step prologue); None without a closure."""
    if closure is None:
        return None
    with torch.enable_grad():
        return closure()


def decayed(p, grad, group):
    """The gradient the moments see under pytorch-optimizer's weight decay options: ``weight_decouple`` shrinks p
    here (p (1 - lr wd), or p (1 - wd) with ``fixed_decay``), else L2 adds wd p (a new tensor: the caller's gradient
    is never written)."""
    wd = group["weight_decay"]
    if wd == 0:
        return grad
    if group["weight_decouple"]:
        p.mul_(1 - wd * (1.0 if group["fixed_decay"] else group["lr"]))
        return grad
    return grad.add(p, alpha=wd)


class FromScratchStep(torch.optim.Optimizer):
    """The step of a mutant written from scratch (an algorithm torch lacks): the closure, then ``_step_groups``."""

    @torch.no_grad()
    def step(self, closure=None):
        loss = evaluated(closure)
        self._step_groups()
        return loss

    def _step_groups(self) -> None:
        raise NotImplementedError


class PyTorchOptimizerStyleStep(FromScratchStep):
    """The per-tensor loop of a from-scratch Adam-family mutant in pytorch-optimizer's conventions: each parameter with
    a gradient gets ``init_state`` (beside a float64 ``step``) when its state is empty, its step counted, its gradient
    negated under maximize and passed through ``decayed``, then ``update(p, grad, state, group, t)``."""

    def _step_groups(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = torch.tensor(0.0, dtype=torch.float64)
                    state.update(self.init_state(p, group))
                state["step"] += 1
                grad = -p.grad if group["maximize"] else p.grad
                self.update(p, self.decayed(p, grad, group), state, group, float(state["step"]))

    def decayed(self, p, grad, group):
        return decayed(p, grad, group)

    def init_state(self, p, group) -> dict:
        raise NotImplementedError

    def update(self, p, grad, state, group, t) -> None:
        raise NotImplementedError


class HandWrittenStep:
    """torch's per-parameter step loop, mixed in before the torch optimizer a class imitates.

    For each group and each parameter with a gradient: ``_check``, ``_init_state`` if its state is
    empty, ``_prepare``, then ``_update``. With ``_set_up_first`` every parameter of the group gets
    there before any is updated (torch's order in Adam, SparseAdam and Adafactor).
    """

    _set_up_first = False

    @torch.no_grad()
    def step(self, closure=None):
        loss = evaluated(closure)
        for group in self.param_groups:
            pending = []
            for param in group["params"]:
                if param.grad is None:
                    self._no_grad(param, group)
                    continue
                self._check(param)
                state = self._state(param, group)
                if len(state) == 0:
                    self._init_state(param, state, group)
                self._prepare(param, state, group)
                if self._set_up_first:
                    pending.append((param, state))
                else:
                    self._update(param, param.grad, state, group)
            for param, state in pending:
                self._update(param, param.grad, state, group)
        return loss

    def _no_grad(self, param: Tensor, group: dict) -> None:
        """A parameter without a gradient this step: nothing happens to it."""

    def _check(self, param: Tensor) -> None:
        """Refuse what torch refuses: by default sparse gradients."""
        if param.grad.is_sparse:
            name = next(c.__name__ for c in type(self).__mro__ if c.__module__.startswith("torch.optim"))
            raise RuntimeError(f"{name} does not support sparse gradients")

    def _state(self, param: Tensor, group: dict) -> dict:
        return self.state[param]

    def _init_state(self, param: Tensor, state: dict, group: dict) -> None:
        """Fill a parameter's empty state (on first sight)."""

    def _prepare(self, param: Tensor, state: dict, group: dict) -> None:
        """Per-parameter work before updating (before any update with ``_set_up_first``)."""

    def _update(self, param: Tensor, grad: Tensor, state: dict, group: dict) -> None:
        raise NotImplementedError
