"""AdamW (Loshchilov & Hutter, 2019): Adam with decoupled weight decay, as torch.optim.AdamW."""

import numpy as np

from . import adam

init = adam.init


def update(param: np.ndarray, grad: np.ndarray, state: dict, hp: dict) -> tuple[np.ndarray, dict]:
    return adam.update(param, grad, state, {**hp, "decoupled_weight_decay": True})
