"""AdamW mutants: deliberately wrong AdamW optimizers optbench must catch, and a correct control.

The mutants share ``CorrectAdamW``'s step: ``HandWrittenStep``'s single-tensor loop in the parameter's dtype that
follows torch's ``_single_tensor_adam`` op for op (``foreach``, ``fused``, ``capturable`` and
``differentiable`` are accepted and ignored). Each mutant overrides one small hook of that step, so
the rest of the arithmetic is, bit for bit, torch's. ``SwappedStateDictAdamW`` keeps torch's own step.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.optim.optimizer import _get_scalar_dtype

from optbench.mutants.handwritten import HandWrittenStep
from optbench.mutants.handwritten import scalar as _scalar


class CorrectAdamW(HandWrittenStep, torch.optim.AdamW):
    """Control: a correct hand-written single-tensor AdamW step (no bug)."""

    def _init_state(self, param: Tensor, state: dict, group: dict) -> None:
        state["step"] = torch.tensor(0.0, dtype=_get_scalar_dtype())
        state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        if group["amsgrad"]:
            state["max_exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)

    def _update(self, param: Tensor, grad: Tensor, state: dict, group: dict) -> None:
        """One AdamW step of one parameter, as torch's ``_single_tensor_adam`` (non-capturable)."""
        lr, eps, weight_decay = _scalar(group["lr"]), group["eps"], group["weight_decay"]
        step_t = state["step"]
        step_t += 1
        step = step_t.item()
        beta1, beta2 = self._betas(group, step)

        grad = self._signed_grad(grad, group)
        grad = self._weight_decay(param, grad, lr, weight_decay)

        exp_avg = state["exp_avg"]
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq = self._second_moment(state, grad, beta2)

        bias_correction1, bias_correction2 = self._bias_corrections(beta1, beta2, step)
        step_size = lr / bias_correction1

        if group["amsgrad"]:
            max_exp_avg_sq = state["max_exp_avg_sq"]
            torch.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
            second_moment = max_exp_avg_sq
        else:
            second_moment = exp_avg_sq
        denom = self._denom(second_moment, bias_correction2, eps)
        param.addcdiv_(exp_avg, denom, value=-step_size)

    # The hooks below are correct here; each mutant overrides exactly one of them.

    def _betas(self, group: dict, step: float) -> tuple[float, float]:
        beta1, beta2 = group["betas"]
        return _scalar(beta1), _scalar(beta2)

    def _signed_grad(self, grad: Tensor, group: dict) -> Tensor:
        return -grad if group["maximize"] else grad

    def _weight_decay(self, param: Tensor, grad: Tensor, lr: float, weight_decay: float) -> Tensor:
        """Decoupled weight decay: shrink the parameter, leave the gradient alone."""
        if weight_decay != 0:
            param.mul_(1 - lr * weight_decay)
        return grad

    def _second_moment(self, state: dict, grad: Tensor, beta2: float) -> Tensor:
        """Update ``exp_avg_sq`` in place and return it (in the parameter's dtype)."""
        exp_avg_sq = state["exp_avg_sq"]
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        return exp_avg_sq

    def _bias_corrections(self, beta1: float, beta2: float, step: float) -> tuple[float, float]:
        return 1 - beta1**step, 1 - beta2**step

    def _denom(self, second_moment: Tensor, bias_correction2: float, eps: float) -> Tensor:
        """sqrt(v_hat) + eps, computed as torch does: sqrt(v) / sqrt(bias_correction2) + eps."""
        return (second_moment.sqrt() / bias_correction2**0.5).add_(eps)


class EpsInsideSqrtAdamW(CorrectAdamW):
    """Bug: denom = sqrt(v_hat + eps) instead of sqrt(v_hat) + eps."""

    def _denom(self, second_moment: Tensor, bias_correction2: float, eps: float) -> Tensor:
        return (second_moment / bias_correction2).add_(eps).sqrt_()


class CoupledWeightDecayAdamW(CorrectAdamW):
    """Bug: L2 (coupled) weight decay, grad += weight_decay * param, instead of param *= 1 - lr * weight_decay."""

    def _weight_decay(self, param: Tensor, grad: Tensor, lr: float, weight_decay: float) -> Tensor:
        if weight_decay != 0:
            grad = grad.add(param, alpha=weight_decay)
        return grad


class BiasCorrectionOffByOneAdamW(CorrectAdamW):
    """Bug: both bias corrections use step + 1 instead of step."""

    def _bias_corrections(self, beta1: float, beta2: float, step: float) -> tuple[float, float]:
        return 1 - beta1 ** (step + 1), 1 - beta2 ** (step + 1)


class LateBugAdamW(CorrectAdamW):
    """Bug: from step 21 on, beta1 = 0.8 instead of the group's beta1 (correct for steps 1-20)."""

    def _betas(self, group: dict, step: float) -> tuple[float, float]:
        beta1, beta2 = super()._betas(group, step)
        return (0.8 if step > 20 else beta1), beta2


class DecayWithoutGradAdamW(CorrectAdamW):
    """Bug: decoupled weight decay is also applied to parameters whose grad is None."""

    def _no_grad(self, param: Tensor, group: dict) -> None:
        weight_decay = group["weight_decay"]
        if weight_decay != 0:
            param.mul_(1 - _scalar(group["lr"]) * weight_decay)


class MaximizeIgnoredAdamW(CorrectAdamW):
    """Bug: ignores maximize=True (always minimizes)."""

    def _signed_grad(self, grad: Tensor, group: dict) -> Tensor:
        return grad


class LowPrecisionStateAdamW(CorrectAdamW):
    """Bug: exp_avg_sq is kept (and updated) in float32 whatever the parameter's dtype."""

    def _init_state(self, param: Tensor, state: dict, group: dict) -> None:
        super()._init_state(param, state, group)
        state["exp_avg_sq"] = state["exp_avg_sq"].float()

    def _second_moment(self, state: dict, grad: Tensor, beta2: float) -> Tensor:
        exp_avg_sq = state["exp_avg_sq"].float()  # load_state_dict casts it to the param's dtype
        state["exp_avg_sq"] = exp_avg_sq
        grad32 = grad.float()
        exp_avg_sq.mul_(beta2).addcmul_(grad32, grad32, value=1 - beta2)
        return exp_avg_sq.to(grad.dtype)


class MasterMomentsCastOnLoadAdamW(CorrectAdamW):
    """Bug: keeps float32 moments for lower-precision parameters (as mixed-precision libraries do) but takes torch's
    load_state_dict, which casts them to the parameters' dtype: a resumed run goes on with bfloat16 moments."""

    def _init_state(self, param: Tensor, state: dict, group: dict) -> None:
        super()._init_state(param, state, group)
        for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
            if key in state and param.dtype in (torch.bfloat16, torch.float16):
                state[key] = state[key].float()

    def _update(self, param: Tensor, grad: Tensor, state: dict, group: dict) -> None:
        super()._update(param, grad.to(state["exp_avg"].dtype), state, group)


class SwappedStateDictAdamW(torch.optim.AdamW):
    """Bug: state_dict() saves exp_avg and exp_avg_sq under each other's key (torch's step, correct)."""

    def state_dict(self):
        saved = super().state_dict()
        swapped = {}
        for key, param_state in saved["state"].items():
            param_state = dict(param_state)  # torch's state_dict shares these dicts with self.state
            if "exp_avg" in param_state and "exp_avg_sq" in param_state:
                param_state["exp_avg"], param_state["exp_avg_sq"] = param_state["exp_avg_sq"], param_state["exp_avg"]
            swapped[key] = param_state
        saved["state"] = swapped
        return saved


MUTANTS: dict[str, str] = {
    "EpsInsideSqrtAdamW": "adamw",
    "CoupledWeightDecayAdamW": "adamw",
    "BiasCorrectionOffByOneAdamW": "adamw",
    "LateBugAdamW": "adamw",
    "DecayWithoutGradAdamW": "adamw",
    "MaximizeIgnoredAdamW": "adamw",
    "LowPrecisionStateAdamW": "adamw",
    "SwappedStateDictAdamW": "adamw",
    "MasterMomentsCastOnLoadAdamW": "adamw",
}
CONTROLS: dict[str, str] = {"CorrectAdamW": "adamw"}
# Below float64 a float32 second moment is as precise as the parameter's dtype or more: not a bug there.
EXISTS_AT = {"LowPrecisionStateAdamW": ("float64",), "MasterMomentsCastOnLoadAdamW": ("bfloat16", "float16")}
# Their steps are right: only a state_dict round-trip can see them (the second at the dtypes it exists at).
CAUGHT_BY = {"SwappedStateDictAdamW": "roundtrip", "MasterMomentsCastOnLoadAdamW": "roundtrip"}
SHOWS_BY = {"LateBugAdamW": 25}  # its bug starts at step 21
