"""SGD with momentum, dampening, Nesterov, L2 weight decay and maximize, as torch.optim.SGD.

``decoupled_weight_decay`` (not torch's: SGDW, Loshchilov & Hutter 2019, as libraries offer it) decays the parameter
instead, p (1 - lr wd) before the step, and leaves the gradient and the momentum buffer undecayed.

The momentum buffer is created on the first step as a copy of the (decayed) gradient, with no
dampening, and exists only when ``momentum != 0``. A sparse ``(indices, values)`` gradient stands
for its dense sum (duplicates add up), which is what torch's sparse arithmetic applies.
"""

import numpy as np

from .sparse import to_dense


def init(param: np.ndarray, hp: dict) -> dict:
    return {}


def update(param: np.ndarray, grad, state: dict, hp: dict) -> tuple[np.ndarray, dict]:
    lr = hp["lr"]
    momentum, dampening = hp.get("momentum", 0.0), hp.get("dampening", 0.0)
    weight_decay = hp.get("weight_decay", 0.0)
    if isinstance(grad, tuple):
        grad = to_dense(*grad, param.shape)
    g = -grad if hp.get("maximize", False) else grad
    if weight_decay != 0:
        if hp.get("decoupled_weight_decay", False):
            param = param * (1.0 - lr * weight_decay)
        else:
            g = g + weight_decay * param
    new_state = {}
    if momentum != 0:
        buf = state.get("momentum_buffer")
        buf = g.copy() if buf is None else momentum * buf + (1.0 - dampening) * g
        new_state["momentum_buffer"] = buf
        g = g + momentum * buf if hp.get("nesterov", False) else buf
    return param - lr * g, new_state
