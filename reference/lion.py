"""Lion (Chen et al., 2023, "Symbolic Discovery of Optimization Algorithms", Algorithm 2), in float64.

    c = beta1 m + (1 - beta1) g
    p <- p - lr (sign(c) + weight_decay p)          (decoupled weight decay: p (1 - lr wd) - lr sign(c))
    m <- beta2 m + (1 - beta2) g

Options as the widely used implementations spell them (lion-pytorch, timm, pytorch-optimizer): lr (1e-4),
betas ((0.9, 0.99)), weight_decay (0.0), maximize (False; g negated first). sign(0) is 0, as torch's sign.

Where implementations differ from the paper: lion-pytorch's ``decoupled_weight_decay=True`` divides
weight_decay by the initial lr (the decay per step no longer scales with lr; off by default);
pytorch-optimizer adds options of its own (gradient centralisation, cautious masking) that are off by
default. Those are the adapter's to declare, not this reference's.

The update is discontinuous where c is 0: ``decisions`` gives c and the magnitude its rounding scales
with, so a sign decided by rounding is left out of the one-step check (optbench.numerics.one_step).
"""

import numpy as np


def init(param: np.ndarray, hp: dict) -> dict:
    return {"exp_avg": np.zeros_like(param)}


def _interpolated(grad: np.ndarray, state: dict, hp: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    beta1 = hp["betas"][0]
    g = -grad if hp.get("maximize", False) else grad
    m = state["exp_avg"]
    return beta1 * m + (1.0 - beta1) * g, g, m


def update(param: np.ndarray, grad: np.ndarray, state: dict, hp: dict) -> tuple[np.ndarray, dict]:
    lr, beta2, weight_decay = hp["lr"], hp["betas"][1], hp.get("weight_decay", 0.0)
    c, g, m = _interpolated(grad, state, hp)
    new_param = param * (1.0 - lr * weight_decay) - lr * np.sign(c)
    return new_param, {"exp_avg": beta2 * m + (1.0 - beta2) * g}


def decisions(param: np.ndarray, grad: np.ndarray, state: dict, hp: dict) -> list[tuple[np.ndarray, np.ndarray]]:
    """sign(c) decides each element's step: c and the magnitudes of the two terms it is the sum of."""
    beta1 = hp["betas"][0]
    c, g, m = _interpolated(grad, state, hp)
    return [(c, np.abs(beta1 * m) + np.abs((1.0 - beta1) * g))]
