"""Adagrad (Duchi et al., 2011) as torch.optim.Adagrad documents it: lr_decay, L2 weight_decay, maximize.

``sum`` starts at ``initial_accumulator_value``; at step t: clr = lr / (1 + (t - 1) * lr_decay),
g += weight_decay * param, sum += g^2, param -= clr * g / (sqrt(sum) + eps). A sparse ``(indices,
values)`` gradient is coalesced first; only its stored entries (explicit zeros too) change, and
weight_decay != 0 with it raises, as in torch.
"""

import numpy as np

from .sparse import coalesce

EAGER_STATE = True  # torch documents (and builds) the accumulator at construction, for every parameter


def init(param: np.ndarray, hp: dict) -> dict:
    return {"step": np.float64(0.0), "sum": np.full_like(param, hp.get("initial_accumulator_value", 0.0))}


def update(param: np.ndarray, grad, state: dict, hp: dict) -> tuple[np.ndarray, dict]:
    lr, eps = hp["lr"], hp.get("eps", 1e-10)
    lr_decay, weight_decay = hp.get("lr_decay", 0.0), hp.get("weight_decay", 0.0)
    maximize = hp.get("maximize", False)
    step = state["step"] + 1.0
    clr = lr / (1.0 + (step - 1.0) * lr_decay)

    if isinstance(grad, tuple):
        if weight_decay != 0:
            raise ValueError("weight_decay option is not compatible with sparse gradients")
        indices, values = grad
        if np.asarray(indices).shape[0] == 0:  # sparse_dim 0 (a 0-dim parameter): entries sum to one
            values = np.asarray(values, dtype=np.float64)
            if values.shape[0] == 0:
                return param, {"step": step, "sum": state["sum"].copy()}
            grad = values.sum(axis=0).reshape(param.shape)
        else:
            indices, values = coalesce(indices, values)
            g = -values if maximize else values
            new_sum, new_param = state["sum"].copy(), param.copy()
            if g.shape[0]:
                at = tuple(indices)
                new_sum[at] = state["sum"][at] + g * g
                new_param[at] = param[at] - clr * (g / (np.sqrt(new_sum[at]) + eps))
            return new_param, {"step": step, "sum": new_sum}

    g = -grad if maximize else grad
    if weight_decay != 0:
        g = g + weight_decay * param
    new_sum = state["sum"] + g * g
    return param - clr * (g / (np.sqrt(new_sum) + eps)), {"step": step, "sum": new_sum}
