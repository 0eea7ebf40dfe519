"""Lion as its paper documents it, in float64 NumPy (optbench's reference contract: init/update).

c = beta1 m + (1 - beta1) g;  p <- p (1 - lr wd) - lr sign(c);  m <- beta2 m + (1 - beta2) g.
"""

import numpy as np


def init(param: np.ndarray, hp: dict) -> dict:
    return {"exp_avg": np.zeros_like(param)}


def update(param: np.ndarray, grad: np.ndarray, state: dict, hp: dict) -> tuple[np.ndarray, dict]:
    lr, (beta1, beta2), weight_decay = hp["lr"], hp["betas"], hp["weight_decay"]
    m = state["exp_avg"]
    direction = np.sign(m + (grad - m) * (1.0 - beta1))
    new_param = param * (1.0 - lr * weight_decay) - lr * direction
    return new_param, {"exp_avg": m + (grad - m) * (1.0 - beta2)}
