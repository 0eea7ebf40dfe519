"""SparseAdam as torch.optim.SparseAdam documents it: Adam masked to the gradient's stored entries.

The gradient is given in COO form as ``(indices, values)`` (see ``sparse``): duplicates are summed
first (torch coalesces), explicitly stored zeros are entries like any other. Only those entries of
the moments and the parameter change; ``step`` counts every call, also one with no entries.
No weight decay; ``maximize`` flips the gradient.
"""

import numpy as np

from .sparse import coalesce


def init(param: np.ndarray, hp: dict) -> dict:
    return {"step": np.float64(0.0), "exp_avg": np.zeros_like(param), "exp_avg_sq": np.zeros_like(param)}


def update(param: np.ndarray, grad: tuple, state: dict, hp: dict) -> tuple[np.ndarray, dict]:
    lr, (beta1, beta2), eps = hp["lr"], hp["betas"], hp["eps"]
    indices, values = grad
    if np.asarray(indices).shape[0]:
        indices, values = coalesce(indices, values)
    step = state["step"] + 1.0
    new_state = {"step": step, "exp_avg": state["exp_avg"].copy(), "exp_avg_sq": state["exp_avg_sq"].copy()}
    if values.size == 0:
        return param, new_state
    g = -values if hp.get("maximize", False) else values
    if indices.shape[0] == 0:  # a scalar parameter: sparse_dim 0, one (coalesced) entry
        g = g.sum(axis=0)
    at = tuple(indices)
    exp_avg = state["exp_avg"][at] + (g - state["exp_avg"][at]) * (1.0 - beta1)
    exp_avg_sq = state["exp_avg_sq"][at] + (g * g - state["exp_avg_sq"][at]) * (1.0 - beta2)
    new_state["exp_avg"][at] = exp_avg
    new_state["exp_avg_sq"][at] = exp_avg_sq
    step_size = lr * np.sqrt(1.0 - beta2**step) / (1.0 - beta1**step)
    new_param = param.copy()
    new_param[at] = param[at] - step_size * exp_avg / (np.sqrt(exp_avg_sq) + eps)
    return new_param, new_state
