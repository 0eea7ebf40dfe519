"""RAdam (Liu et al., 2020) as torch.optim.RAdam documents it, incl. weight_decay (L2 or decoupled) and maximize.

rho_inf = 2 / (1 - beta2) - 1, rho_t = rho_inf - 2 t beta2**t / (1 - beta2**t). While rho_t <= 5 the step is
plain bias-corrected momentum, lr * m_t / (1 - beta1**t) (no second moment; with the default betas this is
steps 1-5, rho_5 = 4.996, rho_6 = 5.994); after it, that times r_t * sqrt(1 - beta2**t) / (sqrt(v_t) + eps).
exp_avg_sq is updated on every step, in both branches, as torch does.

``degenerated_to_sgd`` (default True, torch's form) False is the RAdam authors' other option: while rho_t <= 5 the
parameter does not move at all (no step and no decoupled decay), the moments still update.
"""

import numpy as np


def init(param: np.ndarray, hp: dict) -> dict:
    return {
        "step": np.float64(0.0),
        "exp_avg": np.zeros_like(param),
        "exp_avg_sq": np.zeros_like(param),
    }


def update(param: np.ndarray, grad: np.ndarray, state: dict, hp: dict) -> tuple[np.ndarray, dict]:
    lr, (beta1, beta2), eps = hp["lr"], hp["betas"], hp["eps"]
    weight_decay = hp.get("weight_decay", 0.0)
    g = -grad if hp.get("maximize", False) else grad
    step = state["step"] + 1.0

    start = param
    if weight_decay != 0:
        if hp.get("decoupled_weight_decay", False):
            param = param * (1.0 - lr * weight_decay)
        else:
            g = g + weight_decay * param

    exp_avg = state["exp_avg"] + (g - state["exp_avg"]) * (1.0 - beta1)
    exp_avg_sq = state["exp_avg_sq"] * beta2 + (1.0 - beta2) * g * g
    new_state = {"step": step, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}

    bias_correction1 = 1.0 - beta1**step
    bias_correction2 = 1.0 - beta2**step
    bias_corrected_exp_avg = exp_avg / bias_correction1

    rho_inf = 2.0 / (1.0 - beta2) - 1.0
    rho_t = rho_inf - 2.0 * step * beta2**step / bias_correction2
    if rho_t > 5.0:
        rect = np.sqrt((rho_t - 4.0) * (rho_t - 2.0) * rho_inf / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho_t))
        adaptive_lr = np.sqrt(bias_correction2) / (np.sqrt(exp_avg_sq) + eps)
        return param - bias_corrected_exp_avg * lr * adaptive_lr * rect, new_state
    if not hp.get("degenerated_to_sgd", True):  # no step before the rectification threshold
        return start, new_state
    return param - bias_corrected_exp_avg * lr, new_state
