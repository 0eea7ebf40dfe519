"""AdaBelief (Zhuang et al., NeurIPS 2020, "AdaBelief Optimizer: Adapting Stepsizes by the Belief in Observed
Gradients", arXiv:2010.07468, Algorithm 2), in float64:

    m = b1 m + (1 - b1) g,   s = b2 s + (1 - b2) (g - m)^2 + eps        (g - m with the new m; eps inside s)
    m_hat = m / (1 - b1^t),   s_hat = s / (1 - b2^t)
    theta <- theta - lr m_hat / (sqrt(s_hat) + eps)

Options (pytorch-optimizer's spelling; the authors' package adabelief-pytorch 0.2 documents the same ones in its
README and docstring): lr 1e-3, betas (0.9, 0.999), eps 1e-16 (the package's default since 0.1; the paper's
experiments used 1e-8 to 1e-16), weight_decay 0, maximize False (g negated first), and

* ``weight_decouple`` (True when absent, the package's default): theta (1 - lr wd) before the step (AdamW);
  False: L2, wd theta added to the gradient before the moments;
* ``fixed_decay`` (False): with decoupled decay, theta (1 - wd), not scaled by lr;
* ``ams_bound`` (False; the package's ``amsgrad``): s_max = max(s_max, s) (s with its eps) takes s's place in the
  denominator, kept as ``max_exp_avg_var``;
* ``rectify`` (False; the package's default is True): RAdam's rectification (Liu et al. 2020), as the package runs
  it: with rho_inf = 2 / (1 - b2) - 1 and rho_t = rho_inf - 2 t b2^t / (1 - b2^t),
  rho_t >= ``n_sma_threshold`` (5): theta <- theta - lr r_t / (1 - b1^t) m / (sqrt(s) + eps),
  r_t = sqrt((1 - b2^t) (rho_t - 4) (rho_t - 2) rho_inf / ((rho_inf - 4) (rho_inf - 2) rho_t));
  below it, ``degenerated_to_sgd`` (True): theta <- theta - lr m_hat (SGD with momentum), else no step (the weight
  decay still applies). With ``ams_bound`` too, s_max is in the rectified denominator (the package's code uses s
  there);
* t is this tensor's own count, as the package keeps it (pytorch-optimizer counts per param group: the harness's
  ``group_step``, reference/group_step.py).

State: ``exp_avg`` (m), ``exp_avg_var`` (s), ``max_exp_avg_var`` (ams_bound), ``step``.

Where the paper is silent or implementations differ: Algorithm 2 has no weight decay, AMSGrad or rectification
(Algorithm 2's projection onto a feasible set is the identity for an unconstrained problem); they are the
package's options, documented in its README. Not modelled: pytorch-optimizer's own ``adanorm`` and
``adam_debias`` (through ``**kwargs``, off by default).
"""

import math

import numpy as np


def init(param: np.ndarray, hp: dict) -> dict:
    state = {"step": np.float64(0.0), "exp_avg": np.zeros_like(param), "exp_avg_var": np.zeros_like(param)}
    if hp.get("ams_bound", False):
        state["max_exp_avg_var"] = np.zeros_like(param)
    return state


def rectification(step: float, hp: dict) -> tuple[float, float | None]:
    """(rho_t, r_t) of RAdam's rectification at step t; r_t is None below the threshold (no rectified step)."""
    beta2 = hp["betas"][1]
    rho_inf = 2.0 / (1.0 - beta2) - 1.0
    beta2_t = beta2**step
    rho = rho_inf - 2.0 * step * beta2_t / (1.0 - beta2_t)
    if rho < hp.get("n_sma_threshold", 5):
        return rho, None
    return rho, math.sqrt((1.0 - beta2_t) * (rho - 4.0) * (rho - 2.0) * rho_inf
                          / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho))


def update(param: np.ndarray, grad: np.ndarray, state: dict, hp: dict) -> tuple[np.ndarray, dict]:
    lr, (beta1, beta2), eps = hp["lr"], hp["betas"], hp["eps"]
    weight_decay = hp.get("weight_decay", 0.0)
    g = -grad if hp.get("maximize", False) else grad
    step = state["step"] + 1.0  # (a library's per-group count: reference/group_step.py hands it in as state["step"])

    if weight_decay != 0:
        if hp.get("weight_decouple", True):
            param = param * (1.0 - weight_decay * (1.0 if hp.get("fixed_decay", False) else lr))
        else:
            g = g + weight_decay * param

    exp_avg = beta1 * state["exp_avg"] + (1.0 - beta1) * g
    residual = g - exp_avg
    exp_avg_var = beta2 * state["exp_avg_var"] + (1.0 - beta2) * residual * residual + eps
    new_state = {"step": step, "exp_avg": exp_avg, "exp_avg_var": exp_avg_var}
    second = exp_avg_var
    if hp.get("ams_bound", False):
        second = np.maximum(state["max_exp_avg_var"], exp_avg_var)
        new_state["max_exp_avg_var"] = second

    bias_correction1 = 1.0 - beta1**step
    if not hp.get("rectify", False):
        denom = np.sqrt(second) / math.sqrt(1.0 - beta2**step) + eps
        return param - (lr / bias_correction1) * exp_avg / denom, new_state
    _, r = rectification(float(step), hp)
    if r is not None:
        return param - (lr * r / bias_correction1) * exp_avg / (np.sqrt(second) + eps), new_state
    if hp.get("degenerated_to_sgd", True):
        return param - (lr / bias_correction1) * exp_avg, new_state
    return param, new_state
