"""AdEMAMix (Pagliardini, Ablin & Grangier, 2024, "The AdEMAMix Optimizer: Better, Faster, Older",
arXiv:2409.03137, Algorithm 1), in float64:

    m1 = b1 m1 + (1 - b1) g,   m2 = b3(t) m2 + (1 - b3(t)) g,   nu = b2 nu + (1 - b2) g^2
    m1_hat = m1 / (1 - b1^t),   nu_hat = nu / (1 - b2^t)          (the slow EMA m2 is not bias-corrected)
    theta <- theta - lr ((m1_hat + alpha(t) m2) / (sqrt(nu_hat) + eps) + wd theta)

The paper's schedulers, over a warmup of T = ``t_alpha_beta3`` steps (None, or 0: alpha(t) = alpha, b3(t) = b3, the
limit of both formulas as T -> 0 and what the authors' code, ``step < warmup``, does with a warmup of 0):

    alpha(t) = min(t alpha / T, alpha)
    b3(t) = min(exp(ln(b1) ln(b3) / ((1 - t/T) ln(b3) + (t/T) ln(b1))), b3)

b3(t) moves the slow EMA's half-life linearly from b1's (t = 0) to b3's (t = T): 1 / ln b3(t) is linear in t.

Options (pytorch-optimizer's spelling): lr 1e-3, betas (b1, b2, b3) = (0.9, 0.999, 0.9999), alpha (the paper
tunes it; pytorch-optimizer 5.0, the authors' code 2.0), t_alpha_beta3 None, eps 1e-8, weight_decay 0,
maximize False (g negated first), and three conventions of other implementations:

* ``weight_decouple`` (True when absent: the paper's decay, wd theta inside the lr-scaled step, i.e. theta (1 - lr
  wd) first); False: L2, wd theta added to the gradient before the moments (pytorch-optimizer's default);
* ``fixed_decay`` (False): with decoupled decay, theta (1 - wd), not scaled by lr (pytorch-optimizer);
* t is this tensor's own count, as the authors' code keeps it (pytorch-optimizer counts per param group: the
  harness's ``group_step``, reference/group_step.py).

State: ``exp_avg`` (m1), ``exp_avg_sq`` (nu), ``exp_avg_slow`` (m2), as pytorch-optimizer spells them (the authors'
code: ``exp_avg_fast``, ``exp_avg_slow``, ``exp_avg_sq``), and ``step``, this tensor's count of updates (or t).

Where the paper is silent or implementations differ:
* The authors' code takes two warmups (``alpha_warmup``, ``beta3_warmup``), and computes b3(t) through the half-life
  with ln(b + 1e-8); the paper's T_{alpha,beta3} is one warmup for both and its formula has no 1e-8, as here.
* The authors' code skips m1 when b1 = 0 (m1 = g); so does the formula here. b3(t) needs b1 > 0 (ln b1).
"""

import math

import numpy as np


def init(param: np.ndarray, hp: dict) -> dict:
    return {
        "step": np.float64(0.0),
        "exp_avg": np.zeros_like(param),
        "exp_avg_sq": np.zeros_like(param),
        "exp_avg_slow": np.zeros_like(param),
    }


def schedule_alpha(t: float, hp: dict) -> float:
    """alpha(t): linear from 0 to alpha over t_alpha_beta3 steps, then alpha."""
    alpha, warmup = hp.get("alpha", 5.0), hp.get("t_alpha_beta3")
    return alpha if not warmup else min(t * alpha / warmup, alpha)


def schedule_beta3(t: float, hp: dict) -> float:
    """b3(t): from b1 at t = 0 to b3 at t = t_alpha_beta3, linear in the half-life (in 1 / ln b), then b3."""
    beta1, _, beta3 = hp["betas"]
    warmup = hp.get("t_alpha_beta3")
    if not warmup:  # None or 0: no warmup
        return beta3
    log1, log3 = math.log(beta1), math.log(beta3)
    a = t / warmup
    return min(math.exp(log1 * log3 / ((1.0 - a) * log3 + a * log1)), beta3)


def update(param: np.ndarray, grad: np.ndarray, state: dict, hp: dict) -> tuple[np.ndarray, dict]:
    lr, (beta1, beta2, _), eps = hp["lr"], hp["betas"], hp["eps"]
    weight_decay = hp.get("weight_decay", 0.0)
    g = -grad if hp.get("maximize", False) else grad
    step = state["step"] + 1.0  # (a library's per-group count: reference/group_step.py hands it in as state["step"])

    if weight_decay != 0:
        if hp.get("weight_decouple", True):
            param = param * (1.0 - weight_decay * (1.0 if hp.get("fixed_decay", False) else lr))
        else:
            g = g + weight_decay * param

    alpha, beta3 = schedule_alpha(float(step), hp), schedule_beta3(float(step), hp)
    exp_avg = beta1 * state["exp_avg"] + (1.0 - beta1) * g
    exp_avg_sq = beta2 * state["exp_avg_sq"] + (1.0 - beta2) * g * g
    exp_avg_slow = beta3 * state["exp_avg_slow"] + (1.0 - beta3) * g
    new_state = {"step": step, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq, "exp_avg_slow": exp_avg_slow}

    denom = np.sqrt(exp_avg_sq / (1.0 - beta2**step)) + eps
    direction = (exp_avg / (1.0 - beta1**step) + alpha * exp_avg_slow) / denom
    return param - lr * direction, new_state
