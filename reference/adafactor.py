"""Adafactor (Shazeer & Stern, 2018) as torch.optim.Adafactor documents it.

torch's variant: relative step ``rho_t = min(lr, 1/sqrt(t))``, ``beta2_t = 1 - t**beta2_decay``,
decoupled weight decay ``lr * weight_decay``, eps1 applied to the row-mean of ``row_var`` and (squared)
to the variance estimate rather than to the squared gradient, eps1 = None meaning the dtype's eps,
and mean rather than sum for the factors. Tensors with more than one dimension are factored over
their last two dimensions (``row_var`` [..., n, 1], ``col_var`` [..., 1, m]); others keep ``variance``.
"""

import numpy as np


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(x * x))) if x.size else 0.0


def init(param: np.ndarray, hp: dict) -> dict:
    state = {"step": np.float64(0.0)}
    if param.ndim > 1:
        state["row_var"] = np.zeros(param.shape[:-1] + (1,))
        state["col_var"] = np.zeros(param.shape[:-2] + (1,) + param.shape[-1:])
    else:
        state["variance"] = np.zeros_like(param)
    return state


def update(param: np.ndarray, grad: np.ndarray, state: dict, hp: dict) -> tuple[np.ndarray, dict]:
    lr, beta2_decay, d = hp["lr"], hp["beta2_decay"], hp["d"]
    eps1, eps2 = hp["eps"]
    eps1 = hp["dtype_eps"] if eps1 is None else eps1
    weight_decay = hp.get("weight_decay", 0.0)
    g = -grad if hp.get("maximize", False) else grad

    step = state["step"] + 1.0
    one_minus_beta2 = step**beta2_decay
    rho = min(lr, 1.0 / np.sqrt(step))
    alpha = max(eps2, _rms(param)) * rho
    if weight_decay != 0:
        param = param * (1.0 - lr * weight_decay)

    new_state = {"step": step}
    if g.ndim > 1:
        row_var = state["row_var"] + (np.mean(g * g, axis=-1, keepdims=True) - state["row_var"]) * one_minus_beta2
        col_var = state["col_var"] + (np.mean(g * g, axis=-2, keepdims=True) - state["col_var"]) * one_minus_beta2
        var_estimate = (row_var @ col_var) / np.maximum(np.mean(row_var, axis=-2, keepdims=True), eps1)
        new_state.update(row_var=row_var, col_var=col_var)
    else:
        variance = state["variance"] + (g * g - state["variance"]) * one_minus_beta2
        var_estimate = variance
        new_state["variance"] = variance

    u = g / np.sqrt(np.maximum(var_estimate, eps1 * eps1))
    denom = max(1.0, _rms(u) / d)
    return param - (alpha / denom) * u, new_state
