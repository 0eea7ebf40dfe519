"""Averaged SGD (Polyak & Juditsky, 1992) as torch.optim.ASGD implements it (its docs give no formula box).

Per step t: g (+ weight_decay * param); param <- param * (1 - lambd * eta) - eta * g; then
ax <- param if mu == 1 else ax + mu * (param - ax). The eta and mu used at step t are the state set
by step t-1 (eta starts at lr, mu at 1), then eta <- lr / (1 + lambd * lr * t)**alpha and
mu <- 1 / max(1, t - t0). Averaging (mu < 1) therefore starts at step floor(t0) + 3.
eta and mu are kept in float64 here; torch keeps them as float32 scalars unless the default dtype is float64.
"""

import numpy as np


def init(param: np.ndarray, hp: dict) -> dict:
    return {
        "step": np.float64(0.0),
        "eta": np.float64(hp["lr"]),
        "mu": np.float64(1.0),
        "ax": np.zeros_like(param),
    }


def update(param: np.ndarray, grad: np.ndarray, state: dict, hp: dict) -> tuple[np.ndarray, dict]:
    lr = float(hp["lr"])
    lambd, alpha, t0 = hp.get("lambd", 1e-4), hp.get("alpha", 0.75), hp.get("t0", 1e6)
    weight_decay = hp.get("weight_decay", 0.0)
    g = -grad if hp.get("maximize", False) else grad
    step = state["step"] + 1.0
    if weight_decay != 0:
        g = g + weight_decay * param

    eta, mu = state["eta"], state["mu"]
    new_param = param * (1.0 - lambd * eta) - eta * g
    ax = new_param.copy() if mu == 1 else state["ax"] + (new_param - state["ax"]) * mu

    new_state = {
        "step": step,
        "eta": np.float64(lr / (1.0 + lambd * lr * step) ** alpha),
        "mu": np.float64(1.0 / max(1.0, step - t0)),
        "ax": ax,
    }
    return new_param, new_state
