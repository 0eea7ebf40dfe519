"""ScaledAdam (Daniel Povey's, icefall) as docs/scaled_adam.md specifies it, in two variants:
``ScaledAdam`` steps each parameter on its own, ``BatchedScaledAdam`` stacks same-(dtype, shape)
parameters (``kernels.batched``).

The math is written once, in ``update``, on stacked rows: ``p`` and ``g`` (B, *shape) and the state's
tensors with B as leading dim, every reduction per row. Both variants run the same step loop over
``kernels.batched.Batch`` units: the batched variant's are (chunks of) a bucket, stacked by
``torch.stack``, with slices of the bucket's stacked state; the per-tensor variant's are one parameter,
"stacked" by ``unsqueeze(0)`` (a view), with ``unsqueeze(0)`` views of its state. Both add ``delta`` to
the real parameters with the same ``_foreach_add_`` and share state creation and the group's clipping.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.optim import Optimizer

from .batched import Batch, BatchedOptimizer, add_back, checked_names

CLIPPING = "clipping"


def init_state(p: Tensor, size_update_period: int) -> dict:
    """A fresh state for stacked rows ``p`` (B, *shape), in p's dtype and device."""
    state = {"step": 0, "delta": torch.zeros_like(p), "exp_avg_sq": torch.zeros_like(p)}
    if p[0].numel() > 1:
        state["param_rms"] = (p * p).mean(tuple(range(1, p.dim()))).sqrt_()
        state["scale_exp_avg_sq"] = torch.zeros_like(state["param_rms"])
        state["scale_grads"] = p.new_zeros(p.shape[0], size_update_period)
    return state


def update(p: Tensor, g: Tensor, s: dict, t: int, group: dict) -> Tensor:
    """One step of ScaledAdam on stacked rows (the spec's "Tensor"/"Scalar" steps 1-6): updates the
    state tensors in ``s`` in place, leaves ``p`` alone and returns ``delta``, which the caller adds
    to the parameters. ``g`` is already clipped; ``t`` the steps taken before this one."""
    lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
    bc2 = 1 - beta2 ** (t + 1)
    delta = s["delta"].mul_(beta1)
    if p[0].numel() == 1:  # scalar: plain Adam on delta at lr * scalar_lr_scale
        exp_avg_sq = s["exp_avg_sq"].mul_(beta2).addcmul_(g, g, value=1 - beta2)
        denom = (exp_avg_sq / bc2).sqrt_().add_(eps)
        return delta.addcdiv_(g, denom, value=-(lr * group["scalar_lr_scale"] * (1 - beta1)))
    dims, rows = tuple(range(1, p.dim())), (-1,) + (1,) * (p.dim() - 1)
    period = group["size_update_period"]
    s["scale_grads"][:, t % period] = (p * g).sum(dims)
    if t % period == period - 1:
        s["param_rms"].copy_((p * p).mean(dims).sqrt_())
        if t > 0:
            _size_update(p, s, t, group, rows)
    exp_avg_sq = s["exp_avg_sq"].mul_(beta2).addcmul_(g, g, value=1 - beta2)
    v = exp_avg_sq / bc2 if bc2 < 0.99 else exp_avg_sq
    denom = (v.sqrt_() if v is not exp_avg_sq else v.sqrt()).add_(eps)
    coef = (lr * (1 - beta1)) * s["param_rms"].clamp(min=group["param_min_rms"])
    return delta.addcdiv_(g * coef.view(rows), denom, value=-1)


def _size_update(p: Tensor, s: dict, t: int, group: dict, rows: tuple) -> None:
    """Learn each row's log-scale (spec step 3b): a step along p itself, into delta."""
    beta1, beta2 = group["betas"]
    period, size_lr = group["size_update_period"], group["lr"] * group["scalar_lr_scale"]
    beta2c = beta2 ** period
    grads = s["scale_grads"]  # (B, K)
    exp_avg_sq = s["scale_exp_avg_sq"].mul_(beta2c).add_((grads * grads).mean(1), alpha=1 - beta2c)
    bc = 1 - beta2c ** ((t + 1) // period)
    scale_step = (-size_lr * math.sqrt(bc)) * grads.sum(1) / (exp_avg_sq.sqrt() + group["eps"])
    rms = s["param_rms"]
    scale_step.masked_fill_(rms < group["param_min_rms"], 0.0)
    scale_step.masked_fill_(rms > group["param_max_rms"], -size_lr * period)
    s["delta"].addcmul_(p, ((1 - beta1) * scale_step).view(rows))


class _ScaledAdamBase:
    """Constructor, step loop and clipping shared by both variants; ``_units`` tells them apart."""

    _update = staticmethod(update)  # the math (a subclass may wrap it: optbench/mutants/scaledadam.py)

    def __init__(self, params, lr=3e-2, clipping_scale=None, betas=(0.9, 0.98), scalar_lr_scale=0.1, eps=1e-8,
                 param_min_rms=1e-5, param_max_rms=3.0, scalar_max=10.0, size_update_period=4,
                 clipping_update_period=100, parameters_names=None):
        if lr < 0:
            raise ValueError(f"Invalid lr: {lr}")
        if not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"Invalid betas (each must be in [0, 1)): {betas}")
        if eps < 0:
            raise ValueError(f"Invalid eps: {eps}")
        if size_update_period < 1 or clipping_update_period < 1:
            raise ValueError(f"Invalid periods (each must be >= 1): {size_update_period}, {clipping_update_period}")
        if param_min_rms > param_max_rms:
            raise ValueError(f"param_min_rms {param_min_rms} > param_max_rms {param_max_rms}")
        if clipping_scale is not None and clipping_scale <= 0:
            raise ValueError(f"Invalid clipping_scale: {clipping_scale}")
        defaults = dict(lr=lr, clipping_scale=clipping_scale, betas=tuple(betas), scalar_lr_scale=scalar_lr_scale,
                        eps=eps, param_min_rms=param_min_rms, param_max_rms=param_max_rms, scalar_max=scalar_max,
                        size_update_period=size_update_period, clipping_update_period=clipping_update_period)
        super().__init__(params, defaults)
        self.parameters_names = checked_names(parameters_names, self.param_groups)

    @torch.no_grad()
    def step(self, closure=None):
        """One step of every param group (the spec's "One step of a param group")."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.is_complex():
                    raise RuntimeError("ScaledAdam does not support complex parameters")
                if p.grad is not None and p.grad.is_sparse:
                    raise RuntimeError("ScaledAdam does not support sparse gradients")
        for group in self.param_groups:
            units = self._units(group)
            if not units:
                continue
            clipping = self._clipping(group)
            c = self._clipping_factor(group, clipping, units)
            for u in units:
                p, grad = u.stack(u.params), u.stack(u.grads)
                delta = self._update(p, grad if c == 1.0 else grad * c, u.rows, u.state["step"], group)
                add_back(u.params, delta)
                if p[0].numel() == 1:
                    torch._foreach_clamp_min_(u.params, -group["scalar_max"])
                    torch._foreach_clamp_max_(u.params, group["scalar_max"])
            for state in {id(u.state): u.state for u in units}.values():  # a bucket may come in chunks
                state["step"] += 1
            clipping["step"] += 1
        return loss

    def _clipping(self, group: dict) -> dict:
        """The group's clipping bookkeeping, under its first parameter's state."""
        first = group["params"][0]
        state = self.state[first]
        if CLIPPING not in state:
            state[CLIPPING] = {"step": 0, "model_norms": first.new_zeros(group["clipping_update_period"]),
                               "threshold": None, "num_clipped": 0}
        return state[CLIPPING]

    @staticmethod
    def _clipping_factor(group: dict, clipping: dict, units: list[Batch]) -> float:
        """The spec's clipping factor c (step 1), from the raw gradients; records the model norm."""
        t, scale = clipping["step"], group["clipping_scale"]
        if scale is None or t == 0:
            return 1.0
        period, norms = group["clipping_update_period"], clipping["model_norms"]
        tensors, scalars = [], []  # per parameter: sum((grad * param_rms)^2), grad^2
        for u in units:
            grad = u.stack(u.grads)
            if grad[0].numel() > 1:
                rms = u.rows["param_rms"].view((-1,) + (1,) * (grad.dim() - 1))
                tensors.append((grad * rms).square().sum(tuple(range(1, grad.dim()))))
            else:
                scalars.append(grad.square().reshape(-1))
        tot_norm = (_ordered_sum(tensors, norms) + _ordered_sum(scalars, norms)).sqrt()
        norms[t % period] = tot_norm
        if t % period == 0:
            clipping["threshold"] = scale * norms.sort().values[min(period - 1, (period // 4) * 2)].item()
            clipping["num_clipped"] = 0
        if t < period or clipping["threshold"] is None:  # None: clipping switched on since the last period began
            return 1.0
        c = min(1.0, clipping["threshold"] / (tot_norm.item() + 1e-20))
        if c < 1.0:
            clipping["num_clipped"] += 1
        return c


def _ordered_sum(parts: list[Tensor], like: Tensor) -> Tensor:
    """The sum of per-parameter values in ascending order, in ``like``'s dtype: the same bits whatever
    order the parameters come in (a state_dict loaded into a reordered optimizer continues exactly)."""
    return torch.cat(parts).to(like.dtype).sort().values.sum() if parts else like.new_zeros(())


def _unsqueeze(tensors: list[Tensor]) -> Tensor:
    """One tensor "stacked" as a view: (1, *shape)."""
    return tensors[0].unsqueeze(0)


class ScaledAdam(_ScaledAdamBase, Optimizer):
    """ScaledAdam, each parameter stepped on its own: ``update`` on B = 1 views of it and its state."""

    def _units(self, group: dict) -> list[Batch]:
        out = []
        for p in group["params"]:
            if not p.numel():
                continue
            state = self.state[p]
            if "step" not in state:
                fresh = init_state(p.unsqueeze(0), group["size_update_period"])
                state.update({k: v[0] if isinstance(v, Tensor) else v for k, v in fresh.items()})
            rows = {k: v.unsqueeze(0) for k, v in state.items() if isinstance(v, Tensor)}
            out.append(Batch([p], [torch.zeros_like(p) if p.grad is None else p.grad], state, rows, _unsqueeze))
        return out

    def per_parameter_state(self) -> dict[Tensor, dict]:
        """``self.state`` without the group's clipping bookkeeping."""
        out = {}
        for p, state in self.state.items():
            own = {k: v for k, v in state.items() if k != CLIPPING}
            if own:
                out[p] = own
        return out


class BatchedScaledAdam(_ScaledAdamBase, BatchedOptimizer):
    """ScaledAdam stepping each group's same-(dtype, shape) parameters stacked, with stacked state under
    each bucket's first parameter (``kernels.batched``)."""

    def _units(self, group: dict) -> list[Batch]:
        period = group["size_update_period"]
        return self.batches(group, lambda p: init_state(p, period))
