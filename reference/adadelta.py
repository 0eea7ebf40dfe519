"""Adadelta (Zeiler, 2012) as torch.optim.Adadelta documents it, incl. L2 weight_decay and maximize.

Per step: g += weight_decay * param; square_avg = rho * square_avg + (1 - rho) * g^2;
delta = sqrt(acc_delta + eps) / sqrt(square_avg + eps) * g (acc_delta of the previous step);
acc_delta = rho * acc_delta + (1 - rho) * delta^2; param -= lr * delta. ``lr`` scales only the
applied step: acc_delta accumulates the unscaled delta, as torch documents.
"""

import numpy as np


def init(param: np.ndarray, hp: dict) -> dict:
    return {"step": np.float64(0.0), "square_avg": np.zeros_like(param), "acc_delta": np.zeros_like(param)}


def update(param: np.ndarray, grad: np.ndarray, state: dict, hp: dict) -> tuple[np.ndarray, dict]:
    lr, rho, eps = hp["lr"], hp.get("rho", 0.9), hp.get("eps", 1e-6)
    weight_decay = hp.get("weight_decay", 0.0)
    g = -grad if hp.get("maximize", False) else grad
    if weight_decay != 0:
        g = g + weight_decay * param
    square_avg = state["square_avg"] * rho + (1.0 - rho) * g * g
    delta = np.sqrt(state["acc_delta"] + eps) / np.sqrt(square_avg + eps) * g
    acc_delta = state["acc_delta"] * rho + (1.0 - rho) * delta * delta
    new_state = {"step": state["step"] + 1.0, "square_avg": square_avg, "acc_delta": acc_delta}
    return param - lr * delta, new_state
