"""Rprop (Riedmiller & Braun, 1993) as torch.optim.Rprop documents it, incl. maximize.

Per element, with g (negated under maximize) and prev: if g * prev > 0, step_size <- min(step_size *
etaplus, max); if < 0, step_size <- max(step_size * etaminus, min) and g <- 0; otherwise step_size is
unchanged. Then param -= step_size * sign(g) and prev <- g (zero where the sign flipped).
The sign test is sign(g) * sign(prev), the exact sign of the product (torch's product in the param's dtype
can underflow to 0, e.g. in float16). As documented, the == 0 branch does not clamp: torch clamps there
too, which differs only when lr lies outside step_sizes.
"""

import numpy as np


def init(param: np.ndarray, hp: dict) -> dict:
    return {
        "step": np.float64(0.0),
        "prev": np.zeros_like(param),
        "step_size": np.full_like(param, float(hp["lr"])),
    }


def update(param: np.ndarray, grad: np.ndarray, state: dict, hp: dict) -> tuple[np.ndarray, dict]:
    etaminus, etaplus = hp.get("etas", (0.5, 1.2))
    step_size_min, step_size_max = hp.get("step_sizes", (1e-6, 50.0))
    g = -grad if hp.get("maximize", False) else grad

    direction = np.sign(g) * np.sign(state["prev"])
    step_size = state["step_size"]
    step_size = np.where(direction > 0, np.minimum(step_size * etaplus, step_size_max),
                         np.where(direction < 0, np.maximum(step_size * etaminus, step_size_min), step_size))
    g = np.where(direction < 0, 0.0, g)

    new_state = {"step": state["step"] + 1.0, "prev": g, "step_size": step_size}
    return param - step_size * np.sign(g), new_state
