"""Adamax (Kingma & Ba, 2015, sec. 7.1) as torch.optim.Adamax documents it, with L2 weight_decay, maximize.

Per step t: g += weight_decay * param; exp_avg = beta1 * exp_avg + (1 - beta1) * g (torch's lerp form);
exp_inf = max(beta2 * exp_inf, |g| + eps) (torch puts eps inside the max, unlike the paper);
param -= lr / (1 - beta1^t) * exp_avg / exp_inf. Only the first moment is bias-corrected.
"""

import numpy as np


def init(param: np.ndarray, hp: dict) -> dict:
    return {"step": np.float64(0.0), "exp_avg": np.zeros_like(param), "exp_inf": np.zeros_like(param)}


def update(param: np.ndarray, grad: np.ndarray, state: dict, hp: dict) -> tuple[np.ndarray, dict]:
    lr, (beta1, beta2) = hp["lr"], hp.get("betas", (0.9, 0.999))
    eps, weight_decay = hp.get("eps", 1e-8), hp.get("weight_decay", 0.0)
    g = -grad if hp.get("maximize", False) else grad
    if weight_decay != 0:
        g = g + weight_decay * param
    step = state["step"] + 1.0
    exp_avg = state["exp_avg"] + (g - state["exp_avg"]) * (1.0 - beta1)
    exp_inf = np.maximum(state["exp_inf"] * beta2, np.abs(g) + eps)
    clr = lr / (1.0 - beta1**step)
    return param - clr * (exp_avg / exp_inf), {"step": step, "exp_avg": exp_avg, "exp_inf": exp_inf}
