"""Adam (Kingma & Ba, 2015) as torch.optim.Adam documents it, incl. amsgrad, maximize, weight_decay.

torch's order of operations is followed: L2 weight decay is added to the gradient (or, with
``decoupled_weight_decay``, the parameter is shrunk by ``lr * weight_decay`` first, as AdamW does),
``step`` counts updates per parameter, and bias corrections use the updated step.

Three options model conventions of other libraries (torch.optim takes none of them; defaults off):

* ``debiased_state``: the state holds the bias-corrected moments m_t / (1 - beta1**t) and v_t / (1 - beta2**t),
  each advanced as m_hat += (g - m_hat) (1 - beta) / (1 - beta**t) (equal in exact arithmetic); heavyball.
* ``eps_clamp``: the denominator is max(sqrt(v_hat), eps) instead of sqrt(v_hat) + eps; heavyball.
* ``group_step``: t is the param group's count of step() calls, advanced whether or not this tensor had a
  gradient; heavyball (the harness's, for every reference that keeps a step: reference/group_step.py).
"""

import numpy as np


def init(param: np.ndarray, hp: dict) -> dict:
    state = {
        "step": np.float64(0.0),
        "exp_avg": np.zeros_like(param),
        "exp_avg_sq": np.zeros_like(param),
    }
    if hp.get("amsgrad", False):
        state["max_exp_avg_sq"] = np.zeros_like(param)
    return state


def update(param: np.ndarray, grad: np.ndarray, state: dict, hp: dict) -> tuple[np.ndarray, dict]:
    lr, (beta1, beta2), eps = hp["lr"], hp["betas"], hp["eps"]
    weight_decay = hp.get("weight_decay", 0.0)
    g = -grad if hp.get("maximize", False) else grad
    step = state["step"] + 1.0  # (a library's per-group count: reference/group_step.py hands it in as state["step"])

    if weight_decay != 0:
        if hp.get("decoupled_weight_decay", False):
            param = param * (1.0 - lr * weight_decay)
        else:
            g = g + weight_decay * param

    bias_correction1 = 1.0 - beta1**step
    bias_correction2_sqrt = np.sqrt(1.0 - beta2**step)
    if hp.get("debiased_state", False):  # m_hat, v_hat kept: the corrections are inside the state
        exp_avg = state["exp_avg"] + (g - state["exp_avg"]) * ((1.0 - beta1) / bias_correction1)
        exp_avg_sq = state["exp_avg_sq"] + (g * g - state["exp_avg_sq"]) * ((1.0 - beta2) / (1.0 - beta2**step))
        bias_correction1 = bias_correction2_sqrt = 1.0
    else:
        exp_avg = state["exp_avg"] + (g - state["exp_avg"]) * (1.0 - beta1)
        exp_avg_sq = state["exp_avg_sq"] * beta2 + (1.0 - beta2) * g * g
    new_state = {"step": step, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}

    second_moment = exp_avg_sq
    if hp.get("amsgrad", False):
        second_moment = np.maximum(state["max_exp_avg_sq"], exp_avg_sq)
        new_state["max_exp_avg_sq"] = second_moment
    if hp.get("eps_clamp", False):
        denom = np.maximum(np.sqrt(second_moment) / bias_correction2_sqrt, eps)
    else:
        denom = np.sqrt(second_moment) / bias_correction2_sqrt + eps
    return param - (lr / bias_correction1) * exp_avg / denom, new_state
