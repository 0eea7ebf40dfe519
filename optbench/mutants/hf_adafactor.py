"""Hugging Face / fairseq Adafactor mutants (suite=hf_adafactor, a candidate-only suite): the documented algorithm
written from the paper and transformers' docstring as the control, and two bugs Adafactor ports are written
with."""

from __future__ import annotations

import math

import torch

from optbench.mutants.handwritten import FromScratchStep

MUTANTS = {"AdafactorScalarSecondMoment": "hf_adafactor", "AdafactorUnscaledRelativeStep": "hf_adafactor"}
CONTROLS = {"CorrectHFAdafactor": "hf_adafactor"}


def _rms(x: torch.Tensor) -> float:
    return (x.double().norm() / math.sqrt(x.numel())).item()


class CorrectHFAdafactor(FromScratchStep):
    """Control: relative step min(1e-2 (or 1e-6 t), 1/sqrt(t)) scaled by max(eps2, RMS(x)), a second moment
    factored over the last two dims (row and column means of g^2 + eps1), update clipping, an optional first
    moment of the clipped update, weight decay by weight_decay * alpha_t."""

    def __init__(self, params, lr=None, eps=(1e-30, 1e-3), clip_threshold=1.0, decay_rate=-0.8, beta1=None,
                 weight_decay=0.0, scale_parameter=True, relative_step=True, warmup_init=False):
        if lr is not None and relative_step:
            raise ValueError("Cannot combine manual lr and relative_step=True options")
        if warmup_init and not relative_step:
            raise ValueError("warmup_init=True requires relative_step=True")
        super().__init__(params, {"lr": lr, "eps": tuple(eps), "clip_threshold": clip_threshold,
                                  "decay_rate": decay_rate, "beta1": beta1, "weight_decay": weight_decay,
                                  "scale_parameter": scale_parameter, "relative_step": relative_step,
                                  "warmup_init": warmup_init})

    @staticmethod
    def step_size(group, t, param_rms):
        if group["relative_step"]:
            rho = min(1e-6 * t if group["warmup_init"] else 1e-2, 1.0 / math.sqrt(t))
        else:
            rho = group["lr"]
        return max(group["eps"][1], param_rms) * rho if group["scale_parameter"] else rho

    @staticmethod
    def factors(s):
        return s.mean(dim=-1), s.mean(dim=-2)  # rows (over the columns), columns (over the rows)

    def _step_groups(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    self.update(p, p.grad, self.state[p], group)

    def update(self, p, grad, state, group):
        factored = p.dim() >= 2
        if not state:
            state["step"] = torch.tensor(0.0, dtype=torch.float64)
            if group["beta1"] is not None:
                state["exp_avg"] = torch.zeros_like(p)
            if factored:
                state["exp_avg_sq_row"] = torch.zeros(p.shape[:-1], dtype=p.dtype)
                state["exp_avg_sq_col"] = torch.zeros(p.shape[:-2] + p.shape[-1:], dtype=p.dtype)
            else:
                state["exp_avg_sq"] = torch.zeros_like(p)
        state["step"] += 1
        t = state["step"].item()
        state["RMS"] = torch.tensor(_rms(p), dtype=torch.float64)
        alpha = self.step_size(group, t, state["RMS"].item())
        beta2t = 1.0 - t ** group["decay_rate"]
        s = grad * grad + group["eps"][0]
        if factored:
            row_mean, col_mean = self.factors(s)
            row = state["exp_avg_sq_row"].mul_(beta2t).add_(row_mean, alpha=1 - beta2t)
            col = state["exp_avg_sq_col"].mul_(beta2t).add_(col_mean, alpha=1 - beta2t)
            r = (row / row.mean(dim=-1, keepdim=True)).rsqrt().unsqueeze(-1)
            u = grad * r * col.unsqueeze(-2).rsqrt()
        else:
            u = grad * state["exp_avg_sq"].mul_(beta2t).add_(s, alpha=1 - beta2t).rsqrt()
        u = u / max(1.0, _rms(u) / group["clip_threshold"]) * alpha
        if group["beta1"] is not None:
            u = state["exp_avg"].mul_(group["beta1"]).add_(u, alpha=1 - group["beta1"])
        if group["weight_decay"] != 0:
            p.add_(p, alpha=-group["weight_decay"] * alpha)
        p.sub_(u)


class AdafactorScalarSecondMoment(CorrectHFAdafactor):
    """Bug: the factored second moment collapsed to one value per matrix (both factors replaced by their mean),
    losing the row and column structure the factorisation exists to keep."""

    @staticmethod
    def factors(s):
        rows, cols = CorrectHFAdafactor.factors(s)
        return rows.mean(-1, keepdim=True).expand_as(rows), cols.mean(-1, keepdim=True).expand_as(cols)


class AdafactorUnscaledRelativeStep(CorrectHFAdafactor):
    """Bug: scale_parameter ignored: the relative step is not multiplied by the parameter's RMS."""

    @staticmethod
    def step_size(group, t, param_rms):
        return CorrectHFAdafactor.step_size({**group, "scale_parameter": False}, t, param_rms)
