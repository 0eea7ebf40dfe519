"""NAdam (Dozat, 2016) as torch.optim.NAdam documents it, incl. weight_decay (L2 or decoupled) and maximize.

mu_t = beta1 * (1 - 0.5 * 0.96**(t * momentum_decay)); the update is
lr * [(1 - mu_t) g / (1 - prod_{i<=t} mu_i) + mu_{t+1} m_t / (1 - prod_{i<=t+1} mu_i)]
   / (sqrt(v_t / (1 - beta2**t)) + eps),
applied as torch's for-loop does: two separate steps, the gradient term first. ``mu_product`` (prod_{i<=t} mu_i)
is kept in float64 here; torch keeps it as a float32 scalar tensor unless the default dtype is float64.
"""

import numpy as np


def init(param: np.ndarray, hp: dict) -> dict:
    return {
        "step": np.float64(0.0),
        "mu_product": np.float64(1.0),
        "exp_avg": np.zeros_like(param),
        "exp_avg_sq": np.zeros_like(param),
    }


def update(param: np.ndarray, grad: np.ndarray, state: dict, hp: dict) -> tuple[np.ndarray, dict]:
    lr, (beta1, beta2), eps = hp["lr"], hp["betas"], hp["eps"]
    weight_decay, psi = hp.get("weight_decay", 0.0), hp.get("momentum_decay", 4e-3)
    g = -grad if hp.get("maximize", False) else grad
    step = state["step"] + 1.0
    bias_correction2 = 1.0 - beta2**step

    if weight_decay != 0:
        if hp.get("decoupled_weight_decay", False):
            param = param * (1.0 - lr * weight_decay)
        else:
            g = g + weight_decay * param

    mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * psi))
    mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1.0) * psi))
    mu_product = np.float64(state["mu_product"] * mu)
    mu_product_next = mu_product * mu_next

    exp_avg = state["exp_avg"] + (g - state["exp_avg"]) * (1.0 - beta1)
    exp_avg_sq = state["exp_avg_sq"] * beta2 + (1.0 - beta2) * g * g
    denom = np.sqrt(exp_avg_sq / bias_correction2) + eps

    param = param - (lr * (1.0 - mu) / (1.0 - mu_product)) * g / denom
    param = param - (lr * mu_next / (1.0 - mu_product_next)) * exp_avg / denom
    new_state = {"step": step, "mu_product": mu_product, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}
    return param, new_state
