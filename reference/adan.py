"""Adan (Xie et al., 2022, "Adan: Adaptive Nesterov Momentum Algorithm for Faster Optimizing Deep Models",
arXiv:2208.06677, Algorithm 1) in the official implementation's documented conventions (sail-sg/Adan README and
docstring): betas (b1, b2, b3) = (0.98, 0.92, 0.99) are the paper's (1 - beta)s, the moments start at 0 and are
bias-corrected, and the first step's gradient difference is 0 (the previous gradient is taken as the first one):

    d = g_k - g_{k-1},  m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) d,  n = b3 n + (1 - b3) (g + b2 d)^2
    s = lr * (m / (1 - b1^k) + b2 v / (1 - b2^k)) / (sqrt(n / (1 - b3^k)) + eps)
    x <- (x - s) / (1 + lr wd)   (Algorithm 1's proximal step, the default);   no_prox: x <- x (1 - lr wd) - s

Options: lr 1e-3, betas (0.98, 0.92, 0.99), eps 1e-8, weight_decay 0, no_prox False (pytorch-optimizer spells it
``weight_decouple``, read when ``no_prox`` is absent), maximize False (pytorch-optimizer only: g is -grad
throughout, the remembered previous gradient included).
State: ``exp_avg``, ``exp_avg_sq``, ``exp_avg_diff``, ``neg_pre_grad`` = -g_k (the official code since its
memory-efficient version, and timm; the first official code and many ports keep ``pre_grad`` = +g_k,
pytorch-optimizer ``previous_grad`` = -g_k); ``step`` counts this tensor's updates.

Where the paper is silent or implementations differ:
* Algorithm 1 has no bias correction and its own initialisation; the official code (followed here) starts the
  moments at 0, bias-corrects all three, and sets the previous gradient at the first step.
* The official code, timm and pytorch-optimizer count ``step`` per group: the bias corrections use ``hp``'s
  ``iteration`` (every step() call) where the harness gives it, else this tensor's own count; the first
  difference is 0 at this tensor's own first update (pytorch-optimizer initialises the previous gradient
  from the first one it sees; the official code retakes it at group step 1).
* ``max_grad_norm`` > 0 (official, pytorch-optimizer) clips by the global norm of all gradients, coupling the
  tensors: not modelled (refused). Nor are the paper's restart condition (``restart_opt``) or timm's ``caution``.
"""

import numpy as np


def init(param: np.ndarray, hp: dict) -> dict:
    return {
        "step": np.float64(0.0),
        "exp_avg": np.zeros_like(param),
        "exp_avg_sq": np.zeros_like(param),
        "exp_avg_diff": np.zeros_like(param),
        "neg_pre_grad": np.zeros_like(param),
    }


def update(param: np.ndarray, grad: np.ndarray, state: dict, hp: dict) -> tuple[np.ndarray, dict]:
    if hp.get("max_grad_norm", 0.0) > 0:
        raise ValueError("the Adan reference does not model global gradient clipping (max_grad_norm > 0)")
    lr, (beta1, beta2, beta3), eps = hp["lr"], hp["betas"], hp["eps"]
    weight_decay = hp.get("weight_decay", 0.0)
    no_prox = hp.get("no_prox", hp.get("weight_decouple", False))
    g = -grad if hp.get("maximize", False) else grad
    first = state["step"] == 0.0  # this tensor's first update: no previous gradient, no difference
    # the official code counts steps per param group: its bias corrections use every step() call
    step = float(hp.get("iteration", state["step"] + 1.0))

    diff = np.zeros_like(g) if first else g + state["neg_pre_grad"]
    exp_avg = beta1 * state["exp_avg"] + (1.0 - beta1) * g
    exp_avg_diff = beta2 * state["exp_avg_diff"] + (1.0 - beta2) * diff
    nesterov = g + beta2 * diff
    exp_avg_sq = beta3 * state["exp_avg_sq"] + (1.0 - beta3) * nesterov * nesterov
    new_state = {"step": step, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq, "exp_avg_diff": exp_avg_diff,
                 "neg_pre_grad": -g}

    denom = np.sqrt(exp_avg_sq / (1.0 - beta3**step)) + eps
    direction = (exp_avg / (1.0 - beta1**step) + beta2 * exp_avg_diff / (1.0 - beta2**step)) / denom
    if no_prox:
        return param * (1.0 - lr * weight_decay) - lr * direction, new_state
    return (param - lr * direction) / (1.0 + lr * weight_decay), new_state
